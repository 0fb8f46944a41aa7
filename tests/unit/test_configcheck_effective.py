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

"""One answer per effective configuration.

Each case is a pair of nova.conf file sets that Nova reads to the same
values: Nova's defaults written out or left unset, a deprecated name or
the current one, and the spellings oslo.config and Nova take alike
(group names in another case, spacing, booleans, names Nova
normalises). That Nova reads both alike is proved by loading them with
Nova's own option definitions (marked ``nova``); ``mdev config check``
must then give both the same findings, the same effective rows and the
same scope, with and without the node's sysfs. The one difference
allowed is the note that a name is deprecated (Nova itself logs one for
it), at the deprecated line only. (Warnings about text Nova does not
read as meant, a name it ignores or a trait with a space around it,
judge the writing: they are not spellings of one value.)
"""

import pathlib

import pytest

from osc_mdev.features.config.check import reads as config
from tests.fixtures import nova_driver
from tests.fixtures import sysfs

D2 = '[devices]\nenabled_mdev_types = nvidia-35, nvidia-36\n'
GOOD = D2 + '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'
NOVA_DOWNTIME = ('[libvirt]\nlive_migration_downtime = 500\n'
                 'live_migration_downtime_steps = 10\n'
                 'live_migration_downtime_delay = 75\n')
NVIDIA_DOWNTIME = ('[libvirt]\nlive_migration_downtime = 500000\n'
                   'live_migration_downtime_steps = 3\n'
                   'live_migration_downtime_delay = 3\n')
SPEC = '{"address": "0000:41:00.0", "resource_class": "%s", "traits": "%s"}'
PCI = '[pci]\nreport_in_placement = %s\ndevice_spec = %s\n'

# name: (files A, files B, where-prefixes of the deprecation notes A has)
PAIRS = {
    "downtime: Nova's defaults written vs no [libvirt]": (
        [GOOD + NOVA_DOWNTIME], [GOOD], ()),
    "downtime: Nova's defaults written vs a [libvirt] without them": (
        [GOOD + NOVA_DOWNTIME], [GOOD + '[libvirt]\nvirt_type = kvm\n'], ()),
    'downtime: [LIBVIRT] in upper case': (
        [GOOD + NVIDIA_DOWNTIME.replace('[libvirt]', '[LIBVIRT]')],
        [GOOD + NVIDIA_DOWNTIME], ()),
    'downtime: over two files vs one': (
        [GOOD + '[libvirt]\nlive_migration_downtime = 500000\n',
         '[libvirt]\nlive_migration_downtime_steps = 3\n'
         'live_migration_downtime_delay = 3\n'],
        [GOOD + NVIDIA_DOWNTIME], ()),
    'default type: mdev_class = VGPU written vs unset': (
        [GOOD + NVIDIA_DOWNTIME + '[mdev_nvidia-36]\nmdev_class = VGPU\n'],
        [GOOD + NVIDIA_DOWNTIME], ()),
    'default type: empty device_addresses vs unset': (
        [GOOD + NVIDIA_DOWNTIME + '[mdev_nvidia-36]\ndevice_addresses =\n'],
        [GOOD + NVIDIA_DOWNTIME], ()),
    'default type: an empty group vs none': (
        [GOOD + NVIDIA_DOWNTIME + '[mdev_nvidia-36]\n'],
        [GOOD + NVIDIA_DOWNTIME], ()),
    'default type with a class: empty device_addresses vs unset': (
        [GOOD + '[mdev_nvidia-36]\ndevice_addresses =\n'
         'mdev_class = CUSTOM_NV36\n'],
        [GOOD + '[mdev_nvidia-36]\nmdev_class = CUSTOM_NV36\n'], ()),
    'no type: enabled_mdev_types empty vs unset': (
        ['[devices]\nenabled_mdev_types =\n'], ['[DEFAULT]\ndebug = true\n'],
        ()),
    'enabled_vgpu_types vs enabled_mdev_types': (
        ['[devices]\nenabled_vgpu_types = nvidia-35, nvidia-36\n'
         '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'],
        [GOOD], ('[devices] enabled_vgpu_types',)),
    '[vgpu_<type>] vs [mdev_<type>] device_addresses': (
        [D2 + '[vgpu_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'],
        [GOOD], ('[vgpu_nvidia-35]',)),
    'lists: spacing and continuation lines': (
        ['[devices]\nenabled_mdev_types=nvidia-35 ,nvidia-36\n'
         '[mdev_nvidia-35]\ndevice_addresses =\n    0000:84:00.0,\n'
         '    0000:85:00.0\n'],
        [D2 + '[mdev_nvidia-35]\n'
         'device_addresses = 0000:84:00.0, 0000:85:00.0\n'], ()),
    'group names in upper case': (
        ['[DEVICES]\nenabled_mdev_types = nvidia-35, nvidia-36\n'
         '[MDEV_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'
         'max_instances = 4\n'],
        [GOOD + 'max_instances = 4\n'], ()),
    'report_in_placement = yes vs True': (
        [PCI % ('yes', SPEC % ('CUSTOM_A16', 'CUSTOM_BLUE'))],
        [PCI % ('True', SPEC % ('CUSTOM_A16', 'CUSTOM_BLUE'))], ()),
    'pci_in_placement = False written vs unset': (
        [PCI % ('True', SPEC % ('CUSTOM_A16', 'CUSTOM_BLUE')) +
         '[filter_scheduler]\npci_in_placement = False\n'],
        [PCI % ('True', SPEC % ('CUSTOM_A16', 'CUSTOM_BLUE'))], ()),
    'report_in_placement = False written vs no [pci]': (
        [GOOD + '[pci]\nreport_in_placement = False\n'], [GOOD], ()),
    'class and trait names Nova normalises vs written normalised': (
        [PCI % ('True', SPEC % ('a16', 'blue')) +
         '[filter_scheduler]\npci_in_placement = True\n'],
        [PCI % ('True', SPEC % ('CUSTOM_A16', 'CUSTOM_BLUE')) +
         '[filter_scheduler]\npci_in_placement = True\n'], ()),
    'device_spec JSON spacing': (
        [PCI % ('True', '{ "address" : "0000:41:00.0" ,\n'
                '    "resource_class":"CUSTOM_A16" }')],
        [PCI % ('True', '{"address": "0000:41:00.0", '
                '"resource_class": "CUSTOM_A16"}')], ()),
    'enabled_vgpu_types beside an equal enabled_mdev_types': (
        [D2 + 'enabled_vgpu_types = nvidia-35,nvidia-36\n'
         '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'],
        [GOOD], ('[devices] enabled_vgpu_types',)),
    'enabled_vgpu_types before an equal enabled_mdev_types': (
        ['[devices]\nenabled_vgpu_types = nvidia-35, nvidia-36\n'
         'enabled_mdev_types = nvidia-35, nvidia-36\n'
         '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'],
        [GOOD], ('[devices] enabled_vgpu_types',)),
    'enabled_vgpu_types in a later file, equal to enabled_mdev_types': (
        [GOOD, '[devices]\nenabled_vgpu_types = nvidia-35 , nvidia-36\n'],
        [GOOD], ('[devices] enabled_vgpu_types',)),
    'enabled_vgpu_types in an earlier file, equal to enabled_mdev_types': (
        ['[devices]\nenabled_vgpu_types = nvidia-35, nvidia-36\n', GOOD],
        [GOOD], ('[devices] enabled_vgpu_types',)),
    '[vgpu_<type>] beside an equal [mdev_<type>] device_addresses': (
        [GOOD + '[vgpu_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'],
        [GOOD], ('[vgpu_nvidia-35]',)),
    '[vgpu_<type>] before an equal [mdev_<type>] device_addresses': (
        [D2 + '[vgpu_nvidia-35]\ndevice_addresses = 0000:84:00.0,\n'
         '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'],
        [GOOD], ('[vgpu_nvidia-35]',)),
    '[vgpu_<type>] device_addresses in a later file, equal': (
        [GOOD, '[vgpu_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'],
        [GOOD], ('[vgpu_nvidia-35]',)),
    '[vgpu_<type>] mdev_class and max_instances equal to [mdev_<type>]': (
        [GOOD + 'mdev_class = CUSTOM_NV35\nmax_instances = 4\n'
         '[vgpu_nvidia-35]\nmdev_class = CUSTOM_NV35\nmax_instances = 4\n'],
        [GOOD + 'mdev_class = CUSTOM_NV35\nmax_instances = 4\n'],
        ('[vgpu_nvidia-35] mdev_class', '[vgpu_nvidia-35] max_instances')),
    '[libvirt] iscsi_use_multipath beside an equal volume_use_multipath': (
        [GOOD + NVIDIA_DOWNTIME + 'volume_use_multipath = True\n'
         'iscsi_use_multipath = yes\n'],
        [GOOD + NVIDIA_DOWNTIME + 'volume_use_multipath = True\n'],
        ('[libvirt] iscsi_use_multipath',)),
    '[libvirt] num_iscsi_scan_tries in a later file, equal': (
        [GOOD + NVIDIA_DOWNTIME + 'num_volume_scan_tries = 7\n',
         '[libvirt]\nnum_iscsi_scan_tries = 07\n'],
        [GOOD + NVIDIA_DOWNTIME + 'num_volume_scan_tries = 7\n'],
        ('[libvirt] num_iscsi_scan_tries',)),
    'post-copy: False written vs unset': (
        [GOOD + NVIDIA_DOWNTIME + 'live_migration_permit_post_copy = False\n'],
        [GOOD + NVIDIA_DOWNTIME], ()),
    'post-copy: yes in [LIBVIRT] vs True': (
        [GOOD + NVIDIA_DOWNTIME.replace('[libvirt]', '[LIBVIRT]') +
         'live_migration_permit_post_copy = yes\n'],
        [GOOD + NVIDIA_DOWNTIME + 'live_migration_permit_post_copy = True\n'],
        ()),
    'post-copy with PCI devices: on in a later file vs one file': (
        [PCI % ('True', SPEC % ('CUSTOM_A16', 'CUSTOM_BLUE')),
         '[libvirt]\nlive_migration_permit_post_copy = 1\n'],
        [PCI % ('True', SPEC % ('CUSTOM_A16', 'CUSTOM_BLUE')) +
         '[libvirt]\nlive_migration_permit_post_copy = true\n'], ()),
    'passthrough_whitelist vs device_spec': (
        ['[pci]\nreport_in_placement = True\npassthrough_whitelist = %s\n'
         % (SPEC % ('CUSTOM_A16', 'CUSTOM_BLUE'))],
        [PCI % ('True', SPEC % ('CUSTOM_A16', 'CUSTOM_BLUE'))],
        ('[pci] passthrough_whitelist',)),
}


@pytest.fixture
def node(tmp_path: pathlib.Path) -> str:
    return sysfs.build(tmp_path / 'sys', devices=[
        ('0000:84:00.0', {'nvidia-35': 4, 'nvidia-36': 2}, None),
        ('0000:85:00.0', {'nvidia-35': 4, 'nvidia-36': 2}, None),
        ('0000:41:00.0', {}, None)], ids={'0000:41:00.0': ('10de', '25b6')})


def answer(tmp_path: pathlib.Path, name: str, texts: list[str],
           sysfs_root: str | None) -> tuple[list, list, list]:
    """What ``mdev config check`` says of the files, wherever written:
    findings, effective rows and scope, the files' directory left out.
    """
    directory = tmp_path / name
    directory.mkdir()
    paths = nova_driver.write_files(directory, texts)
    checked = config.check(paths, sysfs_root)
    strip = str(directory) + '/'
    findings = sorted((f.severity, f.where.replace(strip, ''),
                       f.message.replace(strip, ''))
                      for f in checked.findings)
    effects = sorted((e.message, e.device, e.mdev_type or '',
                      e.resource_class or '', e.traits)
                     for e in checked.effects)
    return findings, effects, [s.replace(strip, '') for s in checked.scope]


def without_notes(findings: list[tuple], notes: tuple) -> list[tuple]:
    """The findings but the deprecation notes at ``notes``, which must be
    there, each once.
    """
    kept = list(findings)
    for prefix in notes:
        found = [f for f in kept if f[0] == 'info' and
                 f[1].startswith(prefix) and 'deprecated name' in f[2]]
        assert len(found) == 1, (prefix, findings)
        kept.remove(found[0])
    return [(severity, message) for severity, _, message in kept]


@pytest.mark.parametrize('with_sysfs', [False, True])
@pytest.mark.parametrize('name', sorted(PAIRS))
def test_same_values_same_answer(tmp_path: pathlib.Path, node: str,
                                 name: str, with_sysfs: bool) -> None:
    first, second, notes = PAIRS[name]
    root = node if with_sysfs else None
    a_findings, a_effects, a_scope = answer(tmp_path, 'a', first, root)
    b_findings, b_effects, b_scope = answer(tmp_path, 'b', second, root)
    assert without_notes(a_findings, notes) == without_notes(b_findings, ())
    assert a_effects == b_effects
    assert a_scope == b_scope


@pytest.mark.nova
@pytest.mark.parametrize('name', sorted(PAIRS))
def test_nova_reads_each_pair_alike(tmp_path: pathlib.Path,
                                    name: str) -> None:
    first, second, _ = PAIRS[name]
    values = []
    for label, texts in (('a', first), ('b', second)):
        directory = tmp_path / label
        directory.mkdir()
        values.append(nova_driver.nova_values(
            nova_driver.write_files(directory, texts)))
    assert values[0] == values[1]


def test_downtime_judged_without_a_libvirt_section(
        tmp_path: pathlib.Path) -> None:
    """nova-compute uses Nova's defaults when [libvirt] is absent."""
    findings, _, _ = answer(tmp_path, 'a', [GOOD], None)
    [warning] = [f for f in findings if 'NVIDIA' in f[2]]
    assert warning[0] == 'warning'
    assert ('Types nvidia-35, nvidia-36 are NVIDIA vGPU types and '
            'nova-compute uses [libvirt] live_migration_downtime = 500, '
            'live_migration_downtime_steps = 10, '
            'live_migration_downtime_delay = 75: ') in warning[2]


@pytest.mark.nova
@pytest.mark.parametrize('texts', [
    ['[devices]\nenabled_vgpu_types = nvidia-36\n'
     'enabled_mdev_types = nvidia-35\n'],
    ['[devices]\nenabled_mdev_types = nvidia-35\n'
     'enabled_vgpu_types = nvidia-36\n'],
    ['[devices]\nenabled_mdev_types = nvidia-35\n',
     '[devices]\nenabled_vgpu_types = nvidia-36\n'],
    ['[devices]\nenabled_vgpu_types = nvidia-36\n',
     '[devices]\nenabled_mdev_types = nvidia-35\n'],
])
def test_both_names_the_dropped_type_is_named(tmp_path: pathlib.Path,
                                              texts: list[str]) -> None:
    """Which value Nova takes when both names are set is oslo.config's
    answer (asked here, with Nova's options); the warning names the
    other value and the type nova-compute therefore does not enable.
    """
    paths = nova_driver.write_files(tmp_path, texts)
    [taken] = nova_driver.nova_values(paths)['devices']['enabled_mdev_types']
    [dropped] = {'nvidia-35', 'nvidia-36'} - {taken}
    checked = config.check(paths)
    [warning] = [f for f in checked.findings if f.severity == 'warning'
                 and 'deprecated name' in f.message]
    assert warning.message.startswith('Ignored: ')
    assert '= %s ' % dropped in warning.message
    assert ('Nova takes that value, %s, so nova-compute does not enable %s;'
            % (taken, dropped)) in warning.message
    assert [e.mdev_type for e in checked.effects] == [taken]


@pytest.mark.nova
@pytest.mark.parametrize('texts', [
    [GOOD + '[vgpu_nvidia-35]\ndevice_addresses = 0000:85:00.0\n'],
    [D2 + '[vgpu_nvidia-35]\ndevice_addresses = 0000:85:00.0\n'
     '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'],
    [GOOD, '[vgpu_nvidia-35]\ndevice_addresses = 0000:85:00.0\n'],
    [D2 + '[vgpu_nvidia-35]\ndevice_addresses = 0000:85:00.0\n',
     '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'],
])
def test_both_groups_the_dropped_addresses_are_named(
        tmp_path: pathlib.Path, texts: list[str]) -> None:
    paths = nova_driver.write_files(tmp_path, texts)
    [taken] = nova_driver.nova_values(paths)['mdev_nvidia-35'][
        'device_addresses']
    [dropped] = {'0000:84:00.0', '0000:85:00.0'} - {taken}
    checked = config.check(paths)
    [warning] = [f for f in checked.findings if f.severity == 'warning'
                 and 'device_addresses' in f.where]
    assert ' device_addresses = %s: ' % dropped in warning.message
    assert taken in warning.message.split(': ', 2)[2]
    assert [(e.device, e.mdev_type) for e in checked.effects
            if e.mdev_type == 'nvidia-35'] == [(taken, 'nvidia-35')]


@pytest.mark.nova
@pytest.mark.parametrize('first, second', [
    (GOOD + NOVA_DOWNTIME, GOOD + NOVA_DOWNTIME.replace('= 10', '= 11')),
    (PCI % ('True', SPEC % ('a16', 'blue')),
     PCI % ('True', SPEC % ('a17', 'blue'))),
    (GOOD, D2 + '[mdev_nvidia-35]\ndevice_addresses = 0000:85:00.0\n'),
    (GOOD + '[libvirt]\nlive_migration_permit_post_copy = True\n', GOOD),
])
def test_the_proof_tells_other_values_apart(tmp_path: pathlib.Path,
                                            first: str,
                                            second: str) -> None:
    values = []
    for label, text in (('a', first), ('b', second)):
        directory = tmp_path / label
        directory.mkdir()
        values.append(nova_driver.nova_values(
            nova_driver.write_files(directory, [text])))
    assert values[0] != values[1]
