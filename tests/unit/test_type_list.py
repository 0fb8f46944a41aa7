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

"""``type list``: the types each GPU of a compute node can serve, read
from sysfs trees laid out as the kernel lays them out, and whether Nova
uses each, cross-checked with Nova's own libvirt driver and PCI
whitelist on the same nova.conf files.
"""

import json
import pathlib

import pytest

from osc_mdev.base import errors
from osc_mdev.features.type import gpu_types
from osc_mdev.features.type import reads
from osc_mdev.local import sysfs as local_sysfs
from tests.fixtures import nova_driver
from tests.fixtures import sysfs

GPU_A, GPU_B, GPU_C = '0000:84:00.0', '0000:85:00.0', '0000:86:00.0'
L4 = '0000:25:00.0'
L4_8Q, L4_4Q = 1162, 1161
TYPES = {'nvidia-35': 16, 'nvidia-36': 8}

MDEV_CONF = """[devices]
enabled_mdev_types = nvidia-35, nvidia-36

[mdev_nvidia-36]
device_addresses = 0000:85:00.0, 0000:86:00.0
"""


def mdev_host(tmp_path: pathlib.Path) -> str:
    return sysfs.build(tmp_path / 'sys', devices=[
        (GPU_A, TYPES, None), (GPU_B, TYPES, None),
        (GPU_C, {'nvidia-35': 16}, None)],
        virtual=[('mtty/mtty', {'mtty-1': 4})])


def write(tmp_path: pathlib.Path, text: str) -> str:
    path = tmp_path / 'nova.conf'
    path.write_text(text)
    return str(path)


def table(found: list[gpu_types.GpuType]) -> list[tuple]:
    return [(t.gpu, t.name, t.available, t.enabled) for t in found]


def test_every_type_of_every_mdev_parent(tmp_path: pathlib.Path) -> None:
    found = reads.gpu_types(sysfs_root=mdev_host(tmp_path))
    assert table(found) == [
        (GPU_A, 'nvidia-35', 16, None), (GPU_A, 'nvidia-36', 8, None),
        (GPU_B, 'nvidia-35', 16, None), (GPU_B, 'nvidia-36', 8, None),
        (GPU_C, 'nvidia-35', 16, None), ('mtty_mtty', 'mtty-1', 4, None)]
    first = found[0]
    assert (first.readable_name, first.device_api, first.description) == (
        'GRID nvidia-35', 'vfio-pci', 'num_heads=4, frl_config=60')


def test_enabled_is_the_type_nova_gives_each_device(
        tmp_path: pathlib.Path) -> None:
    root = mdev_host(tmp_path)
    found = reads.gpu_types([write(tmp_path, MDEV_CONF)], root)
    assert table(found) == [
        (GPU_A, 'nvidia-35', 16, True), (GPU_A, 'nvidia-36', 8, False),
        (GPU_B, 'nvidia-35', 16, False), (GPU_B, 'nvidia-36', 8, True),
        # GPU_C is listed for nvidia-36, which it does not offer: Nova
        # uses neither type there.
        (GPU_C, 'nvidia-35', 16, False),
        ('mtty_mtty', 'mtty-1', 4, False)]


CONFS = {
    'default and listed': MDEV_CONF,
    'no type': '[DEFAULT]\nhost = compute1\n',
    'upper case address': MDEV_CONF.replace('0000:85:00.0',
                                            '0000:85:00.0'.upper()),
    'virtual parent': ('[devices]\nenabled_mdev_types = mtty-1, nvidia-35\n'
                       '[mdev_mtty-1]\ndevice_addresses = mtty_mtty\n'),
    'listed only': ('[devices]\nenabled_mdev_types = nvidia-36\n'
                    '[mdev_nvidia-36]\ndevice_addresses = 0000:84:00.0\n'),
}


@pytest.mark.nova
@pytest.mark.parametrize('text', CONFS.values(), ids=CONFS)
def test_enabled_as_novas_libvirt_driver_says(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
        text: str) -> None:
    root = mdev_host(tmp_path)
    paths = nova_driver.write_files(tmp_path, [text])
    found = reads.gpu_types(paths, root)
    nodedevs = {'pci_' + a.replace(':', '_').replace('.', '_'): a
                for a in (GPU_A, GPU_B, GPU_C)}
    nodedevs['mtty_mtty'] = 'mtty_mtty'
    _, nova = nova_driver.run_driver(monkeypatch, paths, root, nodedevs)
    theirs = {(nodedevs[d], t) for d, (t, _) in nova.items() if t}
    ours = {(t.gpu, t.name) for t in found if t.enabled}
    offered = {(t.gpu, t.name) for t in found}
    assert ours == theirs & offered
    assert ours or text == CONFS['no type']


def l4(current: dict[int, int], **kwargs: object) -> sysfs.VgpuGpu:
    return sysfs.VgpuGpu(L4, numvfs=4, current=current, **kwargs)


def vf_conf(vfs: list[str]) -> str:
    return '[pci]\nreport_in_placement = True\n' + ''.join(
        'device_spec = %s\n' % json.dumps({
            'vendor_id': '10de', 'address': vf,
            'resource_class': 'CUSTOM_NVIDIA_L4_8Q', 'managed': 'no'})
        for vf in vfs)


def test_types_of_a_gpu_whose_vfs_are_typed_through_sysfs(
        tmp_path: pathlib.Path) -> None:
    untyped = l4({})
    root = sysfs.build(tmp_path / 'sys', vgpu_gpus=[untyped])
    found = reads.gpu_types(sysfs_root=root)
    # Every type, each creatable on the four VFs.
    assert [(t.gpu, t.name, t.readable_name, t.available)
            for t in found] == [(L4, str(n), name, 4)
                                for n, name in sysfs.L4_TYPES]


def test_vf_types_enabled_where_a_device_spec_offers_a_vf_of_that_type(
        tmp_path: pathlib.Path) -> None:
    gpu = l4({0: L4_8Q})
    root = sysfs.build(tmp_path / 'sys', vgpu_gpus=[gpu])
    found = reads.gpu_types([write(tmp_path, vf_conf(gpu.vfs))], root)
    # Once a VF is typed, the others list only its type.
    assert table(found) == [(L4, str(L4_8Q), 3, True)]
    found = reads.gpu_types([write(tmp_path, vf_conf([gpu.vfs[1]]))], root)
    assert table(found) == [(L4, str(L4_8Q), 3, False)]


def test_a_type_no_vf_lists_any_more_is_listed_without_its_name(
        tmp_path: pathlib.Path) -> None:
    gpu = l4({0: L4_8Q, 1: L4_8Q, 2: L4_8Q, 3: L4_8Q}, full=True)
    root = sysfs.build(tmp_path / 'sys', vgpu_gpus=[gpu])
    found = reads.gpu_types([write(tmp_path, vf_conf(gpu.vfs))], root)
    assert [(t.name, t.readable_name, t.available, t.enabled)
            for t in found] == [(str(L4_8Q), None, 0, True)]


@pytest.mark.nova
def test_vf_enabled_as_novas_whitelist_matches(
        tmp_path: pathlib.Path) -> None:
    import nova.conf
    from nova import objects
    from nova.pci import whitelist

    gpu = l4({0: L4_8Q, 1: L4_4Q})
    root = sysfs.build(tmp_path / 'sys', vgpu_gpus=[gpu])
    offered = [gpu.vfs[1], gpu.vfs[3]]
    found = reads.gpu_types([write(tmp_path, vf_conf(offered))], root)

    objects.register_all()
    nova.conf.CONF.set_override('report_in_placement', True, 'pci')
    try:
        specs = whitelist.Whitelist([json.dumps({
            'vendor_id': '10de', 'address': vf,
            'resource_class': 'CUSTOM_NVIDIA_L4_8Q', 'managed': 'no'})
            for vf in offered])
        host = local_sysfs.read_host(root)
        theirs = set()
        for device in host.pci_devices():
            dev = objects.PciDevice(
                address=device.address, vendor_id=device.vendor_id,
                product_id=device.product_id, dev_type=device.dev_type,
                parent_addr=device.parent_addr, status='available',
                instance_uuid=None, extra_info={})
            vgpu = host.devices[device.address].vgpu
            if specs.get_devspec(dev) is not None and vgpu and vgpu.current:
                theirs.add(str(vgpu.current))
    finally:
        nova.conf.CONF.clear_override('report_in_placement', 'pci')
    assert {t.name for t in found if t.enabled} == theirs == {str(L4_4Q)}
    assert {t.name for t in found} == {str(L4_8Q), str(L4_4Q)}


def test_files_nova_compute_refuses_are_refused(
        tmp_path: pathlib.Path) -> None:
    root = mdev_host(tmp_path)
    twice = MDEV_CONF + '[mdev_nvidia-35]\ndevice_addresses = 0000:85:00.0\n'
    with pytest.raises(errors.Invalid) as caught:
        reads.gpu_types([write(tmp_path, twice)], root)
    assert 'nova-compute refuses to start' in str(caught.value)
    assert caught.value.data['parameter'] == 'files'
    with pytest.raises(errors.Invalid) as caught:
        reads.gpu_types([str(tmp_path / 'missing.conf')], root)
    assert caught.value.data['parameter'] == 'files'


def test_a_sysfs_root_that_is_no_directory(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.Invalid) as caught:
        reads.gpu_types(sysfs_root=str(tmp_path / 'no'))
    assert caught.value.data['parameter'] == 'sysfs'
    assert errors.inputs(caught.value.sentence) == ['sysfs']


def test_a_node_without_gpus_lists_nothing_and_says_why(
        tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / 'sys'
    root.mkdir()
    assert reads.gpu_types(sysfs_root=str(root)) == []
    assert 'no mdev parent' in caplog.text
