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

"""Every osc-mdev command against a cloud that real Nova built.

The embedded cloud (tests.cloud) runs Nova's API, conductor, scheduler and
fake-libvirt compute hosts with mdev-capable GPUs against a real Placement.
Nova writes every provider, inventory and allocation; the answers of the
commands are checked against the topology Nova was configured with and
against the fake hypervisors' own record of which GPU holds each server's
mdev (``mdev_truth``), which does not come from Placement.

One cloud serves the module, but every test stands alone: it boots its
own servers and creates its own flavors (or asks for a fixture that
does), and its assertions hold whatever other tests ran before it.
"""

import json
import re
import uuid

import pytest
import requests
import yaml

from tests.cloud import client
from tests.e2e.helpers import flavor_specs
from tests.e2e.helpers import mdev
from tests.e2e.helpers import mdev_json
from tests.e2e.helpers import placement_request
from tests.fixtures import cli
from tests.fixtures import placement_data
from tests.fixtures import servers as service_processes


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('cloud')) as cloud:
        yield cloud


def node_of(cloud, host):
    """The compute node (root provider name) of a service host."""
    return cloud.hosts[host]['hypervisor_hostname']


def mdev_hosts(cloud):
    """The service hosts with mdev GPUs, sorted (the demo cloud also has
    a host whose GPUs Nova reports through PCI in Placement).
    """
    return sorted(host for host, info in cloud.hosts.items()
                  if any(gpu['resource_class'] for gpu in info['gpus']))


def gpus(cloud):
    """(node, gpu) for every GPU Nova reports an inventory for; the node
    is the root provider's name, the ``Host`` of the commands' rows.
    """
    return [(info['hypervisor_hostname'], gpu)
            for _, info in sorted(cloud.hosts.items())
            for gpu in info['gpus'] if gpu['resource_class']]


def truth(cloud):
    """{server id: [(node, pci address, mdev type)]} from fake libvirt."""
    found = {}
    for mdev_ in cloud.control('mdev_truth'):
        found.setdefault(mdev_['server'], []).append(
            (mdev_['node'], mdev_['pci_address'], mdev_['mdev_type']))
    return found


def service_hosts(cloud):
    """{server id: service host} of every server with an mdev."""
    return {m['server']: m['host'] for m in cloud.control('mdev_truth')}


def boot(cloud, flavor, **kwargs):
    servers = cloud.control('boot', flavor=flavor, **kwargs)
    for server in servers:
        assert server['status'] == 'ACTIVE', server['fault']
    return servers


def flavor(cloud, name, **extra_specs):
    """A new flavor named ``e2e-<name>`` with these extra specs."""
    return cloud.control('create_flavor', name='e2e-%s' % name,
                         extra_specs=extra_specs)['id']


@pytest.fixture(scope='module')
def flavors(cloud):
    return {rc: flavor(cloud, rc.lower(), **{'resources:%s' % rc: '1'})
            for rc in ('VGPU', 'CUSTOM_MLX5')}


def nova_requests(cloud, run):
    """``run()``'s answer and the Nova API requests it made."""
    before = cloud.control('compute_requests')['count']
    answer = run()
    return answer, cloud.control('compute_requests')['requests'][before:]


SERVER_GET = re.compile(r'^GET /v2\.1/servers/[0-9a-f-]{36}$')


def server_listings(requests_made):
    return [r for r in requests_made
            if r.startswith('GET /v2.1/servers/detail')]


# -- provider list / show -------------------------------------------------

def used_per_gpu(cloud):
    """{(node, pci address): mdevs in use} from fake libvirt."""
    used = {}
    for mdevs in truth(cloud).values():
        for node, address, _ in mdevs:
            used[(node, address)] = used.get((node, address), 0) + 1
    return used


def test_provider_list_is_what_nova_reported(cloud):
    used = used_per_gpu(cloud)
    rows = mdev_json('provider', 'list')
    expected = [{'Host': node, 'Device': gpu['pci_address'],
                 'Resource Class': gpu['resource_class'],
                 'Capacity': gpu['offers'][gpu['mdev_type']],
                 'Used': used.get((node, gpu['pci_address']), 0),
                 'Free': gpu['offers'][gpu['mdev_type']] - used.get(
                     (node, gpu['pci_address']), 0)}
                for node, gpu in gpus(cloud)]
    assert [{k: r[k] for k in expected[0]} for r in rows] == expected
    assert all('OWNER_NOVA' in r['Traits'] for r in rows)
    names = {r['UUID']: r for r in mdev_json('provider', 'list', '--long')}
    for (node, gpu), row in zip(gpus(cloud), rows):
        assert names[row['UUID']]['Name'] == gpu['provider_name']


@pytest.fixture(scope='module')
def booted(cloud, flavors):
    """VGPU servers on every host and CUSTOM_MLX5 servers."""
    servers = []
    for host in mdev_hosts(cloud):
        for n in range(2):   # one at a time, see bug 1874664
            servers += boot(cloud, flavors['VGPU'], host=host,
                            name='e2e-vgpu-%s-%d' % (host, n))
    servers += boot(cloud, flavors['CUSTOM_MLX5'], count=2,
                    name='e2e-mlx5')
    return servers


def test_allocation_show_names_the_gpu_libvirt_used(cloud, booted):
    where = truth(cloud)
    hosts = service_hosts(cloud)
    for server in booted:
        [(node, address, mdev_type)] = where[server['id']]
        rows = mdev_json('allocation', 'show', server['id'], '--long')
        assert len(rows) == 1, rows
        row = rows[0]
        assert (row['Host'], row['Device']) == (node, address)
        assert row['Server'] == server['id']
        assert row['Server Name'] == server['name']
        assert row['Amount'] == 1
        assert row['Nova Host'] == hosts[server['id']] == server['host']
        assert row['Nova Node'] == node
        assert row['Server Status'] == 'ACTIVE'
        assert 'OWNER_NOVA' in row['Traits']
        gpu = next(g for n, g in gpus(cloud)
                   if n == node and g['pci_address'] == address)
        assert row['Resource Class'] == gpu['resource_class']
        assert mdev_type == gpu['mdev_type']


def test_allocation_list_matches_libvirt_per_host(cloud, booted):
    where = truth(cloud)
    ids = {s['id'] for s in booted}
    for node in sorted(node_of(cloud, host) for host in mdev_hosts(cloud)):
        rows = mdev_json('allocation', 'list', '--host', node)
        listed = {(r['Server'], r['Host'], r['Device']) for r in rows
                  if r['Server'] in ids}
        expected = {(server, n, address)
                    for server, mdevs in where.items() if server in ids
                    for n, address, _ in mdevs if n == node}
        assert listed == expected
        assert expected, 'no server on %s' % node
    everything = mdev_json('allocation', 'list')
    names = {s['id']: s['name'] for s in booted}
    seen = set()
    for row in everything:
        if row['Server'] in names:
            assert row['Server Name'] == names[row['Server']]
            seen.add(row['Server'])
    assert seen == set(names)


def test_provider_usage_moves_with_servers(cloud, flavors):
    [server] = boot(cloud, flavors['VGPU'], name='e2e-usage')
    used = used_per_gpu(cloud)
    for row in mdev_json('provider', 'list'):
        key = (row['Host'], row['Device'])
        assert row['Used'] == used.get(key, 0), key
        assert row['Free'] == row['Capacity'] - row['Used']
    [(node, address, _)] = truth(cloud)[server['id']]
    show = mdev_json('provider', 'show', '%s:%s' % (node, address))
    consumers = {c['consumer'] for c in show['Consumers']}
    assert server['id'] in consumers
    assert consumers == {
        s for s, mdevs in truth(cloud).items()
        if any((n, a) == (node, address) for n, a, _ in mdevs)}


def test_server_by_name_and_ambiguous_names(cloud, flavors):
    twins = [boot(cloud, flavors['VGPU'], name='e2e-twin')[0]['id']
             for _ in range(2)]
    result = mdev('allocation', 'show', 'e2e-twin')
    line = cli.assert_one_line_error(
        result, "2 servers are named 'e2e-twin'", 'give the ID of one')
    for twin in twins:
        assert twin in line
    [single] = boot(cloud, flavors['VGPU'], name='e2e-unique-name')
    rows = mdev_json('allocation', 'show', 'e2e-unique-name')
    assert [r['Server'] for r in rows] == [single['id']]
    assert rows[0]['Device'] == truth(cloud)[single['id']][0][1]


def test_server_id_in_upper_case(cloud, flavors):
    # Nova's IDs are lower case; an ID written in upper case (as some
    # tools print them) names the same server.
    [server] = boot(cloud, flavors['VGPU'], name='e2e-upper-case-id')
    [(node, address, _)] = truth(cloud)[server['id']]
    rows = mdev_json('allocation', 'show', server['id'].upper())
    assert [(r['Server'], r['Host'], r['Device']) for r in rows] == [
        (server['id'], node, address)]


def test_server_without_mdev(cloud):
    plain = flavor(cloud, 'plain')
    [server] = boot(cloud, plain, name='e2e-plain')
    result = mdev('allocation', 'show', server['id'], '-f', 'json')
    assert result.rc == 0
    assert json.loads(result.stdout) == []
    assert 'has no mdev allocations' in result.stderr


def test_orphaned_allocation_is_shown_and_marked(cloud):
    row = mdev_json('provider', 'list')[0]
    orphan = str(uuid.uuid4())
    placement_request(cloud, 'PUT', '/allocations/%s' % orphan, json={
        'allocations': {row['UUID']: {'resources': {
            row['Resource Class']: 1}}},
        'project_id': 'gone', 'user_id': 'gone',
        'consumer_generation': None, 'consumer_type': 'INSTANCE'})
    try:
        [shown] = mdev_json('allocation', 'show', orphan, '--long')
        assert shown['Server Status'] == 'ORPHANED'
        assert 'orphaned' in shown['Server Name']
        assert shown['Nova Host'] is None and shown['Nova Node'] is None
        assert (shown['Host'], shown['Device']) == (row['Host'],
                                                    row['Device'])
        listed = [r for r in mdev_json('allocation', 'list', '--long')
                  if r['Server'] == orphan]
        assert [r['Server Status'] for r in listed] == ['ORPHANED']
    finally:
        placement_request(cloud, 'DELETE', '/allocations/%s' % orphan)


def test_deleted_server_disappears(cloud, flavors):
    [server] = boot(cloud, flavors['VGPU'], name='e2e-short-lived')
    [(node, address, _)] = truth(cloud)[server['id']]
    listed = mdev_json('allocation', 'list', '--device',
                       '%s:%s' % (node, address))
    assert server['id'] in {r['Server'] for r in listed}
    cloud.control('delete', server=server['id'])
    listed = mdev_json('allocation', 'list', '--device',
                       '%s:%s' % (node, address))
    assert server['id'] not in {r['Server'] for r in listed}
    result = mdev('allocation', 'show', server['id'])
    cli.assert_one_line_error(result, 'No server with ID %s' % server['id'])


def test_migration_moves_the_allocation(cloud, flavors):
    [server] = boot(cloud, flavors['VGPU'], name='e2e-mover')
    [(before_node, _, _)] = truth(cloud)[server['id']]
    moved = cloud.control('migrate', server=server['id'])
    [(node, address, _)] = truth(cloud)[server['id']]
    assert node != before_node
    assert moved['host'] == service_hosts(cloud)[server['id']]
    [row] = mdev_json('allocation', 'show', server['id'], '--long')
    assert (row['Host'], row['Device']) == (node, address)
    assert (row['Nova Host'], row['Nova Node']) == (moved['host'], node)


def test_a_migrations_allocation_is_marked_migration(cloud, flavors):
    """Nova 34 writes no consumer type: a move's source allocation is
    known as such from Nova's migration list, never called orphaned.
    """
    [server] = boot(cloud, flavors['VGPU'], name='e2e-left-behind')
    cloud.control('migrate', server=server['id'])
    rsp = requests.get(
        cloud.compute_url + '/os-migrations?instance_uuid=%s' % server['id'],
        headers={'X-Auth-Token': 'admin',
                 'OpenStack-API-Version': 'compute 2.59'}, timeout=30)
    rsp.raise_for_status()
    [migration] = rsp.json()['migrations']
    row = mdev_json('provider', 'list', '--free')[0]
    # The source allocation of the move, as if its confirm had not
    # cleaned it up, written as Nova 34 writes it (1.36: no consumer type).
    requests.put(
        cloud.placement_url + '/allocations/%s' % migration['uuid'],
        headers={'X-Auth-Token': 'admin',
                 'OpenStack-API-Version': 'placement 1.36'},
        json={'allocations': {row['UUID']: {'resources': {
            row['Resource Class']: 1}}},
            'project_id': 'p', 'user_id': 'u',
            'consumer_generation': None}, timeout=30).raise_for_status()
    try:
        [shown] = mdev_json('allocation', 'show', migration['uuid'],
                            '--long')
        assert shown['Server Status'] == 'MIGRATION'
        assert server['id'] in shown['Server Name']
        assert migration['status'] in shown['Server Name']
        listed = [r for r in mdev_json('allocation', 'list', '--long')
                  if r['Server'] == migration['uuid']]
        assert [r['Server Status'] for r in listed] == ['MIGRATION']
    finally:
        placement_request(cloud, 'DELETE',
                          '/allocations/%s' % migration['uuid'])
        cloud.control('delete', server=server['id'])


# -- a compute whose node is not its service host ----------------------------

def fqdn_host(cloud):
    """The service host whose node is named otherwise, and that node."""
    [(host, info)] = [(h, i) for h, i in sorted(cloud.hosts.items())
                      if i['hypervisor_hostname'] != h]
    return host, info['hypervisor_hostname']


def test_allocations_on_a_node_named_unlike_its_host(cloud):
    host, node = fqdn_host(cloud)
    assert node.startswith(host + '.')
    vgpu = flavor(cloud, 'fqdn-node', **{'resources:VGPU': '1'})
    servers = boot(cloud, vgpu, host=host, count=2, name='e2e-fqdn')
    where = truth(cloud)
    hosts = service_hosts(cloud)
    for server in servers:
        [(truth_node, address, _)] = where[server['id']]
        assert (hosts[server['id']], truth_node) == (host, node)
        result = mdev('allocation', 'show', server['id'], '--long',
                      '-f', 'json')
        [row] = result.json()
        assert result.stderr == ''
        assert (row['Host'], row['Device']) == (node, address)
        assert (row['Nova Host'], row['Nova Node']) == (host, node)
        assert row['Server Status'] == 'ACTIVE'
        assert row['Server Name'] == server['name']

    result = mdev('allocation', 'list', '--host', node, '--long',
                  '-f', 'json')
    rows = {r['Server']: r for r in result.json()}
    assert result.stderr == ''
    for server in servers:
        row = rows[server['id']]
        [(_, address, _)] = where[server['id']]
        assert (row['Host'], row['Device']) == (node, address)
        assert (row['Nova Host'], row['Nova Node']) == (host, node)
        assert (row['Server Status'], row['Server Name']) == (
            'ACTIVE', server['name'])
    # Every consumer on the node is a server Nova has there.
    assert {r['Nova Node'] for r in rows.values()} == {node}


def test_allocation_list_asks_nova_once_per_node(cloud):
    host, node = fqdn_host(cloud)
    vgpu = flavor(cloud, 'counted', **{'resources:VGPU': '1'})

    def list_node():
        return mdev_json('allocation', 'list', '--host', node, '--long')

    boot(cloud, vgpu, host=host, name='e2e-counted-1')
    rows, made = nova_requests(cloud, list_node)
    assert rows and all(r['Server Status'] == 'ACTIVE' for r in rows)
    assert len(server_listings(made)) == 1, made
    assert [r for r in made if SERVER_GET.match(r)] == [], made

    # One at a time: a multi-create claims every server on the host's
    # first candidate (bug 1874664) and fails when that GPU has 1 free.
    for n in range(3):
        boot(cloud, vgpu, host=host, name='e2e-counted-more-%d' % n)
    more_rows, more_made = nova_requests(cloud, list_node)
    assert len(more_rows) == len(rows) + 3
    # Three more servers, not one request more.
    assert len(more_made) == len(made), (made, more_made)
    assert [r for r in more_made if SERVER_GET.match(r)] == []


def test_allocation_list_of_the_cloud_asks_nova_once_per_node(cloud,
                                                              flavors):
    for host in mdev_hosts(cloud):
        boot(cloud, flavors['VGPU'], host=host, name='e2e-everywhere')
    rows, made = nova_requests(
        cloud, lambda: mdev_json('allocation', 'list', '--long'))
    nodes = {r['Host'] for r in rows}
    assert nodes == {node_of(cloud, host) for host in mdev_hosts(cloud)}
    assert len(server_listings(made)) == len(nodes), made
    # Only consumers Nova does not have on that node are looked up alone.
    elsewhere = {r['Server'] for r in rows if r['Nova Node'] != r['Host']}
    assert {r.rsplit('/', 1)[1] for r in made
            if SERVER_GET.match(r)} == elsewhere


def test_a_node_mismatch_is_flagged(cloud):
    # Placement holds the server's vGPU on another node than the one
    # Nova has it on (as a failed move can leave it): the rows say where
    # Placement has it, and one warning line names both nodes.
    host, node = fqdn_host(cloud)
    vgpu = flavor(cloud, 'mismatch', **{'resources:VGPU': '1'})
    [server] = boot(cloud, vgpu, host=host, name='e2e-mismatch')
    other_node, other = next(
        (n, g) for n, g in gpus(cloud)
        if n != node and g['resource_class'] == 'VGPU')
    other_uuid = next(
        p['uuid'] for p in placement_request(
            cloud, 'GET', '/resource_providers')['resource_providers']
        if p['name'] == other['provider_name'])
    path = '/allocations/%s' % server['id']
    original = placement_request(cloud, 'GET', path)
    moved = {rp: a for rp, a in original['allocations'].items()
             if 'VGPU' not in a['resources']}
    moved[other_uuid] = {'resources': {'VGPU': 1}}

    def put(allocations, generation):
        placement_request(cloud, 'PUT', path, json={
            'allocations': {rp: {'resources': a['resources']}
                            for rp, a in allocations.items()},
            'project_id': original['project_id'],
            'user_id': original['user_id'],
            'consumer_generation': generation,
            # Nova writes no consumer type ('unknown'), which a PUT
            # cannot name.
            'consumer_type': 'INSTANCE'})

    put(moved, original['consumer_generation'])
    try:
        result = mdev('allocation', 'show', server['id'], '--long',
                      '-f', 'json')
        [row] = result.json()
        assert (row['Host'], row['Device']) == (other_node,
                                                other['pci_address'])
        assert (row['Nova Host'], row['Nova Node']) == (host, node)
        [warning] = result.stderr.strip().splitlines()
        assert server['id'] in warning
        assert node in warning and other_node in warning
        listed = mdev('allocation', 'list', '--host', other_node,
                      '-f', 'json')
        assert server['id'] in {r['Server'] for r in listed.json()}
        assert [line for line in listed.stderr.splitlines()
                if server['id'] in line] == [warning]
    finally:
        current = placement_request(cloud, 'GET', path)
        put(original['allocations'], current['consumer_generation'])


# -- a Placement older than 1.38 knows no consumer types --------------------

@pytest.fixture
def old_placement(cloud, tmp_path):
    """A real Placement stopped at microversion 1.37 (no consumer types),
    beside the cloud's Nova, with one compute node of one GPU.
    """
    server = service_processes.PlacementProcess(
        tmp_path / 'placement', max_microversion='1.37')
    try:
        config = yaml.safe_load(open(cloud.clouds_yaml))
        entry = config['clouds'][cloud.cloud_name]
        entry['placement_endpoint_override'] = server.url
        entry['auth']['endpoint'] = server.url
        path = tmp_path / 'clouds.yaml'
        path.write_text(yaml.safe_dump(config))
        yield server.url, path
    finally:
        server.stop()


def test_unknown_consumer_on_placement_before_1_38(cloud, old_placement,
                                                   monkeypatch):
    url, clouds_yaml = old_placement
    root = requests.get(url, timeout=30).json()
    assert root['versions'][0]['max_version'] == '1.37'
    placement = placement_data.Placement(url, version='1.37')
    gpu = placement_data.Gpu('pci_0000_81_00_0')
    node = placement.add_compute_node('old-placement.example.net', [gpu])
    consumer = placement.boot_server(node, gpu)
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(clouds_yaml))

    [shown] = mdev_json('allocation', 'show', consumer, '--long')
    assert (shown['Host'], shown['Device']) == (
        'old-placement.example.net', '0000:81:00.0')
    assert shown['Server Status'] == 'UNKNOWN'
    assert 'orphaned' not in shown['Server Name']
    assert shown['Nova Host'] is None and shown['Nova Node'] is None
    listed = mdev_json('allocation', 'list', '--long')
    assert [(r['Server'], r['Server Status']) for r in listed] == [
        (consumer, 'UNKNOWN')]


# -- trait set and flavors end to end --------------------------------------

def nova_conf_of(cloud, host):
    """The [devices]/[mdev_*] part of the service host's nova.conf."""
    info = cloud.hosts[host]
    lines = ['[devices]', 'enabled_mdev_types = %s'
             % ', '.join(info['enabled_mdev_types'])]
    by_type = {}
    for gpu in info['gpus']:
        if gpu['mdev_type']:
            by_type.setdefault(gpu['mdev_type'], []).append(
                gpu['pci_address'])
    for mdev_type in info['enabled_mdev_types']:
        lines += ['[mdev_%s]' % mdev_type, 'device_addresses = %s'
                  % ','.join(by_type.get(mdev_type, []))]
    return '\n'.join(lines) + '\n'


def tag_from_nova_conf(cloud, workdir):
    """Tag every GPU with its type's trait, from each host's nova.conf;
    the command converges, so running it again changes nothing.
    """
    for host in mdev_hosts(cloud):
        conf = workdir / ('%s.conf' % host)
        conf.write_text(nova_conf_of(cloud, host))
        result = mdev('trait', 'set', '--compute-conf',
                      '%s=%s' % (node_of(cloud, host), conf))
        assert result.rc == 0, result.stderr


@pytest.fixture
def type_traits(cloud, tmp_path):
    """Every GPU carries the trait of its mdev type."""
    tag_from_nova_conf(cloud, tmp_path)


def test_tag_from_nova_conf_and_boot_by_type(cloud, tmp_path):
    tag_from_nova_conf(cloud, tmp_path)
    for row in mdev_json('provider', 'list', '--long'):
        gpu = next(g for h, g in gpus(cloud)
                   if g['provider_name'] == row['Name'])
        wanted = 'CUSTOM_' + gpu['mdev_type'].upper().replace('-', '_')
        assert wanted in row['Traits'] and 'OWNER_NOVA' in row['Traits']

    by_type = flavor(cloud, 'nvidia-12')
    result = mdev('flavor', 'configure', by_type, '--resource-class',
                  'VGPU', '--mdev-type', 'nvidia-12')
    assert result.rc == 0, result.stderr
    servers = boot(cloud, by_type, count=3, name='e2e-by-type')
    where = truth(cloud)
    for server in servers:
        [(_, _, mdev_type)] = where[server['id']]
        assert mdev_type == 'nvidia-12'

    # Nova's periodic update does not undo the tags.
    cloud.control('periodic')
    for row in mdev_json('provider', 'list'):
        assert any(t.startswith('CUSTOM_') for t in row['Traits']), row


def test_trait_required_lands_only_on_tagged_gpu(cloud):
    # The VGPU device with the most room left.
    free = {(r['Host'], r['Device']): r['Free']
            for r in mdev_json('provider', 'list', '--resource-class',
                               'VGPU')}
    node, gpu = max(((n, g) for n, g in gpus(cloud)
                     if g['resource_class'] == 'VGPU'),
                    key=lambda hg: free[(hg[0], hg[1]['pci_address'])])
    assert free[(node, gpu['pci_address'])] >= 3
    device = '%s:%s' % (node, gpu['pci_address'])
    result = mdev('trait', 'set', '--trait', 'CUSTOM_E2E_ONLY_HERE', device)
    assert result.rc == 0, result.stderr
    cloud.control('create_flavor', name='e2e-only-here')
    result = mdev('flavor', 'configure', 'e2e-only-here',
                  '--resource-class', 'VGPU', '--require-trait',
                  'CUSTOM_E2E_ONLY_HERE')
    assert result.rc == 0, result.stderr
    servers = boot(cloud, 'e2e-only-here', count=3, name='e2e-only-here')
    where = truth(cloud)
    for server in servers:
        assert where[server['id']] == [
            (node, gpu['pci_address'], gpu['mdev_type'])]
    cloud.control('periodic')
    [row] = [r for r in mdev_json('provider', 'list')
             if (r['Host'], r['Device']) == (node, gpu['pci_address'])]
    assert 'CUSTOM_E2E_ONLY_HERE' in row['Traits']
    assert 'OWNER_NOVA' in row['Traits']
    shown = mdev_json('flavor', 'show', 'e2e-only-here')
    assert shown['Request'] == 'resources: 1 x VGPU with ' \
        'CUSTOM_E2E_ONLY_HERE'
    assert shown['Devices'] == ['%s (%d free)' % (device, row['Free'])]
    assert shown['Servers That Fit'] == row['Free']


def test_flavor_configure_replaces_and_keeps_unrelated(cloud, type_traits):
    flavor = cloud.control('create_flavor', name='e2e-reconfigure',
                           extra_specs={'hw_rng:allowed': 'False'})['id']
    rows = mdev_json('flavor', 'configure', flavor, '--resource-class',
                     'VGPU', '--mdev-type', 'nvidia-11')
    assert {r['Property']: r['Result'] for r in rows} == {
        'resources:VGPU': 'added', 'trait:CUSTOM_NVIDIA_11': 'added'}
    assert flavor_specs(cloud, flavor) == {
        'hw_rng:allowed': 'False', 'resources:VGPU': '1',
        'trait:CUSTOM_NVIDIA_11': 'required'}
    # Re-configure to the generic class: the old keys go.
    mdev_json('flavor', 'configure', 'e2e-reconfigure', '--resource-class',
              'CUSTOM_MLX5', '--amount', '2')
    assert flavor_specs(cloud, flavor) == {
        'hw_rng:allowed': 'False', 'resources:CUSTOM_MLX5': '2'}
    [server] = boot(cloud, flavor, name='e2e-mlx5-pair')
    [(host, address, mdev_type)] = set(truth(cloud)[server['id']])
    assert mdev_type == 'mlx5_core'
    assert len(truth(cloud)[server['id']]) == 2


def test_flavor_reconfigure_removes_every_old_key(cloud):
    # Nova answers concurrent deletes of one flavor's extra specs by
    # putting keys back: every old key must still be gone.
    flavor_id = flavor(cloud, 'many-keys', **{'hw_rng:allowed': 'False'})
    result = mdev('flavor', 'configure', flavor_id, '--resource-class',
                  'VGPU', '--amount', '6', '--spread', '--require-trait',
                  'CUSTOM_E2E_MANY', '--no-validate')
    assert result.rc == 0, result.stderr
    assert len(flavor_specs(cloud, flavor_id)) == 14
    result = mdev('flavor', 'configure', flavor_id, '--resource-class',
                  'CUSTOM_MLX5')
    assert result.rc == 0, result.stderr
    assert flavor_specs(cloud, flavor_id) == {
        'hw_rng:allowed': 'False', 'resources:CUSTOM_MLX5': '1'}


def test_flavor_spread_and_dry_run(cloud, type_traits):
    flavor = cloud.control('create_flavor', name='e2e-spread')['id']
    before = flavor_specs(cloud, flavor)
    dry = mdev_json('flavor', 'configure', flavor, '--resource-class',
                    'VGPU', '--amount', '2', '--spread', '--dry-run')
    assert {r['Result'] for r in dry} == {'would be added'}
    assert flavor_specs(cloud, flavor) == before
    mdev_json('flavor', 'configure', flavor, '--resource-class', 'VGPU',
              '--amount', '2', '--spread', '--mdev-type', 'nvidia-11')
    assert flavor_specs(cloud, flavor) == {
        'group_policy': 'isolate',
        'resources1:VGPU': '1', 'trait1:CUSTOM_NVIDIA_11': 'required',
        'resources2:VGPU': '1', 'trait2:CUSTOM_NVIDIA_11': 'required'}
    [server] = boot(cloud, flavor, name='e2e-spread')
    mdevs = truth(cloud)[server['id']]
    assert len(mdevs) == 2
    assert len({address for _, address, _ in mdevs}) == 2
    assert {t for _, _, t in mdevs} == {'nvidia-11'}
    rows = mdev_json('allocation', 'show', server['id'])
    assert sorted((r['Host'], r['Device']) for r in rows) == sorted(
        (h, a) for h, a, _ in mdevs)


@pytest.mark.parametrize('args,fragment', [
    (['--resource-class', 'CUSTOM_NOT_THERE'],
     'Resource class CUSTOM_NOT_THERE does not exist in Placement'),
    (['--resource-class', 'VGPU', '--require-trait', 'CUSTOM_NEVER_MADE'],
     'Trait CUSTOM_NEVER_MADE does not exist in Placement'),
    (['--resource-class', 'VGPU', '--require-trait', 'CUSTOM_ON_NO_DEVICE'],
     'resources requires trait CUSTOM_ON_NO_DEVICE, which no resource '
     'provider has'),
    (['--resource-class', 'VGPU', '--amount', '17'],
     'room for 17 VGPU rules out 7 devices and 4 hosts, leaving none (the '
     'largest VGPU device holds 16)'),
    (['--resource-class', 'VGPU', '--amount', '3', '--spread',
      '--mdev-type', 'nvidia-12'],
     '3 different devices on one host (group_policy=isolate) rules out'),
    (['--resource-class', 'vgpu'], 'not an mdev resource class'),
    (['--resource-class', 'VGPU', '--amount', '0'], 'at least 1'),
    (['--resource-class', 'VGPU', '--require-trait', 'CUSTOM_A',
      '--forbid-trait', 'CUSTOM_A'], 'both required and forbidden'),
])
def test_flavor_validation_leaves_flavor_untouched(
        cloud, type_traits, args, fragment):
    placement_request(cloud, 'PUT', '/traits/CUSTOM_ON_NO_DEVICE')
    flavor = cloud.control('create_flavor', name='e2e-invalid',
                           extra_specs={'hw_rng:allowed': 'False'})['id']
    try:
        result = mdev('flavor', 'configure', flavor, *args)
        assert result.rc == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and fragment in lines[0], result.stderr
        assert flavor_specs(cloud, flavor) == {'hw_rng:allowed': 'False'}
    finally:
        requests.delete('%s/flavors/%s' % (cloud.compute_url, flavor),
                        headers={'X-Auth-Token': 'admin'}, timeout=30)


def test_unknown_server_and_flavor(cloud):
    result = mdev('allocation', 'show', 'no-such-server')
    cli.assert_one_line_error(result, "No server named 'no-such-server'")
    result = mdev('flavor', 'show', 'no-such-flavor')
    cli.assert_one_line_error(
        result, "No flavor named or with ID 'no-such-flavor'")


@pytest.mark.parametrize('reference', [
    'not-a-uuid-!!', 'x/../servers', 'a?b=c&all_tenants=0', '%zz',
    '0c1e4b1c-5bd5-4a4e-8a55-2f4f3c0e0d0',
])
def test_malformed_server_id(cloud, reference):
    # What was not found, and where: one line, no library's text or URL.
    result = mdev('allocation', 'show', reference)
    line = cli.assert_one_line_error(result, 'No server', reference,
                                     'in any project')
    assert 'http' not in line and 'Exception' not in line


def with_endpoint(cloud, tmp_path, monkeypatch, service, url):
    """Use the cloud with ``service``'s endpoint replaced by ``url``."""
    config = yaml.safe_load(open(cloud.clouds_yaml))
    entry = config['clouds'][cloud.cloud_name]
    entry['%s_endpoint_override' % service] = url
    path = tmp_path / 'clouds.yaml'
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(path))


@pytest.mark.parametrize('service,message', [
    ('compute', 'Cannot reach the Compute API'),
    ('placement', 'Cannot reach the Placement API'),
])
def test_unreachable_services(cloud, tmp_path, monkeypatch, service,
                              message):
    shown = flavor(cloud, 'unreachable-%s' % service)
    with_endpoint(cloud, tmp_path, monkeypatch, service,
                  'http://127.0.0.1:9/')
    for args in (['allocation', 'show', str(uuid.uuid4())],
                 ['allocation', 'list'],
                 ['flavor', 'show', shown]):
        cli.assert_one_line_error(mdev(*args), message)


@pytest.fixture(scope='module')
def endpoint_target(cloud, flavors):
    """A server with a vGPU, for the wrong-endpoint tests."""
    [server] = boot(cloud, flavors['VGPU'], name='e2e-wrong-endpoint')
    return server


@pytest.mark.parametrize('args', [
    ['allocation', 'show', 'e2e-wrong-endpoint'],
    ['allocation', 'list'],
])
def test_compute_endpoint_without_nova_servers(cloud, endpoint_target,
                                               tmp_path, monkeypatch, args):
    # An endpoint under Nova's that serves no servers (a wrong path in the
    # catalog or in compute_endpoint_override) answers 404 to everything.
    with_endpoint(cloud, tmp_path, monkeypatch, 'compute',
                  cloud.compute_url + '/wrong')
    line = cli.assert_one_line_error(mdev(*args), 'Compute', 'endpoint')
    assert 'Client Error' not in line and 'Exception' not in line


def test_compute_endpoint_without_nova_servers_by_server_id(
        cloud, endpoint_target, tmp_path, monkeypatch):
    # By ID, the server's own GET answers 404 at such an endpoint: that
    # is no proof the server is gone, and its allocation is no orphan.
    with_endpoint(cloud, tmp_path, monkeypatch, 'compute',
                  cloud.compute_url + '/wrong')
    result = mdev('allocation', 'show', endpoint_target['id'])
    line = cli.assert_one_line_error(result, 'Compute', 'endpoint')
    assert 'Client Error' not in line and 'Exception' not in line


@pytest.mark.parametrize('args', [
    ['allocation', 'show', 'e2e-wrong-endpoint'],
    ['allocation', 'list'],
])
def test_compute_endpoint_of_another_service(cloud, endpoint_target,
                                             tmp_path, monkeypatch, args):
    # The compute endpoint points at Placement: its version document is
    # not Nova's.
    with_endpoint(cloud, tmp_path, monkeypatch, 'compute',
                  cloud.placement_url)
    line = cli.assert_one_line_error(mdev(*args), 'Compute', 'endpoint')
    assert 'api_version' not in line and 'Exception' not in line
