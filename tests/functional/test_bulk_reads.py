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

"""The bulk reads give exactly what per-device reads give, in few requests.

Against the production-shaped Placement (PostgreSQL, gunicorn) on data
chosen to trip the provider summaries: full GPUs, a host whose GPUs are
all full, a host whose VCPUs are all used too (absent from allocation
candidates), reserved and over-committed inventories, a device whose usage
exceeds its capacity, PCI-in-Placement and network agent children, a
device deleted while the command reads, and a Placement whose
``max_allocation_candidates`` cuts the answer short. Every row is compared
field by field with plain per-device reads (inventories, usages, traits)
made by the test itself.
"""

import json
import uuid

import pytest
import requests

from osc_mdev.api import placement as placement_client
from tests.fixtures import cli
from tests.fixtures import pg_placement as pg
from tests.fixtures import placement_data
from tests.fixtures.placement_data import Gpu

NARROW = ('UUID', 'Host', 'Device', 'Resource Class', 'Used', 'Free',
          'Traits')


def _root(placement, host, vcpus=64):
    root = placement.create_provider(host)
    placement.set_inventory(root, {
        'VCPU': {'total': vcpus}, 'MEMORY_MB': {'total': 262144},
        'DISK_GB': {'total': 2000}})
    placement.set_traits(root, placement_data.ROOT_TRAITS)
    return root


def _gpu(placement, root, host, nodedev, inventory, traits=()):
    gpu = Gpu(nodedev, next(iter(inventory)), 0, tuple(traits))
    gpu.name = '%s_%s' % (host, nodedev)
    gpu.uuid = placement.create_provider(gpu.name, parent=root)
    placement.set_inventory(gpu.uuid, inventory)
    placement.set_traits(gpu.uuid, ['OWNER_NOVA', *traits])
    return gpu


def fill(placement):
    """The tricky cloud; returns the UUIDs of providers to watch."""
    p = placement
    inv = {'VGPU': {'total': 4, 'max_unit': 4}}
    watch = {}

    # A: one GPU full, one partly used, one reserved, one over-committed.
    a = _root(p, 'bulk-a.example.com')
    full = _gpu(p, a, 'bulk-a.example.com', 'pci_0000_84_00_0', inv,
                ['CUSTOM_NVIDIA_35'])
    part = _gpu(p, a, 'bulk-a.example.com', 'pci_0000_85_00_0', inv,
                ['CUSTOM_NVIDIA_35'])
    reserved = _gpu(p, a, 'bulk-a.example.com', 'pci_0000_86_00_0', {
        'VGPU': {'total': 4, 'reserved': 1, 'max_unit': 4}})
    over = _gpu(p, a, 'bulk-a.example.com', 'pci_0000_87_00_0', {
        'CUSTOM_NVIDIA_36': {'total': 2, 'max_unit': 2,
                             'allocation_ratio': 2.5}}, ['CUSTOM_T36'])
    for gpu, servers in ((full, 4), (part, 2), (reserved, 3), (over, 4)):
        for _ in range(servers):
            p.boot_server(a, gpu)
    # Used above capacity: the inventory shrank under existing servers.
    p.set_inventory(part.uuid, {'VGPU': {'total': 4, 'max_unit': 4,
                                         'reserved': 3}})
    watch['full'] = full.uuid

    # B: every GPU full, VCPUs free.
    b = _root(p, 'bulk-b')
    for n in range(2):
        gpu = _gpu(p, b, 'bulk-b', 'pci_0000_3b_00_%d' % n,
                   {'VGPU': {'total': 1, 'max_unit': 1}})
        p.boot_server(b, gpu)

    # C: every GPU full and every VCPU used: no allocation candidate.
    c = _root(p, 'bulk_c.dc1', vcpus=4)
    c_gpus = [_gpu(p, c, 'bulk_c.dc1', 'pci_0000_41_00_%d' % n,
                   {'VGPU': {'total': 1, 'max_unit': 1}}, ['CUSTOM_C'])
              for n in range(2)]
    for gpu in c_gpus:
        p.allocate(str(uuid.uuid4()), {
            c: {'VCPU': 2}, gpu.uuid: {'VGPU': 1}})
    watch['uncovered'] = c_gpus[1].uuid

    # D: a custom class, a virtual parent, PCI in Placement, an agent.
    d = _root(p, 'bulk-d')
    _gpu(p, d, 'bulk-d', 'pci_0000_a1_00_0', {
        'CUSTOM_MLX5': {'total': 8, 'max_unit': 8}})
    _gpu(p, d, 'bulk-d', 'mtty_mtty', {'CUSTOM_MTTY': {'total': 3}})
    pci = p.create_provider('bulk-d_0000:81:00.0', parent=d)
    p.set_inventory(pci, {'CUSTOM_PCI_10DE_1EB8': {'total': 1}})
    p.set_traits(pci, ['OWNER_NOVA'])
    agent = p.create_provider('bulk-d:Open vSwitch agent', parent=d)
    p.set_inventory(agent, {'NET_BW_EGR_KILOBIT_PER_SEC': {'total': 1000}})
    watch['not_mdev'] = (pci, agent)
    return watch


def per_device_rows(url):
    """Every mdev row from plain per-provider reads (no osc-mdev code)."""
    session = requests.Session()
    session.headers.update({'X-Auth-Token': 'admin',
                            'OpenStack-API-Version': 'placement 1.14'})

    def get(path):
        return session.get(url + path).json()

    providers = get('/resource_providers')['resource_providers']
    by_uuid = {p['uuid']: p for p in providers}
    rows = []
    for rp in providers:
        if rp['root_provider_uuid'] == rp['uuid']:
            continue
        host = by_uuid[rp['root_provider_uuid']]['name']
        nodedev = rp['name'][len(host) + 1:]
        if not rp['name'].startswith(host + '_') or ':' in nodedev:
            continue
        inv = get('/resource_providers/%s/inventories' % rp['uuid'])
        usages = get('/resource_providers/%s/usages' % rp['uuid'])['usages']
        traits = get('/resource_providers/%s/traits' % rp['uuid'])['traits']
        device = nodedev
        if nodedev.startswith('pci_'):
            _, dom, bus, slot, fn = nodedev.split('_')
            device = '%s:%s:%s.%s' % (dom, bus, slot, fn)
        for rc, i in sorted(inv['inventories'].items()):
            if not (rc == 'VGPU' or rc.startswith('CUSTOM_')):
                continue
            capacity = int((i['total'] - i['reserved'])
                           * i['allocation_ratio'])
            used = usages.get(rc, 0)
            rows.append({
                'UUID': rp['uuid'], 'Name': rp['name'], 'Host': host,
                'Device': device, 'Kind': 'mdev', 'Resource Class': rc,
                'Total': i['total'],
                'Reserved': i['reserved'], 'Used': used,
                'Free': max(capacity - used, 0), 'Max Unit': i['max_unit'],
                'Allocation Ratio': i['allocation_ratio'],
                'Generation': inv['resource_provider_generation'],
                'Traits': sorted(traits)})
    return sorted(rows, key=lambda r: (r['Host'], r['Device']))


def mdev(url, *args):
    return cli.openstack(*cli.admin_token_args(url), 'mdev', *args)


def listed(url, *args):
    return mdev(url, 'provider', 'list', '-f', 'json', *args).json()


@pytest.fixture(scope='module')
def cloud(pg_placement):
    watch = fill(placement_data.Placement(pg_placement.url))
    return pg_placement, watch


@pytest.fixture(scope='module')
def truncating():
    """The same cloud on a Placement that cuts candidates at 2."""
    with pg.running(options={
            'placement': {'max_allocation_candidates': 2}}) as server:
        fill(placement_data.Placement(server.url))
        yield server


def _counted(server, func):
    before = server.requests()
    result = func()
    return result, server.requests() - before


def test_long_list_equals_per_device_reads(cloud):
    server, _ = cloud
    expected = per_device_rows(server.url)
    assert len(expected) == 10
    rows, count = _counted(server, lambda: listed(server.url, '--long'))
    assert rows == expected
    # listing + summaries + one inventories read per covered device; the
    # two devices of the tree without candidates: inventories, usages and
    # traits each.
    assert count == 2 + 8 + 2 * 3


def test_default_and_narrow_views_equal_per_device_reads(cloud):
    server, _ = cloud
    expected = per_device_rows(server.url)
    default = listed(server.url)
    assert default == [{k: r[k] for k in (
        'UUID', 'Host', 'Device', 'Resource Class', 'Total', 'Used', 'Free',
        'Traits')} for r in expected]
    cols = [a for c in NARROW for a in ('-c', c)]
    narrow, count = _counted(server, lambda: listed(server.url, *cols))
    assert narrow == [{k: r[k] for k in NARROW} for r in expected]
    # No inventories read: listing, summaries, the uncovered tree's two
    # devices (inventories, usages, traits).
    assert count == 2 + 2 * 3


@pytest.mark.parametrize('args, keep', [
    (('--full',), lambda r: r['Free'] == 0),
    (('--free',), lambda r: r['Free'] > 0),
    (('--trait', 'CUSTOM_NVIDIA_35'),
     lambda r: 'CUSTOM_NVIDIA_35' in r['Traits']),
    (('--host', 'bulk_c.dc1'), lambda r: r['Host'] == 'bulk_c.dc1'),
    (('--host', 'bulk-a.example.com', '--resource-class',
      'CUSTOM_NVIDIA_36'), lambda r: r['Resource Class'] ==
     'CUSTOM_NVIDIA_36'),
])
def test_filters_equal_per_device_reads(cloud, args, keep):
    server, _ = cloud
    expected = [{k: r[k] for k in NARROW}
                for r in per_device_rows(server.url) if keep(r)]
    assert expected
    cols = [a for c in NARROW for a in ('-c', c)]
    rows, count = _counted(server, lambda: listed(server.url, *args, *cols))
    assert rows == expected
    assert count <= 2 + 2 * 3 + 2


def test_truncated_candidates_fall_back_to_per_device_reads(truncating):
    answer = requests.get(
        truncating.url + '/allocation_candidates?resources=VCPU:1',
        headers={'X-Auth-Token': 'admin',
                 'OpenStack-API-Version': 'placement 1.31'}).json()
    # Three trees have a free VCPU; the answer holds two.
    assert len(answer['allocation_requests']) == 2
    assert listed(truncating.url, '--long') == per_device_rows(
        truncating.url)


def test_show_reads_only_its_tree(cloud):
    server, _ = cloud
    expected = {r['UUID']: r for r in per_device_rows(server.url)}
    for ref in ('bulk-a.example.com:0000:84:00.0',
                'bulk-a.example.com_pci_0000_84_00_0'):
        shown, count = _counted(server, lambda: mdev(
            server.url, 'provider', 'show', ref, '-f', 'json').json())
        row = expected[shown['UUID']]
        assert {k: shown[k] for k in row} == row
        # name lookup, tree listing, inventories, traits, allocations
        assert count == 5
    by_uuid, count = _counted(server, lambda: mdev(
        server.url, 'provider', 'show', shown['UUID'], '-f', 'json').json())
    assert by_uuid == shown and count == 5


def test_device_deleted_while_reading_is_left_out(cloud, monkeypatch):
    server, watch = cloud
    url = server.url
    data = placement_data.Placement(url)
    host = 'bulk-e'
    root = _root(data, host)
    gone = _gpu(data, root, host, 'pci_0000_0a_00_0',
                {'VGPU': {'total': 2}})
    kept = _gpu(data, root, host, 'pci_0000_0b_00_0',
                {'VGPU': {'total': 2}})
    real = placement_client.PlacementClient.get_inventories

    def delete_first(self, uuid):
        if uuid == gone.uuid:
            data.request('DELETE', '/resource_providers/%s' % uuid)
        return real(self, uuid)

    monkeypatch.setattr(placement_client.PlacementClient, 'get_inventories',
                        delete_first)
    rows = listed(url, '--host', host)
    assert [r['UUID'] for r in rows] == [kept.uuid]


def test_trait_set_all_keeps_every_trait_in_few_requests(cloud):
    server, _ = cloud
    before = {r['UUID']: set(r['Traits'])
              for r in per_device_rows(server.url)}
    result, count = _counted(server, lambda: mdev(
        server.url, 'trait', 'set', '--all', '--trait', 'CUSTOM_FRESH',
        '-f', 'json'))
    assert result.rc == 0, result.stderr
    assert {r['Result'] for r in json.loads(result.stdout)} == {
        'added CUSTOM_FRESH'}
    after = {r['UUID']: set(r['Traits'])
             for r in per_device_rows(server.url)}
    assert after == {u: t | {'CUSTOM_FRESH'} for u, t in before.items()}
    # listing, summaries, PUT /traits/CUSTOM_FRESH, one PUT per device;
    # the uncovered tree's devices are read first (inventories, traits).
    devices = len(before)
    assert count == 3 + devices + 2 * 2
    dry, count = _counted(server, lambda: mdev(
        server.url, 'trait', 'unset', '--all', '--trait', 'CUSTOM_FRESH',
        '--dry-run', '-f', 'json'))
    assert dry.rc == 0 and count == 2 + 2 * 2
