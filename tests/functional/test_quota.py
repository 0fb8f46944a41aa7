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
import json
import pathlib
import subprocess
import sys
import uuid

import pytest
import requests

from tests.fixtures import cli
from tests.fixtures.identity import Identity
from tests.fixtures import placement_data
from tests.fixtures.placement_data import Gpu
from tests.fixtures import servers

VGPU, MLX5, L40S = 'VGPU', 'CUSTOM_MLX5', 'CUSTOM_NVIDIA_L40S_VF'
VIEWER, VIEWER_PASSWORD = 'gpu-viewer', 'gpu-viewer-password'
# Users of project team-a with one role each.
TEAM_USERS = {'reader': ('team-a-reader', 'team-a-reader-password'),
              'member': ('team-a-member', 'team-a-member-password')}
OTHER_REGION = 'RegionTwo'
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
        for role, (user, password) in TEAM_USERS.items():
            self.identity.add_user(self.projects['team-a'], user, password,
                                   role)
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
        self.identity.project_limit(nova, ids['team-c'], 'class:%s' % MLX5,
                                    3, region=False)
        # Another region's, as another region's Nova reads them.
        self.identity.create_region(OTHER_REGION)
        self.identity.registered_limit(nova, 'class:VGPU', 7,
                                       region=OTHER_REGION)
        self.identity.project_limit(nova, ids['team-a'], 'class:VGPU', 9,
                                    region=OTHER_REGION)
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


def test_a_member_of_a_project_without_gpus_sees_its_defaults(
        world: World, keystone: servers.KeystoneProcess,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No usage, no limit of its own: the registered limits of Nova's
    region are what Nova would enforce on its first GPU.
    """
    as_viewer(keystone, monkeypatch)
    viewers = world.identity.request(
        'GET', '/projects?name=viewers')['projects'][0]['id']
    rows = quota('-f', 'json').json()
    assert rows == [
        {'Project': viewers, 'Resource': 'class:%s' % L40S, 'Used': 0,
         'Limit': 1, 'Free': 1, 'Rule': 'registered limit'},
        {'Project': viewers, 'Resource': 'class:VGPU', 'Used': 0,
         'Limit': 2, 'Free': 2, 'Rule': 'registered limit'}]


def as_user(keystone: servers.KeystoneProcess,
            monkeypatch: pytest.MonkeyPatch, user: str, password: str,
            project: str) -> None:
    """The CLI as ``user`` on ``project``, from OS_* variables."""
    monkeypatch.delenv('OS_CLOUD', raising=False)
    monkeypatch.delenv('OS_CLIENT_CONFIG_FILE', raising=False)
    for key, value in {
            'OS_AUTH_URL': keystone.url + '/v3', 'OS_USERNAME': user,
            'OS_PASSWORD': password, 'OS_PROJECT_NAME': project,
            'OS_USER_DOMAIN_NAME': 'Default',
            'OS_PROJECT_DOMAIN_NAME': 'Default',
            'OS_IDENTITY_API_VERSION': '3'}.items():
        monkeypatch.setenv(key, value)


@pytest.mark.parametrize('role', sorted(TEAM_USERS))
def test_a_project_reader_or_member_gets_its_own_rows(
        world: World, keystone: servers.KeystoneProcess,
        placement: servers.PlacementProcess, as_admin: None,
        monkeypatch: pytest.MonkeyPatch, role: str) -> None:
    """Placement's and Keystone's default policies let a project's
    reader read its usages and its limits: the rows are the admin's of
    that project, for the classes it uses or that have a limit Nova
    reads (the devices, and so the other classes, are the admin's to
    list).
    """
    admin = quota('--project', 'team-a', '--long', '-f', 'json').json()
    as_user(keystone, monkeypatch, *TEAM_USERS[role], 'team-a')
    before = stats(placement)
    result = quota('--long', '-f', 'json')
    assert stats(placement) - before == 1     # GET /usages?project_id=
    assert result.json() == [r for r in admin if r['Used'] or
                             not r['Rule'].startswith('no limit')]
    assert sorted(r['Resource'] for r in result.json()) == [
        'class:%s' % L40S, 'class:VGPU']
    # Named by name or ID, the user's own project is the same.
    assert quota('--project', world.projects['team-a'], '--long',
                 '-f', 'json').json() == result.json()


@pytest.mark.parametrize('args, fragment', [
    (['--project', 'team-b'], 'Reading the quota of project team-b'),
    (['--flavor', 'any'], "--flavor counts the cloud's capacity"),
])
def test_the_admin_parts_name_the_role_they_need(
        world: World, keystone: servers.KeystoneProcess,
        monkeypatch: pytest.MonkeyPatch, args: list[str],
        fragment: str) -> None:
    as_user(keystone, monkeypatch, *TEAM_USERS['reader'], 'team-a')
    cli.assert_one_line_error(quota(*args), fragment, 'admin role',
                              'this user has reader on project team-a')


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


def test_limits_outside_novas_region_are_named_in_one_line(
        world: World, as_admin: None) -> None:
    result = quota('-f', 'json')
    assert result.rc == 0, result.stderr
    warned = [line for line in result.stderr.splitlines()
              if 'Keystone holds limits' in line]
    # Limits in no region are a slip; RegionTwo's (beside RegionOne's)
    # are another Nova's.
    assert warned == [
        "Warning: Keystone holds limits of Nova's service that Nova does "
        "not read (oslo.limit reads those of region RegionOne, its "
        "endpoint's): project limits of class:%s in no region; "
        "registered limits of class:%s in no region." % (MLX5, MLX5)]


# oslo.limit is Nova's dependency: it is installed where nova is.
@pytest.mark.nova
def test_the_limits_are_those_oslo_limit_reads(
        world: World, keystone: servers.KeystoneProcess, as_admin: None,
        tmp_path: pathlib.Path) -> None:
    """oslo.limit's own Enforcer, configured as Nova's ``[oslo_limit]``
    is (Nova's public endpoint), reads the same limits from Keystone:
    those of RegionOne, not the ones with no region nor RegionTwo's.
    """
    named = [p for p in world.projects if p != 'gone']
    args = [a for p in named for a in ('--project', p)]
    rows = quota(*args, '-f', 'json').json()
    conf = tmp_path / 'nova.conf'
    conf.write_text(
        '[oslo_limit]\nauth_type = password\nauth_url = %s/v3\n'
        'username = %s\npassword = %s\nuser_domain_name = Default\n'
        'project_name = %s\nproject_domain_name = Default\n'
        'endpoint_id = %s\n' % (
            keystone.url, keystone.admin_user, keystone.admin_password,
            keystone.admin_project, world.identity.endpoint_id(world.nova)))
    resources = sorted({r['Resource'] for r in rows})
    run = subprocess.run(
        [sys.executable, '-m', 'tests.fixtures.oslo_limits', '--conf',
         str(conf)] + ['--project=%s' % world.projects[p] for p in named] +
        ['--resource=%s' % r for r in resources],
        capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    enforcer = json.loads(run.stdout)
    assert len(rows) == len(named) * 3
    for row in rows:
        read = enforcer[row['Project']][row['Resource']]
        if row['Rule'] in ('project limit', 'registered limit'):
            assert row['Limit'] == read, row
        else:
            # oslo.limit's 0 where Keystone has no limit; the strategy
            # then decides (tests/unit/test_domain_quota.py).
            assert (read, row['Rule'][:8]) == (0, 'no limit'), row
    by_key = {(r['Project'], r['Resource']): r for r in rows}
    assert by_key[(world.projects['team-a'], 'class:VGPU')]['Limit'] == 4
    assert by_key[(world.projects['team-c'], 'class:%s' % MLX5)][
        'Rule'] == DEFAULT_RULE


def test_under_novas_default_driver_no_gpu_class_has_a_limit(
        world: World, keystone: servers.KeystoneProcess, as_admin: None,
        tmp_path: pathlib.Path) -> None:
    """A controller without ``[quota] driver`` runs DbQuotaDriver: the
    rows are the usage, with no limit, and Keystone's limits are not
    read.
    """
    conf = tmp_path / 'nova.conf'
    conf.write_text('[quota]\ninstances = 20\n')
    paths = requests.get(keystone.url + '/_stats', timeout=30).json()
    before = paths['paths'].get('GET /v3/limits', 0)
    result = quota('--controller-conf', str(conf), '-f', 'json')
    assert result.rc == 0, result.stderr
    after = requests.get(keystone.url + '/_stats', timeout=30).json()
    assert after['paths'].get('GET /v3/limits', 0) == before
    rule = ('no limit; [quota] driver nova.quota.DbQuotaDriver limits no '
            'resource class')
    assert result.json() == world.expected([
        world.row(project, rc, -1, rule) for project, rc in (
            ('team-a', VGPU), ('team-b', VGPU), ('legacy', VGPU),
            ('team-c', MLX5), ('legacy', MLX5), ('team-c', L40S),
            ('gone', L40S))])
    assert [line for line in result.stderr.splitlines()
            if 'Keystone' in line] == [
        'Warning: [quota] driver is nova.quota.DbQuotaDriver in '
        "--controller-conf: Nova uses none of Keystone's limits (only "
        'nova.quota.UnifiedLimitsDriver does), so no GPU class has a '
        'limit.']
    assert 'Note: without --controller-conf' not in result.stderr


def test_without_the_controllers_conf_unified_limits_are_assumed(
        world: World, as_admin: None) -> None:
    result = quota('--resource-class', VGPU)
    assert result.rc == 0, result.stderr
    assert [line for line in result.stderr.splitlines()
            if 'assumed' in line] == [
        'Note: without --controller-conf, Nova is assumed to use '
        'nova.quota.UnifiedLimitsDriver with its default [quota] options '
        "(under Nova's default driver, nova.quota.DbQuotaDriver, none of "
        'these limits applies).']


@pytest.mark.parametrize('conf_text', [
    '[quota]\ndriver = nova.quota.UnifiedLimitsDriver\n'
    'unified_limits_resource_list = servers,class:%s\n' % MLX5,
    '[quota]\n'])
def test_metrics_read_the_controllers_quota_options(
        world: World, as_admin: None, tmp_path: pathlib.Path,
        conf_text: str) -> None:
    """``metrics --quota --controller-conf`` applies the controller's
    ``[quota]`` as ``quota list`` does: its strategy, or its driver.
    """
    from prometheus_client import parser

    conf = tmp_path / 'nova.conf'
    conf.write_text(conf_text)
    rows = quota('--controller-conf', str(conf), '-f', 'json').json()
    result = cli.openstack('mdev', 'metrics', '--quota',
                           '--controller-conf', str(conf))
    assert result.rc == 0, result.stderr
    found = {f.name: f for f in
             parser.text_string_to_metric_families(result.stdout)}
    limits = {(s.labels['project'], s.labels['resource_class']): s.value
              for s in found['openstack_mdev_project_limit'].samples}
    assert limits == {(r['Project'], r['Resource'][len('class:'):]):
                      r['Limit'] for r in rows}
    mlx5 = {v for (_, rc), v in limits.items() if rc == MLX5}
    # Listed with require: 0 without a registered limit in the region;
    # under DbQuotaDriver: unlimited.
    assert mlx5 == ({0} if 'class:' in conf_text else {-1})
