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

"""Benchmark every osc-mdev command at 250 to 5,000 GPUs, idle and busy.

Starts openstack-placement on PostgreSQL behind gunicorn (2 workers x 4
threads, tests/fixtures/pg_placement.py), fills it concurrently with a
cloud in Nova's layout, and grows it through each size (default 250,
1,000 and 5,000 GPU child providers, 4 per compute node). One compute
node in ten has dedicated CPUs only (PCPU, no VCPU); some devices are
used beyond their capacity (their inventory shrank under their servers).
At each size every command is measured twice on the same cloud:

* **idle**: every compute node has free VCPUs (or PCPUs), memory and
  disk;
* **busy**: the same with other servers taking every free VCPU (or PCPU)
  of three nodes in four, all the memory of one node in ten, and every
  VCPU, all memory and all disk of one node in fifty (only a GPU has room
  there). Those servers are removed before the cloud grows.

Measured, each run a real ``openstack`` process against Placement and a
stand-in Nova (tests/fixtures/nova_standin.py: servers with their node
and embedded flavor, flavors, services, hypervisors, migrations; its
requests are counted apart): every command ``openstack mdev --help``
lists. Beside them, the reads an operator scripts today: the
osc-placement command loop (``resource provider list``, then per GPU
``resource provider inventory list``, ``usage show`` and ``trait list``,
each a separate process, timed on a sample of GPUs and extrapolated) and
the same requests one after another in one Python process.

Each command's "same data" is checked against a reference that shares no
code with osc-mdev (tools/bench_checks.py): the per-device reads, the
compute nodes' own reads, what the bench wrote (which GPU each server
got, the flavors Nova holds) or the file it wrote for ``config check``.

Reported: median wall time over --runs runs, requests Placement served
(counted at the server), requests per GPU, speed-up, whether the data is
the same. Also the plugin's import time and ``--help`` time.

Usage: python tools/bench.py [--sizes 250,1000,5000] [--runs 3]
       [--sample 3] [--only capacity|fleet] [--hold]
       [--max-allocation-candidates N] [--output doc/bench-results.md]
       [--fleet-sizes 50,200,500] [--fleet-sample 5] [--forks 10]
       [--fleet-output doc/bench-fleet-results.md]

``--only capacity`` measures ``mdev capacity`` alone and rewrites only
its section of the output file. Then the check of a fleet of 50, 200 and
500 GPU nodes through the Ansible collection, beside the node-by-node
check (tools/bench_fleet.py, written to doc/bench-fleet-results.md);
``--only fleet`` measures it alone. ``--hold`` keeps the filled cloud up
after the last size (its clouds.yaml is printed) until interrupted, to
profile a command against it.
"""

import argparse
import collections
from concurrent import futures
import dataclasses
import json
import os
import pathlib
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid as uuidlib

import requests

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import bench_checks as checks  # noqa: E402
import bench_fleet  # noqa: E402
from tests.fixtures import nova_standin  # noqa: E402
from tests.fixtures import pg_placement  # noqa: E402

GPUS_PER_HOST = 4
BUSES = (0x3b, 0x5e, 0x86, 0xaf)
ROOT_TRAITS = ['OWNER_NOVA', 'COMPUTE_NODE', 'HW_CPU_X86_AVX2',
               'HW_CPU_X86_AVX512F', 'HW_CPU_X86_SSE42']
VERSION = 'placement 1.38'
CAPACITY_TRAIT = 'CUSTOM_NVIDIA_35'
CAPACITY_HEADING = '## `openstack mdev capacity`'
IDLE, BUSY = 'idle', 'busy'
QEMU_VERSION = 8002000      # QEMU 8.2.0, as os-hypervisors shows it
# What a GPU server holds on its compute node.
SERVER_ROOT = {'MEMORY_MB': 8192}
SERVER_CPUS = 4


def _flavor(name: str, extra_specs: dict, vcpus: int = SERVER_CPUS,
            ram: int = SERVER_ROOT['MEMORY_MB']) -> dict:
    return nova_standin.flavor(name, vcpus=vcpus, ram=ram, disk=0,
                               extra_specs=extra_specs,
                               flavor_id=str(uuidlib.uuid5(
                                   uuidlib.NAMESPACE_DNS, name)))


# The stand-in Nova's flavors: a server on a GPU of a type trait runs the
# flavor of that type (which requires the trait), on a GPU without one
# vgpu.bench; hosts of the custom class run vgpu.a40, dedicated-CPU hosts
# vgpu.dedicated; other tenants' servers cpu.filler; 'flavor configure'
# writes vgpu.configure.
FLAVOR = _flavor('vgpu.bench', {'resources:VGPU': '1'})
TYPED = {trait: _flavor('vgpu.nvidia-%s' % trait[-2:], {
    'resources:VGPU': '1', 'trait:%s' % trait: 'required'})
    for trait in ('CUSTOM_NVIDIA_35', 'CUSTOM_NVIDIA_36')}
TYPED_NAMES = {f['name'] for f in TYPED.values()}
FLAVOR_A40 = _flavor('vgpu.a40', {'resources:CUSTOM_NVIDIA_A40': '1'})
FLAVOR_DEDICATED = _flavor('vgpu.dedicated', {
    'resources:VGPU': '1', 'hw:cpu_policy': 'dedicated'})
FLAVOR_FILLER = _flavor('cpu.filler', {}, vcpus=1, ram=512)
# capacity --flavor of every shape a flavor's request takes.
FLAVOR_DISK = dict(FLAVOR, name='vgpu.disk', id='vgpu.disk', disk=20)
FLAVOR_EPHEMERAL = dict(FLAVOR, name='vgpu.ephemeral', id='vgpu.ephemeral',
                        disk=10, swap=1536,
                        **{'OS-FLV-EXT-DATA:ephemeral': 5})
FLAVOR_PCI = dict(_flavor('pci.alias', {'pci_passthrough:alias': 'a2:1'}),
                  id='pci.alias', disk=20)
FLAVOR_GROUPS = dict(_flavor('vgpu.groups', {
    'resources1:VGPU': '1', 'resources2:VGPU': '1',
    'group_policy': 'isolate'}), id='vgpu.groups', disk=20)
SHAPES = (FLAVOR_DISK, FLAVOR_EPHEMERAL, FLAVOR_PCI, FLAVOR_GROUPS)
# The PCI alias of FLAVOR_PCI, as the controller's nova.conf gives it.
CONTROLLER_CONF = '''[filter_scheduler]
pci_in_placement = True

[pci]
alias = {"name": "a2", "vendor_id": "10de", "product_id": "2236",
  "device_type": "type-PCI"}
'''
# metrics with 20 flavors: VGPU or A40, one or two of them, 1 to 8
# VCPUs, 1 to 16 GiB, with and without a root disk.
MANY = tuple(_flavor('many.%02d' % i, {
    'resources:%s' % ('CUSTOM_NVIDIA_A40' if i % 5 == 4 else 'VGPU'):
    str(1 + i % 2)}, vcpus=1 + i % 8, ram=1024 * (1 + i % 16))
    for i in range(20))
MANY = tuple(dict(f, disk=10 * (i % 3)) for i, f in enumerate(MANY))
FLAVOR_CONFIGURE = _flavor('vgpu.configure', {})
CONFIGURED = {'resources:VGPU': '1',
              'trait:%s' % CAPACITY_TRAIT: 'required'}


# -- the cloud ------------------------------------------------------------

def host_name(h: int) -> str:
    return 'gpu%05d.dc%d.example.net' % (h, h % 3)


def service_host(h: int) -> str:
    """The nova-compute service host: the node's first label."""
    return 'gpu%05d' % h


def dedicated(h: int) -> bool:
    """Nodes with dedicated CPUs only (PCPU, no VCPU inventory)."""
    return h % 10 == 7


def cpu_class(h: int) -> str:
    return 'PCPU' if dedicated(h) else 'VCPU'


def gpu_layout(h: int, g: int) -> tuple:
    """What Nova would report for GPU g of host h, its usage, and the
    reserved count that leaves it used beyond its capacity (or None).
    """
    n = h * GPUS_PER_HOST + g
    custom = h % 5 == 4
    rc = 'CUSTOM_NVIDIA_A40' if custom else 'VGPU'
    total = 8 if custom else 16
    inventory = {'total': total, 'max_unit': total, 'min_unit': 1,
                 'step_size': 1, 'reserved': 0, 'allocation_ratio': 1.0}
    if n % 50 == 7:
        inventory['reserved'] = 1
    if n % 70 == 3:
        inventory['allocation_ratio'] = 1.5
    capacity = int((total - inventory['reserved'])
                   * inventory['allocation_ratio'])
    traits = ['OWNER_NOVA']
    if n % 10 != 9:
        traits.append('CUSTOM_NVIDIA_%d' % (35 + g % 2))
    if h % 20 == 13:
        used = capacity                     # the whole host is full
    else:
        used = [0, 1, capacity // 2, capacity, 2, capacity - 1][n % 6]
    shrunk = None
    if n % 40 == 11 and used >= 2 and inventory['allocation_ratio'] == 1.0:
        # The inventory shrank under its servers: used beyond capacity.
        shrunk = total - used + 1
    return rc, inventory, traits, used, shrunk


def busy_classes(h: int) -> list[str]:
    """The compute node classes other tenants' servers take whole on a
    busy cloud.
    """
    taken = []
    if h % 4:
        taken.append(cpu_class(h))
    if h % 10 == 3 or h % 50 == 21:
        taken.append('MEMORY_MB')
    if h % 50 == 21:
        taken = [cpu_class(h), 'MEMORY_MB', 'DISK_GB']
    return list(dict.fromkeys(taken))


@dataclasses.dataclass
class Server:
    """A server the bench created: its node, its GPU, what it holds."""

    host: int
    gpu: str | None         # the provider UUID of its GPU
    resource_class: str | None
    root: dict              # {class: amount} on the compute node
    flavor: dict


class Filler:
    """Writes hosts into Placement from a bounded pool of threads and
    remembers every server it allocated.
    """

    def __init__(self, url: str, workers: int) -> None:
        self.url = url
        self.workers = workers
        self.local = threading.local()
        self.servers = {}                   # consumer -> Server
        self.hosts = 0
        self.lock = threading.Lock()

    def _session(self) -> requests.Session:
        if not hasattr(self.local, 'session'):
            session = requests.Session()
            session.headers.update({'X-Auth-Token': 'admin',
                                    'OpenStack-API-Version': VERSION})
            self.local.session = session
        return self.local.session

    def call(self, method: str, path: str, body: dict | None = None
             ) -> dict | None:
        resp = self._session().request(method, self.url + path, json=body)
        if resp.status_code >= 400:
            raise RuntimeError('%s %s: %s %s' % (method, path,
                                                 resp.status_code, resp.text))
        return resp.json() if resp.content else None

    def provider(self, name: str, inventories: dict, traits=(),
                 parent: str | None = None) -> str:
        body = {'name': name, 'uuid': str(uuidlib.uuid4())}
        if parent:
            body['parent_provider_uuid'] = parent
        rp = self.call('POST', '/resource_providers', body)
        gen = self.call('PUT', '/resource_providers/%s/inventories'
                        % rp['uuid'], {'resource_provider_generation':
                                       rp['generation'],
                                       'inventories': inventories})[
            'resource_provider_generation']
        if traits:
            self.call('PUT', '/resource_providers/%s/traits' % rp['uuid'],
                      {'resource_provider_generation': gen,
                       'traits': sorted(traits)})
        return rp['uuid']

    def prepare(self) -> None:
        for rc in ('CUSTOM_NVIDIA_A40', 'CUSTOM_PCI_10DE_2236'):
            self.call('PUT', '/resource_classes/%s' % rc)
        for trait in ('CUSTOM_NVIDIA_35', 'CUSTOM_NVIDIA_36'):
            self.call('PUT', '/traits/%s' % trait)

    def _consumer(self, allocations: dict) -> dict:
        return {'allocations': {rp: {'resources': res}
                                for rp, res in allocations.items()},
                'project_id': 'bench', 'user_id': 'bench',
                'consumer_generation': None, 'consumer_type': 'INSTANCE'}

    def host(self, h: int) -> None:
        if h % 250 == 0:
            print('  filling host %d' % h, flush=True)
        name = host_name(h)
        cpu = cpu_class(h)
        root = self.provider(name, {
            cpu: {'total': 384, 'allocation_ratio': 1.0} if dedicated(h)
            else {'total': 128, 'allocation_ratio': 4.0},
            'MEMORY_MB': {'total': 1048576, 'reserved': 4096},
            'DISK_GB': {'total': 4000}}, ROOT_TRAITS)
        consumers, servers, shrink = {}, {}, []
        for g in range(GPUS_PER_HOST):
            rc, inventory, traits, used, shrunk = gpu_layout(h, g)
            gpu = self.provider('%s_pci_0000_%02x_00_0' % (name, BUSES[g]),
                                {rc: inventory}, traits, parent=root)
            held = dict(SERVER_ROOT, **{cpu: SERVER_CPUS})
            typed = [TYPED[t] for t in traits if t in TYPED]
            flavor = (FLAVOR_DEDICATED if dedicated(h) else
                      FLAVOR_A40 if rc != 'VGPU' else
                      typed[0] if typed else FLAVOR)
            for _ in range(used):
                consumer = str(uuidlib.uuid4())
                consumers[consumer] = self._consumer(
                    {root: held, gpu: {rc: 1}})
                servers[consumer] = Server(h, gpu, rc, held, flavor)
            if shrunk is not None:
                shrink.append((gpu, rc, dict(inventory, reserved=shrunk)))
        if h % 8 == 5:
            # PCI in Placement and a Neutron agent: not mdev devices.
            self.provider('%s_0000:81:00.0' % name, {
                'CUSTOM_PCI_10DE_2236': {'total': 1}},
                ['COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA'], parent=root)
            self.provider('%s:Open vSwitch agent' % name, {
                'NET_BW_EGR_KILOBIT_PER_SEC': {'total': 10000000}},
                parent=root)
        if consumers:
            self.call('POST', '/allocations', consumers)
        for gpu, rc, inventory in shrink:
            gen = self.call('GET', '/resource_providers/%s' % gpu)[
                'generation']
            self.call('PUT', '/resource_providers/%s/inventories' % gpu, {
                'resource_provider_generation': gen,
                'inventories': {rc: inventory}})
        with self.lock:
            self.servers.update(servers)

    def fill(self, first: int, last: int) -> None:
        with futures.ThreadPoolExecutor(self.workers) as pool:
            list(pool.map(self.host, range(first, last)))
        self.hosts = max(self.hosts, last)

    def _root(self, h: int) -> str:
        found = self.call('GET', '/resource_providers?name=%s'
                          % host_name(h))['resource_providers']
        return found[0]['uuid']

    def _take(self, h: int) -> None:
        """One server of another tenant taking what is left of the
        node's busy classes.
        """
        classes = busy_classes(h)
        if not classes:
            return
        root = self._root(h)
        base = '/resource_providers/%s' % root
        inventories = self.call('GET', base + '/inventories')['inventories']
        usages = self.call('GET', base + '/usages')['usages']
        take = {}
        for rc in classes:
            inv = inventories[rc]
            left = int((inv['total'] - inv['reserved'])
                       * inv['allocation_ratio']) - usages.get(rc, 0)
            if left > 0:
                take[rc] = left
        if not take:
            return
        consumer = str(uuidlib.uuid4())
        self.call('PUT', '/allocations/%s' % consumer, dict(
            self._consumer({root: take}), consumer_generation=None))
        flavor = dict(FLAVOR_FILLER, vcpus=take.get(cpu_class(h), 0),
                      ram=take.get('MEMORY_MB', 0),
                      disk=take.get('DISK_GB', 0))
        with self.lock:
            self.servers[consumer] = Server(h, None, None, take, flavor)

    def make_busy(self) -> None:
        with futures.ThreadPoolExecutor(self.workers) as pool:
            list(pool.map(self._take, range(self.hosts)))

    def make_idle(self) -> None:
        fillers = [c for c, s in self.servers.items() if s.gpu is None]
        with futures.ThreadPoolExecutor(self.workers) as pool:
            list(pool.map(lambda c: self.call('DELETE', '/allocations/%s'
                                              % c), fillers))
        for consumer in fillers:
            del self.servers[consumer]


# -- the stand-in Nova ----------------------------------------------------

def nova_server(consumer: str, server: Server) -> dict:
    """A server as ``GET /servers/detail`` (2.47) shows it to an admin."""
    flavor = server.flavor
    return {
        'id': consumer, 'name': 'vm-%s' % consumer[:8], 'status': 'ACTIVE',
        'tenant_id': 'bench', 'user_id': 'bench',
        'OS-EXT-SRV-ATTR:host': service_host(server.host),
        'OS-EXT-SRV-ATTR:hypervisor_hostname': host_name(server.host),
        'OS-EXT-STS:vm_state': 'active', 'OS-EXT-STS:task_state': None,
        'image': '',
        'flavor': {'vcpus': flavor['vcpus'], 'ram': flavor['ram'],
                   'disk': flavor['disk'], 'ephemeral': 0, 'swap': 0,
                   'original_name': flavor['name'],
                   'extra_specs': dict(flavor['extra_specs'])}}


def update_nova(nova: nova_standin.NovaStandin, filler: Filler) -> None:
    """Give the stand-in Nova the servers, nodes and services filled."""
    nova.servers = [nova_server(c, s) for c, s in sorted(
        filler.servers.items(), key=lambda i: (i[1].host, i[0]))]
    nova.hypervisors = [{
        'id': str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, host_name(h))),
        'hypervisor_hostname': host_name(h), 'hypervisor_type': 'QEMU',
        'hypervisor_version': QEMU_VERSION, 'status': 'enabled',
        'state': 'up', 'host_ip': '192.0.2.%d' % (h % 250 + 1),
        'service': {'id': h + 1, 'host': service_host(h),
                    'disabled_reason': None}}
        for h in range(filler.hosts)]
    nova.services = [{
        'id': h + 1, 'binary': 'nova-compute', 'host': service_host(h),
        'zone': 'nova', 'status': 'enabled', 'state': 'up',
        'disabled_reason': None, 'forced_down': False}
        for h in range(filler.hosts)]


def new_nova() -> nova_standin.NovaStandin:
    return nova_standin.NovaStandin(flavors=[
        FLAVOR, *TYPED.values(), FLAVOR_A40, FLAVOR_DEDICATED,
        FLAVOR_FILLER, FLAVOR_CONFIGURE, *SHAPES, *MANY])


# -- measuring ------------------------------------------------------------

class Runner:
    def __init__(self, placement: pg_placement.PgPlacement,
                 nova: nova_standin.NovaStandin, clouds: pathlib.Path
                 ) -> None:
        self.placement = placement
        self.nova = nova
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith('OS_')}
        self.env['OS_CLIENT_CONFIG_FILE'] = str(clouds)

    def openstack(self, *args: str, check: bool = True) -> tuple:
        cmd = [sys.executable, '-m', 'openstackclient.shell',
               '--os-cloud', 'bench', *args]
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              env=self.env)
        elapsed = time.perf_counter() - start
        if check and proc.returncode:
            raise RuntimeError('%s failed: %s' % (' '.join(args),
                                                  proc.stderr[-2000:]))
        return elapsed, proc.stdout

    def measure(self, runs: int, *args: str, check: bool = True,
                before=None) -> tuple:
        """``Measured`` of ``runs`` runs (``before`` called before each,
        not timed) and the last output.
        """
        times, counts, nova = [], [], []
        for _ in range(runs):
            if before is not None:
                before()
            placement, compute = self.placement.requests(), \
                self.nova.requests
            elapsed, out = self.openstack(*args, check=check)
            counts.append(self.placement.requests() - placement)
            nova.append(self.nova.requests - compute)
            times.append(elapsed)
        return Measured(statistics.median(times), max(counts), max(nova)), \
            out


@dataclasses.dataclass
class Measured:
    seconds: float
    requests: int           # Placement's, the most of any run
    nova: int = 0           # the stand-in Nova's
    same: bool | None = None


def config_file(directory: str, h: int, baseline: dict) -> tuple:
    """A nova.conf for host ``h``: its devices by the type their trait
    names, but the first device with a type trait listed under the other
    type. Returns the path and that device's address.
    """
    types = {'CUSTOM_NVIDIA_35': 'nvidia-35', 'CUSTOM_NVIDIA_36': 'nvidia-36'}
    by_type = {'nvidia-35': [], 'nvidia-36': []}
    swapped = None
    for (uuid, rc), row in sorted(baseline.items(),
                                  key=lambda i: i[1]['Device']):
        if row['Host'] != host_name(h):
            continue
        named = [types[t] for t in row['Traits'] if t in types]
        if not named:
            continue
        mdev_type = named[0]
        if swapped is None:
            swapped = row['Device']
            mdev_type = 'nvidia-36' if mdev_type == 'nvidia-35' \
                else 'nvidia-35'
        by_type[mdev_type].append(row['Device'])
    text = '[devices]\nenabled_mdev_types = nvidia-35, nvidia-36\n'
    for mdev_type, addresses in by_type.items():
        text += '\n[mdev_%s]\ndevice_addresses = %s\n' % (
            mdev_type, ','.join(addresses))
    path = pathlib.Path(directory) / ('%s.conf' % service_host(h))
    path.write_text(text)
    return path, swapped


def config_same(rows: list, swapped: str | None, with_host: bool
                ) -> bool:
    """``config check``: no error (the file is valid as Nova reads it);
    with ``--host``, exactly one finding about a device's type trait, on
    the device the file lists under the other type.
    """
    errors = [r for r in rows if str(r.get('Severity', '')).lower() ==
              'error']
    named = [r for r in rows if 'will be of type' in json.dumps(r)]
    ok = not errors
    if with_host:
        ok = ok and len(named) == 1 and swapped in json.dumps(named[0])
    elif named:
        ok = False
    if not ok:
        checks._say('config check: %s' % rows[:4])
    return ok


def typed_fits(baseline: dict, nodes: dict) -> dict:
    """``{flavor name: {node: servers}}`` of the VGPU flavors (typed or
    not), from the references.
    """
    return {f['name']: checks.flavor_fits(
        baseline, nodes, {'VCPU': f['vcpus'], 'MEMORY_MB': f['ram']},
        {'VGPU': 1}, trait)
        for trait, f in list(TYPED.items()) + [(None, FLAVOR)]}


def migration_same(rows: list, fits: dict, source: str) -> bool:
    """``migration check``: the nodes said yes for a cold move are those
    the references give room for another server of the same flavor (its
    type required), the source aside; live ones among them.
    """
    expected = {h for h, n in fits.items() if n and h != source}
    cold = {r['Host'] for r in rows if r['Cold'] == 'yes'}
    live = {r['Host'] for r in rows if r['Live'] == 'yes'}
    ok = bool(expected) and cold == expected and live <= cold
    if not ok:
        checks._say('migration check: cold yes on %d nodes, expected %d; '
                    'e.g. %s' % (len(cold), len(expected),
                                 sorted(cold ^ expected)[:3]))
    return ok


def plan_same(rows: list, servers: dict, source: str, fits: dict
              ) -> bool:
    """``migration plan``: one row per server with a GPU on the node (as
    the bench placed them); no node gets more servers of a flavor than
    the references give room for.
    """
    mine = {c: s for c, s in servers.items()
            if host_name(s.host) == source and s.gpu}
    planned = collections.Counter()
    for row in rows:
        server = mine.get(row['Server'])
        if server is not None and row['Target Host']:
            planned[(server.flavor['name'], row['Target Host'])] += 1
    ok = {r['Server'] for r in rows} == set(mine) and all(
        n <= fits.get(name, {}).get(target, 0)
        for (name, target), n in planned.items()) and bool(planned)
    if not ok:
        checks._say('migration plan: %d servers (expected %d), %d placed: '
                    '%s' % (len(rows), len(mine), sum(planned.values()),
                            sorted(planned.items())[:3]))
    return ok


def pick_host(filler: Filler, busy: bool) -> int:
    """A VGPU node (not dedicated-CPU, not all full) with servers."""
    with_servers = {s.host for s in filler.servers.values() if s.gpu}
    for h in range(filler.hosts):
        if h % 5 != 4 and not dedicated(h) and h % 20 != 13 and \
                h in with_servers and (not busy or h % 4 == 0):
            return h
    raise RuntimeError('no host to check')


def measure_cloud(runner: Runner, url: str, gpus: int,
                  nova: nova_standin.NovaStandin, filler: Filler,
                  args: argparse.Namespace, cloud: str) -> tuple:
    """Every command on the cloud as it is: ``({key: Measured}, the
    per-device reads)``.
    """
    runs = args.runs
    result = {}
    naive = []
    baseline = None
    for _ in range(args.naive_runs):
        before = runner.placement.requests()
        rows, elapsed = checks.naive_reads(url)
        naive.append(elapsed)
        naive_requests = runner.placement.requests() - before
        baseline = baseline or rows
    assert len(baseline) == gpus, (len(baseline), gpus)
    result['naive'] = Measured(statistics.median(naive), naive_requests)
    nodes = checks.node_reads(url)
    print('  %s: naive reads %.1f s' % (cloud, result['naive'].seconds),
          flush=True)

    result.update(measure_capacity(runner, baseline, runs))
    if args.only == 'capacity':
        return result, baseline

    def run(key: str, *cmd: str, check: bool = True, same=None,
            before=None, times: int = runs) -> str:
        measured, out = runner.measure(times, 'mdev', *cmd, check=check,
                                       before=before)
        measured.same = same(out) if same else None
        result[key] = measured
        return out

    run('list', 'provider', 'list', '-f', 'json', same=lambda out:
        checks.same_rows(json.loads(out), baseline, checks.DEFAULT))
    run('long', 'provider', 'list', '--long', '-f', 'json', same=lambda out:
        checks.same_rows(json.loads(out), baseline, checks.LONG))
    for flag in ('--free', '--full'):
        keep = {k: v for k, v in baseline.items()
                if (v['Free'] > 0) == (flag == '--free')}
        run(flag, 'provider', 'list', flag, '-f', 'json',
            same=lambda out, keep=keep: checks.same_rows(
                json.loads(out), keep, checks.DEFAULT))
    one = sorted(baseline)[0][0]
    run('show', 'provider', 'show', one, '-f', 'json', same=lambda out: all(
        json.loads(out)[f] == baseline[(one, json.loads(out)[
            'Resource Class'])][f] for f in checks.LONG))

    fits = checks.flavor_fits(baseline, nodes, {
        'VCPU': FLAVOR['vcpus'], 'MEMORY_MB': FLAVOR['ram']}, {'VGPU': 1})
    total = sum(fits.values())
    # metrics shows the PCI-in-Placement devices too (--kind all).
    pci = checks.pci_reads(url)
    devices = {**baseline, **pci}
    run('metrics', 'metrics', same=lambda out: checks.metrics_same(
        out, devices))
    run('metrics_flavor', 'metrics', '--flavor', FLAVOR['name'],
        same=lambda out: checks.metrics_same(out, devices, total))
    run('capacity_flavor', 'capacity', '--flavor', FLAVOR['name'], '-f',
        'json', same=lambda out: checks.fits_same(json.loads(out), fits))
    measure_shapes(run, baseline, nodes, pci)
    run('flavor_show', 'flavor', 'show', FLAVOR['name'], '-f', 'json',
        same=lambda out: json.loads(out)['Servers That Fit'] == total)

    def reset() -> None:
        FLAVOR_CONFIGURE['extra_specs'].clear()
    run('flavor_configure', 'flavor', 'configure', FLAVOR_CONFIGURE['name'],
        '--resource-class', 'VGPU', '--require-trait', CAPACITY_TRAIT, '-f',
        'json',
        before=reset, same=lambda out:
        FLAVOR_CONFIGURE['extra_specs'] == CONFIGURED)

    run('alloc', 'allocation', 'list', '-f', 'json', same=lambda out:
        checks.allocations_same(json.loads(out), baseline, filler.servers))
    server = sorted(c for c, s in filler.servers.items() if s.gpu)[0]
    run('alloc_show', 'allocation', 'show', server, '-f', 'json',
        same=lambda out: sorted(
            (r['Provider UUID'], r['Amount']) for r in json.loads(out)) ==
        [(filler.servers[server].gpu, 1)])
    run('audit', 'audit', '-f', 'json', check=False, same=lambda out:
        checks.audit_same(json.loads(out), baseline))

    h = pick_host(filler, cloud == BUSY)
    with tempfile.TemporaryDirectory() as conf_dir:
        path, swapped = config_file(conf_dir, h, baseline)
        run('config', 'config', 'check', str(path), '-f', 'json',
            check=False, same=lambda out: config_same(
                checks.json_rows(out), swapped, False))
        run('config_host', 'config', 'check', str(path), '--host',
            host_name(h), '-f', 'json', check=False,
            same=lambda out: config_same(checks.json_rows(out), swapped,
                                         True))

    source = host_name(h)
    typed = typed_fits(baseline, nodes)
    mover = sorted(c for c, s in filler.servers.items()
                   if s.host == h and s.flavor['name'] in TYPED_NAMES)[0]
    run('migration_check', 'migration', 'check', mover, '-f', 'json',
        check=False, same=lambda out: migration_same(
            checks.json_rows(out),
            typed[filler.servers[mover].flavor['name']], source))
    run('migration_plan', 'migration', 'plan', '--host', source, '-f',
        'json', check=False, same=lambda out: plan_same(
            checks.json_rows(out), filler.servers, source, typed))
    print('  %s: osc-mdev reads done' % cloud, flush=True)

    with tempfile.TemporaryDirectory() as out_dir:
        run('export', 'trait', 'export', '--provider-config-dir', out_dir,
            '-f', 'json', same=lambda out: checks.exported_same(
                out_dir, baseline))
    fresh = 'CUSTOM_BENCH_%d_%s' % (gpus, cloud.upper())
    run('dry', 'trait', 'set', '--all', '--trait', fresh, '--dry-run', '-f',
        'json', same=lambda out: len(json.loads(out)) == gpus)
    run('set', 'trait', 'set', '--all', '--trait', fresh, '-f', 'json',
        times=1, same=lambda out: all(
            r['Result'] == 'added %s' % fresh for r in json.loads(out))
        and checks.traits_kept(url, baseline, fresh, True))
    run('unset', 'trait', 'unset', '--all', '--trait', fresh, '-f', 'json',
        times=1, same=lambda out: checks.traits_kept(
            url, baseline, fresh, False))
    return result, baseline


def _root(flavor: dict) -> dict:
    """What a flavor asks of the compute node, as Nova asks it."""
    disk = flavor['disk'] + flavor.get('OS-FLV-EXT-DATA:ephemeral', 0) + \
        -(-(flavor.get('swap') or 0) // 1024)
    root = {'VCPU': flavor['vcpus'], 'MEMORY_MB': flavor['ram']}
    if disk:
        root['DISK_GB'] = disk
    return root


def measure_shapes(run, baseline: dict, nodes: dict, pci: dict) -> None:
    """capacity --flavor of each flavor shape, and metrics with 20
    flavors, each against the servers the references give (``pci``: the
    per-device reads of the PCI-in-Placement providers).
    """
    with tempfile.TemporaryDirectory() as conf_dir:
        conf = pathlib.Path(conf_dir) / 'nova.conf'
        conf.write_text(CONTROLLER_CONF)
        for flavor in SHAPES:
            root = _root(flavor)
            if flavor is FLAVOR_GROUPS:
                fits = checks.two_device_fits(baseline, nodes, root, 'VGPU')
            elif flavor is FLAVOR_PCI:
                # Nova's PCI-alias request group requires the trait its
                # translator gives every PCI device provider.
                fits = checks.flavor_fits(
                    pci, nodes, root, {'CUSTOM_PCI_10DE_2236': 1},
                    'COMPUTE_MANAGED_PCI_DEVICE')
                print('  %s: %d servers fit (per-device reads of %d PCI '
                      'providers)' % (flavor['name'], sum(fits.values()),
                                      len(pci)), flush=True)
            else:
                fits = checks.flavor_fits(baseline, nodes, root, {'VGPU': 1})
            run('cap_' + flavor['name'], 'capacity', '--flavor',
                flavor['name'], '--controller-conf', str(conf), '-f', 'json',
                same=lambda out, fits=fits: checks.fits_same(
                    json.loads(out), fits))
    totals = {}
    for flavor in MANY:
        [(key, amount)] = [(k, v) for k, v in flavor['extra_specs'].items()]
        totals[flavor['name']] = sum(checks.flavor_fits(
            baseline, nodes, _root(flavor),
            {key.split(':', 1)[1]: int(amount)}).values())
    run('metrics_many', 'metrics', *[a for f in MANY
                                     for a in ('--flavor', f['name'])],
        same=lambda out: checks.metrics_same(out, {**baseline, **pci}) and
        checks.flavors_same(out, totals))


def measure_capacity(runner: Runner, baseline: dict, runs: int) -> dict:
    """The bare capacity requests: ``{key: Measured}``."""
    bare = ('mdev', 'capacity', '--resource-class', 'VGPU', '--amount', '1',
            '-f', 'json')
    traited = bare + ('--require-trait', CAPACITY_TRAIT)
    result = {}
    for key, cmd, same in (
            ('cap_bare', bare, lambda out: checks.capacity_same(
                json.loads(out), checks.capacity_expected(
                    baseline, 'VGPU'))),
            ('cap_trait', traited, lambda out: checks.capacity_same(
                json.loads(out), checks.capacity_expected(
                    baseline, 'VGPU', [CAPACITY_TRAIT]))),
            ('cap_explain', traited + ('--explain',),
             lambda out: checks.explain_same(
                 json.loads(out), baseline, 'VGPU', CAPACITY_TRAIT))):
        measured, out = runner.measure(runs, *cmd)
        measured.same = same(out)
        result[key] = measured
    return result


def osc_placement_loop(runner: Runner, baseline: dict, sample: int
                       ) -> tuple:
    """Time the osc-placement loop on ``sample`` GPUs; check its data."""
    elapsed, out = runner.openstack('resource', 'provider', 'list',
                                    '-f', 'json')
    listing = elapsed
    per_gpu = []
    ok = True
    for (uuid, rc), row in sorted(baseline.items())[:sample]:
        t1, inv = runner.openstack(
            '--os-placement-api-version', '1.14', 'resource', 'provider',
            'inventory', 'list', uuid, '-f', 'json')
        t2, usage = runner.openstack('resource', 'provider', 'usage',
                                     'show', uuid, '-f', 'json')
        t3, traits = runner.openstack(
            '--os-placement-api-version', '1.6', 'resource', 'provider',
            'trait', 'list', uuid, '-f', 'json')
        per_gpu.append(t1 + t2 + t3)
        total = {i['resource_class']: i['total'] for i in json.loads(inv)}
        used = {u['resource_class']: u['usage'] for u in json.loads(usage)}
        same = total.get(rc) == row['Total'] and used.get(
            rc, 0) == row['Used'] and sorted(
                t['name'] for t in json.loads(traits)) == row['Traits']
        if not same:
            checks._say('osc-placement differs on %s' % uuid)
        ok = ok and same
    return listing, statistics.mean(per_gpu), ok


def import_cost(runs: int = 7) -> float:
    """Median cumulative import time of osc_mdev.plugin, milliseconds."""
    found = []
    for _ in range(runs):
        err = subprocess.run(
            [sys.executable, '-X', 'importtime', '-c',
             'import osc_mdev.plugin'], capture_output=True,
            text=True).stderr
        for line in err.splitlines():
            match = re.match(r'import time:\s+\d+ \|\s+(\d+) \| (\s*)(\S+)',
                             line)
            if match and match.group(3) == 'osc_mdev.plugin':
                found.append(int(match.group(1)) / 1000.0)
    return statistics.median(found)


def help_times(runner: Runner, runs: int) -> tuple:
    ours = [runner.openstack('mdev', 'provider', 'list', '--help')[0]
            for _ in range(runs)]
    theirs = [runner.openstack('resource', 'provider', 'list', '--help')[0]
              for _ in range(runs)]
    return statistics.median(ours), statistics.median(theirs)


# -- the tables -----------------------------------------------------------

# The rows of the main table, in order: (key, command).
COMMANDS = (
    ('list', '`mdev provider list`'),
    ('--free', '`mdev provider list --free`'),
    ('--full', '`mdev provider list --full`'),
    ('long', '`mdev provider list --long`'),
    ('show', '`mdev provider show <uuid>`'),
    ('metrics', '`mdev metrics`'),
    ('metrics_flavor', '`mdev metrics --flavor %s`' % FLAVOR['name']),
    ('capacity_flavor', '`mdev capacity --flavor %s` (no root disk)'
     % FLAVOR['name']),
    ('cap_' + FLAVOR_DISK['name'], '`mdev capacity --flavor %s` (root disk '
     '20 GB)' % FLAVOR_DISK['name']),
    ('cap_' + FLAVOR_EPHEMERAL['name'], '`mdev capacity --flavor %s` (root, '
     'ephemeral and swap)' % FLAVOR_EPHEMERAL['name']),
    ('cap_' + FLAVOR_PCI['name'], '`mdev capacity --flavor %s '
     '--controller-conf FILE` (PCI alias)' % FLAVOR_PCI['name']),
    ('cap_' + FLAVOR_GROUPS['name'], '`mdev capacity --flavor %s` (two '
     'numbered groups, isolate)' % FLAVOR_GROUPS['name']),
    ('metrics_many', '`mdev metrics` with 20 `--flavor`'),
    ('flavor_show', '`mdev flavor show %s`' % FLAVOR['name']),
    ('flavor_configure', '`mdev flavor configure %s --resource-class VGPU '
     '--require-trait %s`' % (FLAVOR_CONFIGURE['name'], CAPACITY_TRAIT)),
    ('alloc', '`mdev allocation list`'),
    ('alloc_show', '`mdev allocation show <server>`'),
    ('audit', '`mdev audit`'),
    ('config', '`mdev config check FILE`'),
    ('config_host', '`mdev config check FILE --host <node>`'),
    ('migration_check', '`mdev migration check <server>`'),
    ('migration_plan', '`mdev migration plan --host <node>`'),
    ('export', '`mdev trait export --provider-config-dir DIR`'),
    ('dry', '`mdev trait set --all --dry-run`'),
    ('set', '`mdev trait set --all` (fresh trait, one run)'),
    ('unset', '`mdev trait unset --all` (that trait, one run)'))
CAPACITY = (
    ('cap_bare', '`mdev capacity --resource-class VGPU --amount 1`'),
    ('cap_trait', '`mdev capacity --resource-class VGPU --amount 1 '
     '--require-trait %s`' % CAPACITY_TRAIT),
    ('cap_explain', 'the same with `--explain`'))
# The commands that read what the naive reads read: compared with them.
WHOLE = ('list', '--free', '--full', 'long', 'metrics')
# The commands of the summary: the default reads on a busy cloud.
SUMMARY = ('list', 'metrics', 'cap_bare', 'capacity_flavor',
           'cap_' + FLAVOR_DISK['name'], 'metrics_many')
LABELS = dict(COMMANDS + CAPACITY)


def _same(measured: Measured) -> str:
    return {True: 'yes', False: 'NO', None: ''}[measured.same]


def summary_table(results: list) -> str:
    """Requests per command, idle and busy, at each size."""
    sizes = [r['gpus'] for r in results]
    head = '| Command | ' + ' | '.join(
        '%d %s' % (g, c) for g in sizes for c in (IDLE, BUSY)) + ' |'
    lines = [head, '|---|' + '---:|' * (2 * len(sizes))]
    for key in SUMMARY + tuple(k for k, _ in COMMANDS if k not in SUMMARY):
        cells = []
        for r in results:
            for cloud in (IDLE, BUSY):
                measured = r[cloud].get(key)
                cells.append('' if measured is None
                             else str(measured.requests))
        lines.append('| %s | %s |' % (LABELS[key], ' | '.join(cells)))
    return '\n'.join(lines)


def table(results: list, import_ms: float, help_ours: float,
          help_theirs: float, fill_times: list, args: argparse.Namespace
          ) -> str:
    lines = [
        'Placement requests of each command, on the idle and the busy '
        'cloud (details below):', '', summary_table(results), '',
        '| GPUs | Cloud | Command | Median s | Requests | Req/GPU | '
        'ms/GPU | Speed-up vs naive | vs osc-placement loop | Same data |',
        '|---:|---|---|---:|---:|---:|---:|---:|---:|---|']
    for r in results:
        g = r['gpus']
        listing, per_gpu, loop_ok = r['loop']
        loop_t = listing + per_gpu * g
        lines.append(
            '| %d | both | osc-placement loop (%d processes, extrapolated '
            'from %d GPUs) | %.0f | %d | 3.00 | %.0f | | 1x | %s |'
            % (g, 1 + 3 * g, args.sample, loop_t, 1 + 3 * g,
               loop_t / g * 1000, 'yes' if loop_ok else 'NO'))
        for cloud in (IDLE, BUSY):
            m = r[cloud]
            naive = m['naive']
            lines.append(
                '| %d | %s | naive reads, one after another in one process '
                '| %.2f | %d | %.2f | %.2f | 1x | %.0fx | (baseline) |'
                % (g, cloud, naive.seconds, naive.requests,
                   naive.requests / g, naive.seconds / g * 1000,
                   loop_t / naive.seconds))
            for key, label in COMMANDS:
                x = m[key]
                speed = ('%.1fx' % (naive.seconds / x.seconds)
                         if key in WHOLE else '')
                loop = '%.0fx' % (loop_t / x.seconds) if key in WHOLE else ''
                nova = ' (+%d Nova)' % x.nova if x.nova else ''
                lines.append(
                    '| %d | %s | %s | %.2f | %d%s | %.2f | %.2f | %s | %s | '
                    '%s |' % (g, cloud, label, x.seconds, x.requests, nova,
                              x.requests / g, x.seconds / g * 1000, speed,
                              loop, _same(x)))
    notes = [
        '',
        'Measured by `tox -e bench` (`python tools/bench.py --sizes %s '
        '--runs %d --naive-runs %d --sample %d%s`) on %s, %d CPUs, '
        'Python %s: '
        'openstack-placement on PostgreSQL (pgserver) behind gunicorn, '
        '2 workers x 4 threads, on 127.0.0.1%s; osc-mdev with its default '
        '8 workers. Each osc-mdev figure is a whole `openstack` process '
        '(about %.2f s of it is the CLI starting: `openstack mdev '
        'provider list --help` takes %.2f s, `openstack resource provider '
        'list --help` %.2f s). Plugin import: %.1f ms '
        '(`python -X importtime -c "import osc_mdev.plugin"`, median). '
        'Median over %d runs (naive reads: %d); requests are the most of '
        'any run, counted by Placement itself; Nova\'s go to a stand-in '
        'that answers the servers (with node and flavor), flavors, '
        'services, hypervisors and migrations, counted apart.'
        % (','.join(str(r['gpus']) for r in results), args.runs,
           args.naive_runs, args.sample,
           '' if args.max_allocation_candidates is None else
           ' --max-allocation-candidates %d' % args.max_allocation_candidates,
           platform.platform(terse=True),
           os.cpu_count(), platform.python_version(),
           '' if args.max_allocation_candidates is None else
           ', with `[placement] max_allocation_candidates = %d`'
           % args.max_allocation_candidates, help_ours,
           help_ours, help_theirs, import_ms, args.runs, args.naive_runs),
        '',
        'The cloud: 4 GPUs per compute node (VGPU, or CUSTOM_NVIDIA_A40 on '
        'one node in five), one node in ten with dedicated CPUs only (PCPU, '
        'no VCPU), one node in twenty with every GPU full, about one GPU '
        'in 40 used beyond its capacity. Busy: other tenants\' servers '
        'take every free VCPU (or PCPU) of three nodes in four, all the '
        'memory of one node in ten, and every VCPU, all memory and all '
        'disk of one node in fifty (only a GPU has room there).',
        '',
        'Same data, each against a reference that shares no code with '
        'osc-mdev: provider list (every view), provider show and metrics: '
        'the per-device reads (inventories, usages and traits of every '
        'GPU; for metrics, which shows every kind, of every PCI-in-'
        'Placement device too), field by field, metrics parsed with '
        'prometheus_client; '
        'capacity --flavor, metrics --flavor and flavor show: the servers '
        'that fit on each node (the Total for metrics and flavor show) '
        'reckoned from the per-device reads and the nodes\' own '
        'inventories, usages and traits, for every flavor shape (root '
        'disk, ephemeral and swap, two numbered groups on two devices) and '
        'each of the 20 flavors of metrics; the PCI alias flavor: the '
        'servers that fit reckoned the same way from the per-device reads '
        'of the PCI-in-Placement providers (one device with Nova\'s '
        'COMPUTE_MANAGED_PCI_DEVICE trait on one node in eight); '
        'flavor configure: the extra specs '
        'Nova holds afterwards; allocation list: amounts per device sum '
        'to the used counts of the per-device reads and each server is on '
        'the GPU the fill gave it; allocation show: that GPU; audit: an '
        'over-capacity finding for each device the per-device reads show '
        'used beyond its capacity (there are some) and none about '
        'allocations (the stand-in Nova knows every consumer); config '
        'check: no error in a valid file and, with --host, one finding '
        'exactly: the device the file lists under another type than its '
        'trait; migration check: the nodes a cold move may go to are '
        'those with room for the flavor and a device of the server\'s '
        'type with room, live ones among them; migration plan: every '
        'server the fill put on the node, each to a node with room or '
        'none; trait export: the files name each device with the custom '
        'traits it carries; trait set and unset: every device gained '
        '(lost) the trait and kept the others, counted by Placement.',
        '',
        'Filling the cloud (concurrent, %d writers): %s.' % (
            args.fill_workers, ', '.join(
                '%d GPUs in %.0f s' % f for f in fill_times)),
    ]
    return '\n'.join(lines + notes) + '\n'


def capacity_table(results: list, help_ours: float,
                   args: argparse.Namespace) -> str:
    lines = [
        CAPACITY_HEADING, '',
        '| GPUs | Cloud | Command | Median s | Requests | Same data |',
        '|---:|---|---|---:|---:|---|']
    for r in results:
        for cloud in (IDLE, BUSY):
            for key, label in CAPACITY:
                m = r[cloud][key]
                lines.append('| %d | %s | %s | %.2f | %d | %s |' % (
                    r['gpus'], cloud, label, m.seconds, m.requests,
                    _same(m)))
    lines += [
        '',
        'Measured by `python tools/bench.py --sizes %s --runs %d%s%s` on '
        'the same clouds and machine as above (%s, %d CPUs, Python %s). '
        'Each figure is the median wall time of a whole `openstack` process '
        '(`openstack mdev provider list --help` took %.2f s in this run: '
        'the CLI starting); requests are counted by Placement. Same data: '
        'per host, the servers that fit, the free mdevs and the devices '
        'with room equal what the per-device reads (inventories, usages '
        'and traits of every GPU) give; `--explain`: the devices and '
        'hosts left after the class, the trait and the room.'
        % (','.join(str(r['gpus']) for r in results), args.runs,
           ' --only capacity' if args.only else '',
           '' if args.max_allocation_candidates is None else
           ' --max-allocation-candidates %d' % args.max_allocation_candidates,
           platform.platform(terse=True), os.cpu_count(),
           platform.python_version(), help_ours)]
    return '\n'.join(lines) + '\n'


def write_output(path: str, main_text: str | None, capacity_text: str
                 ) -> None:
    """Write the results file; with no ``main_text`` keep the one there.
    """
    path = pathlib.Path(path)
    if main_text is None:
        old = path.read_text() if path.exists() else ''
        main_text = old.split(CAPACITY_HEADING)[0].rstrip('\n')
        main_text = main_text[len('# osc-mdev benchmark results\n\n'):] \
            if main_text.startswith('# osc-mdev benchmark results') \
            else main_text
        main_text = main_text.strip('\n') + '\n' if main_text else ''
    path.parent.mkdir(exist_ok=True)
    path.write_text('# osc-mdev benchmark results\n\n' + main_text +
                    ('\n' if main_text else '') + capacity_text)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _hold(clouds: pathlib.Path) -> None:
    print('holding the cloud: OS_CLIENT_CONFIG_FILE=%s openstack '
          '--os-cloud bench ... (Ctrl-C to stop)' % clouds, flush=True)
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


def measure_size(runner: Runner, placement: pg_placement.PgPlacement,
                 filler: Filler, nova: nova_standin.NovaStandin,
                 args: argparse.Namespace, gpus: int) -> dict:
    """Both clouds at one size: ``{'gpus', 'loop', idle, busy}``."""
    result = {'gpus': gpus}
    update_nova(nova, filler)
    result[IDLE], baseline = measure_cloud(
        runner, placement.url, gpus, nova, filler, args, IDLE)
    if args.only != 'capacity':
        result['loop'] = osc_placement_loop(runner, baseline, args.sample)
        print('  osc-placement loop sampled', flush=True)
    filler.make_busy()
    update_nova(nova, filler)
    print('  the cloud is busy', flush=True)
    result[BUSY], _ = measure_cloud(runner, placement.url, gpus, nova,
                                    filler, args, BUSY)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', default='250,1000,5000')
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--naive-runs', type=int, default=2,
                        help='runs of the in-process naive reads')
    parser.add_argument('--sample', type=int, default=3)
    parser.add_argument('--fill-workers', type=int, default=16)
    parser.add_argument('--only', choices=('capacity', 'fleet'),
                        help='measure only this command (fleet: the check '
                             'of a fleet, tools/bench_fleet.py) and rewrite '
                             'only its section of the output')
    parser.add_argument('--hold', action='store_true',
                        help='keep the cloud up (busy) after the last '
                             'size, until interrupted')
    parser.add_argument('--output', default=str(REPO / 'doc' /
                                                'bench-results.md'))
    parser.add_argument('--max-allocation-candidates', type=int,
                        help="Placement's [placement] "
                             'max_allocation_candidates (default: none)')
    bench_fleet.add_arguments(parser, 'fleet-')
    args = parser.parse_args()
    if args.only == 'fleet':
        bench_fleet.run(args)
        return 0
    sizes = sorted(int(s) for s in args.sizes.split(','))
    options = {}
    if args.max_allocation_candidates is not None:
        options = {'placement': {
            'max_allocation_candidates': args.max_allocation_candidates}}

    with tempfile.TemporaryDirectory() as workdir, \
            pg_placement.running(pathlib.Path(workdir) / 'pg',
                                 options=options) as placement:
        filler = Filler(placement.url, args.fill_workers)
        filler.prepare()
        nova = new_nova()
        clouds = pathlib.Path(workdir) / 'clouds.yaml'
        clouds.write_text(nova_standin.clouds_yaml(
            placement.url, nova.url, name='bench'))
        runner = Runner(placement, nova, clouds)
        import_ms = import_cost()
        help_ours, help_theirs = help_times(runner, args.runs)
        print('plugin import %.1f ms; --help %.2f s (osc-placement %.2f s)'
              % (import_ms, help_ours, help_theirs), flush=True)
        results, fill_times = [], []
        try:
            for size in sizes:
                # Whole hosts: 250 GPUs are 63 hosts, 252 GPUs.
                hosts = -(-size // GPUS_PER_HOST)
                start = time.perf_counter()
                filler.fill(filler.hosts, hosts)
                gpus = hosts * GPUS_PER_HOST
                fill_times.append((gpus, time.perf_counter() - start))
                print('filled %d GPUs in %.0f s' % fill_times[-1],
                      flush=True)
                results.append(measure_size(runner, placement, filler, nova,
                                            args, gpus))
                text = None if args.only else table(
                    results, import_ms, help_ours, help_theirs, fill_times,
                    args)
                capacity_text = capacity_table(results, help_ours, args)
                print(text or '', capacity_text, flush=True)
                write_output(args.output, text, capacity_text)
                if size != sizes[-1] or not args.hold:
                    filler.make_idle()
            if args.hold:
                _hold(clouds)
        finally:
            nova.stop()
    if not args.only:
        bench_fleet.run(args)
    return 0


if __name__ == '__main__':
    sys.exit(main())
