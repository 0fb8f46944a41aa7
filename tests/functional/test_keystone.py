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

"""osc-mdev configured the way most operators configure ``openstack``.

A real Keystone (password authentication, fernet tokens) and a real
Placement that validates those tokens with it; the CLI gets credentials
from ``OS_*`` variables or a ``clouds.yaml`` entry and finds Placement in
Keystone's service catalog: no endpoint override, no admin token.
"""

import pytest
import requests

from tests.fixtures import cli
from tests.fixtures.identity import Identity
from tests.fixtures import placement_data
from tests.fixtures.placement_data import Gpu
from tests.fixtures import servers

MEMBER_USER = 'gpu-user'
MEMBER_PASSWORD = 'gpu-user-password'
MEMBER_PROJECT = 'gpu-tenant'


class Cloud:
    """Two compute nodes with GPUs, written to Placement as Nova does."""

    LAYOUT = {
        'gpu-host-1': [
            Gpu('pci_0000_84_00_0', 'VGPU', 4, ('CUSTOM_NVIDIA_35',)),
            Gpu('pci_0000_85_00_0', 'VGPU', 4),
        ],
        'gpu_host-2.rack2': [
            Gpu('pci_0000_3b_00_0', 'CUSTOM_MLX5', 8),
            Gpu('mtty_mtty', 'CUSTOM_MTTY', 2),
        ],
    }

    def __init__(self, placement):
        self.placement = placement
        self.gpus = {}
        self.roots = {}
        self.used = {}
        for host, gpus in self.LAYOUT.items():
            self.add_host(host, gpus)
        key = ('gpu-host-1', 'pci_0000_84_00_0')
        for _ in range(3):
            self.placement.boot_server(self.roots['gpu-host-1'],
                                       self.gpus[key])
        self.used[key] = 3

    def add_host(self, host, gpus):
        self.roots[host] = self.placement.add_compute_node(host, gpus)
        for gpu in gpus:
            self.gpus[(host, gpu.nodedev)] = gpu

    def expected(self):
        rows = []
        for (host, nodedev), gpu in self.gpus.items():
            device = nodedev
            if nodedev.startswith('pci_'):
                _, dom, bus, slot, fn = nodedev.split('_')
                device = '%s:%s:%s.%s' % (dom, bus, slot, fn)
            used = self.used.get((host, nodedev), 0)
            rows.append({
                'UUID': gpu.uuid, 'Host': host, 'Device': device,
                'Resource Class': gpu.resource_class,
                'Capacity': gpu.total, 'Used': used,
                'Free': gpu.total - used,
                'Traits': sorted(('OWNER_NOVA',) + tuple(gpu.traits))})
        return sorted(rows, key=lambda r: (r['Host'], r['Device']))


@pytest.fixture(scope='module')
def keystone(tmp_path_factory):
    """A Keystone still starting: ``identity`` waits for it."""
    server = servers.KeystoneProcess(tmp_path_factory.mktemp('keystone'),
                                     wait=False)
    yield server
    server.stop()


@pytest.fixture(scope='module')
def placement_url(tmp_path_factory, keystone):
    """A Placement that only Keystone's tokens open.

    It starts while Keystone is still being set up: keystonemiddleware
    first calls Keystone with the first request.
    """
    server = servers.PlacementProcess(tmp_path_factory.mktemp('placement'),
                                      keystone_url=keystone.url)
    yield server.url
    server.stop()


@pytest.fixture(scope='module')
def identity(keystone, placement_url):
    """Keystone, answering, with Placement in its catalog and a user who
    is only a project member.
    """
    keystone.wait()
    identity = Identity(keystone)
    identity.register_service('placement', 'placement', placement_url)
    identity.create_project_user(MEMBER_PROJECT, MEMBER_USER,
                                 MEMBER_PASSWORD, 'member')
    return identity


@pytest.fixture(scope='module')
def cloud(placement_url, identity):
    return Cloud(placement_data.Placement(placement_url,
                                          token=identity.token))


def password_env(monkeypatch, keystone, user=None, password=None,
                 project=None):
    """OS_* variables as an openrc file sets them."""
    for key, value in {
            'OS_AUTH_URL': keystone.url + '/v3',
            'OS_USERNAME': user or keystone.admin_user,
            'OS_PASSWORD': password or keystone.admin_password,
            'OS_PROJECT_NAME': project or keystone.admin_project,
            'OS_USER_DOMAIN_NAME': 'Default',
            'OS_PROJECT_DOMAIN_NAME': 'Default',
            'OS_IDENTITY_API_VERSION': '3'}.items():
        monkeypatch.setenv(key, value)


def test_os_environment_variables(cloud, keystone, monkeypatch):
    password_env(monkeypatch, keystone)
    listed = cli.openstack('mdev', 'provider', 'list', '-f', 'json').json()
    assert listed == cloud.expected()


def test_clouds_yaml_password_entry(cloud, keystone, tmp_path, monkeypatch):
    clouds = cli.password_cloud(tmp_path / 'clouds.yaml', keystone)
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(clouds))
    args = ('--os-cloud', 'gpu-cloud', 'mdev', 'provider', 'list',
            '-f', 'json')
    assert cli.openstack(*args).json() == cloud.expected()
    assert cli.openstack_process(*args).json() == cloud.expected()


def test_trait_set_through_the_catalog(cloud, keystone, monkeypatch):
    gpus = [Gpu('pci_0000_84_00_0', 'VGPU', 4, ('CUSTOM_KEEP_ME',)),
            Gpu('pci_0000_85_00_0', 'VGPU', 4)]
    cloud.add_host('trait-host', gpus)
    password_env(monkeypatch, keystone)
    result = cli.openstack('mdev', 'trait', 'set', '--trait',
                           'CUSTOM_POOL_A', '-f', 'json',
                           'trait-host:0000:84:00.0')
    assert result.json() == [{
        'Device': '0000:84:00.0', 'Host': 'trait-host',
        'Traits': ['CUSTOM_KEEP_ME', 'CUSTOM_POOL_A', 'OWNER_NOVA'],
        'Result': 'added CUSTOM_POOL_A'}]
    placement = cloud.placement
    assert set(placement.get_traits(gpus[0].uuid)) == {
        'CUSTOM_KEEP_ME', 'CUSTOM_POOL_A', 'OWNER_NOVA'}
    assert placement.get_traits(gpus[1].uuid) == ['OWNER_NOVA']
    gpus[0].traits = ('CUSTOM_KEEP_ME', 'CUSTOM_POOL_A')
    listed = cli.openstack('mdev', 'provider', 'list', '--require-trait',
                           'CUSTOM_POOL_A', '-f', 'json').json()
    assert listed == [r for r in cloud.expected()
                      if 'CUSTOM_POOL_A' in r['Traits']]
    assert [r['UUID'] for r in listed] == [gpus[0].uuid]


def test_wrong_region_is_one_line(cloud, keystone, monkeypatch):
    password_env(monkeypatch, keystone)
    cli.assert_one_line_error(
        cli.openstack('--os-region-name', 'Nowhere', 'mdev', 'provider',
                      'list'),
        'No Placement endpoint found', 'Nowhere')


def test_a_services_own_interface_and_region(cloud, keystone, tmp_path,
                                             monkeypatch):
    # The catalog has public and internal endpoints, no admin one: the
    # cloud's interface is refused, Placement's own is taken.
    args = ('--os-cloud', 'gpu-cloud', 'mdev', 'provider', 'list')
    clouds = cli.password_cloud(tmp_path / 'clouds.yaml', keystone,
                                extra='interface: admin')
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(clouds))
    cli.assert_one_line_error(cli.openstack(*args),
                              'No Placement endpoint found')
    cli.password_cloud(clouds, keystone, extra='interface: admin\n'
                       'placement_interface: internal')
    assert cli.openstack(*args, '-f', 'json').json() == cloud.expected()
    cli.password_cloud(clouds, keystone,
                       extra='placement_region_name: Nowhere')
    cli.assert_one_line_error(cli.openstack(*args),
                              'No Placement endpoint found', 'Nowhere')


def test_member_only_user_is_refused_by_policy(cloud, keystone,
                                               monkeypatch):
    password_env(monkeypatch, keystone, MEMBER_USER, MEMBER_PASSWORD,
                 MEMBER_PROJECT)
    cli.assert_one_line_error(
        cli.openstack('mdev', 'provider', 'list'),
        'HTTP 403', 'placement:resource_providers:list', 'admin role')


def test_wrong_password_is_one_line(cloud, keystone, monkeypatch):
    password_env(monkeypatch, keystone, password='not-the-password')
    cli.assert_one_line_error(
        cli.openstack('mdev', 'provider', 'list'), 'HTTP 401')


def test_placement_accepts_only_keystone_tokens(cloud, placement_url):
    """Placement here is not noauth2, where token ``admin`` is an admin."""
    resp = requests.get(placement_url + '/resource_providers',
                        headers={'X-Auth-Token': 'admin'})
    assert resp.status_code == 401


def test_debug_output_and_errors_never_show_secrets(cloud, keystone,
                                                    identity, monkeypatch):
    """--debug logs every request; the password and any token (fernet
    tokens start with gAAAAA) appear nowhere in the output, nor in the
    errors of a refused or failed request.
    """
    password_env(monkeypatch, keystone)
    secrets = [keystone.admin_password, MEMBER_PASSWORD, 'gAAAAA',
               identity.token]
    runs = [cli.openstack_process('--debug', 'mdev', 'provider', 'list'),
            cli.openstack_process('--debug', 'mdev', 'trait', 'set',
                                  '--trait', 'CUSTOM_DEBUGGED', '--all')]
    assert all(r.rc == 0 for r in runs), [r.stderr[-2000:] for r in runs]
    assert 'REQ: curl' in runs[0].stderr
    assert 'X-Auth-Token: {SHA256}' in runs[0].stderr
    password_env(monkeypatch, keystone, MEMBER_USER, MEMBER_PASSWORD,
                 MEMBER_PROJECT)
    runs.append(cli.openstack_process('mdev', 'provider', 'list'))
    runs.append(cli.openstack_process('--debug', 'mdev', 'provider',
                                      'list'))
    monkeypatch.setenv('OS_PASSWORD', 'wrong-%s' % MEMBER_PASSWORD)
    runs.append(cli.openstack_process('--debug', 'mdev', 'provider',
                                      'list'))
    assert [r.rc for r in runs[2:]] == [1, 1, 1]
    for run in runs:
        for secret in secrets:
            assert secret not in run.stdout + run.stderr


def test_quota_list_says_keystone_has_no_nova_service(
        cloud: Cloud, keystone: servers.KeystoneProcess,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """This Keystone has no compute service, whose limits Nova's are."""
    password_env(monkeypatch, keystone)
    cli.assert_one_line_error(
        cli.openstack('mdev', 'quota', 'list'),
        'Keystone has no compute service', 'openstack service create')
