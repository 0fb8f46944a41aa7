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

"""``config check --sysfs`` on SR-IOV vGPU hosts: the VFs of NVIDIA GPUs
typed through sysfs (trees laid out as the kernel lays them out) against
``[pci] device_spec`` as Nova matches it; which VFs Nova offers, and as
which class, is cross-checked with Nova's own code.
"""

import json
import pathlib

import pytest

from osc_mdev.base import findings
from osc_mdev.features.config.check import reads as config
from osc_mdev.features.config.check import vf as configcheck_vf
from osc_mdev.host import gpus as host_gpus
from osc_mdev.local import conf_files as local_novaconf
from osc_mdev.local import sysfs as local_sysfs
from osc_mdev.nova.pci import config as pci_rules
from tests.fixtures import sysfs

L4_8Q, L4_4Q = 1162, 1161
CLASS = 'CUSTOM_NVIDIA_L4_8Q'
GPU_A, GPU_B = '0000:25:00.0', '0000:26:00.0'


def gpu(pf: str, current: dict[int, int], **kwargs: object
        ) -> sysfs.VgpuGpu:
    return sysfs.VgpuGpu(pf, numvfs=4, current=current, **kwargs)


def nova_conf(vfs: list[str], rc: str = CLASS, report: bool = True) -> str:
    """A compute's nova.conf as Nova's guide writes it: one device_spec
    per VF with the type's class and ``managed`` no.
    """
    lines = ['[pci]', 'report_in_placement = %s' % report]
    lines += ['device_spec = %s' % json.dumps({
        'vendor_id': '10de', 'address': vf, 'resource_class': rc,
        'managed': 'no'}) for vf in vfs]
    return '\n'.join(lines + ['[filter_scheduler]',
                              'pci_in_placement = True']) + '\n'


def run(tmp_path: pathlib.Path, text: str,
        gpus: list[sysfs.VgpuGpu]) -> configcheck_vf.VfCheck:
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / 'nova.conf'
    path.write_text(text)
    conf = local_novaconf.parse_files([str(path)])
    assert conf.settings is not None
    root = sysfs.build(tmp_path / 'sys', vgpu_gpus=gpus)
    return configcheck_vf.vf_check(pci_rules.pci_config(conf.settings),
                                   local_sysfs.read_host(root))


def messages(check: configcheck_vf.VfCheck) -> list[str]:
    return [f.message for f in check.findings]


def test_clean_host_says_so(tmp_path: pathlib.Path) -> None:
    # Both GPUs typed L4-8Q on their first two VFs (the others stay
    # untyped, unlisted): each typed VF offered as CUSTOM_NVIDIA_L4_8Q.
    gpus = [gpu(GPU_A, {0: L4_8Q, 1: L4_8Q}),
            gpu(GPU_B, {0: L4_8Q, 1: L4_8Q}, header=True)]
    vfs = [g.vf_address(i) for g in gpus for i in (0, 1)]
    check = run(tmp_path, nova_conf(vfs), gpus)
    assert check.findings == []
    assert check.scope() == (
        'the vGPU types of the 8 VFs of GPUs 0000:25:00.0 and 0000:26:00.0 '
        '(all 4 offered, each typed as its class says)')


def test_full_gpus_name_no_type(tmp_path: pathlib.Path) -> None:
    # Every VF that could take a type has one: sysfs names no type, so
    # the class name cannot be checked, and the result row says so.
    gpus = [gpu(GPU_A, {0: L4_8Q, 1: L4_8Q}, full=True)]
    check = run(tmp_path, nova_conf(gpus[0].vfs[:2]), gpus)
    assert check.findings == []
    assert check.scope() == (
        'the vGPU types of the 4 VFs of GPU 0000:25:00.0 (all 2 offered, '
        'each with a vGPU type; no VF can take type 1162 any more, so '
        'sysfs does not name it: the class names are not checked against '
        'it)')


def test_full_gpus_of_two_types_name_neither(tmp_path: pathlib.Path) -> None:
    gpus = [gpu(GPU_A, {0: L4_8Q, 1: L4_8Q}, full=True),
            gpu(GPU_B, {0: L4_4Q, 1: L4_4Q}, full=True)]
    # GPU A offered as L4-8Q, GPU B as L4-4Q: both full.
    specs = ''.join(
        'device_spec = {"address": "%s", "resource_class": '
        '"CUSTOM_NVIDIA_L4_4Q", "managed": "no"}\n' % vf
        for vf in gpus[1].vfs[:2])
    text = nova_conf(gpus[0].vfs[:2]).replace(
        '[filter_scheduler]', specs + '[filter_scheduler]')
    check = run(tmp_path, text, gpus)
    assert check.findings == []
    assert check.scope() is not None
    assert check.scope().endswith(
        '(all 4 offered, each with a vGPU type; no VF can take types 1161 '
        'and 1162 any more, so sysfs does not '
        'name them: the class names are not checked against them)')


def test_untyped_vfs_offered_after_a_reboot(tmp_path: pathlib.Path) -> None:
    # After a reboot every VF is back at 0 and lists every type again.
    gpus = [gpu(GPU_A, {})]
    check = run(tmp_path, nova_conf(gpus[0].vfs[:2]), gpus)
    [finding] = check.findings
    assert finding.severity == findings.WARNING
    assert finding.where.startswith('[pci] device_spec, ')
    assert finding.message == (
        'VFs 0000:25:00.4, 0000:25:00.5 of GPU 0000:25:00.0 are offered as '
        'CUSTOM_NVIDIA_L4_8Q but have no vGPU type (current_vgpu_type 0), '
        'as after a reboot: a server given one of them does not start. '
        'Re-apply the types (NVIDIA L4-8Q (1162)) before nova-compute '
        'starts.')
    assert (finding.device, finding.resource_class) == ('0000:25:00.4',
                                                        CLASS)


def test_untyped_vf_among_typed_ones(tmp_path: pathlib.Path) -> None:
    # A class not named after a type: the type the others have.
    gpus = [gpu(GPU_A, {0: L4_8Q, 1: L4_8Q}, full=True)]
    check = run(tmp_path, nova_conf(gpus[0].vfs[:3], 'CUSTOM_L4_POOL'),
                gpus)
    assert messages(check) == [
        'VF 0000:25:00.6 of GPU 0000:25:00.0 is offered as CUSTOM_L4_POOL '
        'but has no vGPU type (current_vgpu_type 0), as after a reboot: a '
        'server given it does not start. Re-apply the types (type 1162, as '
        'the other VFs of CUSTOM_L4_POOL) before nova-compute starts.']


def test_class_named_after_another_type(tmp_path: pathlib.Path) -> None:
    # GPU B is typed L4-4Q (its untyped VFs list L4-4Q) but offered as
    # CUSTOM_NVIDIA_L4_8Q, which names L4-8Q (GPU A's untyped VFs list it).
    gpus = [gpu(GPU_A, {0: L4_8Q}), gpu(GPU_B, {0: L4_4Q, 1: L4_4Q})]
    check = run(tmp_path, nova_conf([gpus[0].vfs[0]] + gpus[1].vfs[:2]),
                gpus)
    [finding] = check.findings
    assert finding.message == (
        'Class CUSTOM_NVIDIA_L4_8Q is named after NVIDIA L4-8Q (1162), but '
        'VFs offered as it have another type: NVIDIA L4-4Q (1161) on '
        '0000:26:00.4, 0000:26:00.5. A server asking for '
        'CUSTOM_NVIDIA_L4_8Q gets that type there; type them as the class '
        'says, or give them a class of their own.')
    assert finding.resource_class == CLASS


def test_class_named_after_a_type_sysfs_does_not_list(
        tmp_path: pathlib.Path) -> None:
    # Only L4-4Q is named (by GPU B's untyped VFs): the class names
    # another L4 type.
    gpus = [gpu(GPU_B, {0: L4_4Q})]
    check = run(tmp_path, nova_conf(gpus[0].vfs[:1]), gpus)
    assert messages(check) == [
        'Class CUSTOM_NVIDIA_L4_8Q is named after another type than its VF '
        'has: NVIDIA L4-4Q (1161) on 0000:26:00.4. A server asking for '
        'CUSTOM_NVIDIA_L4_8Q gets that type there; type it as the class '
        'says, or give it a class of its own.']


def test_different_types_in_one_class(tmp_path: pathlib.Path) -> None:
    gpus = [gpu(GPU_A, {0: L4_8Q}), gpu(GPU_B, {0: L4_4Q})]
    check = run(tmp_path, nova_conf([gpus[0].vfs[0], gpus[1].vfs[0]],
                                    'CUSTOM_L4'), gpus)
    assert messages(check) == [
        'VFs offered as CUSTOM_L4 have different vGPU types: NVIDIA L4-4Q '
        '(1161) on 0000:26:00.4; NVIDIA L4-8Q (1162) on 0000:25:00.4. A '
        'server asking for them gets either; give each type a '
        'resource_class of its own.']


def test_different_types_on_one_gpu_without_placement(
        tmp_path: pathlib.Path) -> None:
    gpus = [gpu(GPU_A, {0: L4_8Q, 1: L4_4Q}, creatable=sysfs.L4_TYPES)]
    check = run(tmp_path, nova_conf(gpus[0].vfs[:2], report=False), gpus)
    assert messages(check) == [
        'VFs of GPU 0000:25:00.0 have different vGPU types: NVIDIA L4-4Q '
        '(1161) on 0000:25:00.5; NVIDIA L4-8Q (1162) on 0000:25:00.4. A '
        'server asking for them gets either; give each type a '
        'resource_class of its own.']


@pytest.mark.parametrize('numvfs,named', [
    (0, 'VFs 0000:25:00.4, 0000:25:00.5'), (1, 'VF 0000:25:00.5')])
def test_specs_naming_vfs_not_enabled(tmp_path: pathlib.Path, numvfs: int,
                                      named: str) -> None:
    gpus = [sysfs.VgpuGpu(GPU_A, numvfs=numvfs, current={0: L4_8Q})]
    text = nova_conf(['0000:25:00.4', '0000:25:00.5'])
    check = run(tmp_path, text, gpus)
    [finding] = [f for f in check.findings
                 if 'not enabled' in f.message]
    assert finding.message.startswith(
        'The device specs name %s of GPU 0000:25:00.0 that %s not enabled '
        '(sriov_numvfs %d of 16), as after a reboot: Nova offers nothing '
        'from %s. Enable the VFs (sriov-manage -e 0000:25:00.0)'
        % (named, 'are' if numvfs == 0 else 'is', numvfs,
           'them' if numvfs == 0 else 'it'))
    # Said once: not also as a device spec that matches nothing.
    checked = config.check([str(tmp_path / 'nova.conf')],
                           str(tmp_path / 'sys'))
    assert [f.message for f in checked.findings
            if 'Matches no PCI device' in f.message] == []
    assert [f.message for f in checked.findings
            if 'not enabled' in f.message] == [finding.message]


def test_typed_vfs_no_spec_offers(tmp_path: pathlib.Path) -> None:
    gpus = [gpu(GPU_A, {0: L4_8Q, 1: L4_8Q}), gpu(GPU_B, {0: L4_8Q})]
    check = run(tmp_path, nova_conf([gpus[0].vfs[0]]), gpus)
    assert [f.where for f in check.findings] == ['[pci] device_spec'] * 2
    assert messages(check) == [
        'VF 0000:25:00.5 of GPU 0000:25:00.0 has NVIDIA L4-8Q (1162) but no '
        '[pci] device_spec matches it: Nova never gives it to a server.',
        'VF 0000:26:00.4 of GPU 0000:26:00.0 has NVIDIA L4-8Q (1162) but no '
        '[pci] device_spec matches it: Nova never gives it to a server.']
    gpus = [gpu(GPU_A, {0: L4_8Q, 1: L4_8Q})]
    check = run(tmp_path / 'none', '[DEFAULT]\ndebug = true\n', gpus)
    assert messages(check) == [
        'VFs 0000:25:00.4, 0000:25:00.5 of GPU 0000:25:00.0 have NVIDIA '
        'L4-8Q (1162) but no [pci] device_spec matches them: Nova never '
        'gives them to a server.']


def test_result_row_through_the_use_case(tmp_path: pathlib.Path) -> None:
    gpus = [gpu(GPU_A, {0: L4_8Q})]
    root = sysfs.build(tmp_path / 'sys', vgpu_gpus=gpus)
    path = tmp_path / 'nova.conf'
    path.write_text(nova_conf(gpus[0].vfs[:1]))
    checked = config.check([str(path)], root)
    assert [f for f in checked.findings if f.severity != 'info'] == []
    assert checked.scope[-1] == (
        'the vGPU types of the 4 VFs of GPU 0000:25:00.0 (the one offered, '
        'each typed as its class says)')
    # Without an SR-IOV vGPU GPU, nothing is said of VFs.
    plain = sysfs.build(tmp_path / 'plain', devices=[
        ('0000:84:00.0', {'nvidia-35': 4}, None)])
    assert not any('vGPU types' in s for s in config.check(
        [str(path)], plain).scope)


@pytest.mark.nova
def test_offered_vfs_and_classes_agree_with_nova(
        tmp_path: pathlib.Path) -> None:
    from nova.compute import pci_placement_translator as nova_translator
    import nova.conf
    from nova import objects
    from nova.pci import whitelist

    gpus = [gpu(GPU_A, {0: L4_8Q, 1: L4_8Q}), gpu(GPU_B, {0: L4_4Q})]
    root = sysfs.build(tmp_path / 'sys', vgpu_gpus=gpus)
    host = local_sysfs.read_host(root)
    specs = [{'vendor_id': '10de', 'address': gpus[0].vfs[0],
              'resource_class': CLASS, 'managed': 'no'},
             {'vendor_id': '10de', 'product_id': '27b8',
              'address': '0000:26:00.*', 'resource_class': 'l4-4q'}]
    text = '[pci]\nreport_in_placement = True\n' + ''.join(
        'device_spec = %s\n' % json.dumps(s) for s in specs)
    path = tmp_path / 'nova.conf'
    path.write_text(text)
    conf = local_novaconf.parse_files([str(path)])
    assert conf.settings is not None
    ours = {v.address: v.resource_class for v in configcheck_vf._vfs(
        pci_rules.pci_config(conf.settings), host)}

    objects.register_all()
    nova.conf.CONF.set_override('report_in_placement', True, 'pci')
    try:
        wl = whitelist.Whitelist([json.dumps(s) for s in specs])
        theirs = {}
        for device in host.pci_devices():
            if device.dev_type != 'type-VF':
                continue
            dev = objects.PciDevice(
                address=device.address, vendor_id=device.vendor_id,
                product_id=device.product_id, dev_type=device.dev_type,
                parent_addr=device.parent_addr, status='available',
                instance_uuid=None, extra_info={})
            spec = wl.get_devspec(dev)
            theirs[device.address] = (
                nova_translator._get_rc_for_dev(dev, spec.get_tags())
                if spec is not None else None)
    finally:
        nova.conf.CONF.clear_override('report_in_placement', 'pci')
    assert ours == theirs
    assert theirs[gpus[0].vfs[0]] == CLASS
    assert theirs[gpus[0].vfs[1]] is None
    assert theirs[gpus[1].vfs[0]] == 'CUSTOM_L4_4Q'


def test_no_vgpu_gpu_no_check(tmp_path: pathlib.Path) -> None:
    host = host_gpus.Host({}, False, ())
    assert configcheck_vf.vf_check(pci_rules.PciConfig(), host) == \
        configcheck_vf.VfCheck([])


def test_untyped_vf_without_placement(tmp_path: pathlib.Path) -> None:
    gpus = [gpu(GPU_A, {0: L4_8Q}, full=True)]
    check = run(tmp_path, nova_conf(gpus[0].vfs[:2], report=False), gpus)
    assert messages(check) == [
        'VF 0000:25:00.5 of GPU 0000:25:00.0 is offered by the device spec '
        'address 0000:25:00.5 10de:* but has no vGPU type '
        '(current_vgpu_type 0), as after a reboot: a server given it does '
        'not start. Re-apply the types (type 1162, as the other VFs of GPU '
        '0000:25:00.0) before nova-compute starts.']
