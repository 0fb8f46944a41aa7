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
all full, a host whose VCPUs are all used too (reached by the first
anchor, its free memory), a host whose VCPUs and memory are all used but
one GPU has room (reached by its free disk), reserved and over-committed
inventories, a device whose usage exceeds its capacity, PCI-in-Placement
and network agent children, a device deleted while the command reads,
and a Placement whose ``max_allocation_candidates`` cuts the answers
short. Every row is compared field by field with plain per-device reads
(inventories, usages, traits: tests.fixtures.per_device), and the
requests are counted at the server. Busier clouds are in
test_busy_reads.
"""

import json
import uuid

import pytest
import requests

from osc_mdev.api import placement as placement_client
from tests.fixtures import cli
from tests.fixtures import per_device
from tests.fixtures import pg_placement as pg
from tests.fixtures import placement_data
from tests.fixtures.placement_data import Gpu

NARROW = ('UUID', 'Host', 'Device', 'Resource Class', 'Used', 'Free',
          'Traits')


def _root(placement, host, vcpus=64, memory=262144):
    root = placement.create_provider(host)
    placement.set_inventory(root, {
        'VCPU': {'total': vcpus}, 'MEMORY_MB': {'total': memory},
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

    # C: every VCPU used (no candidate for a VCPU), two GPUs full and one
    # with room: reached by the node's free memory.
    c = _root(p, 'bulk_c.dc1', vcpus=4)
    c_gpus = [_gpu(p, c, 'bulk_c.dc1', 'pci_0000_41_00_%d' % n,
                   {'VGPU': {'total': 1, 'max_unit': 1}}, ['CUSTOM_C'])
              for n in range(2)]
    for gpu in c_gpus:
        p.allocate(str(uuid.uuid4()), {
            c: {'VCPU': 2}, gpu.uuid: {'VGPU': 1}})
    _gpu(p, c, 'bulk_c.dc1', 'pci_0000_42_00_0',
         {'VGPU': {'total': 2, 'max_unit': 2}}, ['CUSTOM_C'])
    watch['no_vcpu'] = c_gpus[1].uuid

    # F: every VCPU and all memory used, one GPU full and one with room:
    # only its free disk reaches this tree.
    f = _root(p, 'bulk-f', vcpus=2, memory=2048)
    f_full = _gpu(p, f, 'bulk-f', 'pci_0000_61_00_0',
                  {'VGPU': {'total': 1, 'max_unit': 1}})
    f_room = _gpu(p, f, 'bulk-f', 'pci_0000_62_00_0',
                  {'VGPU': {'total': 3, 'max_unit': 3}}, ['CUSTOM_F'])
    p.boot_server(f, f_full)
    watch['uncovered'] = f_room.uuid

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


DEFAULT = ('UUID', 'Host', 'Device', 'Resource Class', 'Capacity', 'Used',
           'Free', 'Traits')
# The default view's reads: the listing, the first anchor (MEMORY_MB:1,
# which reaches every tree but bulk-f's) and DISK_GB:1 (bulk-f's).
READS = 3
DEVICES = 13


def _fewer_than_per_device(count, devices=DEVICES):
    """Fewer requests than the listing and three reads per device."""
    return count < 1 + 3 * devices


def test_long_list_equals_per_device_reads(cloud):
    server, _ = cloud
    expected = per_device.rows(server.url)
    assert len(expected) == DEVICES
    rows, count = _counted(server, lambda: listed(server.url, '--long'))
    assert rows == expected
    # The default view's reads and one inventories read per device.
    assert count == READS + DEVICES


def test_default_and_narrow_views_equal_per_device_reads(cloud):
    server, _ = cloud
    expected = per_device.rows(server.url)
    default, count = _counted(server, lambda: listed(server.url))
    assert default == [{k: r[k] for k in DEFAULT} for r in expected]
    # No inventories read.
    assert count == READS
    cols = [a for c in NARROW for a in ('-c', c)]
    narrow, count = _counted(server, lambda: listed(server.url, *cols))
    assert narrow == [{k: r[k] for k in NARROW} for r in expected]
    assert count == READS


def test_a_long_column_named_with_c_brings_the_long_view(cloud):
    server, _ = cloud
    expected = per_device.rows(server.url)
    rows = listed(server.url, '-c', 'UUID', '-c', 'Total', '-c', 'Step Size')
    assert rows == [{k: r[k] for k in ('UUID', 'Total', 'Step Size')}
                    for r in expected]


def test_a_node_without_free_vcpu_is_reached_by_its_memory(cloud):
    server, _ = cloud
    rows, count = _counted(server, lambda: listed(
        server.url, '--host', 'bulk_c.dc1'))
    assert rows == [{k: r[k] for k in DEFAULT}
                    for r in per_device.rows(server.url)
                    if r['Host'] == 'bulk_c.dc1']
    assert [(r['Capacity'], r['Used'], r['Free']) for r in rows] == [
        (1, 1, 0), (1, 1, 0), (2, 0, 2)]
    # root lookup, tree listing, the first anchor (memory, with
    # in_tree=); no device read on its own.
    assert count == 3


def test_a_node_without_free_vcpu_or_memory_is_reached_by_its_disk(
        cloud):
    server, watch = cloud
    rows, count = _counted(server, lambda: listed(
        server.url, '--host', 'bulk-f'))
    assert rows == [{k: r[k] for k in DEFAULT}
                    for r in per_device.rows(server.url)
                    if r['Host'] == 'bulk-f']
    assert [(r['Capacity'], r['Used'], r['Free']) for r in rows] == [
        (1, 1, 0), (3, 0, 3)]
    assert rows[1]['UUID'] == watch['uncovered']
    # root lookup, tree listing, the memory anchor (no candidate), the
    # disk anchor; no device read on its own.
    assert count == 4


@pytest.mark.parametrize('args, keep', [
    (('--full',), lambda r: r['Free'] == 0),
    (('--free',), lambda r: r['Free'] > 0),
    (('--require-trait', 'CUSTOM_NVIDIA_35'),
     lambda r: 'CUSTOM_NVIDIA_35' in r['Traits']),
    (('--host', 'bulk_c.dc1'), lambda r: r['Host'] == 'bulk_c.dc1'),
    (('--host', 'bulk-a.example.com', '--resource-class',
      'CUSTOM_NVIDIA_36'), lambda r: r['Resource Class'] ==
     'CUSTOM_NVIDIA_36'),
    (('--kind', 'mdev', '--resource-class', 'VGPU', '--free'),
     lambda r: r['Resource Class'] == 'VGPU' and r['Free'] > 0),
])
def test_filters_equal_per_device_reads(cloud, args, keep):
    server, _ = cloud
    expected = [{k: r[k] for k in DEFAULT}
                for r in per_device.rows(server.url) if keep(r)]
    assert expected
    rows, count = _counted(server, lambda: listed(server.url, *args))
    assert rows == expected
    # Whatever the filter: the reads of the default view, plus at most
    # one listing by trait or class check.
    assert count <= READS + 1


def _truncated_answer(url):
    return requests.get(
        url + '/allocation_candidates?resources=MEMORY_MB:1',
        headers={'X-Auth-Token': 'admin',
                 'OpenStack-API-Version': 'placement 1.31'}).json()


def _without_ids(rows):
    return [{k: v for k, v in r.items() if k not in ('UUID', 'Name',
                                                     'Generation')}
            for r in rows]


def test_truncated_candidates_fill_the_missing_trees(cloud, truncating):
    answer = _truncated_answer(truncating.url)
    # Four trees have free memory; the answer holds two, and says
    # nothing of the others.
    assert len(answer['allocation_requests']) == 2
    expected = per_device.rows(truncating.url)
    rows, count = _counted(truncating, lambda: listed(truncating.url))
    assert rows == [{k: r[k] for k in DEFAULT} for r in expected]
    # The same data as on the Placement that does not truncate.
    assert _without_ids(rows) == _without_ids(listed(cloud[0].url))
    # The anchors and the trees asked one by one: which trees an answer
    # keeps varies, not the data.
    assert _fewer_than_per_device(count)
    rows, count = _counted(truncating, lambda: listed(truncating.url,
                                                      '--long'))
    assert rows == expected
    assert _fewer_than_per_device(count - DEVICES)


def test_truncated_candidates_capacity_and_allocation_list(cloud,
                                                           truncating):
    bare = ('capacity', '--resource-class', 'VGPU', '--amount', '1',
            '-f', 'json')
    providers = per_device.read(truncating.url)
    ours, count = _counted(truncating, lambda: mdev(
        truncating.url, *bare).json())
    fits = {r['Host']: r['Fits'] for r in ours if r['Host'] != 'Total'}
    assert fits == {h: per_device.fits(providers, h, {}, {'VGPU': 1})
                    for h in fits}
    assert ours == mdev(cloud[0].url, *bare).json()
    assert [r for r in ours if r['Host'] == 'bulk-f'][0]['Free'] == 3
    assert _fewer_than_per_device(count)


def test_show_reads_only_its_tree(cloud):
    server, _ = cloud
    expected = {r['UUID']: r for r in per_device.rows(server.url)}
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
    # --long reads each device's inventories.
    rows = listed(url, '--host', host, '--long')
    assert [r['UUID'] for r in rows] == [kept.uuid]


def test_trait_set_all_keeps_every_trait_in_few_requests(cloud):
    server, _ = cloud
    before = {r['UUID']: set(r['Traits'])
              for r in per_device.rows(server.url)}
    result, count = _counted(server, lambda: mdev(
        server.url, 'trait', 'set', '--all', '--trait', 'CUSTOM_FRESH',
        '-f', 'json'))
    assert result.rc == 0, result.stderr
    assert {r['Result'] for r in json.loads(result.stdout)} == {
        'added CUSTOM_FRESH'}
    after = {r['UUID']: set(r['Traits'])
             for r in per_device.rows(server.url)}
    assert after == {u: t | {'CUSTOM_FRESH'} for u, t in before.items()}
    # The default view's reads, PUT /traits/CUSTOM_FRESH, one PUT per
    # device.
    devices = len(before)
    assert count == READS + 1 + devices
    dry, count = _counted(server, lambda: mdev(
        server.url, 'trait', 'unset', '--all', '--trait', 'CUSTOM_FRESH',
        '--dry-run', '-f', 'json'))
    assert dry.rc == 0 and count == READS


def _metrics(url, *args):
    from prometheus_client import parser

    result = mdev(url, 'metrics', *args)
    assert result.rc == 0, result.stderr
    return {f.name: f for f in parser.text_string_to_metric_families(
        result.stdout)}


def _device_samples(families, name):
    return {(s.labels['host'], s.labels['device'],
             s.labels['resource_class']): s.value
            for s in families[name].samples}


@pytest.mark.parametrize('truncated', [False, True])
def test_metrics_equal_per_device_reads(cloud, truncating, truncated):
    server = truncating if truncated else cloud[0]
    expected = per_device.rows(server.url)
    families, count = _counted(server, lambda: _metrics(server.url))
    for metric, field in (('openstack_mdev_device_capacity', 'Capacity'),
                          ('openstack_mdev_device_used', 'Used'),
                          ('openstack_mdev_device_free', 'Free')):
        assert _device_samples(families, metric) == {
            (r['Host'], r['Device'], r['Resource Class']): r[field]
            for r in expected}
    types = {s.labels['device']: s.labels['type']
             for s in families['openstack_mdev_device_used'].samples}
    assert types['0000:84:00.0'] == 'CUSTOM_NVIDIA_35'
    assert types['0000:86:00.0'] == ''
    free = {}
    for r in expected:
        key = (r['Host'], r['Resource Class'])
        free[key] = free.get(key, 0) + r['Free']
    assert {(s.labels['host'], s.labels['resource_class']): s.value
            for s in families['openstack_mdev_host_free'].samples} == free
    assert [s.value for s in families[
        'openstack_mdev_scrape_success'].samples] == [1]
    assert 'openstack_mdev_flavor_fits' not in families
    # The requests of provider list's default view.
    if truncated:
        assert _fewer_than_per_device(count)
    else:
        assert count == READS
