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

"""The commands see every server, flavor, migration and compute node of a
Nova whose ``[api] max_limit`` is small.

Nova answers at most ``max_limit`` items per page of a listing, however
many are asked for, and links the next page while there is one. Here it
is 2, with more of each than that: every command that lists must still
see all of them, checked against the fake hypervisors' record and
Placement.
"""

import collections.abc
import json

import pytest

from tests.cloud import client
from tests.e2e import helpers
from tests.e2e.helpers import mdev
from tests.e2e.helpers import mdev_json

PAGE = 2
V = {'libvirt_version': '8.6.0', 'qemu_version': '8.1.0'}
HOSTS = ('pg1', 'pg2', 'pg3')
TOPOLOGY = {
    'hosts': [dict(V, name=name, gpus=1, bus='0x%x' % (0x41 + number),
                   enabled_mdev_types=['nvidia-11'])
              for number, name in enumerate(HOSTS)],
    'nova_conf': {'api': {'max_limit': PAGE}},
    'unified_limits': {'registered': {'servers': 20, 'class:VGPU': 20}},
}
#: Flavors no GPU can serve: they ask for a trait no GPU has.
GOLD = ['pg-gold-%d' % n for n in range(3)]
TWIN = 'pg-twin'


@pytest.fixture(scope='module')
def cloud(
        tmp_path_factory: pytest.TempPathFactory
) -> collections.abc.Iterator[client.EmbeddedCloud]:
    with client.EmbeddedCloud(tmp_path_factory.mktemp('paging'),
                              topology=TOPOLOGY, keystone=True) as cloud:
        yield cloud


def boot(cloud: client.EmbeddedCloud, flavor: str, host: str | None,
         name: str, project: str | None = None) -> dict:
    [server] = cloud.control('boot', flavor=flavor, host=host, name=name,
                             project=project)
    assert server['status'] == 'ACTIVE', server['fault']
    return server


@pytest.fixture(scope='module')
def paged(cloud: client.EmbeddedCloud) -> dict:
    """More servers, flavors, migrations and nodes than a page holds.

    ``resized`` is left in VERIFY_RESIZE: its migration holds its old
    GPU on pg1, and two newer migrations put that one on Nova's second
    page of migrations (newest first). The oldest server (``oldest``)
    is on the last page of servers; pg3, the newest node, on the second
    page of compute nodes.
    """
    helpers.placement_request(cloud, 'PUT', '/traits/CUSTOM_PG_GOLD')
    flavors = {'pg-vgpu': cloud.control(
        'create_flavor', name='pg-vgpu',
        extra_specs={'resources:VGPU': '1'})['id']}
    flavors['pg-big'] = cloud.control(
        'create_flavor', name='pg-big', vcpus=2,
        extra_specs={'resources:VGPU': '1'})['id']
    for name in GOLD:
        flavors[name] = cloud.control(
            'create_flavor', name=name, extra_specs={
                'resources:VGPU': '1',
                'trait:CUSTOM_PG_GOLD': 'required'})['id']

    oldest = boot(cloud, 'pg-vgpu', 'pg2', 'pg-oldest')
    resized = boot(cloud, 'pg-vgpu', 'pg1', 'pg-resized')
    answer = cloud.control('resize', server=resized['id'], flavor='pg-big',
                           confirm=False)
    assert answer['status'] == 'VERIFY_RESIZE', answer
    moved = [boot(cloud, 'pg-vgpu', 'pg2', 'pg-moved-%d' % n)
             for n in range(2)]
    for server in moved:
        cloud.control('migrate', server=server['id'])
    twins = [boot(cloud, 'pg-vgpu', 'pg1', TWIN) for _ in range(3)]
    others = [boot(cloud, 'pg-vgpu', None, 'pg-%s' % project,
                   cloud.projects[project])
              for project in ('ml-team', 'render-farm')]
    migrations = helpers.nova_request(
        cloud, 'GET', '/os-migrations?instance_uuid=%s' % resized['id'],
        '2.59')['migrations']
    [migration] = migrations
    return {'flavors': flavors, 'oldest': oldest, 'resized': resized,
            'migration': migration, 'moved': moved, 'twins': twins,
            'others': others}


def truth(cloud: client.EmbeddedCloud) -> dict[str, tuple[str, str]]:
    """``{server: (node, PCI address)}`` of each mdev, from fake libvirt."""
    return {m['server']: (m['node'], m['pci_address'])
            for m in cloud.control('mdev_truth')}


def nova_count(cloud: client.EmbeddedCloud, path: str, key: str) -> int:
    """How many items Nova lists at ``path``, following its pages."""
    count, marker = 0, None
    while True:
        query = '&marker=%s' % marker if marker else ''
        body = helpers.nova_request(cloud, 'GET', path + query)
        count += len(body[key])
        if len(body[key]) > PAGE:
            raise AssertionError('Nova answered more than max_limit')
        nexts = [link for link in body.get(key + '_links', ())
                 if link['rel'] == 'next']
        if not nexts:
            return count
        marker = body[key][-1]['id']


def test_nova_pages_its_listings(cloud: client.EmbeddedCloud,
                                 paged: dict) -> None:
    # The cloud is as the tests need it: more of each than a page.
    assert nova_count(cloud, '/servers/detail?all_tenants=1&limit=1000',
                      'servers') == 9
    assert nova_count(cloud, '/flavors/detail?is_public=None&limit=1000',
                      'flavors') > PAGE
    assert nova_count(cloud, '/os-hypervisors/detail?limit=1000',
                      'hypervisors') == 3


def test_allocation_list_names_every_consumer(cloud: client.EmbeddedCloud,
                                              paged: dict) -> None:
    rows = mdev_json('allocation', 'list', '--long')
    where = truth(cloud)
    servers = {(r['Server'], r['Host'], r['Device']) for r in rows
               if r['Server'] in where}
    assert servers == {(s, node, address)
                       for s, (node, address) in where.items()}
    # The resize's source GPU is held by its migration, which Nova lists
    # on its second page of migrations.
    [held] = [r for r in rows if r['Server'] == paged['migration']['uuid']]
    assert held['Host'] == 'pg1'
    assert held['Server Status'] == 'MIGRATION', held
    assert paged['resized']['id'] in held['Server Name'], held


def test_metrics_label_every_consumer(cloud: client.EmbeddedCloud,
                                      paged: dict) -> None:
    from prometheus_client import parser

    result = mdev('metrics', '--allocations')
    assert result.rc == 0, result.stderr
    samples = {f.name: f for f in parser.text_string_to_metric_families(
        result.stdout)}['openstack_mdev_allocation_used'].samples
    labels = {s.labels['server']: s.labels for s in samples}
    assert set(truth(cloud)) < set(labels)
    migration = labels[paged['migration']['uuid']]
    assert paged['resized']['id'] in migration['server_name'], migration


def test_audit_sees_every_server_flavor_and_migration(
        cloud: client.EmbeddedCloud, paged: dict) -> None:
    # The oldest server, on Nova's last page of servers, loses its vGPU
    # allocation.
    oldest = paged['oldest']['id']
    before = helpers.placement_request(cloud, 'GET',
                                       '/allocations/%s' % oldest)
    roots = {rp['uuid'] for rp in helpers.placement_request(
        cloud, 'GET', '/resource_providers')['resource_providers']
        if not rp['parent_provider_uuid']}
    helpers.rewrite_allocations(cloud, oldest, lambda allocations: {
        rp: a for rp, a in allocations.items() if rp in roots})
    try:
        result = mdev('audit', '-f', 'json')
    finally:
        helpers.rewrite_allocations(cloud, oldest, lambda _: {
            rp: {'resources': a['resources']}
            for rp, a in before['allocations'].items()})
    assert 'Traceback' not in result.stderr, result.stderr
    found: dict[str, list[dict]] = {}
    for row in json.loads(result.stdout):
        found.setdefault(row['Check'], []).append(row)
    # The resize's allocation, on Nova's second page of migrations, is
    # no orphan: --fix must not remove it.
    assert 'orphaned-allocation' not in found, found['orphaned-allocation']
    assert [r['Server'] for r in found.pop('missing-allocation')] == [oldest]
    flavors = {paged['flavors'][name] for name in GOLD}
    unschedulable = found.pop('unschedulable-flavor')
    assert {f for f in flavors for r in unschedulable
            if f in r['Message']} == flavors
    assert len(unschedulable) == len(flavors)
    assert found == {}


@pytest.mark.parametrize('name', ['pg-vgpu', 'pg-big'] + GOLD)
def test_every_flavor_is_found_by_name(paged: dict, name: str) -> None:
    rows = mdev_json('capacity', '--flavor', name)
    assert rows, name


def test_every_server_of_a_name_is_counted(paged: dict) -> None:
    result = mdev('allocation', 'show', TWIN)
    assert result.rc == 1
    ids = sorted(s['id'] for s in paged['twins'])
    assert "3 servers are named '%s' (%s)" % (TWIN, ', '.join(ids)) in (
        result.stderr), result.stderr


def test_migration_plan_sees_every_node(cloud: client.EmbeddedCloud,
                                        paged: dict) -> None:
    on_pg1 = {s for s, (node, _) in truth(cloud).items() if node == 'pg1'}
    rows = mdev_json('migration', 'plan', '--host', 'pg1', '--target',
                     'pg3')
    assert {r['Server'] for r in rows} == on_pg1
    assert {r['Target Host'] for r in rows} == {'pg3'}, rows


def test_quota_list_counts_every_project(cloud: client.EmbeddedCloud,
                                         paged: dict,
                                         monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    monkeypatch.setenv('OS_CLOUD', cloud.keystone_cloud)
    rows = mdev_json('quota', 'list')
    used = {(r['Project'], r['Resource']): r['Used'] for r in rows}
    expected = {}
    for project in cloud.projects.values():
        # Placement 1.38+: the usages of each consumer type.
        used_here = sum(usages.get('VGPU', 0) for usages in
                        helpers.placement_request(
                            cloud, 'GET', '/usages?project_id=%s' % project
                        )['usages'].values())
        if used_here:
            expected[(project, 'class:VGPU')] = used_here
    # The harness's project's servers and the migration, and one server
    # of each other project.
    assert expected == {
        (cloud.projects['demo'], 'class:VGPU'): 8,
        (cloud.projects['ml-team'], 'class:VGPU'): 1,
        (cloud.projects['render-farm'], 'class:VGPU'): 1}
    assert used == expected
