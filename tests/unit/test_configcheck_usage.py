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

"""``config check --sysfs --host``: the vGPUs of a host tree (laid out as
the kernel lays it out) against what Placement holds in use there.
"""

import dataclasses
import pathlib
import uuid

import pytest

from osc_mdev.base import findings
from osc_mdev.features.config.check import mdev as configcheck
from osc_mdev.features.config.check import pci as configcheck_pci
from osc_mdev.features.config.check import usage as configcheck_usage
from osc_mdev.features.config.check import vf as configcheck_vf
from osc_mdev.host import gpus as host_gpus
from osc_mdev.local import conf_files as local_novaconf
from osc_mdev.local import sysfs as local_sysfs
from osc_mdev.nova.pci import config as pci_rules
from tests.fixtures import sysfs

NODE = 'gpu1.example.net'


def placed(address: str, used: int, servers: tuple[str, ...] = (),
           rc: str = 'VGPU') -> configcheck.PlacementDevice:
    nodedev = 'pci_' + address.replace(':', '_').replace('.', '_')
    return configcheck.PlacementDevice(nodedev, address, rc, 4, (),
                                       servers, used)


def host(tmp_path: pathlib.Path, mdevs: dict[str, int]) -> host_gpus.Host:
    """GPUs 0000:84:00.0 and 0000:85:00.0 with ``mdevs`` per address."""
    return local_sysfs.read_host(sysfs.build(
        tmp_path / 'sys', devices=[
            ('0000:84:00.0', {'nvidia-35': 4}, None),
            ('0000:85:00.0', {'nvidia-35': 4}, None)],
        mdevs=[(str(uuid.uuid4()), address, 'nvidia-35')
               for address, count in mdevs.items() for _ in range(count)]))


@pytest.mark.parametrize('mdevs,device,message', [
    ({'0000:84:00.0': 1}, placed('0000:84:00.0', 2, ('a', 'b')),
     'GPU 0000:84:00.0 has 1 mdev but Placement holds 2 VGPU there, for '
     'servers a and b: 1 of their 2 mdevs is gone'),
    ({}, placed('0000:84:00.0', 1, ('vm-1 (a)',), 'CUSTOM_NV35'),
     'GPU 0000:84:00.0 has 0 mdevs but Placement holds 1 CUSTOM_NV35 '
     'there, for server vm-1 (a): its mdev is gone'),
    ({'0000:84:00.0': 1}, placed('0000:84:00.0', 3, ('a',)),
     'for server a: 2 of its 3 mdevs are gone'),
    ({'0000:84:00.0': 1}, placed('0000:84:00.0', 3, ('a', 'b', 'c')),
     'for servers a, b and c: 2 of their 3 mdevs are gone'),
    ({}, placed('0000:86:00.0', 1, ('a',)),
     'GPU 0000:86:00.0 has 0 mdevs (it is not an mdev parent on this '
     'host: is its driver loaded?) but Placement holds 1 VGPU there'),
])
def test_lost_mdevs(tmp_path: pathlib.Path, mdevs: dict[str, int],
                    device: configcheck.PlacementDevice,
                    message: str) -> None:
    [finding] = configcheck_usage.mdev_usage_findings(
        host(tmp_path, mdevs), NODE, [device])
    assert finding.severity == findings.WARNING
    assert finding.where == 'Placement, host %s' % NODE
    assert message in finding.message, finding.message
    assert finding.message.endswith(
        "create it again with the UUID of the server's libvirt domain (its "
        "<hostdev type='mdev'>).")
    assert (finding.host, finding.device, finding.resource_class) == (
        NODE, device.address, device.resource_class)


def test_spare_mdevs_are_a_note(tmp_path: pathlib.Path) -> None:
    [finding] = configcheck_usage.mdev_usage_findings(
        host(tmp_path, {'0000:84:00.0': 3, '0000:85:00.0': 1}), NODE,
        [placed('0000:84:00.0', 1, ('a',)), placed('0000:85:00.0', 1)])
    assert finding.severity == findings.INFO
    assert finding.message == (
        'GPU 0000:84:00.0 has 3 mdevs and Placement holds 1 VGPU there: '
        'Nova gives the 2 no server uses to the next servers.')


def test_matching_counts_are_quiet(tmp_path: pathlib.Path) -> None:
    assert configcheck_usage.mdev_usage_findings(
        host(tmp_path, {'0000:84:00.0': 2}), NODE,
        [placed('0000:84:00.0', 2, ('a', 'b')),
         placed('0000:85:00.0', 0)]) == []


# -- VFs typed through sysfs against their PCI provider ----------------------

def vf_check(tmp_path: pathlib.Path, current: dict[int, int],
             offered: int = 4, rc: str = 'CUSTOM_NVIDIA_L4_8Q',
             **kwargs: object) -> configcheck_vf.VfCheck:
    """GPU 0000:25:00.0 with 4 VFs (``current``: their types), the first
    ``offered`` of them offered as ``rc``.
    """
    gpu = sysfs.VgpuGpu('0000:25:00.0', numvfs=4, current=current,
                        **kwargs)
    root = sysfs.build(tmp_path / 'sys', vgpu_gpus=[gpu])
    path = tmp_path / 'nova.conf'
    path.write_text('[pci]\nreport_in_placement = True\n' + ''.join(
        'device_spec = {"address": "%s", "resource_class": "%s", '
        '"managed": "no"}\n' % (vf, rc) for vf in gpu.vfs[:offered]))
    conf = local_novaconf.parse_files([str(path)])
    assert conf.settings is not None
    return configcheck_vf.vf_check(pci_rules.pci_config(conf.settings),
                                   local_sysfs.read_host(root))


def provider(total: int, used: int, servers: tuple[str, ...] = (),
             rc: str = 'CUSTOM_NVIDIA_L4_8Q'
             ) -> configcheck_pci.PlacementPciProvider:
    return configcheck_pci.PlacementPciProvider(
        '%s_0000:25:00.0' % NODE, rc, total, used,
        ('COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA'), 'uuid', servers)


def test_vfs_in_use_without_their_type(tmp_path: pathlib.Path) -> None:
    # After a reboot: every VF at 0, two of them held by servers.
    [finding] = configcheck_usage.vf_usage_findings(
        vf_check(tmp_path, {}), NODE, [provider(4, 2, ('a', 'b'))])
    assert finding.severity == findings.WARNING
    assert finding.message == (
        'Provider %s_0000:25:00.0 (GPU 0000:25:00.0) has 2 '
        'CUSTOM_NVIDIA_L4_8Q in use, for servers a and b, but only 0 of its '
        'VFs have NVIDIA L4-8Q (1162), as after a reboot: a server given a '
        'VF without it does not start. Re-apply the types before '
        'nova-compute starts.' % NODE)
    assert (finding.device, finding.resource_class) == (
        '0000:25:00.0', 'CUSTOM_NVIDIA_L4_8Q')


def test_vfs_of_another_type_count_as_untyped(
        tmp_path: pathlib.Path) -> None:
    check = vf_check(tmp_path, {0: 1162, 1: 1161},
                     creatable=sysfs.L4_TYPES)
    [finding] = configcheck_usage.vf_usage_findings(
        check, NODE, [provider(4, 2, ('vm-1 (a)', 'vm-2 (b)'))])
    assert 'but only 1 of its VFs has NVIDIA L4-8Q (1162)' in \
        finding.message


def test_vfs_offered_without_their_type(tmp_path: pathlib.Path) -> None:
    [finding] = configcheck_usage.vf_usage_findings(
        vf_check(tmp_path, {0: 1162, 1: 1162}, full=True), NODE,
        [provider(4, 1, ('a',))])
    assert finding.message == (
        'Placement offers 4 CUSTOM_NVIDIA_L4_8Q on provider '
        '%s_0000:25:00.0 (GPU 0000:25:00.0, 1 in use), but only 2 of its '
        'VFs have a vGPU type: the scheduler can give a server one without '
        'it, which does not start.' % NODE)


def test_typed_vfs_matching_placement_are_quiet(
        tmp_path: pathlib.Path) -> None:
    check = vf_check(tmp_path, {0: 1162, 1: 1162}, offered=2)
    assert configcheck_usage.vf_usage_findings(
        check, NODE, [provider(2, 2, ('a', 'b'))]) == []
    # A provider of another node or GPU is not this GPU's.
    other = dataclasses.replace(provider(4, 4), name='other_0000:25:00.0')
    assert configcheck_usage.vf_usage_findings(check, NODE, [other]) == []
