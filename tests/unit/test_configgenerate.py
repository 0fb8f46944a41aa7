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

"""``config generate``'s plan (``features.config.generate.plan``) on
hosts laid out as the kernel lays them out: which devices take which
type, and the bad input refused before a file is written.
"""

import pathlib

import pytest

from osc_mdev.features.config.generate import plan as configgenerate
from osc_mdev.host import gpus as host_gpus
from osc_mdev.local import sysfs as local_sysfs
from tests.fixtures import sysfs

#: Two L4 GPUs, VFs enabled and untyped (after sriov-manage -e), one in
#: the header layout; a third whose VFs are not enabled; an mdev GPU; an
#: SR-IOV GPU of the mdev framework (its VFs are mdev parents) and mtty.
L4_A = sysfs.VgpuGpu('0000:25:00.0', numvfs=4, totalvfs=4)
L4_B = sysfs.VgpuGpu('0000:26:00.0', numvfs=4, totalvfs=4, header=True)
L4_OFF = sysfs.VgpuGpu('0000:27:00.0', numvfs=0, totalvfs=4)
A40 = '0000:41:00.0'


def build(root: pathlib.Path, *gpus: sysfs.VgpuGpu) -> str:
    return sysfs.build(root, devices=[
        ('0000:84:00.0', {'nvidia-35': 4, 'nvidia-36': 2}, None),
        ('0000:85:00.0', {'nvidia-35': 4}, None),
        (A40, {}, None),
        ('0000:41:00.4', {'nvidia-558': 1}, A40),
        ('0000:41:00.5', {'nvidia-558': 1}, A40),
        ('0000:03:00.0', {}, None),
    ], virtual=[('mtty/mtty', {'mtty-1': 2})],
        ids={'0000:03:00.0': ('8086', '1572')},
        vgpu_gpus=gpus or (L4_A, L4_B, L4_OFF))


@pytest.fixture
def host(tmp_path: pathlib.Path) -> host_gpus.Host:
    return local_sysfs.read_host(build(tmp_path / 'sys'))


def plan(host: host_gpus.Host, *values: str) -> configgenerate.Plan:
    return configgenerate.plan(
        host, [configgenerate.parse_choice(v) for v in values])


def vfs_of(result: configgenerate.Plan) -> dict[str, tuple[str, ...]]:
    return {g.pf: tuple(vf.address for vf in g.vfs) for g in result.vf_gpus}


@pytest.mark.parametrize('text, expected', [
    ('0000:25:00.0=L4-8Q', ('0000:25:00.0', 'L4-8Q', None)),
    ('25:00.0=NVIDIA L4-8Q:3', ('0000:25:00.0', 'NVIDIA L4-8Q', 3)),
    ('0000:3B:00.4=1162', ('0000:3b:00.4', '1162', None)),
    (' 0000:84:00.0 = nvidia-35 ', ('0000:84:00.0', 'nvidia-35', None)),
    ('mtty_mtty=mtty-1', ('mtty_mtty', 'mtty-1', None)),
])
def test_parse_choice(text: str, expected: tuple) -> None:
    choice = configgenerate.parse_choice(text)
    assert (choice.device, choice.type_name, choice.count) == expected
    assert choice.text == text


@pytest.mark.parametrize('text', ['0000:25:00.0', '=L4-8Q', '0000:25:00.0=',
                                  '0000:25:00.0=L4-8Q:0'])
def test_parse_choice_refuses(text: str) -> None:
    with pytest.raises(configgenerate.GenerateError):
        configgenerate.parse_choice(text)


@pytest.mark.parametrize('written', [
    'L4-8Q', 'l4-8q', 'NVIDIA L4-8Q', 'nvidia  l4-8q', '1162'])
def test_a_vf_gpu_takes_its_type_on_every_vf(host: host_gpus.Host,
                                             written: str) -> None:
    result = plan(host, '0000:25:00.0=%s' % written)
    [gpu] = result.vf_gpus
    assert gpu.vgpu_type == host_gpus.VgpuType(1162, 'NVIDIA L4-8Q')
    assert [vf.address for vf in gpu.vfs] == L4_A.vfs
    assert gpu.resource_class == 'CUSTOM_NVIDIA_L4_8Q'
    assert gpu.alias == 'nvidia-l4-8q'
    assert result.mdev_types == ()


def test_count_takes_the_first_vfs(host: host_gpus.Host) -> None:
    result = plan(host, '0000:25:00.0=L4-8Q:3', '0000:26:00.0=1161')
    assert vfs_of(result) == {'0000:25:00.0': tuple(L4_A.vfs[:3]),
                              '0000:26:00.0': tuple(L4_B.vfs)}
    assert result.resource_classes() == ['CUSTOM_NVIDIA_L4_4Q',
                                         'CUSTOM_NVIDIA_L4_8Q']
    assert result.aliases() == {'nvidia-l4-4q': 'CUSTOM_NVIDIA_L4_4Q',
                                'nvidia-l4-8q': 'CUSTOM_NVIDIA_L4_8Q'}
    assert result.vf_count == 7


def test_count_takes_the_vfs_with_the_type_first(
        tmp_path: pathlib.Path) -> None:
    # VFs 1 and 3 were typed by hand; the GPU has no room for a third.
    gpu = sysfs.VgpuGpu('0000:25:00.0', numvfs=4, totalvfs=4,
                        current={1: 1164, 3: 1164}, creatable=())
    untyped = sysfs.VgpuGpu('0000:26:00.0', numvfs=1, totalvfs=1)
    host = local_sysfs.read_host(sysfs.build(tmp_path / 'sys',
                                             vgpu_gpus=[gpu, untyped]))
    assert vfs_of(plan(host, '0000:25:00.0=L4-24Q:2')) == {
        '0000:25:00.0': (gpu.vfs[1], gpu.vfs[3])}
    with pytest.raises(configgenerate.GenerateError,
                       match=r'virtual function 0000:25:00.4 cannot take '
                             r'NVIDIA L4-24Q \(1164\) now \(it lists none\)'):
        plan(host, '0000:25:00.0=L4-24Q:3')


def test_single_vfs_of_one_gpu_make_one_gpu(host: host_gpus.Host) -> None:
    result = plan(host, '0000:25:00.6=L4-8Q', '0000:25:00.4=1162')
    assert vfs_of(result) == {'0000:25:00.0': ('0000:25:00.4',
                                               '0000:25:00.6')}


def test_mdev_gpus(host: host_gpus.Host) -> None:
    result = plan(host, '0000:85:00.0=nvidia-35', '84:00.0=GRID nvidia-36',
                  'mtty_mtty=mtty-1', '0000:41:00.0=558')
    assert result.vf_gpus == ()
    assert [(t.mdev_type, t.addresses) for t in result.mdev_types] == [
        ('nvidia-35', ('0000:85:00.0',)),
        ('nvidia-36', ('0000:84:00.0',)),
        ('mtty-1', ('mtty_mtty',)),
        ('nvidia-558', ('0000:41:00.4', '0000:41:00.5'))]


def test_one_type_on_several_mdev_gpus(host: host_gpus.Host) -> None:
    result = plan(host, '0000:85:00.0=35', '0000:84:00.0=nvidia-35')
    assert [(t.mdev_type, t.addresses) for t in result.mdev_types] == [
        ('nvidia-35', ('0000:84:00.0', '0000:85:00.0'))]


BAD = {
    'no such device': (['0000:99:00.0=L4-8Q'],
                       'there is no device 0000:99:00.0 on the host'),
    'not a GPU': (['0000:03:00.0=L4-8Q'], '0000:03:00.0 is no GPU that '
                  'gives vGPUs'),
    'mdev type the VFs of a GPU do not offer': (
        ['0000:41:00.0=L4-8Q'], '0000:41:00.4 offers no mdev type L4-8Q'),
    'type the VF GPU cannot create': (
        ['0000:25:00.0=A16-8Q'], 'cannot create vGPU type A16-8Q; its VFs '
        'list NVIDIA L4-1Q (1159), NVIDIA L4-2Q (1160)'),
    'number the VF GPU does not know': (['0000:25:00.0=63'],
                                        'cannot create vGPU type 63'),
    'mdev type the GPU does not offer': (
        ['0000:85:00.0=nvidia-36'], '0000:85:00.0 offers no mdev type '
        'nvidia-36; it offers nvidia-35 (GRID nvidia-35)'),
    'VFs not enabled': (['0000:27:00.0=L4-8Q'], 'sriov-manage -e '
                        '0000:27:00.0'),
    'two types for one GPU': (
        ['0000:84:00.0=nvidia-35', '0000:84:00.0=nvidia-36'],
        '0000:84:00.0 is given two types, nvidia-35 '
        '(0000:84:00.0=nvidia-35) and nvidia-36'),
    'two types for one VF GPU': (
        ['0000:25:00.0=L4-8Q', '0000:25:00.0=L4-4Q'],
        'is given two types, NVIDIA L4-8Q (1162)'),
    'a GPU and its VF': (['0000:25:00.0=L4-8Q', '0000:25:00.5=L4-8Q'],
                         '0000:25:00.5 is given its type twice'),
    "one PF's VFs mixing types": (
        ['0000:25:00.4=L4-8Q', '0000:25:00.5=L4-4Q'],
        'PlacementPciMixedResourceClassException'),
    'count above the VFs': (['0000:25:00.0=L4-8Q:5'],
                            'has 4 virtual functions enabled, fewer than 5'),
    'count on one VF': (['0000:25:00.4=L4-8Q:1'], 'is one virtual function'),
    'count on an mdev GPU': (['0000:84:00.0=nvidia-35:2'],
                             'COUNT is for GPUs whose vGPUs are virtual'),
    'nothing chosen': ([], 'Give the type of each GPU'),
}


@pytest.mark.parametrize('name', sorted(BAD))
def test_bad_input_is_one_sentence(host: host_gpus.Host, name: str) -> None:
    values, fragment = BAD[name]
    with pytest.raises(configgenerate.GenerateError) as caught:
        plan(host, *values)
    message = str(caught.value)
    assert '\n' not in message
    if fragment:
        assert fragment in message, message


def test_a_vf_of_another_type_is_refused(tmp_path: pathlib.Path) -> None:
    # A GPU that lists every type whatever its VFs have.
    gpu = sysfs.VgpuGpu('0000:25:00.0', numvfs=2, totalvfs=2,
                        current={0: 1161}, creatable=sysfs.L4_TYPES)
    host = local_sysfs.read_host(sysfs.build(tmp_path / 'sys',
                                             vgpu_gpus=[gpu]))
    with pytest.raises(configgenerate.GenerateError,
                       match='0000:25:00.4 has vGPU type 1161, not NVIDIA '
                             r'L4-8Q \(1162\): write 0 to /sys/bus/pci/'
                             'devices/0000:25:00.4/nvidia/current_vgpu_type'
                             ' first'):
        plan(host, '0000:25:00.0=L4-8Q')
    # Where its VFs have L4-4Q, the GPU offers L4-4Q only.
    half = sysfs.VgpuGpu('0000:25:00.0', numvfs=2, totalvfs=2,
                         current={0: 1161})
    host = local_sysfs.read_host(sysfs.build(tmp_path / 'half',
                                             vgpu_gpus=[half]))
    with pytest.raises(configgenerate.GenerateError,
                       match='cannot create vGPU type L4-8Q; its VFs list '
                             r'NVIDIA L4-4Q \(1161\)$'):
        plan(host, '0000:25:00.0=L4-8Q')
    assert vfs_of(plan(host, '0000:25:00.0=L4-4Q')) == {
        '0000:25:00.0': tuple(half.vfs)}


def test_a_vf_whose_nvidia_files_are_missing(tmp_path: pathlib.Path) -> None:
    root = pathlib.Path(build(tmp_path / 'sys', L4_A))
    (root / sysfs.PCI / '0000:25:00.5' / 'nvidia' /
     'current_vgpu_type').unlink()
    host = local_sysfs.read_host(str(root))
    with pytest.raises(configgenerate.GenerateError,
                       match='virtual function 0000:25:00.5 has no readable'):
        plan(host, '0000:25:00.0=L4-8Q')


def test_spellings_of_mdev_and_vgpu_types() -> None:
    types = [host_gpus.VgpuType(1, 'NVIDIA RTX Pro 6000 Blackwell DC-3Q'),
             host_gpus.VgpuType(2, 'NVIDIA RTX Pro 6000 Blackwell DC-4Q')]
    for written in ('RTX Pro 6000 Blackwell DC-3Q', 'dc-3q', '1',
                    'nvidia rtx pro 6000 blackwell dc-3q'):
        assert configgenerate.match_vgpu_type(written, types, 'x') == \
            types[0]
    assert configgenerate.match_vgpu_type('DC-5Q', types, 'x') is None
    twins = types + [host_gpus.VgpuType(3, 'NVIDIA RTX Pro 5000 DC-3Q')]
    with pytest.raises(configgenerate.GenerateError,
                       match='DC-3Q names several types of x'):
        configgenerate.match_vgpu_type('DC-3Q', twins, 'x')
    assert configgenerate.alias_of(types[0]) == \
        'nvidia-rtx-pro-6000-blackwell-dc-3q'
    assert configgenerate.resource_class_of(types[0]) == \
        'CUSTOM_NVIDIA_RTX_PRO_6000_BLACKWELL_DC_3Q'
