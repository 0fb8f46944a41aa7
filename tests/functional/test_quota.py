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

"""``openstack mdev quota list`` against a real Keystone holding Nova's
unified limits (created through its API) and a real Placement behind
keystonemiddleware, the CLI authenticated with a password and finding
every service in Keystone's catalog.

Nova's compute service is registered with an endpoint nothing listens
on: the command reads no Nova here but for the projects of consumers,
which it then reads from Placement. The expected rows are worked out
in the tests from the limits and allocations they wrote.
"""

import collections.abc
import pathlib
import uuid

import pytest

from tests.fixtures import cli
from tests.fixtures.identity import Identity
from tests.fixtures import placement_data
from tests.fixtures.placement_data import Gpu
from tests.fixtures import servers

VGPU, MLX5, L40S = 'VGPU', 'CUSTOM_MLX5', 'CUSTOM_NVIDIA_L40S_VF'
VIEWER, VIEWER_PASSWORD = 'gpu-viewer', 'gpu-viewer-password'
# A project Keystone does not know (deleted, say) that still holds GPUs.
GONE = uuid.uuid4().hex
DEFAULT_RULE = "no limit; require strategy does not list it (Nova's default)"


@pytest.fixture(scope='module')
def keystone(
        tmp_path_factory: pytest.TempPathFactory
) -> collections.abc.Iterator[servers.KeystoneProcess]:
    server = servers.KeystoneProcess(tmp_path_factory.mktemp('keystone'),
                                     wait=False)
    yield server
    server.stop()


@pytest.fixture(scope='module')
def placement(
        tmp_path_factory: pytest.TempPathFactory,
        keystone: servers.KeystoneProcess
) -> collections.abc.Iterator[servers.PlacementProcess]:
    server = servers.PlacementProcess(tmp_path_factory.mktemp('placement'),
                                      keystone_url=keystone.url)
    yield server
    server.stop()


class World:
    """Keystone's limits and Placement's usage of the module's cloud."""

    def __init__(self, keystone: servers.KeystoneProcess,
                 placement: servers.PlacementProcess) -> None:
        keystone.wait()
        self.identity = Identity(keystone)
        self.identity.register_service('placement', 'placement',
                                       placement.url)
        self.nova = self.identity.register_service(
            'compute', 'nova', 'http://127.0.0.1:9/v2.1')
        self.placement = placement_data.Placement(
            placement.url, token=self.identity.token)
        self.projects = {name: self.identity.create_project(name)
                         for name in ('team-a', 'team-b', 'team-c', 'idle',
                                      'legacy')}
        self.projects['gone'] = GONE
        # A user with only the member role on a project of its own.
        self.identity.create_project_user('viewers', VIEWER,
                                          VIEWER_PASSWORD, 'member')
        self._limits()
        self._usage()

    def _limits(self) -> None:
        ids, nova = self.projects, self.nova
        for resource, value in (('class:VGPU', 2), ('servers', 10),
                                ('class:%s' % L40S, 1)):
            self.identity.registered_limit(nova, resource, value)
        # Not in Nova's region: oslo.limit, which asks for the region of
        # Nova's endpoint, never sees it.
        self.identity.registered_limit(nova, 'class:%s' % MLX5, 5,
                                       region=False)
        for project, resource, value in (
                ('team-a', 'class:VGPU', 4), ('team-b', 'class:VGPU', 0),
                ('idle', 'class:VGPU', 8), ('team-c', 'class:%s' % L40S, 2)):
            self.identity.project_limit(nova, ids[project], resource, value)

    def _usage(self) -> None:
        place = self.placement
        self.gpus = {'vgpu': [Gpu('pci_0000_84_00_0', VGPU, 4),
                              Gpu('pci_0000_85_00_0', VGPU, 4)],
                     'mlx5': [Gpu('pci_0000_3b_00_0', MLX5, 8)]}
        root1 = place.add_compute_node('gpu-host-1', self.gpus['vgpu'])
        root2 = place.add_compute_node('gpu-host-2', self.gpus['mlx5'])
        l40s = place.add_pci_device(root2, 'gpu-host-2', '0000:c1:00.0',
                                    L40S, total=4)
        self.used = {}
        for project, gpu, root, amount in (
                ('team-a', self.gpus['vgpu'][0], root1, 3),
                ('team-b', self.gpus['vgpu'][1], root1, 1),
                ('legacy', self.gpus['vgpu'][1], root1, 1),
                ('team-c', self.gpus['mlx5'][0], root2, 2),
                ('legacy', self.gpus['mlx5'][0], root2, 2),
                ('team-c', l40s, root2, 1),
                ('gone', l40s, root2, 1)):
            for _ in range(amount):
                place.allocate(str(uuid.uuid4()), {
                    root: {'VCPU': 1, 'MEMORY_MB': 512},
                    gpu.uuid: {gpu.resource_class: 1}},
                    project=self.projects[project])
            key = (self.projects[project], gpu.resource_class)
            self.used[key] = self.used.get(key, 0) + amount
        self.devices_in_use = 4

    def row(self, project: str, resource_class: str, limit: int,
            rule: str) -> dict:
        project_id = self.projects[project]
        used = self.used.get((project_id, resource_class), 0)
        return {'Project': project_id,
                'Resource': 'class:%s' % resource_class, 'Used': used,
                'Limit': limit, 'Free': None if limit < 0 else limit - used,
                'Rule': rule}

    def expected(self, rows: list[dict]) -> list[dict]:
        return sorted(rows, key=lambda r: (
            r['Free'] is None, r['Free'] or 0, r['Project'], r['Resource']))


@pytest.fixture(scope='module')
def world(keystone: servers.KeystoneProcess,
          placement: servers.PlacementProcess) -> World:
    return World(keystone, placement)


@pytest.fixture
def as_admin(world: World, keystone: servers.KeystoneProcess,
             tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI as the admin user, through a clouds.yaml entry that gives
    up at once on Nova's endpoint (nothing listens there).
    """
    clouds = cli.password_cloud(tmp_path / 'clouds.yaml', keystone,
                                extra='compute_connect_retries: 0')
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(clouds))
    monkeypatch.setenv('OS_CLOUD', 'gpu-cloud')


def quota(*args: str) -> cli.Result:
    return cli.openstack('mdev', 'quota', 'list', *args)


def stats(placement: servers.PlacementProcess) -> int:
    return placement_data.server_stats(placement.url)['requests']


def test_every_project_with_gpu_usage_or_a_gpu_limit(
        world: World, placement: servers.PlacementProcess,
        as_admin: None) -> None:
    before = stats(placement)
    result = quota('-f', 'json')
    spent = stats(placement) - before
    assert result.json() == world.expected([
        world.row('team-a', VGPU, 4, 'project limit'),
        world.row('team-b', VGPU, 0, 'project limit'),
        world.row('idle', VGPU, 8, 'project limit'),
        world.row('team-c', MLX5, -1, DEFAULT_RULE),
        world.row('team-c', L40S, 2, 'project limit'),
        world.row('legacy', VGPU, 2, 'registered limit'),
        world.row('legacy', MLX5, -1, DEFAULT_RULE),
        world.row('gone', L40S, 1, 'registered limit'),
    ])
    # The devices (listing, summaries); one usages read per project with
    # a limit (4); the four projects do not hold all the GPUs, so each
    # device in use is asked for its allocations, each of their 11
    # consumers (Nova cannot be reached) for its project, and the two
    # projects found for their usages.
    assert spent == 2 + 4 + world.devices_in_use + 11 + 2
    assert 'Nova could not list the servers' in result.stderr


def test_named_projects_get_every_class(world: World,
                                        placement: servers.PlacementProcess,
                                        as_admin: None) -> None:
    before = stats(placement)
    rows = quota('--project', 'idle', '--project', world.projects['team-c'],
                 '--long', '-f', 'json').json()
    assert stats(placement) - before == 2 + 2
    expected = world.expected([
        world.row('idle', VGPU, 8, 'project limit'),
        world.row('idle', MLX5, -1, DEFAULT_RULE),
        world.row('idle', L40S, 1, 'registered limit'),
        world.row('team-c', VGPU, 2, 'registered limit'),
        world.row('team-c', MLX5, -1, DEFAULT_RULE),
        world.row('team-c', L40S, 2, 'project limit')])
    names = {v: k for k, v in world.projects.items()}
    for row in expected:
        row['Project Name'] = names[row['Project']]
    assert rows == expected


def test_resource_class_and_the_controllers_strategy(
        world: World, as_admin: None, tmp_path: pathlib.Path) -> None:
    conf = tmp_path / 'nova.conf'
    conf.write_text('[quota]\ndriver = nova.quota.UnifiedLimitsDriver\n'
                    'unified_limits_resource_list = servers,class:%s\n'
                    % MLX5)
    rows = quota('--resource-class', MLX5, '--controller-conf', str(conf),
                 '-f', 'json').json()
    rule = 'no limit; require strategy lists it'
    assert rows == world.expected([world.row('team-c', MLX5, 0, rule),
                                   world.row('legacy', MLX5, 0, rule)])
    conf.write_text('[quota]\ndriver = nova.quota.UnifiedLimitsDriver\n'
                    'unified_limits_resource_strategy = ignore\n'
                    'unified_limits_resource_list = class:VGPU\n')
    rows = quota('--project', 'legacy', '--controller-conf', str(conf),
                 '-f', 'json').json()
    assert rows == world.expected([
        world.row('legacy', VGPU, 2, 'registered limit'),
        world.row('legacy', MLX5, 0,
                  'no limit; ignore strategy does not list it'),
        world.row('legacy', L40S, 1, 'registered limit')])


@pytest.mark.parametrize('args, fragments', [
    (['--project', 'no-such-team'],
     ["No project named or with ID 'no-such-team' in Keystone"]),
    (['--project', uuid.uuid4().hex], ['No project named or with ID']),
    (['--resource-class', 'vgpu'], ['vgpu']),
])
def test_bad_input_is_one_line(world: World, as_admin: None, args: list[str],
                               fragments: list[str]) -> None:
    cli.assert_one_line_error(quota(*args), *fragments)


def test_nova_conf_nova_refuses_is_one_line(world: World, as_admin: None,
                                            tmp_path: pathlib.Path) -> None:
    conf = tmp_path / 'nova.conf'
    conf.write_text('[quota]\nunified_limits_resource_strategy = prefer\n')
    cli.assert_one_line_error(
        quota('--controller-conf', str(conf)), '--controller-conf',
        'unified_limits_resource_strategy', 'nova.conf:2')


def as_viewer(keystone: servers.KeystoneProcess,
              monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
            'OS_AUTH_URL': keystone.url + '/v3', 'OS_USERNAME': VIEWER,
            'OS_PASSWORD': VIEWER_PASSWORD, 'OS_PROJECT_NAME': 'viewers',
            'OS_USER_DOMAIN_NAME': 'Default',
            'OS_PROJECT_DOMAIN_NAME': 'Default',
            'OS_IDENTITY_API_VERSION': '3'}.items():
        monkeypatch.setenv(key, value)


def test_a_user_who_sees_only_its_project_is_told_the_role(
        world: World, keystone: servers.KeystoneProcess,
        monkeypatch: pytest.MonkeyPatch) -> None:
    as_viewer(keystone, monkeypatch)
    cli.assert_one_line_error(quota(), 'admin role', 'member')


def test_an_admin_token_is_refused(
        world: World, placement: servers.PlacementProcess) -> None:
    cli.assert_one_line_error(
        cli.openstack(*cli.admin_token_args(placement.url), 'mdev',
                      'quota', 'list'),
        'admin token', 'password')


def test_metrics_give_each_projects_used_and_limit(world: World,
                                                   as_admin: None) -> None:
    from prometheus_client import parser

    rows = quota('-f', 'json').json()
    result = cli.openstack('mdev', 'metrics', '--quota')
    assert result.rc == 0, result.stderr
    found = {f.name: f for f in
             parser.text_string_to_metric_families(result.stdout)}
    names = {v: k for k, v in world.projects.items()}
    for family, column in (('openstack_mdev_project_used', 'Used'),
                           ('openstack_mdev_project_limit', 'Limit')):
        assert {(s.labels['project'], s.labels['project_name'],
                 s.labels['resource_class']): s.value
                for s in found[family].samples} == {
            (r['Project'], names[r['Project']] if r['Project'] != GONE
             else '', r['Resource'][len('class:'):]): r[column]
            for r in rows}
    assert found['openstack_mdev_scrape_success'].samples[0].value == 1


def test_metrics_of_a_user_who_may_not_read_the_limits_fail(
        world: World, keystone: servers.KeystoneProcess,
        monkeypatch: pytest.MonkeyPatch) -> None:
    as_viewer(keystone, monkeypatch)
    result = cli.openstack('mdev', 'metrics', '--quota')
    assert result.rc == 1
    assert 'openstack_mdev_scrape_success 0.0' in result.stdout
    assert 'admin role' in result.stderr
