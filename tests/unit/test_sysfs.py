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

"""The sysfs reader on trees laid out as the kernel lays them out, and
the host model it fills (``host.gpus``): mdev parents and their
types, PCI functions, SR-IOV vGPU GPUs with their VFs' ``nvidia/`` files
in both layouts, and mdevs.
"""

import pathlib

import pytest

from osc_mdev.host import gpus as host_gpus
from osc_mdev.local import sysfs as local_sysfs
from osc_mdev.nova.pci import devspec as pci_devspec
from tests.fixtures import sysfs

MDEV_A = '6f0f2b7a-0d6c-4a4e-9a3e-1b2c3d4e5f60'
MDEV_B = '0b5e7c1e-2f4a-4c1b-8d9e-a0b1c2d3e4f5'
MDEV_M = 'c3d4e5f6-a7b8-4c9d-8e0f-112233445566'
L4 = sysfs.VgpuGpu('0000:25:00.0', numvfs=4, current={0: 1162, 1: 1162},
                   header=True)
L4_PLAIN = sysfs.VgpuGpu('0000:26:00.0', numvfs=2, totalvfs=4)
AFTER_REBOOT = sysfs.VgpuGpu('0000:27:00.0', numvfs=0, totalvfs=4)


@pytest.fixture
def node(tmp_path: pathlib.Path) -> host_gpus.Host:
    """Two mdev GPUs (one with two mdevs), an SR-IOV GPU of the mdev
    framework with three VFs, mtty with an mdev, and three L4 GPUs on
    NVIDIA's VFIO framework: typed VFs under the header layout, untyped
    ones without it, and one whose VFs are not enabled.
    """
    root = sysfs.build(tmp_path / 'sys', devices=[
        ('0000:84:00.0', {'nvidia-35': 4, 'nvidia-36': 2}, None),
        ('0000:85:00.0', {'nvidia-35': 4}, None),
        ('0000:41:00.0', {}, None),
        ('0000:41:00.4', {'nvidia-558': 1}, '0000:41:00.0'),
        ('0000:41:00.5', {'nvidia-558': 1}, '0000:41:00.0'),
        ('0000:41:00.6', {'nvidia-558': 1}, '0000:41:00.0'),
    ], virtual=[('mtty/mtty', {'mtty-1': 2})],
        vgpu_gpus=[L4, L4_PLAIN, AFTER_REBOOT],
        mdevs=[(MDEV_A, '0000:84:00.0', 'nvidia-35'),
               (MDEV_B, '0000:84:00.0', 'nvidia-35'),
               (MDEV_M, 'mtty/mtty', 'mtty-1')])
    return local_sysfs.read_host(root)


def test_mdev_parents(node: host_gpus.Host) -> None:
    parents = node.mdev_parents()
    assert parents is not None
    assert sorted(parents) == ['0000:41:00.4', '0000:41:00.5',
                               '0000:41:00.6', '0000:84:00.0',
                               '0000:85:00.0', 'mtty_mtty']
    gpu = parents['0000:84:00.0']
    assert {n: t.available_instances for n, t in gpu.types.items()} == {
        'nvidia-35': 4, 'nvidia-36': 2}
    assert gpu.types['nvidia-35'].readable_name == 'GRID nvidia-35'
    assert gpu.types['nvidia-35'].device_api == 'vfio-pci'
    assert gpu.types['nvidia-35'].description == 'num_heads=4, frl_config=60'
    assert parents['0000:41:00.5'].physfn == '0000:41:00.0'
    assert parents['mtty_mtty'].types['mtty-1'].available_instances == 2
    assert not parents['mtty_mtty'].pci_function


def test_one_model_of_each_device(node: host_gpus.Host) -> None:
    # An mdev parent that is a PCI function is one device: the one the
    # PCI view and the mdev view both show.
    vf = node.devices['0000:41:00.4']
    assert vf.mdev_parent and vf.pci_function and vf.is_vf
    pf = node.devices['0000:41:00.0']
    assert not pf.mdev_parent
    assert pf.virtfns == ('0000:41:00.4', '0000:41:00.5', '0000:41:00.6')
    mdev_parents = node.mdev_parents()
    assert mdev_parents is not None
    assert mdev_parents['0000:41:00.4'] is vf


def test_pci_devices_as_libvirt_reports_them(node: host_gpus.Host) -> None:
    devices = {d.address: d for d in node.pci_devices()}
    assert 'mtty_mtty' not in devices
    assert devices['0000:41:00.0'].dev_type == pci_devspec.TYPE_PF
    assert devices['0000:41:00.4'] == pci_devspec.PciDevice(
        '0000:41:00.4', '10de', '', pci_devspec.TYPE_VF, '0000:41:00.0')
    assert devices['0000:84:00.0'].dev_type == pci_devspec.TYPE_PCI
    # A PF whose VFs are not enabled is a PF by its sriov_totalvfs.
    assert devices['0000:27:00.0'].dev_type == pci_devspec.TYPE_PF
    assert devices['0000:25:00.5'] == pci_devspec.PciDevice(
        '0000:25:00.5', '10de', '27b8', pci_devspec.TYPE_VF, '0000:25:00.0')


def test_vgpu_gpus(node: host_gpus.Host) -> None:
    # Not the PF of the mdev framework, whose VFs are mdev parents.
    assert [g.address for g in node.vgpu_gpus()] == [
        '0000:25:00.0', '0000:26:00.0', '0000:27:00.0']
    pf = node.devices['0000:25:00.0']
    assert (pf.sriov_numvfs, pf.sriov_totalvfs) == (4, 16)
    assert pf.driver == 'nvidia'
    assert pf.pci_class == '030200'
    assert [vf.address for vf in node.vfs_of(pf)] == L4.vfs == [
        '0000:25:00.4', '0000:25:00.5', '0000:25:00.6', '0000:25:00.7']
    after_reboot = node.devices['0000:27:00.0']
    assert after_reboot.sriov_numvfs == 0
    assert node.vfs_of(after_reboot) == []


def test_vf_types_in_both_layouts(node: host_gpus.Host) -> None:
    typed = node.devices['0000:25:00.4'].vgpu
    assert typed == host_gpus.VfVgpu(1162, ())
    assert typed.typed
    # Header layout: the untyped VFs of a GPU typed L4-8Q list L4-8Q.
    untyped = node.devices['0000:25:00.6'].vgpu
    assert untyped == host_gpus.VfVgpu(
        0, (host_gpus.VgpuType(1162, 'NVIDIA L4-8Q'),))
    assert not untyped.typed
    # Plain layout: every type of an untyped GPU.
    plain = node.devices['0000:26:00.5'].vgpu
    assert plain is not None and plain.current == 0
    assert [(t.number, t.name) for t in plain.creatable] == list(
        sysfs.L4_TYPES)
    assert node.vgpu_type_names()[1161].name == 'NVIDIA L4-4Q'
    assert node.vgpu_type_names()[1162].short_name == 'L4-8Q'
    assert node.devices['0000:84:00.0'].vgpu is None


def test_vf_addresses_enabled_or_not(node: host_gpus.Host) -> None:
    # Where the kernel puts the VFs: PF + sriov_offset + n x sriov_stride.
    pf = node.devices['0000:25:00.0']
    assert pf.vf_addresses()[:4] == pf.virtfns
    assert pf.vf_addresses() == tuple(L4.vf_address(i) for i in range(16))
    assert pf.vf_addresses()[4:6] == ('0000:25:01.0', '0000:25:01.1')
    assert node.devices['0000:27:00.0'].vf_addresses() == (
        '0000:27:00.4', '0000:27:00.5', '0000:27:00.6', '0000:27:00.7')
    assert node.pf_for_vf_address('0000:27:00.6').address == '0000:27:00.0'
    assert node.pf_for_vf_address('0000:25:01.3').address == '0000:25:00.0'
    assert node.pf_for_vf_address('0000:41:00.4') is None
    assert node.devices['0000:84:00.0'].vf_addresses() == ()


def test_virtfn_links_in_index_order(tmp_path: pathlib.Path) -> None:
    gpu = sysfs.VgpuGpu('0000:25:00.0', numvfs=12)
    host = local_sysfs.read_host(sysfs.build(tmp_path / 'sys',
                                             vgpu_gpus=[gpu]))
    assert list(host.devices['0000:25:00.0'].virtfns) == gpu.vfs
    assert gpu.vfs[9:11] == ['0000:25:01.5', '0000:25:01.6']


def test_mdevs(node: host_gpus.Host) -> None:
    assert node.mdevs_of('0000:84:00.0') == [
        host_gpus.Mdev(MDEV_B, '0000:84:00.0', 'nvidia-35'),
        host_gpus.Mdev(MDEV_A, '0000:84:00.0', 'nvidia-35')]
    assert node.mdevs_of('mtty_mtty') == [
        host_gpus.Mdev(MDEV_M, 'mtty_mtty', 'mtty-1')]
    assert node.mdevs_of('0000:85:00.0') == []


def test_no_mdev_bus(tmp_path: pathlib.Path) -> None:
    root = sysfs.build(tmp_path / 'sys', vgpu_gpus=[L4])
    (pathlib.Path(root) / 'class' / 'mdev_bus').rmdir()
    host = local_sysfs.read_host(root)
    assert host.mdev_parents() is None
    assert host.mdevs == ()
    assert [g.address for g in host.vgpu_gpus()] == ['0000:25:00.0']
    empty = tmp_path / 'empty'
    empty.mkdir()
    assert local_sysfs.read_host(str(empty)) == host_gpus.Host({}, False, ())


@pytest.mark.parametrize('text,expected', [
    ('', []),
    ('1162 : NVIDIA L4-8Q\n', [(1162, 'NVIDIA L4-8Q')]),
    ('ID    : vGPU Name\n1414  : NVIDIA H200X-1-18C\n'
     '1428  : NVIDIA H200X-141C\n',
     [(1414, 'NVIDIA H200X-1-18C'), (1428, 'NVIDIA H200X-141C')]),
    ('  1414\t:   NVIDIA H200X-1-18C  \n', [(1414, 'NVIDIA H200X-1-18C')]),
    ('\n1162 : NVIDIA L4-8Q\n\n\n1161 : NVIDIA L4-4Q\n\n',
     [(1162, 'NVIDIA L4-8Q'), (1161, 'NVIDIA L4-4Q')]),
    ('1162 NVIDIA L4-8Q\n', [(1162, 'NVIDIA L4-8Q')]),
    ('1162 :\n1161 : NVIDIA L4-4Q\n', [(1161, 'NVIDIA L4-4Q')]),
    ('63 : GRID P40-2Q\n', [(63, 'GRID P40-2Q')]),
    ('ID : vGPU Name\n', []),
])
def test_parse_creatable_vgpu_types(text: str,
                                    expected: list[tuple[int, str]]) -> None:
    assert [(t.number, t.name) for t in
            host_gpus.parse_creatable_vgpu_types(text)] == expected


def test_short_name() -> None:
    assert host_gpus.VgpuType(1, 'NVIDIA RTX6000-Ada-2Q').short_name == \
        'RTX6000-Ada-2Q'
    assert host_gpus.VgpuType(1, 'A100-40C').short_name == 'A100-40C'


def test_vgpu_types_of_a_gpu(tmp_path: pathlib.Path) -> None:
    # A GPU whose VFs all have L4-8Q lists no type (it is full): the name
    # of its VFs' type comes from another GPU of the host that lists it.
    full = sysfs.VgpuGpu('0000:25:00.0', numvfs=3, totalvfs=3,
                         current={0: 1162, 1: 1162, 2: 1162})
    untyped = sysfs.VgpuGpu('0000:26:00.0', numvfs=2, totalvfs=2)
    half = sysfs.VgpuGpu('0000:27:00.0', numvfs=2, totalvfs=2,
                         current={0: 1161})
    host = local_sysfs.read_host(sysfs.build(
        tmp_path / 'sys', vgpu_gpus=[full, untyped, half]))
    types_of = {gpu.address: host.vgpu_types_of(gpu)
                for gpu in host.vgpu_gpus()}
    assert types_of['0000:25:00.0'] == {
        1162: host_gpus.VgpuType(1162, 'NVIDIA L4-8Q')}
    assert list(types_of['0000:26:00.0']) == [t[0] for t in sysfs.L4_TYPES]
    # Its untyped VF lists only the type in use.
    assert types_of['0000:27:00.0'] == {
        1161: host_gpus.VgpuType(1161, 'NVIDIA L4-4Q')}


def test_vgpu_types_of_a_gpu_whose_type_no_vf_lists(
        tmp_path: pathlib.Path) -> None:
    full = sysfs.VgpuGpu('0000:25:00.0', numvfs=2, totalvfs=2,
                         current={0: 1162, 1: 1162})
    host = local_sysfs.read_host(sysfs.build(tmp_path / 'sys',
                                             vgpu_gpus=[full]))
    assert host.vgpu_types_of(host.devices['0000:25:00.0']) == {}


def test_class_named_after_a_type() -> None:
    l4_8q = host_gpus.VgpuType(1162, 'NVIDIA L4-8Q')
    assert l4_8q.resource_class == 'CUSTOM_NVIDIA_L4_8Q'
    assert l4_8q.named_by('CUSTOM_NVIDIA_L4_8Q')
    assert l4_8q.named_by('CUSTOM_L4_8Q')
    assert not l4_8q.named_by('CUSTOM_NVIDIA_L4_4Q')
    assert not l4_8q.named_by('VGPU')


@pytest.mark.parametrize('name,resource_class,another', [
    ('NVIDIA L4-4Q', 'CUSTOM_NVIDIA_L4_8Q', True),
    ('NVIDIA L4-4Q', 'CUSTOM_L4_8Q', True),
    ('NVIDIA L4-4Q', 'CUSTOM_NVIDIA_L4_4Q', False),
    ('NVIDIA L4-4Q', 'CUSTOM_NVIDIA_L40_8Q', False),
    ('NVIDIA L40-8Q', 'CUSTOM_NVIDIA_L40S_8Q', False),
    ('NVIDIA L4-4Q', 'CUSTOM_VGPU_POOL', False),
    ('NVIDIA H200X-1-18C', 'CUSTOM_NVIDIA_H200X_2_35C', True),
    ('NVIDIA RTX6000-Ada-2Q', 'CUSTOM_NVIDIA_RTX6000_ADA_4Q', True),
    ('GRID P40-2Q', 'CUSTOM_GRID_P40_4Q', True),
])
def test_class_named_after_another_type(name: str, resource_class: str,
                                        another: bool) -> None:
    assert host_gpus.VgpuType(1, name).names_another(resource_class) is \
        another
