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

"""Traits that survive Nova re-creating a device's provider, on real Nova.

A device is tagged and the tags exported; nova-compute is restarted with
its ``[compute] provider_config_location`` pointing at the exported file
(Nova loads it), and Nova is made to delete the device's provider (its
type's ``max_instances`` leaves it no instance) and create it again: the
new provider has a new UUID and the exported traits. Without the file it
comes back bare, and the audit says what the file would have done.
"""

import json

import pytest

from tests.e2e import helpers
from tests.e2e.helpers import placement_request as placement

HOST, NODE = 'gpu4', 'gpu4.dc2.example.net'
ADDRESS = '0000:25:01.0'
NAME = '%s_pci_0000_25_01_0' % NODE
OTHER = '%s_pci_0000_25_00_0' % NODE


def providers(cloud):
    return {p['name']: p for p in placement(
        cloud, 'GET', '/resource_providers')['resource_providers']}


def traits(cloud, name):
    return sorted(placement(cloud, 'GET', '/resource_providers/%s/traits'
                            % providers(cloud)[name]['uuid'])['traits'])


def recreate(cloud):
    """Make Nova delete the device's provider and create it again: its
    type's max_instances leaves it no instance, then the old
    configuration gives them back (each a restart of nova-compute).
    Answers (old UUID, new UUID).
    """
    old = providers(cloud)[NAME]['uuid']
    plan = cloud.control('reconfigure', host=HOST,
                         enabled_mdev_types=['nvidia-11'],
                         mdev={'nvidia-11': {'max_instances': 16}})
    assert [g['total'] for g in plan['gpus']] == [16, 0]
    assert NAME not in providers(cloud)
    cloud.control('reconfigure', host=HOST, enabled_mdev_types=['nvidia-11'])
    return old, providers(cloud)[NAME]['uuid']


def findings(result):
    assert 'Traceback' not in result.stderr, result.stderr
    return json.loads(result.stdout)


def check_findings(result):
    """The findings of ``config check -f json``: its rows but for the
    effective rows and the last, result row.
    """
    return [row for row in findings(result)
            if row['Severity'] not in ('effective', 'result')]


def audit_node(exports, *args):
    """The audit's findings on NODE, with its provider config file."""
    rows = findings(helpers.mdev('audit', '--host', NODE,
                                 '--provider-config',
                                 '%s=%s' % (NODE, exports), *args,
                                 '-f', 'json'))
    return [r for r in rows if r['Host'] == NODE]


@pytest.fixture(scope='module')
def exports(tmp_path_factory):
    return tmp_path_factory.mktemp('exports')


def test_01_exported_traits_come_back_on_a_recreated_provider(
        cloud, exports):
    from nova.compute import provider_config

    # No server may be on gpu4: Placement keeps a provider in use.
    for name in (NAME, OTHER):
        assert placement(cloud, 'GET', '/resource_providers/%s/allocations'
                         % providers(cloud)[name]['uuid'])[
            'allocations'] == {}
    # Both GPUs of gpu4 nvidia-11, tagged and exported as an operator does.
    cloud.control('reconfigure', host=HOST, enabled_mdev_types=['nvidia-11'])
    result = helpers.mdev('trait', 'set', '--host', NODE, '--trait',
                          'CUSTOM_NVIDIA_11')
    assert result.rc == 0, result.stderr
    rows = helpers.mdev_json('trait', 'export', '--host', NODE,
                             '--provider-config-dir', str(exports))
    path = exports / (NODE + '.yaml')
    assert rows == [{'Host': NODE, 'File': str(path), 'Devices': 2,
                     'Traits': 2, 'Result': 'created'}]
    # Tag and persist in one step.
    result = helpers.mdev('trait', 'set', '--trait', 'CUSTOM_RACK_7',
                          '%s:%s' % (NODE, ADDRESS), '--provider-config-dir',
                          str(exports))
    assert result.rc == 0, result.stderr
    assert 'Provider config %s: updated' % path in result.stderr

    # Nova's own reader takes the file as written.
    assert {k: v['traits']['additional'] for k, v in
            provider_config.get_provider_configs(str(exports)).items()} == {
        OTHER: ['CUSTOM_NVIDIA_11'],
        NAME: ['CUSTOM_NVIDIA_11', 'CUSTOM_RACK_7']}
    # So does osc-mdev's check, against the node's providers too.
    check = helpers.mdev('config', 'check', '--provider-config',
                         str(exports), '--host', NODE, '-f', 'json')
    assert check.rc == 0, check.stderr
    assert check_findings(check) == []

    # nova-compute restarted with the file loads it.
    loaded = cloud.control('provider_config', host=HOST,
                           location=str(exports))
    assert loaded['providers'] == [OTHER, NAME]
    assert traits(cloud, NAME) == ['CUSTOM_NVIDIA_11', 'CUSTOM_RACK_7',
                                   'OWNER_NOVA']

    old, new = recreate(cloud)
    assert new != old
    assert traits(cloud, NAME) == ['CUSTOM_NVIDIA_11', 'CUSTOM_RACK_7',
                                   'OWNER_NOVA']
    # Nothing for the audit to say about the node.
    assert audit_node(exports) == []


def test_02_without_the_file_it_comes_back_bare(cloud, exports):
    loaded = cloud.control('provider_config', host=HOST)
    assert loaded['providers'] == []
    old, new = recreate(cloud)
    assert new != old
    assert traits(cloud, NAME) == ['OWNER_NOVA']

    rows = audit_node(exports, '--long')
    assert [(r['Severity'], r['Check'], r['Device'], r['Provider UUID'])
            for r in rows] == [
        ('warning', 'lost-trait', ADDRESS, new),
        ('warning', 'provider-config', ADDRESS, new)]
    lost, differs = [r['Message'] for r in rows]
    assert 'lacks CUSTOM_NVIDIA_11' not in differs
    assert 'provider config file of %s gives it' % NODE in lost
    assert 'restart nova-compute' in lost
    assert 'lacks CUSTOM_RACK_7' in differs
    assert 'adds it back at its next update' in differs
    # The file still keeps every trait Placement has: nothing for config
    # check to say.
    check = helpers.mdev('config', 'check', '--provider-config',
                         str(exports), '--host', NODE, '-f', 'json')
    assert check.rc == 0 and check_findings(check) == []

    # Restarted with the file, nova-compute puts them back (no
    # re-creation needed): the provider keeps its UUID.
    cloud.control('provider_config', host=HOST, location=str(exports))
    assert providers(cloud)[NAME]['uuid'] == new
    assert traits(cloud, NAME) == ['CUSTOM_NVIDIA_11', 'CUSTOM_RACK_7',
                                   'OWNER_NOVA']
    assert audit_node(exports) == []


def test_03_a_file_would_override_a_pci_device_spec(cloud, tmp_path):
    """Why trait export leaves PCI-in-Placement devices out: Nova sets
    their traits from [pci] device_spec on every update and then adds the
    file's, so a file would keep a trait device_spec does not give.
    """
    pci = 'sriov1_0000:C1:00.0'
    spec = traits(cloud, pci)
    assert {'CUSTOM_GPU_L40S', 'CUSTOM_VGPU_VF'} <= set(spec)
    printed = helpers.mdev('trait', 'export', '--host', 'sriov1')
    assert printed.rc == 0, printed.stderr
    assert 'providers: []' in printed.stdout
    assert 'PCI-in-Placement device(s) left out' in printed.stderr

    directory = tmp_path / 'provider_config'
    directory.mkdir()
    (directory / 'sriov1.yaml').write_text(
        "meta: {schema_version: '1.0'}\nproviders:\n"
        "- identification: {name: '%s'}\n"
        "  traits: {additional: [CUSTOM_POOL_A]}\n" % pci)
    check = helpers.mdev('config', 'check', '--provider-config',
                         str(directory), '--host', 'sriov1', '-f', 'json')
    assert check.rc == 0, check.stderr
    [row] = check_findings(check)
    assert row['Severity'] == 'warning' and 'device_spec' in row['Message']

    assert cloud.control('provider_config', host='sriov1',
                         location=str(directory))['providers'] == [pci]
    assert traits(cloud, pci) == sorted(spec + ['CUSTOM_POOL_A'])
    # Without the file, the device spec's traits are all it has again.
    cloud.control('provider_config', host='sriov1')
    assert traits(cloud, pci) == spec
