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

"""``type change`` of a GPU whose VFs are typed through sysfs: the VFs
to reset, the ``device_spec`` lines ``config generate`` writes for the
new type, the node's nova.conf with them read back with Nova's own
``Whitelist``, and the mdev GPU's capacity after from its sysfs.
"""

import pytest

from osc_mdev.base import errors
from osc_mdev.features.config.generate import files as generated_files
from osc_mdev.features.config.generate import plan as generate_plan
from osc_mdev.features.config.generate import run as generate_run
from osc_mdev.features.type import change
from osc_mdev.features.type.vf import change as vf_change
from osc_mdev.local import sysfs as local_sysfs
from tests.fixtures import nova_driver
from tests.fixtures import sysfs

PF, OTHER = '0000:b1:00.0', '0000:b1:01.0'
CONF = """[DEFAULT]
host = tcv-node

[pci]
report_in_placement = True
device_spec = {"vendor_id": "10de", "product_id": "27b9", \
"resource_class": "CUSTOM_NVIDIA_L4_2Q"}
device_spec = {"vendor_id": "10de", "product_id": "2339", \
"resource_class": "CUSTOM_NVIDIA_L4_4Q"}
"""


def _host(tmp_path, other_product='2339'):
    root = sysfs.build(tmp_path / 'sys', vgpu_gpus=[
        sysfs.VgpuGpu(PF, 4, current=dict.fromkeys(range(3), 1160),
                      offset=1, product_id='27b8', vf_product_id='27b9'),
        sysfs.VgpuGpu(OTHER, 2, current={0: 1161}, offset=1,
                      product_id='2338', vf_product_id=other_product)])
    host = local_sysfs.read_host(root)
    return host, host.devices[PF]


def test_the_typed_vfs_are_reset_and_the_script_line_changes(tmp_path):
    host, pf = _host(tmp_path)
    assert [vf.address for vf in vf_change.typed_vfs(host, pf)] == [
        '0000:b1:00.%d' % i for i in range(1, 4)]
    assert vf_change.current_script_line(host, pf) == (
        "gpu %s 1160 'NVIDIA L4-2Q' 0000:b1:00.1 0000:b1:00.2 "
        '0000:b1:00.3' % PF)
    made = vf_change.generated(host, pf, 'L4-4Q', 3)
    assert made.script_line() == (
        "gpu %s 1161 'NVIDIA L4-4Q' 0000:b1:00.1 0000:b1:00.2 "
        '0000:b1:00.3' % PF)
    assert made.alias_line() == (
        'alias = {"name": "nvidia-l4-4q", "device_type": "type-VF", '
        '"resource_class": "CUSTOM_NVIDIA_L4_4Q"}')


def test_config_generate_refuses_the_vfs_until_they_are_reset(tmp_path):
    host, pf = _host(tmp_path)
    choice = generate_plan.parse_choice('%s=L4-4Q:3' % PF)
    with pytest.raises(generate_plan.GenerateError,
                       match='cannot create vGPU type L4-4Q'):
        generate_run.plan_files(host, [choice])
    # Once reset, the lines are those config generate writes.
    made = vf_change.generated(host, pf, 'L4-4Q', 3)
    written = generated_files.compute_conf(generate_plan.plan(
        vf_change.reset_host(host, pf), [choice])).splitlines()
    assert made.spec_lines() == [
        line for line in written
        if line.startswith('device_spec') or line.startswith('# %s' % PF)]


@pytest.mark.nova
def test_the_nova_conf_offers_the_chosen_vfs_as_the_new_class(tmp_path):
    host, pf = _host(tmp_path)
    made = vf_change.generated(host, pf, 'NVIDIA L4-4Q', 3)
    conf = vf_change.new_conf_text(host, pf, 'nova.conf', CONF, made)
    diff = conf.diff().splitlines()
    assert diff[3] == ('-device_spec = {"vendor_id": "10de", "product_id": '
                       '"27b9", "resource_class": "CUSTOM_NVIDIA_L4_2Q"}')
    assert [line for line in diff if line.startswith('+device_spec')] == [
        '+device_spec = %s' % generated_files.device_spec(
            host.devices['0000:b1:00.%d' % i], 'CUSTOM_NVIDIA_L4_4Q')
        for i in (1, 2, 3)]
    classes = vf_change.vf_classes(host, 'nova.conf', conf.new_text)
    assert {a: c for a, c in classes.items() if c} == {
        '0000:b1:00.1': 'CUSTOM_NVIDIA_L4_4Q',
        '0000:b1:00.2': 'CUSTOM_NVIDIA_L4_4Q',
        '0000:b1:00.3': 'CUSTOM_NVIDIA_L4_4Q',
        '0000:b1:01.1': 'CUSTOM_NVIDIA_L4_4Q',
        '0000:b1:01.2': 'CUSTOM_NVIDIA_L4_4Q'}
    assert vf_change.expected_total(host, pf, 'nova.conf', conf.new_text,
                                    'CUSTOM_NVIDIA_L4_4Q') == (3, 0)
    assert vf_change.expected_total(host, pf, 'nova.conf', CONF,
                                    'CUSTOM_NVIDIA_L4_4Q') == (0, 4)
    # Nova's own Whitelist reads the new lines as meant.
    path = tmp_path / 'nova.conf'
    path.write_text(conf.new_text)
    specs = nova_driver.nova_values([str(path)])['pci']['device_spec']
    assert [dict(s[4])['resource_class'] for s in specs] == [
        'CUSTOM_NVIDIA_L4_4Q'] * 4
    assert [dict(s[3])['func'] for s in specs[:3]] == ['1', '2', '3']


def test_a_spec_shared_with_another_gpu_is_refused(tmp_path):
    host, pf = _host(tmp_path, other_product='27b9')
    made = vf_change.generated(host, pf, 'L4-4Q', None)
    assert len(made.gpu.vfs) == 4
    with pytest.raises(errors.Invalid, match='other GPUs too'):
        vf_change.new_conf_text(host, pf, 'nova.conf', CONF, made)


def test_a_type_the_gpu_cannot_take_is_refused(tmp_path):
    host, pf = _host(tmp_path)
    with pytest.raises(errors.Invalid, match='cannot create vGPU type'):
        vf_change.generated(host, pf, 'A100-4C', None)
    with pytest.raises(errors.Invalid, match='fewer than 9'):
        vf_change.generated(host, pf, 'L4-4Q', 9)


@pytest.mark.parametrize('text,expected', [
    ('L4-4Q:3', ('L4-4Q', 3)), ('NVIDIA L4-4Q', ('NVIDIA L4-4Q', None)),
    ('1161', ('1161', None)), ('1161:2', ('1161', 2))])
def test_to_takes_a_count(text, expected):
    assert vf_change.parse_to(text) == expected


def test_an_mdev_gpu_counts_what_its_sysfs_offers(tmp_path):
    gpu = '0000:84:00.0'
    root = sysfs.build(tmp_path / 'sys', devices=[
        (gpu, {'nvidia-11': 15, 'nvidia-12': 8}, None)],
        mdevs=[('b3c2a7e4-0000-4000-8000-000000000001', gpu, 'nvidia-11')])
    host = local_sysfs.read_host(root)
    assert [m.uuid for m in change.mdevs_to_remove(
        host, gpu, 'nvidia-12')] == ['b3c2a7e4-0000-4000-8000-000000000001']
    assert change.total_after(host, gpu, 'nvidia-12') == 8
    assert change.total_after(host, gpu, 'nvidia-11') == 16
    assert change.total_after(host, gpu, 'nvidia-99') is None
    blocked = sysfs.build(tmp_path / 'blocked', devices=[
        (gpu, {'nvidia-11': 15, 'nvidia-12': 0}, None)],
        mdevs=[('b3c2a7e4-0000-4000-8000-000000000001', gpu, 'nvidia-11')])
    assert change.total_after(local_sysfs.read_host(blocked), gpu,
                              'nvidia-12') is None


def test_a_request_for_a_pci_alias_keys_a_dict():
    from osc_mdev.nova.pci import request as pci_request
    alias = pci_request.Alias('nvidia-l4-4q', 'legacy', ({
        'dev_type': 'type-VF', 'resource_class': 'CUSTOM_NVIDIA_L4_4Q'},))
    same = pci_request.Alias('nvidia-l4-4q', 'legacy', ({
        'dev_type': 'type-VF', 'resource_class': 'CUSTOM_NVIDIA_L4_4Q'},))
    found = {(pci_request.PciRequest(alias, 1), 'root'): 1}
    assert found[(pci_request.PciRequest(same, 1), 'root')] == 1


def test_an_mdev_gpu_must_offer_the_new_type(tmp_path):
    gpu = '0000:84:00.0'
    host = local_sysfs.read_host(sysfs.build(tmp_path / 'sys', devices=[
        (gpu, {'nvidia-11': 15, 'nvidia-12': 8}, None)]))
    change.check_offered(host, gpu, 'nvidia-12')
    with pytest.raises(errors.Invalid, match='offers no mdev type') as got:
        change.check_offered(host, gpu, 'nvidia-99')
    assert got.value.data['choices'] == ['nvidia-11', 'nvidia-12']
    with pytest.raises(errors.Invalid, match='shows no GPU'):
        change.check_offered(host, '0000:85:00.0', 'nvidia-12')
