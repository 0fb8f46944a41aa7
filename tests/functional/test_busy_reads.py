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

"""Flat reads on a busy cloud: few requests whatever is allocated.

Against the production-shaped Placement (PostgreSQL, gunicorn), a cloud
filled as busy clouds are: compute nodes with every VCPU allocated,
nodes with dedicated CPUs only (PCPU, no VCPU inventory), nodes whose
memory is full, whose memory and disk are full, whose GPUs are full, and
nodes where nothing of the compute node is free though a GPU has room
(in VGPU and in a custom class). The default ``provider list``,
``metrics`` and ``capacity`` (a bare request and a flavor) must take at
most 10 Placement requests there, counted at the server, and give what
plain per-provider reads give (tests.fixtures.per_device). A node where
nothing at all is free is in no allocation candidate answer: its devices
are read one by one, and ``--debug`` names it. On a Placement that cuts
answers short (``[placement] max_allocation_candidates``) the data is
still right.
"""

import contextlib
import pathlib
import typing
import uuid as uuidlib

from prometheus_client import parser
import pytest

from tests.fixtures import cli
from tests.fixtures import nova_standin
from tests.fixtures import per_device
from tests.fixtures import pg_placement as pg
from tests.fixtures import placement_data

ROOT_TRAITS = placement_data.ROOT_TRAITS
BUDGET = 10
DEFAULT = ('UUID', 'Host', 'Device', 'Resource Class', 'Capacity', 'Used',
           'Free', 'Traits')
A40 = 'CUSTOM_NVIDIA_A40'
PCI_CLASS = 'CUSTOM_PCI_10DE_2236'
# The flavor of capacity --flavor and its request, as the test reckons it.
FLAVOR = nova_standin.flavor('vgpu.small', vcpus=2, ram=2048,
                             extra_specs={'resources:VGPU': '1'})
FLAVOR_ROOT = {'VCPU': 2, 'MEMORY_MB': 2048}
FLAVOR_DEVICE = {'VGPU': 1}
# Every shape a flavor's request takes: (flavor, root resources as the
# test reckons them, the device resources or None for two VGPUs from two
# devices).
SHAPES = {
    'root disk': (nova_standin.flavor(
        'shape.disk', vcpus=2, ram=2048, disk=20,
        extra_specs={'resources:VGPU': '1'}),
        {'VCPU': 2, 'MEMORY_MB': 2048, 'DISK_GB': 20}, {'VGPU': 1}),
    'ephemeral and swap': (dict(nova_standin.flavor(
        'shape.ephemeral', vcpus=4, ram=4096, disk=10,
        extra_specs={'resources:VGPU': '1'}),
        **{'OS-FLV-EXT-DATA:ephemeral': 5, 'swap': 1536}),
        {'VCPU': 4, 'MEMORY_MB': 4096, 'DISK_GB': 17}, {'VGPU': 1}),
    'PCI alias': (nova_standin.flavor(
        'shape.pci', vcpus=2, ram=2048, disk=20,
        extra_specs={'pci_passthrough:alias': 'a2:1'}),
        {'VCPU': 2, 'MEMORY_MB': 2048, 'DISK_GB': 20}, {PCI_CLASS: 1}),
    'numbered groups': (nova_standin.flavor(
        'shape.groups', vcpus=2, ram=2048, disk=20, extra_specs={
            'resources1:VGPU': '1', 'resources2:VGPU': '1',
            'group_policy': 'isolate'}),
        {'VCPU': 2, 'MEMORY_MB': 2048, 'DISK_GB': 20}, None),
}
CONTROLLER = '''[filter_scheduler]
pci_in_placement = True

[pci]
alias = {"name": "a2", "vendor_id": "10de", "product_id": "2236",
  "device_type": "type-PCI"}
'''
# metrics with 20 flavors: (flavor, root resources, device resources).
MANY = [(nova_standin.flavor(
    'many.%02d' % i, vcpus=1 + i % 5, ram=512 * (1 + i % 7),
    disk=i % 3 * 10, extra_specs={
        'resources:%s' % ('VGPU' if i % 4 else A40): str(1 + i % 2)}),
    {'VCPU': 1 + i % 5, 'MEMORY_MB': 512 * (1 + i % 7),
     **({'DISK_GB': i % 3 * 10} if i % 3 else {})},
    {('VGPU' if i % 4 else A40): 1 + i % 2}) for i in range(20)]


class Busy:
    """Writes a busy cloud as Nova and its servers would leave it."""

    def __init__(self, placement: placement_data.Placement) -> None:
        self.p = placement
        self.roots = {}

    def node(self, host: str, vcpu: int = 32, pcpu: int = 0,
             memory: int = 65536, disk: int = 1000) -> str:
        inventory = {'MEMORY_MB': {'total': memory, 'reserved': 512},
                     'DISK_GB': {'total': disk}}
        if vcpu:
            inventory['VCPU'] = {'total': vcpu}
        if pcpu:
            inventory['PCPU'] = {'total': pcpu}
        root = self.roots[host] = self.p.create_provider(host)
        self.p.set_inventory(root, inventory)
        self.p.set_traits(root, ROOT_TRAITS)
        return root

    def gpu(self, host: str, bus: int, rc: str = 'VGPU', total: int = 4,
            traits=(), used: int = 0, reserved: int = 0,
            ratio: float = 1.0) -> str:
        name = '%s_pci_0000_%02x_00_0' % (host, bus)
        gpu = self.p.create_provider(name, parent=self.roots[host])
        self.p.set_inventory(gpu, {rc: {
            'total': total, 'max_unit': total, 'reserved': reserved,
            'allocation_ratio': ratio}})
        self.p.set_traits(gpu, ['OWNER_NOVA', *traits])
        root = self.roots[host]
        cpu = 'VCPU' if 'VCPU' in self._inventory(root) else 'PCPU'
        for _ in range(used):
            self.p.allocate(str(uuidlib.uuid4()), {
                root: {cpu: 2, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                gpu: {rc: 1}})
        return gpu

    def pci(self, host: str, address: str, total: int = 2, used: int = 0
            ) -> str:
        gpu = self.p.create_provider('%s_%s' % (host, address.upper()),
                                     parent=self.roots[host])
        self.p.set_inventory(gpu, {PCI_CLASS: {'total': total,
                                               'max_unit': total}})
        self.p.set_traits(gpu, ['OWNER_NOVA', 'COMPUTE_MANAGED_PCI_DEVICE'])
        for _ in range(used):
            self.p.allocate(str(uuidlib.uuid4()), {gpu: {PCI_CLASS: 1}})
        return gpu

    def _inventory(self, rp: str) -> dict:
        return self.p.request('GET', '/resource_providers/%s/inventories'
                              % rp)['inventories']

    def _usages(self, rp: str) -> dict:
        return self.p.request('GET', '/resource_providers/%s/usages'
                              % rp)['usages']

    def exhaust(self, host: str, *classes: str) -> None:
        """Allocate what is left of ``classes`` on the node (a consumer of
        its own, as other servers would).
        """
        root = self.roots[host]
        inventory, used = self._inventory(root), self._usages(root)
        take = {}
        for rc in classes:
            inv = inventory[rc]
            left = int((inv['total'] - inv['reserved'])
                       * inv['allocation_ratio']) - used.get(rc, 0)
            if left > 0:
                take[rc] = left
        self.p.allocate(str(uuidlib.uuid4()), {root: take})


def fill(p: placement_data.Placement) -> Busy:
    """The busy cloud (14 nodes, 28 devices); returns its Busy."""
    b = Busy(p)
    # Nodes with room: a PCI-in-Placement GPU too, and an over-committed
    # and a reserved device.
    b.node('idle-1.dc1')
    b.gpu('idle-1.dc1', 0x3b, used=1, traits=['CUSTOM_NVIDIA_35'])
    b.gpu('idle-1.dc1', 0x5e, ratio=1.5, used=5)
    b.node('idle-2')
    b.gpu('idle-2', 0x3b, reserved=1)
    b.gpu('idle-2', 0x5e, used=2)
    b.pci('idle-2', '0000:81:00.0', used=1)
    # Every VCPU allocated; memory free.
    for n in range(1, 6):
        host = 'vcpu-full-%d' % n
        b.node(host, vcpu=16)
        rc, total = (A40, 2) if n == 3 else ('VGPU', 4)
        b.gpu(host, 0x3b, rc, total, used=n % 3,
              traits=['CUSTOM_NVIDIA_%d' % (35 + n % 2)])
        b.gpu(host, 0x5e, rc, total, used=1)
        if n == 1:
            # Used beyond its capacity (the inventory shrank under it).
            gpu = b.gpu(host, 0x86, used=3)
            p.set_inventory(gpu, {'VGPU': {'total': 4, 'reserved': 2,
                                           'max_unit': 4}})
        b.exhaust(host, 'VCPU')
    # Every VCPU and every GPU allocated.
    b.node('gpu-full', vcpu=16)
    b.gpu('gpu-full', 0x3b, total=2, used=2)
    b.gpu('gpu-full', 0x5e, total=2, used=2)
    b.exhaust('gpu-full', 'VCPU')
    # Dedicated CPUs only (no VCPU inventory): one with room, one whose
    # memory is full.
    b.node('pcpu-1', vcpu=0, pcpu=32)
    b.gpu('pcpu-1', 0x3b, used=1)
    b.gpu('pcpu-1', 0x5e)
    b.node('pcpu-mem-full', vcpu=0, pcpu=32)
    b.gpu('pcpu-mem-full', 0x3b, used=2)
    b.gpu('pcpu-mem-full', 0x5e)
    b.exhaust('pcpu-mem-full', 'MEMORY_MB')
    # Memory full (VCPU free); memory and disk full (VCPU free).
    b.node('mem-full')
    b.gpu('mem-full', 0x3b, used=1)
    b.gpu('mem-full', 0x5e)
    b.exhaust('mem-full', 'MEMORY_MB')
    b.node('mem-disk-full')
    b.gpu('mem-disk-full', 0x3b, used=3)
    b.gpu('mem-disk-full', 0x5e)
    b.exhaust('mem-disk-full', 'MEMORY_MB', 'DISK_GB')
    # Nothing of the node free, a GPU with room: in VGPU, in A40.
    b.node('root-full_vgpu', vcpu=8)
    b.gpu('root-full_vgpu', 0x3b, used=2)
    b.gpu('root-full_vgpu', 0x5e, total=2, used=2)
    b.exhaust('root-full_vgpu', 'VCPU', 'MEMORY_MB', 'DISK_GB')
    b.node('root-full-a40', vcpu=8)
    b.gpu('root-full-a40', 0x3b, A40, 2, used=1)
    b.gpu('root-full-a40', 0x5e, A40, 2, used=2)
    b.exhaust('root-full-a40', 'VCPU', 'MEMORY_MB', 'DISK_GB')
    return b


def _counted(server: pg.PgPlacement, func) -> tuple:
    before = server.requests()
    result = func()
    return result, server.requests() - before


@pytest.fixture(scope='module')
def busy(pg_placement: pg.PgPlacement) -> pg.PgPlacement:
    fill(placement_data.Placement(pg_placement.url))
    return pg_placement


@pytest.fixture(scope='module')
def truncating() -> typing.Iterator[pg.PgPlacement]:
    """The same cloud on a Placement that cuts every answer at 2
    allocation candidates.
    """
    with pg.running(options={
            'placement': {'max_allocation_candidates': 2}}) as server:
        fill(placement_data.Placement(server.url))
        yield server


@pytest.fixture(scope='module')
def nova() -> typing.Iterator[nova_standin.NovaStandin]:
    standin = nova_standin.NovaStandin(flavors=[FLAVOR] + [
        f for f, _, _ in SHAPES.values()] + [f for f, _, _ in MANY],
        services=[])
    yield standin
    standin.stop()


@contextlib.contextmanager
def _cloud(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path,
           server: pg.PgPlacement, nova: nova_standin.NovaStandin
           ) -> typing.Iterator[None]:
    clouds = tmp_path / 'clouds.yaml'
    clouds.write_text(nova_standin.clouds_yaml(server.url, nova.url))
    with monkeypatch.context() as m:
        m.setenv('OS_CLIENT_CONFIG_FILE', str(clouds))
        m.setenv('OS_CLOUD', 'standin')
        yield


def mdev(url: str, *args: str) -> cli.Result:
    return cli.openstack(*cli.admin_token_args(url), 'mdev', *args)


def listed(url: str, *args: str) -> list:
    return mdev(url, 'provider', 'list', '-f', 'json', *args).json()


def test_the_cloud_is_busy(busy) -> None:
    """Most trees are in no VCPU-anchored answer: the case to solve."""
    answer = placement_data.Placement(busy.url).request(
        'GET', '/allocation_candidates?resources=VCPU:1', version='1.31')
    reached = {s['root_provider_uuid']
               for s in answer['provider_summaries'].values()}
    roots = {p.uuid for p in per_device.read(busy.url) if p.is_root}
    assert len(roots) == 14 and len(reached) == 4


def test_provider_list_equals_per_device_reads(busy) -> None:
    expected = per_device.rows(busy.url)
    assert len(expected) == 29
    rows, count = _counted(busy, lambda: listed(busy.url))
    assert rows == [{k: r[k] for k in DEFAULT} for r in expected]
    assert count <= BUDGET
    rows, count = _counted(busy, lambda: listed(busy.url, '--long'))
    assert rows == expected
    # The inventory fields: one inventories read per device.
    assert count <= BUDGET + len(expected)


def test_pci_devices_too(busy) -> None:
    rows, count = _counted(busy, lambda: listed(busy.url, '--kind', 'all'))
    pci = [r for r in rows if r['Resource Class'] == PCI_CLASS]
    assert [(r['Host'], r['Device'], r['Capacity'], r['Used']) for r in
            pci] == [('idle-2', '0000:81:00.0', 2, 1)]
    assert len(rows) == 30 and count <= BUDGET


def _samples(families: dict, name: str) -> dict:
    return {(s.labels['host'], s.labels['device'],
             s.labels['resource_class']): s.value
            for s in families[name].samples}


def _metrics(url: str) -> dict:
    result = mdev(url, 'metrics')
    assert result.rc == 0, result.stderr
    return {f.name: f for f in parser.text_string_to_metric_families(
        result.stdout)}


def _assert_metrics_equal(families: dict, expected: list) -> None:
    for metric, field in (('openstack_mdev_device_capacity', 'Capacity'),
                          ('openstack_mdev_device_used', 'Used'),
                          ('openstack_mdev_device_free', 'Free')):
        assert _samples(families, metric) == {
            (r['Host'], r['Device'], r['Resource Class']): r[field]
            for r in expected}, metric
    assert [s.value for s in families[
        'openstack_mdev_scrape_success'].samples] == [1]


def test_metrics_equal_per_device_reads(busy) -> None:
    # metrics covers every GPU by default: the PCI devices too.
    expected = per_device.rows(busy.url, pci=True)
    families, count = _counted(busy, lambda: _metrics(busy.url))
    _assert_metrics_equal(families, expected)
    assert count <= BUDGET


def _fits(rows: list) -> dict:
    rows = [r for r in rows if r['Host'] != 'Total']
    return {r['Host']: r['Fits'] for r in rows}


def _reference_fits(providers: list, root_resources: dict,
                    device_resources: dict, hosts) -> dict:
    return {h: per_device.fits(providers, h, root_resources,
                               device_resources) for h in hosts}


def test_capacity_of_a_bare_request(busy) -> None:
    providers = per_device.read(busy.url)
    rows, count = _counted(busy, lambda: mdev(
        busy.url, 'capacity', '--resource-class', 'VGPU', '-f',
        'json').json())
    fits = _fits(rows)
    assert fits == _reference_fits(providers, {}, {'VGPU': 1}, fits)
    with_room = {p.root for p in providers if p.is_mdev and p.free('VGPU')}
    assert with_room <= set(fits)
    assert fits['root-full_vgpu'] == 2 and fits['gpu-full'] == 0
    # The listing, ?resources=VGPU:1, and the anchors.
    assert count <= BUDGET


def test_capacity_of_a_flavor(busy, nova, monkeypatch, tmp_path) -> None:
    providers = per_device.read(busy.url)
    with _cloud(monkeypatch, tmp_path, busy, nova):
        rows, count = _counted(busy, lambda: cli.openstack(
            'mdev', 'capacity', '--flavor', FLAVOR['name'], '-f',
            'json').json())
    fits = _fits(rows)
    hosts = {p.root for p in providers if p.is_root}
    assert set(fits) == hosts
    assert fits == _reference_fits(providers, FLAVOR_ROOT, FLAVOR_DEVICE,
                                   hosts)
    assert fits['idle-1.dc1'] > 0 and fits['mem-full'] == 0
    # Placement's side: the listing, one ?resources= listing per amount
    # (VCPU:2, MEMORY_MB:2048, VGPU:1) and the anchors.
    assert count <= BUDGET


def _two_devices(providers: list, host: str, root: dict) -> int:
    """Servers asking ``root`` of the node and one VGPU of each of two
    devices (``group_policy=isolate``), from the per-device reads.
    """
    most = per_device.fits(providers, host, root, {})
    free = [p.free('VGPU') for p in providers
            if p.root == host and p.is_mdev and 'VGPU' in p.inventories]
    servers = 0
    while servers < most and sum(min(f, servers + 1) for f in free) \
            >= 2 * (servers + 1):
        servers += 1
    return servers


@pytest.mark.parametrize('shape', sorted(SHAPES))
def test_capacity_of_each_flavor_shape(busy, nova, monkeypatch, tmp_path,
                                       shape) -> None:
    """Whatever the flavor asks, the same flat reads: at most 10
    Placement requests, and the servers the per-device reads give.
    """
    flavor, root, device = SHAPES[shape]
    conf = tmp_path / 'nova.conf'
    conf.write_text(CONTROLLER)
    providers = per_device.read(busy.url)
    with _cloud(monkeypatch, tmp_path, busy, nova):
        result, count = _counted(busy, lambda: cli.openstack(
            'mdev', 'capacity', '--flavor', flavor['name'],
            '--controller-conf', str(conf), '-f', 'json'))
    assert result.rc == 0, result.stderr
    fits = _fits(result.json())
    hosts = {p.root for p in providers if p.is_root}
    assert set(fits) == hosts
    if device is None:
        expected = {h: _two_devices(providers, h, root) for h in hosts}
    else:
        expected = _reference_fits(providers, root, device, hosts)
    assert fits == expected
    assert sum(fits.values()) > 0
    assert count <= BUDGET


def test_metrics_of_twenty_flavors(busy, nova, monkeypatch,
                                   tmp_path) -> None:
    """Twenty flavors share the reads of the devices: at most 10
    Placement requests, each flavor's count as the per-device reads give
    it.
    """
    providers = per_device.read(busy.url)
    hosts = {p.root for p in providers if p.is_root}
    args = [a for f, _, _ in MANY for a in ('--flavor', f['name'])]
    with _cloud(monkeypatch, tmp_path, busy, nova):
        result, count = _counted(busy, lambda: cli.openstack(
            'mdev', 'metrics', *args))
    assert result.rc == 0, result.stderr
    families = {f.name: f for f in parser.text_string_to_metric_families(
        result.stdout)}
    fits = {s.labels['flavor']: s.value
            for s in families['openstack_mdev_flavor_fits'].samples}
    assert fits == {f['name']: sum(_reference_fits(
        providers, root, device, hosts).values()) for f, root, device in MANY}
    assert any(fits.values())
    _assert_metrics_equal(families, per_device.rows(busy.url, pci=True))
    assert count <= BUDGET


def test_debug_names_no_tree_when_every_tree_is_reached(busy) -> None:
    result = mdev(busy.url, '--debug', 'provider', 'list')
    assert result.rc == 0, result.stderr
    assert 'read provider by provider' not in result.stderr


@pytest.fixture
def all_full(busy: pg.PgPlacement) -> typing.Iterator[Busy]:
    """A node where nothing at all is free, removed after the test."""
    p = placement_data.Placement(busy.url)
    b = Busy(p)
    b.node('all-full', vcpu=8)
    gpus = [b.gpu('all-full', 0x3b, total=2, used=2),
            b.gpu('all-full', 0x5e, A40, 1, used=1)]
    b.exhaust('all-full', 'VCPU', 'MEMORY_MB', 'DISK_GB')
    yield b
    root = b.roots['all-full']
    for rp in gpus + [root]:
        for consumer in p.request('GET', '/resource_providers/%s/allocations'
                                  % rp)['allocations']:
            p.request('DELETE', '/allocations/%s' % consumer, ok=(204, 404))
    for rp in gpus + [root]:
        p.request('DELETE', '/resource_providers/%s' % rp)


def test_a_node_with_nothing_free_is_read_per_device(busy, all_full) -> None:
    expected = per_device.rows(busy.url)
    rows, count = _counted(busy, lambda: listed(busy.url))
    assert rows == [{k: r[k] for k in DEFAULT} for r in expected]
    assert [(r['Device'], r['Used'], r['Free']) for r in rows
            if r['Host'] == 'all-full'] == [
        ('0000:3b:00.0', 2, 0), ('0000:5e:00.0', 1, 0)]
    # Its two devices, one by one: inventories, usages, traits.
    assert count <= BUDGET + 2 * 3
    result = mdev(busy.url, '--debug', 'provider', 'list')
    assert result.rc == 0, result.stderr
    line = [x for x in result.stderr.splitlines()
            if 'read provider by provider' in x]
    assert len(line) == 1 and 'all-full' in line[0], result.stderr[-3000:]
    assert '1 of 15 trees' in line[0]


def test_truncated_answers_still_give_the_same_data(truncating) -> None:
    answer = placement_data.Placement(truncating.url).request(
        'GET', '/allocation_candidates?resources=MEMORY_MB:1',
        version='1.31')
    assert len(answer['allocation_requests']) == 2
    providers = per_device.read(truncating.url)
    expected = per_device.mdev_rows(providers)
    assert listed(truncating.url) == [
        {k: r[k] for k in DEFAULT} for r in expected]
    assert listed(truncating.url, '--long') == expected
    _assert_metrics_equal(_metrics(truncating.url),
                          per_device.mdev_rows(providers, pci=True))
    rows = mdev(truncating.url, 'capacity', '--resource-class', 'VGPU',
                '-f', 'json').json()
    fits = _fits(rows)
    assert fits == _reference_fits(providers, {}, {'VGPU': 1}, fits)


# Flavors whose counts the unit rules decide: more VCPUs than a node's
# max_unit though its over-committed capacity has room, memory off a
# node's step_size, and a small one that fits where the large do not.
UNITS = [
    (nova_standin.flavor('units.large', vcpus=12, ram=2048,
                         extra_specs={'resources:VGPU': '1'}),
     {'VCPU': 12, 'MEMORY_MB': 2048}, {'VGPU': 1}),
    (nova_standin.flavor('units.odd', vcpus=2, ram=1536,
                         extra_specs={'resources:VGPU': '1'}),
     {'VCPU': 2, 'MEMORY_MB': 1536}, {'VGPU': 1}),
    (nova_standin.flavor('units.small', vcpus=1, ram=1024,
                         extra_specs={'resources:VGPU': '1'}),
     {'VCPU': 1, 'MEMORY_MB': 1024}, {'VGPU': 1}),
]


@pytest.fixture(scope='module')
def units_cloud() -> typing.Iterator[pg.PgPlacement]:
    """Nodes whose inventories' units refuse some amounts, and a node
    with room for the smaller flavors only.
    """
    with pg.running() as server:
        b = Busy(placement_data.Placement(server.url))
        b.node('plain', vcpu=32)
        b.gpu('plain', 0x3b)
        b.node('overcommitted', vcpu=8)
        b.p.set_inventory(b.roots['overcommitted'], {
            'VCPU': {'total': 8, 'max_unit': 8, 'allocation_ratio': 4.0},
            'MEMORY_MB': {'total': 65536}, 'DISK_GB': {'total': 1000}})
        b.gpu('overcommitted', 0x3b)
        b.node('stepped', vcpu=32)
        b.p.set_inventory(b.roots['stepped'], {
            'VCPU': {'total': 32}, 'DISK_GB': {'total': 1000},
            'MEMORY_MB': {'total': 65536, 'step_size': 1024}})
        b.gpu('stepped', 0x3b)
        b.node('nearly-full', vcpu=16)
        b.gpu('nearly-full', 0x3b)
        b.p.allocate(str(uuidlib.uuid4()), {b.roots['nearly-full']: {
            'VCPU': 14}})
        yield server


def test_units_decide_the_counts_in_few_requests(
        units_cloud, monkeypatch, tmp_path) -> None:
    providers = per_device.read(units_cloud.url)
    hosts = {p.root for p in providers if p.is_root}
    expected = {f['name']: _reference_fits(providers, root, device, hosts)
                for f, root, device in UNITS}
    assert expected['units.large']['overcommitted'] == 0
    assert expected['units.odd']['stepped'] == 0
    assert expected['units.small']['nearly-full'] == 2
    standin = nova_standin.NovaStandin(
        flavors=[f for f, _, _ in UNITS], services=[])
    try:
        with _cloud(monkeypatch, tmp_path, units_cloud, standin):
            for flavor, _, _ in UNITS:
                result, count = _counted(units_cloud, lambda: cli.openstack(
                    'mdev', 'capacity', '--flavor', flavor['name'], '-f',
                    'json'))
                assert result.rc == 0, result.stderr
                assert _fits(result.json()) == expected[flavor['name']]
                assert count <= BUDGET
            args = [a for f, _, _ in UNITS for a in ('--flavor', f['name'])]
            result, count = _counted(units_cloud, lambda: cli.openstack(
                'mdev', 'metrics', *args))
    finally:
        standin.stop()
    assert result.rc == 0, result.stderr
    families = {f.name: f for f in parser.text_string_to_metric_families(
        result.stdout)}
    assert {s.labels['flavor']: s.value for s in families[
        'openstack_mdev_flavor_fits'].samples} == {
        name: sum(fits.values()) for name, fits in expected.items()}
    assert count <= BUDGET
