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

"""``openstack mdev quota list`` against Nova enforcing the same limits.

The cloud has a real Keystone: Nova runs its unified limits driver, and
oslo.limit reads the limits of that Keystone over HTTP, the same numbers
the CLI reads (it logs in to that Keystone with a password and finds
Nova and Placement in its catalog). Servers are booted one by one as a
member of a project until Nova refuses (HTTP 403 for a limit, a server in
ERROR for no room); the tool must show the limit Nova stopped at, and
with ``--flavor`` must have said beforehand exactly how many servers Nova
would let in, and which of the limits and the cloud's capacity binds.
"""

import uuid

import pytest

from tests.cloud import client
from tests.e2e import helpers

GPU = '0000:81:00.0'
MLX5_GPU = '0000:81:01.0'
TOPOLOGY = {
    'hosts': [{
        'name': 'gpu1', 'gpus': ['nvidia', 'generic'], 'bus': '0x81',
        'enabled_mdev_types': ['nvidia-12', 'mlx5_core'],
        'mdev': {'nvidia-12': {'device_addresses': [GPU]},
                 'mlx5_core': {'device_addresses': [MLX5_GPU],
                               'mdev_class': 'CUSTOM_MLX5'}}}],
    # CUSTOM_MLX5 has no registered limit and is listed: Nova allows 0.
    'quota': {'strategy': 'require',
              'resource_list': ['servers', 'class:CUSTOM_MLX5']},
    'unified_limits': {
        'registered': {'servers': 10, 'class:VGPU': 1},
        'projects': {'ml-team': {'class:VGPU': 3},
                     'render-farm': {'servers': 2, 'class:VGPU': -1},
                     'demo': {'servers': 20, 'class:VGPU': 20}}},
}
# The controller's nova.conf (tests/e2e/conftest.py: controller).
CONTROLLER_CONF = """[quota]
driver = nova.quota.UnifiedLimitsDriver
unified_limits_resource_strategy = require
unified_limits_resource_list = servers,class:CUSTOM_MLX5
"""
# The nvidia-12 GPU holds 8 vGPUs.
GPU_SIZE = 8

# The module's cloud (tests/e2e/conftest.py): on TOPOLOGY, with a real
# Keystone the CLI logs in to with a password, and these flavors.
KEYSTONE = True
FLAVORS = {'vgpu': {'resources:VGPU': '1'},
           'vgpu.double': {'resources:VGPU': '2'},
           'vgpu.mlx5': {'resources:CUSTOM_MLX5': '1'}}
pytestmark = pytest.mark.usefixtures('keystone_cli')


def boot_until_refused(
        cloud: client.EmbeddedCloud, flavor: str, project: str,
        most: int = 12) -> tuple[list[dict], str | None, list[dict]]:
    """Boot servers one by one in ``project`` until Nova refuses; answers
    ``(servers that became ACTIVE, how Nova refused)``: ``'quota'`` for
    an HTTP 403 of the API, ``'no valid host'`` for a server in ERROR.
    """
    booted, refusal = [], None
    for _ in range(most):
        try:
            [server] = cloud.control('boot', flavor=flavor, project=project)
        except client.CloudError as exc:
            assert exc.nova_status == 403, exc
            refusal = 'quota'
            break
        booted.append(server)
        if server['status'] != 'ACTIVE':
            assert 'No valid host' in server['fault'], server
            refusal = 'no valid host'
            break
    return [s for s in booted if s['status'] == 'ACTIVE'], refusal, booted


def delete(cloud: client.EmbeddedCloud, servers: list[dict]) -> None:
    for server in servers:
        cloud.control('delete', server=server['id'])


def fit(flavor: str, project: str, *args: str) -> dict:
    [row] = helpers.mdev_json('quota', 'list', '--flavor', flavor,
                              '--project', project, *args)
    return row


def test_nova_stops_at_the_project_limit_the_tool_gave(
        cloud: client.EmbeddedCloud, controller: str) -> None:
    project = cloud.projects['ml-team']
    before = fit('vgpu', 'ml-team', '--controller-conf', controller)
    assert before == {
        'Project': project, 'Fits': 3, 'Quota Allows': 3,
        'Capacity Allows': GPU_SIZE,
        'Bound By': 'quota class:VGPU: 0 of 3 used, 1 per server'}
    active, refusal, booted = boot_until_refused(cloud, 'vgpu', project)
    try:
        assert (len(active), refusal) == (before['Fits'], 'quota')
        after = fit('vgpu', 'ml-team', '--controller-conf', controller)
        assert (after['Fits'], after['Bound By']) == (
            0, 'quota class:VGPU (403 quota exceeded): 3 of 3 used, 1 per '
               'server')
        rows = helpers.mdev_json('quota', 'list', '--project', project,
                                 '--controller-conf', controller)
        assert [(r['Resource'], r['Used'], r['Limit'], r['Free'],
                 r['Rule']) for r in rows] == [
            ('class:CUSTOM_MLX5', 0, 0, 0,
             'no limit; require strategy lists it'),
            ('class:VGPU', 3, 3, 0, 'project limit')]
    finally:
        delete(cloud, booted)


def test_nova_stops_at_the_servers_limit_the_tool_gave(
        cloud: client.EmbeddedCloud, controller: str) -> None:
    """``servers`` binds: the tool reads Nova's count of the project's
    servers (its quota set), not Placement's.
    """
    project = cloud.projects['render-farm']
    before = fit('vgpu', project, '--controller-conf', controller)
    assert (before['Fits'], before['Quota Allows'], before['Bound By']) == (
        2, 2, 'quota servers: 0 of 2 used, 1 per server')
    active, refusal, booted = boot_until_refused(cloud, 'vgpu', project)
    try:
        assert (len(active), refusal) == (2, 'quota')
        assert fit('vgpu', project, '--controller-conf',
                   controller)['Fits'] == 0
    finally:
        delete(cloud, booted)


def test_nova_finds_no_host_where_the_tool_said_capacity_binds(
        cloud: client.EmbeddedCloud, controller: str) -> None:
    project = cloud.projects['demo']
    before = fit('vgpu.double', 'demo', '--controller-conf', controller)
    assert before == {
        'Project': project, 'Fits': GPU_SIZE // 2, 'Quota Allows': 10,
        'Capacity Allows': GPU_SIZE // 2, 'Bound By': 'capacity'}
    active, refusal, booted = boot_until_refused(cloud, 'vgpu.double',
                                                 project)
    try:
        assert (len(active), refusal) == (before['Fits'], 'no valid host')
        after = fit('vgpu.double', 'demo', '--controller-conf', controller)
        assert after['Fits'] == 0
        assert after['Bound By'].startswith(
            'capacity (NoValidHost): room for 2 VGPU rules out 1 device')
    finally:
        delete(cloud, booted)


def rows_of(*args: str) -> list[tuple]:
    return [(r['Resource'], r['Used'], r['Limit'], r['Free'], r['Rule'])
            for r in helpers.mdev_json('quota', 'list', *args)]


def test_nova_refuses_a_class_the_strategy_requires(
        cloud: client.EmbeddedCloud, controller: str) -> None:
    """CUSTOM_MLX5 has no registered limit and [quota] lists it under
    ``require``: Nova allows 0, as the tool says with the controller's
    nova.conf (without it, it says what Nova's defaults would do).
    """
    assert rows_of('--project', 'demo', '--resource-class', 'CUSTOM_MLX5',
                   '--controller-conf', controller) == [
        ('class:CUSTOM_MLX5', 0, 0, 0,
         'no limit; require strategy lists it')]
    assert rows_of('--project', 'demo', '--resource-class',
                   'CUSTOM_MLX5') == [
        ('class:CUSTOM_MLX5', 0, -1, None,
         "no limit; require strategy does not list it (Nova's default)")]
    row = fit('vgpu.mlx5', 'demo', '--controller-conf', controller)
    assert (row['Fits'], row['Quota Allows'], row['Capacity Allows']) == (
        0, 0, 16)
    active, refusal, booted = boot_until_refused(
        cloud, 'vgpu.mlx5', cloud.projects['demo'])
    assert (active, refusal, booted) == ([], 'quota', [])
    # Under Nova's defaults the class would be unlimited: only the
    # project's servers limit would count.
    assert fit('vgpu.mlx5', 'demo')['Quota Allows'] == 20


def quota_list_requests(
        cloud: client.EmbeddedCloud
) -> tuple[list[dict], list[str], list[str]]:
    """``quota list`` as JSON rows, with the requests it sent Placement
    and Nova (as the served APIs recorded them).
    """
    placement = len(cloud.control('placement_requests')['requests'])
    compute = len(cloud.control('compute_requests')['requests'])
    rows = helpers.mdev_json('quota', 'list')
    return (rows, cloud.control('placement_requests')['requests'][
        placement:], cloud.control('compute_requests')['requests'][compute:])


def test_holders_without_a_limit_of_their_own_are_found(
        cloud: client.EmbeddedCloud) -> None:
    """The admin project has no limit of its own; its GPU usage makes it
    a row, found through Nova's server list (one request: its server's
    flavor asks for VGPU) and read with one GET /usages, as every project
    with a limit; no device is asked for its allocations.
    """
    admin = cloud.projects['admin']
    active, _, booted = boot_until_refused(cloud, 'vgpu', admin, most=1)
    others = [cloud.projects[p] for p in ('ml-team', 'demo', 'render-farm')]
    try:
        assert len(active) == 1
        rows, placement, compute = quota_list_requests(cloud)
        assert [(r['Project'], r['Resource'], r['Used'], r['Limit'],
                 r['Rule']) for r in rows] == [
            (admin, 'class:VGPU', 1, 1, 'registered limit'),
            (others[0], 'class:VGPU', 0, 3, 'project limit'),
            (others[1], 'class:VGPU', 0, 20, 'project limit'),
            (others[2], 'class:VGPU', 0, -1, 'project limit')]
        assert sorted(r for r in placement if r.startswith(
            'GET /usages')) == sorted('GET /usages?project_id=%s' % p
                                      for p in [admin] + others)
        assert not [r for r in placement if r.endswith('/allocations')]
        assert [r for r in compute if '/servers' in r] == [
            'GET /v2.1/servers/detail?all_tenants=True&limit=1000']
    finally:
        delete(cloud, booted)


def test_a_consumer_that_is_no_server_is_traced_in_placement(
        cloud: client.EmbeddedCloud) -> None:
    """Allocations of a project Nova has no server of (another service's,
    a project Keystone no longer has): the flavors do not account for
    them, so the devices in use are asked for their consumers and
    Placement for the consumer's project.
    """
    [device] = helpers.mdev_json('provider', 'list', '--host', 'gpu1',
                                 '--resource-class', 'VGPU')
    consumer, project = str(uuid.uuid4()), uuid.uuid4().hex
    helpers.placement_request(
        cloud, 'PUT', '/allocations/%s' % consumer, json={
            'allocations': {device['UUID']: {'resources': {
                device['Resource Class']: 2}}},
            'project_id': project, 'user_id': 'someone',
            'consumer_generation': None, 'consumer_type': 'INSTANCE'})
    try:
        rows, placement, _ = quota_list_requests(cloud)
        assert [(r['Project'], r['Resource'], r['Used'], r['Limit'],
                 r['Free']) for r in rows][0] == (
            project, 'class:%s' % device['Resource Class'], 2, 1, -1)
        assert 'GET /allocations/%s' % consumer in placement
    finally:
        helpers.placement_request(cloud, 'DELETE',
                                  '/allocations/%s' % consumer)
