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

"""The layouts of ``config generate``'s files: kolla-ansible's overrides
and OpenStack-Ansible's variables, from the same plan as the files
layout, and the node name that names them.
"""

import dataclasses
import pathlib

import pytest
import yaml

from osc_mdev.features.config.generate import files as generated
from osc_mdev.features.config.generate import formats
from osc_mdev.features.config.generate import kolla
from osc_mdev.features.config.generate import openstack_ansible
from osc_mdev.features.config.generate import plan as configgenerate
from osc_mdev.local import sysfs as local_sysfs
from tests.fixtures import sysfs

L4_A = sysfs.VgpuGpu('0000:25:00.0', numvfs=4, totalvfs=4)


def plan_of(tmp_path: pathlib.Path, *choices: str) -> configgenerate.Plan:
    root = sysfs.build(tmp_path / 'sys', devices=[
        ('0000:84:00.0', {'nvidia-35': 4}, None)], vgpu_gpus=[L4_A])
    return configgenerate.plan(local_sysfs.read_host(root), [
        configgenerate.parse_choice(c) for c in choices])


@pytest.fixture
def plan(tmp_path: pathlib.Path) -> configgenerate.Plan:
    return plan_of(tmp_path, '0000:25:00.0=L4-8Q:3', '0000:84:00.0=nvidia-35')


def test_the_files_layout_is_the_files(plan) -> None:
    assert formats.files('files', plan, None) == generated.files(plan)


def test_kolla_ansible_renames_the_fragments_and_keeps_their_text(
        plan) -> None:
    by_name = {f.name: f for f in generated.files(plan)}
    found = {f.name: f for f in kolla.files(plan, 'gpu1')}
    assert list(found) == ['nova/gpu1/nova.conf', 'nova/nova-scheduler.conf',
                           'nova/nova-api.conf', generated.UNIT,
                           generated.SCRIPT]
    assert found['nova/gpu1/nova.conf'].text == by_name[
        generated.COMPUTE_CONF].text
    for service in kolla.CONTROLLER_SERVICES:
        assert found['nova/%s.conf' % service].text == by_name[
            generated.CONTROLLER_CONF].text
    assert found[generated.SCRIPT].executable
    assert found[generated.UNIT].holds.startswith(
        'not read by kolla-ansible: install it on gpu1 as '
        '/etc/systemd/system/osc-mdev-vgpu-types.service, enabled; ')


def test_kolla_ansible_refuses_what_jinja_would_read(plan,
                                                     monkeypatch) -> None:
    real = generated.files

    def with_marker(planned):
        return [dataclasses.replace(f, text=f.text + '# {{ x }}\n')
                if f.name == generated.CONTROLLER_CONF else f
                for f in real(planned)]
    monkeypatch.setattr(generated, 'files', with_marker)
    with pytest.raises(configgenerate.GenerateError,
                       match="^nova-controller-vgpu.conf holds {{, which "):
        kolla.files(plan, 'gpu1')


def test_openstack_ansible_variables(plan) -> None:
    found = {f.name: f for f in openstack_ansible.files(plan, 'gpu1')}
    assert list(found) == ['host_vars/gpu1.yml',
                           'group_vars/nova_api_os_compute.yml',
                           'group_vars/nova_scheduler.yml',
                           generated.UNIT, generated.SCRIPT]
    host = yaml.safe_load(found['host_vars/gpu1.yml'].text)
    assert host == {
        'nova_device_spec': [
            generated.device_spec(vf, 'CUSTOM_NVIDIA_L4_8Q')
            for vf in plan.vf_gpus[0].vfs],
        'nova_enabled_mdev_types': [
            {'type': 'nvidia-35', 'address': ['0000:84:00.0']}],
        'nova_nova_conf_overrides': {'pci': {'report_in_placement': True}}}
    group = yaml.safe_load(found['group_vars/nova_scheduler.yml'].text)
    assert group == {
        'nova_pci_alias': [generated.alias('nvidia-l4-8q',
                                           'CUSTOM_NVIDIA_L4_8Q')],
        'nova_nova_conf_overrides': {
            'filter_scheduler': {'pci_in_placement': True}}}


def test_an_mdev_node_has_no_controller_variables(tmp_path) -> None:
    plan = plan_of(tmp_path, '0000:84:00.0=nvidia-35')
    found = openstack_ansible.files(plan, 'gpu1')
    assert [f.name for f in found] == ['host_vars/gpu1.yml']
    assert yaml.safe_load(found[0].text) == {'nova_enabled_mdev_types': [
        {'type': 'nvidia-35', 'address': ['0000:84:00.0']}]}


@pytest.mark.parametrize('layout', ['kolla-ansible', 'openstack-ansible'])
def test_the_tools_layouts_need_the_inventory_host(plan, layout) -> None:
    with pytest.raises(configgenerate.GenerateError,
                       match='named after the node'):
        formats.files(layout, plan, None)


@pytest.mark.parametrize('name', ['', '.', '..', 'a/b', '../x', 'a b',
                                  ' a', 'a\n', 'a\x1b'])
def test_a_inventory_host_that_cannot_name_a_file(name) -> None:
    with pytest.raises(configgenerate.GenerateError,
                       match="cannot name a node's file"):
        formats.check_inventory_host(name)


@pytest.mark.parametrize('name', ['gpu1', 'gpu-node-1.example.org',
                                  'compute_07'])
def test_a_inventory_host(name) -> None:
    assert formats.check_inventory_host(name) == name
