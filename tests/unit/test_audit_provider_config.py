# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""``audit --provider-config``: devices against their host's provider
config file, and what the file says about a lost trait.
"""

from osc_mdev.features.audit import checks as audit
from osc_mdev.nova.compute import provider_config as pc
from tests.unit import test_audit


def device(uuid, traits=()):
    return test_audit.device(uuid, ('OWNER_NOVA',) + tuple(traits))


def entry(value, *traits, key='name'):
    return pc.Entry('c1.yaml', 4, key, value, traits)


FILES = {'c1': [entry('c1_pci_0000_84_00_0', 'CUSTOM_NVIDIA_35'),
                entry('g2', 'CUSTOM_NVIDIA_35', key='uuid'),
                entry('c1_pci_0000_86_00_0', 'CUSTOM_NVIDIA_36',
                      'CUSTOM_RACK_7')]}


def rows(found):
    return [(f.severity, f.check, f.device, f.message) for f in found]


def test_devices_that_agree_with_the_file():
    devices = [device('g1', ['CUSTOM_NVIDIA_35']),
               device('g2', ['CUSTOM_NVIDIA_35']),
               device('g3', ['CUSTOM_NVIDIA_36', 'CUSTOM_RACK_7']),
               # Not a host with a file.
               device('g4', ['CUSTOM_OTHER'])]
    assert devices[-1].host == 'c2.dc'
    assert audit.provider_config_findings(devices, FILES) == []


def test_traits_the_file_gives_back_and_traits_it_would_lose():
    devices = [device('g1', ['CUSTOM_NVIDIA_35', 'CUSTOM_NVIDIA_36',
                             'CUSTOM_POOL_A']),
               device('g2', []),
               device('g3', ['CUSTOM_NVIDIA_36'])]
    found = audit.provider_config_findings(devices, FILES)
    assert [(s, c, d) for s, c, d, _ in rows(found)] == [
        ('warning', 'provider-config', '0000:84:00.0'),
        ('info', 'provider-config', '0000:84:00.0'),
        ('warning', 'provider-config', '0000:85:00.0'),
        ('warning', 'provider-config', '0000:86:00.0')]
    assert 'carries CUSTOM_NVIDIA_36, which' in found[0].message
    assert 'lost when Nova re-creates' in found[0].message
    assert 'trait export --host c1' in found[0].message
    assert 'carries CUSTOM_POOL_A' in found[1].message
    # Named by UUID in the file: it comes back.
    assert 'lacks CUSTOM_NVIDIA_35' in found[2].message
    assert 'adds it back at its next update' in found[2].message
    assert ('trait unset --trait CUSTOM_RACK_7 c1:0000:86:00.0 '
            '--provider-config-dir' in found[3].message)


def test_a_lost_trait_says_what_the_file_does():
    devices = [device('g1', ['CUSTOM_NVIDIA_35']),
               device('g2', ['CUSTOM_NVIDIA_35']),
               device('g3', [])]
    lost = audit.trait_findings(devices)
    assert [(f.check, f.device) for f in lost] == [
        ('lost-trait', '0000:86:00.0')]
    # The file gives g3 other traits than its siblings' type trait.
    noted = audit.note_provider_configs(lost, FILES)
    assert noted[0].message.startswith(lost[0].message)
    assert 'does not give it: add it there too' in noted[0].message
    files = {'c1': FILES['c1'][:2] + [entry('c1_pci_0000_86_00_0',
                                            'CUSTOM_NVIDIA_35')]}
    noted = audit.note_provider_configs(lost, files)
    assert 'gives it: nova-compute puts it back' in noted[0].message
    # The lost trait is not reported twice.
    assert [f.check for f in audit.provider_config_findings(
        devices, files, noted)] == []
    # Hosts without a file: unchanged.
    assert audit.note_provider_configs(lost, {'c2': []}) == lost
