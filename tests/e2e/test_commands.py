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
"""

import json

import pytest
import requests

from tests.cloud import client
from tests.fixtures import cli


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('cloud')) as cloud:
        yield cloud


@pytest.fixture(autouse=True)
def os_cloud(cloud, monkeypatch):
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(cloud.clouds_yaml))
    monkeypatch.setenv('OS_CLOUD', cloud.cloud_name)


def mdev(*args):
    return cli.openstack('mdev', *args)


def mdev_json(*args):
    return mdev(*args, '-f', 'json').json()


def placement_request(cloud, method, path, **kwargs):
    rsp = requests.request(
        method, cloud.placement_url + path, timeout=30,
        headers={'X-Auth-Token': 'admin',
                 'OpenStack-API-Version': 'placement 1.39'}, **kwargs)
    rsp.raise_for_status()
    return rsp.json() if rsp.content else None


def flavor_specs(cloud, flavor_id):
    rsp = requests.get(
        '%s/flavors/%s/os-extra_specs' % (cloud.compute_url, flavor_id),
        headers={'X-Auth-Token': 'admin'}, timeout=30)
    rsp.raise_for_status()
    return rsp.json()['extra_specs']


def gpus(cloud):
    """(host, gpu) for every GPU Nova reports an inventory for."""
    return [(host, gpu) for host, info in sorted(cloud.hosts.items())
            for gpu in info['gpus'] if gpu['resource_class']]


def truth(cloud):
    """{server id: [(host, pci address, mdev type)]} from fake libvirt."""
    found = {}
    for mdev_ in cloud.control('mdev_truth'):
        found.setdefault(mdev_['server'], []).append(
            (mdev_['host'], mdev_['pci_address'], mdev_['mdev_type']))
    return found


def boot(cloud, flavor, **kwargs):
    servers = cloud.control('boot', flavor=flavor, **kwargs)
    for server in servers:
        assert server['status'] == 'ACTIVE', server['fault']
    return servers


@pytest.fixture(scope='module')
def flavors(cloud):
    return {rc: cloud.control('create_flavor', name='e2e-%s' % rc.lower(),
                              extra_specs={'resources:%s' % rc: '1'})['id']
            for rc in ('VGPU', 'CUSTOM_MLX5')}


# -- provider list / show -------------------------------------------------

def test_01_provider_list_is_what_nova_reported(cloud):
    rows = mdev_json('provider', 'list')
    expected = [{'Host': host, 'Device': gpu['pci_address'],
                 'Resource Class': gpu['resource_class'],
                 'Total': gpu['offers'][gpu['mdev_type']],
                 'Used': 0, 'Free': gpu['offers'][gpu['mdev_type']]}
                for host, gpu in gpus(cloud)]
    assert [{k: r[k] for k in expected[0]} for r in rows] == expected
    assert all('OWNER_NOVA' in r['Traits'] for r in rows)
    names = {r['UUID']: r for r in mdev_json('provider', 'list', '--long')}
    for (host, gpu), row in zip(gpus(cloud), rows):
        assert names[row['UUID']]['Name'] == gpu['provider_name']


@pytest.fixture(scope='module')
def booted(cloud, flavors):
    """VGPU servers on every host and CUSTOM_MLX5 servers."""
    servers = []
    for host in sorted(cloud.hosts):
        servers += boot(cloud, flavors['VGPU'], host=host, count=2,
                        name='e2e-vgpu-%s' % host)
    servers += boot(cloud, flavors['CUSTOM_MLX5'], count=2,
                    name='e2e-mlx5')
    return servers


def test_02_allocation_show_names_the_gpu_libvirt_used(cloud, booted):
    where = truth(cloud)
    for server in booted:
        [(host, address, mdev_type)] = where[server['id']]
        rows = mdev_json('allocation', 'show', server['id'], '--long')
        assert len(rows) == 1, rows
        row = rows[0]
        assert (row['Host'], row['Device']) == (host, address)
        assert row['Server'] == server['id']
        assert row['Server Name'] == server['name']
        assert row['Amount'] == 1
        assert row['Nova Host'] == host == server['host']
        assert row['Server Status'] == 'ACTIVE'
        assert 'OWNER_NOVA' in row['Traits']
        gpu = next(g for h, g in gpus(cloud)
                   if h == host and g['pci_address'] == address)
        assert row['Resource Class'] == gpu['resource_class']
        assert mdev_type == gpu['mdev_type']


def test_03_allocation_list_matches_libvirt_per_host(cloud, booted):
    where = truth(cloud)
    ids = {s['id'] for s in booted}
    for host in sorted(cloud.hosts):
        rows = mdev_json('allocation', 'list', '--host', host)
        listed = {(r['Server'], r['Host'], r['Device']) for r in rows
                  if r['Server'] in ids}
        expected = {(server, h, address)
                    for server, mdevs in where.items() if server in ids
                    for h, address, _ in mdevs if h == host}
        assert listed == expected
        assert expected, 'no server on %s' % host
    everything = mdev_json('allocation', 'list')
    names = {s['id']: s['name'] for s in booted}
    for row in everything:
        if row['Server'] in names:
            assert row['Server Name'] == names[row['Server']]


def test_04_provider_usage_moves_with_servers(cloud, booted):
    where = truth(cloud)
    used = {}
    for mdevs in where.values():
        for host, address, _ in mdevs:
            used[(host, address)] = used.get((host, address), 0) + 1
    for row in mdev_json('provider', 'list'):
        key = (row['Host'], row['Device'])
        assert row['Used'] == used.get(key, 0), key
        assert row['Free'] == row['Total'] - row['Used']
    host, address = sorted(used)[0]
    show = mdev_json('provider', 'show', '%s:%s' % (host, address))
    assert {c['consumer'] for c in show['Consumers']} == {
        s for s, mdevs in where.items()
        if any((h, a) == (host, address) for h, a, _ in mdevs)}


def test_05_server_by_name_and_ambiguous_names(cloud, flavors):
    twins = [boot(cloud, flavors['VGPU'], name='e2e-twin')[0]['id']
             for _ in range(2)]
    result = mdev('allocation', 'show', 'e2e-twin')
    assert result.rc == 1
    for twin in twins:
        assert twin in result.stderr
    assert "2 servers are named 'e2e-twin'" in result.stderr
    assert 'give the ID of one' in result.stderr
    [single] = boot(cloud, flavors['VGPU'], name='e2e-unique-name')
    rows = mdev_json('allocation', 'show', 'e2e-unique-name')
    assert [r['Server'] for r in rows] == [single['id']]
    assert rows[0]['Device'] == truth(cloud)[single['id']][0][1]


def test_06_server_without_mdev(cloud):
    flavor = cloud.control('create_flavor', name='e2e-plain')['id']
    [server] = boot(cloud, flavor, name='e2e-plain')
    result = mdev('allocation', 'show', server['id'], '-f', 'json')
    assert result.rc == 0
    assert json.loads(result.stdout) == []
    assert 'has no mdev allocations' in result.stderr


def test_07_orphaned_allocation_is_shown_and_marked(cloud):
    row = mdev_json('provider', 'list')[0]
    orphan = '0c1e4b1c-5bd5-4a4e-8a55-2f4f3c0e0d01'
    placement_request(cloud, 'PUT', '/allocations/%s' % orphan, json={
        'allocations': {row['UUID']: {'resources': {
            row['Resource Class']: 1}}},
        'project_id': 'gone', 'user_id': 'gone',
        'consumer_generation': None, 'consumer_type': 'INSTANCE'})
    try:
        [shown] = mdev_json('allocation', 'show', orphan, '--long')
        assert shown['Server Status'] == 'ORPHANED'
        assert 'orphaned' in shown['Server Name']
        assert (shown['Host'], shown['Device']) == (row['Host'],
                                                    row['Device'])
        listed = [r for r in mdev_json('allocation', 'list', '--long')
                  if r['Server'] == orphan]
        assert [r['Server Status'] for r in listed] == ['ORPHANED']
    finally:
        placement_request(cloud, 'DELETE', '/allocations/%s' % orphan)


def test_08_deleted_server_disappears(cloud, flavors):
    [server] = boot(cloud, flavors['VGPU'], name='e2e-short-lived')
    [(host, address, _)] = truth(cloud)[server['id']]
    listed = mdev_json('allocation', 'list', '--device',
                       '%s:%s' % (host, address))
    assert server['id'] in {r['Server'] for r in listed}
    cloud.control('delete', server=server['id'])
    listed = mdev_json('allocation', 'list', '--device',
                       '%s:%s' % (host, address))
    assert server['id'] not in {r['Server'] for r in listed}
    result = mdev('allocation', 'show', server['id'])
    assert result.rc == 1
    assert 'No server with ID %s' % server['id'] in result.stderr


def test_09_migration_moves_the_allocation(cloud, flavors):
    [server] = boot(cloud, flavors['VGPU'], name='e2e-mover')
    [(before_host, _, _)] = truth(cloud)[server['id']]
    try:
        moved = cloud.control('migrate', server=server['id'])
    except client.CloudError as exc:
        pytest.skip('the harness cannot migrate vGPU servers: %s' % exc)
    [(host, address, _)] = truth(cloud)[server['id']]
    assert host == moved['host'] != before_host
    [row] = mdev_json('allocation', 'show', server['id'])
    assert (row['Host'], row['Device']) == (host, address)


# -- trait set and flavors end to end --------------------------------------

def nova_conf_of(cloud, host):
    """The [devices]/[mdev_*] part of the host's nova.conf."""
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


def test_10_tag_from_nova_conf_and_boot_by_type(cloud, tmp_path):
    for host in sorted(cloud.hosts):
        conf = tmp_path / ('%s.conf' % host)
        conf.write_text(nova_conf_of(cloud, host))
        result = mdev('trait', 'set', '--from-nova-conf', str(conf),
                      '--host', host)
        assert result.rc == 0, result.stderr
    for row in mdev_json('provider', 'list', '--long'):
        gpu = next(g for h, g in gpus(cloud)
                   if g['provider_name'] == row['Name'])
        wanted = 'CUSTOM_' + gpu['mdev_type'].upper().replace('-', '_')
        assert wanted in row['Traits'] and 'OWNER_NOVA' in row['Traits']

    cloud.control('create_flavor', name='e2e-nvidia-12')
    result = mdev('flavor', 'configure', 'e2e-nvidia-12', '--resource-class',
                  'VGPU', '--mdev-type', 'nvidia-12')
    assert result.rc == 0, result.stderr
    servers = boot(cloud, 'e2e-nvidia-12', count=3, name='e2e-by-type')
    where = truth(cloud)
    for server in servers:
        [(_, _, mdev_type)] = where[server['id']]
        assert mdev_type == 'nvidia-12'

    # Nova's periodic update does not undo the tags.
    cloud.control('periodic')
    for row in mdev_json('provider', 'list'):
        assert any(t.startswith('CUSTOM_') for t in row['Traits']), row


def test_11_trait_required_lands_only_on_tagged_gpu(cloud):
    # The VGPU device with the most room left after the earlier tests.
    free = {(r['Host'], r['Device']): r['Free']
            for r in mdev_json('provider', 'list', '--resource-class',
                               'VGPU')}
    host, gpu = max(((h, g) for h, g in gpus(cloud)
                     if g['resource_class'] == 'VGPU'),
                    key=lambda hg: free[(hg[0], hg[1]['pci_address'])])
    assert free[(host, gpu['pci_address'])] >= 3
    device = '%s:%s' % (host, gpu['pci_address'])
    result = mdev('trait', 'set', '--trait', 'CUSTOM_E2E_ONLY_HERE', device)
    assert result.rc == 0, result.stderr
    cloud.control('create_flavor', name='e2e-only-here')
    result = mdev('flavor', 'configure', 'e2e-only-here',
                  '--resource-class', 'VGPU', '--trait',
                  'CUSTOM_E2E_ONLY_HERE')
    assert result.rc == 0, result.stderr
    servers = boot(cloud, 'e2e-only-here', count=3, name='e2e-only-here')
    where = truth(cloud)
    for server in servers:
        assert where[server['id']] == [
            (host, gpu['pci_address'], gpu['mdev_type'])]
    cloud.control('periodic')
    [row] = [r for r in mdev_json('provider', 'list')
             if (r['Host'], r['Device']) == (host, gpu['pci_address'])]
    assert 'CUSTOM_E2E_ONLY_HERE' in row['Traits']
    assert 'OWNER_NOVA' in row['Traits']
    shown = mdev_json('flavor', 'show', 'e2e-only-here')
    assert shown['Request'] == '1 x VGPU from one device with ' \
        'CUSTOM_E2E_ONLY_HERE'
    assert shown['Devices'] == ['%s (%d free)' % (device, row['Free'])]
    assert shown['Servers That Fit'] == row['Free']


def test_12_flavor_configure_replaces_and_keeps_unrelated(cloud):
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


def test_13_flavor_spread_and_dry_run(cloud):
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
    (['--resource-class', 'VGPU', '--trait', 'CUSTOM_NEVER_MADE'],
     'Trait CUSTOM_NEVER_MADE does not exist in Placement'),
    (['--resource-class', 'VGPU', '--trait', 'CUSTOM_ON_NO_DEVICE'],
     'no VGPU device has trait CUSTOM_ON_NO_DEVICE'),
    (['--resource-class', 'VGPU', '--amount', '17'],
     'the largest matching device offers 16 VGPU per server'),
    (['--resource-class', 'VGPU', '--amount', '3', '--spread',
      '--mdev-type', 'nvidia-12'],
     'no host has 3 matching devices'),
    (['--resource-class', 'vgpu'], 'not an mdev resource class'),
    (['--resource-class', 'VGPU', '--amount', '0'], 'at least 1'),
    (['--resource-class', 'VGPU', '--trait', 'CUSTOM_A',
      '--forbid-trait', 'CUSTOM_A'], 'both required and forbidden'),
])
def test_14_flavor_validation_leaves_flavor_untouched(cloud, args, fragment):
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


def test_15_unknown_server_and_flavor(cloud):
    result = mdev('allocation', 'show', 'no-such-server')
    assert result.rc == 1
    assert "No server named 'no-such-server'" in result.stderr
    result = mdev('flavor', 'show', 'no-such-flavor')
    assert result.rc == 1
    assert "No flavor named or with ID 'no-such-flavor'" in result.stderr


@pytest.mark.parametrize('service,message', [
    ('compute', 'Cannot reach the Compute API'),
    ('placement', 'Cannot reach the Placement API'),
])
def test_16_unreachable_services(cloud, tmp_path, monkeypatch, service,
                                 message):
    import yaml

    config = yaml.safe_load(open(cloud.clouds_yaml))
    entry = config['clouds'][cloud.cloud_name]
    entry['%s_endpoint_override' % service] = 'http://127.0.0.1:9/'
    path = tmp_path / 'clouds.yaml'
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(path))
    for args in (['allocation', 'show', 'e2e-unique-name'],
                 ['allocation', 'list'],
                 ['flavor', 'show', 'e2e-only-here']):
        result = mdev(*args)
        assert result.rc == 1, args
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], result.stderr
