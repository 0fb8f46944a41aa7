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

"""``config generate --layout kolla-ansible|openstack-ansible`` with the
real CLI on a host tree laid out as the kernel lays it out.

The kolla-ansible files are merged by kolla-ansible's own
``merge_configs`` action plugin, run by a real ``ansible-playbook``
(local connection) into a base nova.conf, in the order kolla-ansible
merges a service's files, and the result is read with Nova's parsers as
``config generate`` reads its own files back. OpenStack-Ansible's role
cannot run here: its variables are loaded as YAML and compared, item by
item, with what Nova reads from the files of ``--layout files``.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import pytest
import yaml

from osc_mdev.features.config.generate import files as generated
from osc_mdev.features.config.generate import plan as plans
from osc_mdev.features.config.generate import readback
from osc_mdev.local import sysfs as local_sysfs
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.pci import config as pci_rules
from tests.fixtures import cli
from tests.fixtures import sysfs

NODE = 'gpu-node-1'
L4_A = sysfs.VgpuGpu('0000:25:00.0', numvfs=4, totalvfs=4)
L4_B = sysfs.VgpuGpu('0000:26:00.0', numvfs=4, totalvfs=4, header=True)
TYPES = ('--type', '0000:25:00.0=L4-8Q:3', '--type',
         '0000:26:00.0=NVIDIA L4-4Q', '--type', '0000:84:00.0=nvidia-35')
#: The VFs the choices type: 3 of the first GPU, 4 of the second.
VF_COUNT = 7

#: kolla-ansible's ``node_custom_config`` files for a service's
#: nova.conf, in rising precedence (its nova and nova-cell roles).
KOLLA_SOURCES = ['global.conf', 'nova.conf', 'nova/{{ service }}.conf',
                 'nova/{{ inventory_hostname }}/nova.conf']

#: A deployment's nova.conf before the overrides: a device_spec of its
#: own, which the node's file must replace, not add to.
BASE = '''[DEFAULT]
debug = False
compute_driver = libvirt.LibvirtDriver

[pci]
device_spec = {"address": "0000:99:00.1"}
'''

PLAYBOOK = '''- hosts: all
  gather_facts: false
  tasks:
    - name: Merge nova.conf as kolla-ansible does
      merge_configs:
        sources: "{{ [base] + (sources | map('regex_replace', '^',
                   node_custom_config + '/') | list) }}"
        dest: "{{ out }}/{{ service }}.conf"
      loop: "{{ services }}"
      loop_control:
        loop_var: service
'''


def kolla_plugins() -> str | None:
    """kolla-ansible's action plugins, where its package installs them."""
    path = os.path.join(sysconfig.get_path('data'), 'share', 'kolla-ansible',
                        'ansible', 'action_plugins')
    return path if os.path.isfile(
        os.path.join(path, 'merge_configs.py')) else None


def ansible_playbook() -> str | None:
    return shutil.which('ansible-playbook',
                        path=os.path.dirname(sys.executable))


needs_kolla = pytest.mark.skipif(
    kolla_plugins() is None or ansible_playbook() is None,
    reason='kolla-ansible and ansible-core are not installed (py3 has '
    'them, from test-requirements.txt)')


def generate(*args: str) -> cli.Result:
    return cli.openstack('mdev', 'config', 'generate', *args)


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> str:
    """The host after a reboot: VFs enabled, none typed; an mdev GPU."""
    return sysfs.build(tmp_path / 'sys', devices=[
        ('0000:84:00.0', {'nvidia-35': 4, 'nvidia-36': 2}, None)],
        vgpu_gpus=[L4_A, L4_B])


def plan_of(tree: str) -> plans.Plan:
    return plans.plan(local_sysfs.read_host(tree),
                      [plans.parse_choice(t) for t in TYPES[1::2]])


def files_layout(tree: str, tmp_path: pathlib.Path) -> pathlib.Path:
    """The directory of --layout files."""
    out = tmp_path / 'files'
    result = generate('--sysfs', tree, *TYPES, '--output-dir', str(out))
    assert result.rc == 0, result.stderr
    return out


def merge(config: pathlib.Path, tmp_path: pathlib.Path,
          services: list[str]) -> dict[str, str]:
    """Each service's nova.conf as kolla-ansible's merge_configs makes
    it from BASE and the files under ``config``.
    """
    (tmp_path / 'base.conf').write_text(BASE)
    (tmp_path / 'merge.yml').write_text(PLAYBOOK)
    (tmp_path / 'inventory').write_text(
        '%s ansible_connection=local ansible_python_interpreter=%s\n'
        % (NODE, sys.executable))
    out = tmp_path / 'merged'
    out.mkdir()
    env = dict(os.environ, ANSIBLE_ACTION_PLUGINS=str(kolla_plugins()),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / 'ansible-tmp'),
               ANSIBLE_HOME=str(tmp_path / 'ansible-home'),
               ANSIBLE_NOCOLOR='1')
    extra = {'base': str(tmp_path / 'base.conf'),
             'node_custom_config': str(config), 'out': str(out),
             'sources': KOLLA_SOURCES, 'services': services}
    done = subprocess.run(
        [str(ansible_playbook()), '-i', str(tmp_path / 'inventory'),
         str(tmp_path / 'merge.yml'), '-e', json.dumps(extra)],
        env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return {s: (out / ('%s.conf' % s)).read_text() for s in services}


def as_file(name: str, text: str) -> generated.GeneratedFile:
    return generated.GeneratedFile(name, '', text)


@needs_kolla
def test_kolla_ansible_merged_by_merge_configs(
        tree: str, tmp_path: pathlib.Path) -> None:
    config = tmp_path / 'kolla'
    result = generate('--sysfs', tree, *TYPES, '--layout', 'kolla-ansible',
                      '--inventory-host', NODE, '--output-dir', str(config),
                      '-f', 'value', '-c', 'File')
    assert result.rc == 0, result.stderr
    assert result.stdout.split() == [str(config / name) for name in (
        'nova/%s/nova.conf' % NODE, 'nova/nova-scheduler.conf',
        'nova/nova-api.conf', generated.UNIT, generated.SCRIPT)]
    merged = merge(config, tmp_path,
                   ['nova-compute', 'nova-scheduler', 'nova-api'])
    plan = plan_of(tree)
    compute = merged['nova-compute']
    # merge_configs keeps a key repeated in one file, one line a value,
    # and the node's file replaces the base's device_spec.
    assert compute.count('device_spec = ') == VF_COUNT
    assert '0000:99:00.1' not in compute
    assert 'compute_driver = libvirt.LibvirtDriver' in compute
    settings = novaconf.parse_texts([('nova.conf', compute)])
    addresses = [json.loads(text)['address']
                 for text, _ in settings.pci['device_spec']]
    assert addresses == [vf.address for gpu in plan.vf_gpus
                         for vf in gpu.vfs]
    assert len(set(addresses)) == VF_COUNT
    readback.check_compute_conf(plan, as_file('nova-compute', compute))
    # The node's file is every service's on the node: the controller's
    # services of another node have the aliases and no device_spec.
    for service in ('nova-scheduler', 'nova-api'):
        readback.check_controller_conf(
            plan, as_file(service, merged[service]))


@needs_kolla
def test_merge_configs_replaces_a_key_of_an_earlier_file(
        tmp_path: pathlib.Path) -> None:
    """What the layout relies on: within one file a repeated key keeps
    every value; a later file's key replaces all of them.
    """
    config = tmp_path / 'kolla'
    (config / 'nova' / NODE).mkdir(parents=True)
    (config / 'nova.conf').write_text(
        '[pci]\ndevice_spec = {"address": "0000:98:00.1"}\n'
        'device_spec = {"address": "0000:98:00.2"}\n')
    merged = merge(config, tmp_path, ['nova-compute'])['nova-compute']
    settings = novaconf.parse_texts([('nova.conf', merged)])
    assert [json.loads(t)['address'] for t, _ in
            settings.pci['device_spec']] == ['0000:98:00.1', '0000:98:00.2']


def test_openstack_ansible_variables_are_the_files(
        tree: str, tmp_path: pathlib.Path) -> None:
    out = tmp_path / 'osa'
    result = generate('--sysfs', tree, *TYPES, '--layout',
                      'openstack-ansible', '--inventory-host', NODE,
                      '--output-dir', str(out))
    assert result.rc == 0, result.stderr
    files_dir = files_layout(tree, tmp_path)
    compute = novaconf.parse_texts([('c', (
        files_dir / generated.COMPUTE_CONF).read_text())])
    controller = novaconf.parse_texts([('c', (
        files_dir / generated.CONTROLLER_CONF).read_text())])

    host = yaml.safe_load((out / 'host_vars' / ('%s.yml' % NODE)).read_text())
    assert host['nova_device_spec'] == [
        text for text, _ in compute.pci['device_spec']]
    assert len(host['nova_device_spec']) == VF_COUNT
    assert [t['type'] for t in host['nova_enabled_mdev_types']] == (
        compute.enabled.value)
    for record in host['nova_enabled_mdev_types']:
        assert record['address'] == compute.groups[record['type']][
            'device_addresses'].value
    assert host['nova_nova_conf_overrides'] == {
        'pci': {'report_in_placement': True}}
    assert compute.pci['report_in_placement'].value is True
    for group in ('nova_api_os_compute', 'nova_scheduler'):
        variables = yaml.safe_load(
            (out / 'group_vars' / ('%s.yml' % group)).read_text())
        assert variables['nova_pci_alias'] == [
            text for text, _ in controller.pci['alias']]
        assert variables['nova_nova_conf_overrides'] == {
            'filter_scheduler': {'pci_in_placement': True}}
    assert pci_rules.pci_config(controller).pci_in_placement is True
    assert (out / generated.SCRIPT).stat().st_mode & 0o111
    assert (out / generated.UNIT).is_file()


@pytest.mark.parametrize('layout', ['kolla-ansible', 'openstack-ansible'])
def test_printed_and_dry_run_write_nothing(tree: str, tmp_path: pathlib.Path,
                                           layout: str) -> None:
    printed = generate('--sysfs', tree, *TYPES, '--layout', layout,
                       '--inventory-host', NODE)
    assert printed.rc == 0, printed.stderr
    first = ('nova/%s/nova.conf' % NODE if layout == 'kolla-ansible'
             else 'host_vars/%s.yml' % NODE)
    assert printed.stdout.startswith('==> %s <==\n' % first)
    out = tmp_path / 'out'
    dry = generate('--sysfs', tree, *TYPES, '--layout', layout,
                   '--inventory-host', NODE, '--output-dir', str(out),
                   '--dry-run')
    assert dry.rc == 0, dry.stderr
    assert dry.stdout == printed.stdout
    assert not out.exists()


def test_inventory_host_is_needed_and_checked(
        tree: str, tmp_path: pathlib.Path) -> None:
    out = tmp_path / 'out'
    missing = generate('--sysfs', tree, *TYPES, '--layout', 'kolla-ansible',
                       '--output-dir', str(out))
    assert missing.rc == 1
    assert missing.stderr.strip() == (
        'The kolla-ansible files are named after the node: give its '
        'inventory name with --inventory-host.')
    bad = generate('--sysfs', tree, *TYPES, '--layout', 'kolla-ansible',
                   '--inventory-host', '../etc', '--output-dir', str(out))
    assert bad.rc == 1
    assert bad.stderr.startswith(
        "Argument --inventory-host: '../etc' cannot name a node's file: ")
    assert not out.exists()
