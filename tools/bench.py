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

"""Benchmark osc-mdev on a production-shaped Placement at 250 to 5,000 GPUs.

Starts openstack-placement on PostgreSQL behind gunicorn (2 workers x 4
threads, tests/fixtures/pg_placement.py), fills it concurrently with a
cloud in Nova's layout, and grows it through each size (default 250,
1,000 and 5,000 GPU child providers, 4 per compute node). At each size it
measures, on the same cloud:

* osc-mdev, each run a real ``openstack`` process: ``mdev provider list``
  (default view, ``--free``, ``--full``, ``--long``), ``mdev metrics``
  (alone and with ``--flavor``, checked against ``mdev capacity
  --flavor``), ``mdev provider show``, ``mdev allocation list`` and
  ``show``, ``mdev audit``, ``mdev trait set --all --dry-run`` and ``mdev
  trait set --all`` with a trait no device has yet;
* the osc-placement command loop operators script today: ``openstack
  resource provider list``, then per GPU ``resource provider inventory
  list``, ``usage show`` and ``trait list``, each a separate process,
  timed on a sample of GPUs and extrapolated to all of them;
* the same requests one after another in one Python process (listing,
  then inventories, usages and traits of each GPU);
* ``mdev capacity`` for a bare request (``--resource-class VGPU
  --amount 1``), the same with ``--require-trait CUSTOM_NVIDIA_35``, and
  that one with ``--explain``: each answer is checked against what the
  per-device reads say (per host: servers that fit, free mdevs and the
  devices with room; per constraint: the devices and hosts left).

Reported: median wall time over --runs runs, requests Placement served
(counted at the server), requests per GPU, speed-up, and whether our
output holds the same data as the per-device reads (devices, classes,
totals, used, free, traits). Also the plugin's import time and ``--help``
time. The commands that ask Nova (allocation list and show, audit,
metrics and capacity with --flavor) meet a small stand-in that answers
the server list (the consumers the fill created, as servers of a flavor
asking what they hold), one flavor, the services and migrations (its
requests are counted apart).

Usage: python tools/bench.py [--sizes 250,1000,5000] [--runs 3]
       [--sample 3] [--only capacity] [--hold]
       [--max-allocation-candidates N] [--output doc/bench-results.md]

``--only capacity`` measures ``mdev capacity`` alone and rewrites only
its section of the output file. ``--hold`` keeps the filled cloud up
after the last size (its clouds.yaml is printed) until interrupted, to
profile a command against it.
"""

import argparse
import collections
from concurrent import futures
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
import urllib.parse
import uuid as uuidlib

import requests

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fixtures import pg_placement  # noqa: E402
from tests.fixtures import wsgi_server  # noqa: E402

GPUS_PER_HOST = 4
BUSES = (0x3b, 0x5e, 0x86, 0xaf)
ROOT_TRAITS = ['OWNER_NOVA', 'COMPUTE_NODE', 'HW_CPU_X86_AVX2',
               'HW_CPU_X86_AVX512F', 'HW_CPU_X86_SSE42']
VERSION = 'placement 1.38'
CAPACITY_TRAIT = 'CUSTOM_NVIDIA_35'
CAPACITY_HEADING = '## `openstack mdev capacity`'
# The flavor of the stand-in Nova: what most servers of the fill are.
FLAVOR = {'id': 'f0a1b2c3-0000-4000-8000-0000000000aa', 'name': 'vgpu.bench',
          'vcpus': 4, 'ram': 8192, 'disk': 0,
          'extra_specs': {'resources:VGPU': '1'}}


# -- filling the cloud ----------------------------------------------------

def host_name(h):
    return 'gpu%05d.dc%d.example.net' % (h, h % 3)


def gpu_layout(h, g):
    """What Nova would report for GPU g of host h, and its usage."""
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
    return rc, inventory, traits, used


class Filler:
    """Writes hosts into Placement from a bounded pool of threads."""

    def __init__(self, url, workers):
        self.url = url
        self.workers = workers
        self.local = threading.local()
        self.servers = collections.defaultdict(list)   # host -> [uuid]
        self.classes = {}                              # host -> class

    def _session(self):
        if not hasattr(self.local, 'session'):
            session = requests.Session()
            session.headers.update({'X-Auth-Token': 'admin',
                                    'OpenStack-API-Version': VERSION})
            self.local.session = session
        return self.local.session

    def call(self, method, path, body=None):
        resp = self._session().request(method, self.url + path, json=body)
        if resp.status_code >= 400:
            raise RuntimeError('%s %s: %s %s' % (method, path,
                                                 resp.status_code, resp.text))
        return resp.json() if resp.content else None

    def provider(self, name, inventories, traits=(), parent=None):
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

    def prepare(self):
        for rc in ('CUSTOM_NVIDIA_A40', 'CUSTOM_PCI_10DE_2236'):
            self.call('PUT', '/resource_classes/%s' % rc)
        for trait in ('CUSTOM_NVIDIA_35', 'CUSTOM_NVIDIA_36'):
            self.call('PUT', '/traits/%s' % trait)

    def host(self, h):
        if h % 250 == 0:
            print('  filling host %d' % h, flush=True)
        name = host_name(h)
        root = self.provider(name, {
            'VCPU': {'total': 128, 'allocation_ratio': 4.0},
            'MEMORY_MB': {'total': 1048576, 'reserved': 4096},
            'DISK_GB': {'total': 4000}}, ROOT_TRAITS)
        consumers = {}
        for g in range(GPUS_PER_HOST):
            rc, inventory, traits, used = gpu_layout(h, g)
            gpu = self.provider('%s_pci_0000_%02x_00_0' % (name, BUSES[g]),
                                {rc: inventory}, traits, parent=root)
            for _ in range(used):
                consumers[str(uuidlib.uuid4())] = {
                    'allocations': {
                        root: {'resources': {'VCPU': 4, 'MEMORY_MB': 8192}},
                        gpu: {'resources': {rc: 1}}},
                    'project_id': 'bench', 'user_id': 'bench',
                    'consumer_generation': None, 'consumer_type': 'INSTANCE'}
        if h % 8 == 5:
            # PCI in Placement and a Neutron agent: not mdev devices.
            self.provider('%s_0000:81:00.0' % name, {
                'CUSTOM_PCI_10DE_2236': {'total': 1}}, ['OWNER_NOVA'],
                parent=root)
            self.provider('%s:Open vSwitch agent' % name, {
                'NET_BW_EGR_KILOBIT_PER_SEC': {'total': 10000000}},
                parent=root)
        if consumers:
            self.call('POST', '/allocations', consumers)
        self.servers[name] = sorted(consumers)
        self.classes[name] = gpu_layout(h, 0)[0]

    def fill(self, first, last):
        with futures.ThreadPoolExecutor(self.workers) as pool:
            list(pool.map(self.host, range(first, last)))


# -- a stand-in for Nova's server list ------------------------------------

class NovaServers:
    """Answers what ``mdev allocation list``, ``audit``, ``metrics
    --flavor`` and ``capacity --flavor`` ask Nova.

    Version discovery; ``GET /v2.1/servers/detail`` (by ``host=``, or
    every server, paged by ``limit``/``marker``): every consumer the
    fill put on a host, as an ACTIVE server of a flavor asking what its
    allocation holds; ``GET /v2.1/servers/{id}``; the one flavor
    ``FLAVOR`` (``/flavors/{id}``, ``/flavors/detail``); no
    nova-compute service disabled; no migration.
    """

    def __init__(self, servers, classes):
        self.servers = servers
        self.classes = classes
        self.requests = 0
        self.server = wsgi_server.make_server(self.app)
        self.url = 'http://127.0.0.1:%d' % self.server.server_port
        threading.Thread(target=self.server.serve_forever,
                         daemon=True).start()

    def _server(self, host, uuid):
        rc = self.classes.get(host, 'VGPU')
        return {'id': uuid, 'name': 'vm-%s' % uuid[:8], 'status': 'ACTIVE',
                'OS-EXT-SRV-ATTR:host': host.split('.', 1)[0],
                'OS-EXT-SRV-ATTR:hypervisor_hostname': host,
                'OS-EXT-STS:task_state': None,
                'flavor': {'vcpus': 4, 'ram': 8192, 'disk': 0,
                           'original_name': 'vgpu.%s' % rc.lower(),
                           'extra_specs': {'resources:%s' % rc: '1'}}}

    def _all(self):
        return [self._server(h, s) for h in sorted(self.servers)
                for s in self.servers[h]]

    def _page(self, items, query):
        if 'marker' in query:
            ids = [i['id'] for i in items]
            items = items[ids.index(query['marker']) + 1:]
        if 'limit' in query:
            items = items[:int(query['limit'])]
        return items

    def app(self, environ, start_response):
        self.requests += 1
        path = environ['PATH_INFO'].rstrip('/')
        query = dict(urllib.parse.parse_qsl(environ.get('QUERY_STRING',
                                                        '')))
        version = {'id': 'v2.1', 'status': 'CURRENT', 'version': '2.96',
                   'min_version': '2.1', 'updated': '2013-07-23T11:33:21Z',
                   'links': [{'rel': 'self', 'href': self.url + '/v2.1/'}]}
        status, body = '200 OK', None
        flavor = dict(FLAVOR, extra_specs=dict(FLAVOR['extra_specs']))
        by_id = {s: h for h, ids in self.servers.items() for s in ids}
        if path in ('', '/v2.1'):
            body = {'version': version} if path else {'versions': [version]}
        elif path == '/v2.1/servers/detail':
            host, node = query.get('host'), query.get('node')
            if host or node:
                # node= is a regular expression (what Nova does).
                found = [self._server(h, s) for h, ids in sorted(
                    self.servers.items())
                    if (host and host in (h, h.split('.')[0])) or (
                        node and re.search(node, h))
                    for s in ids]
            else:
                found = self._all()
            body = {'servers': self._page(found, query)}
        elif path.startswith('/v2.1/servers/') and \
                path.rsplit('/', 1)[1] in by_id:
            uuid = path.rsplit('/', 1)[1]
            body = {'server': self._server(by_id[uuid], uuid)}
        elif path == '/v2.1/flavors/detail':
            body = {'flavors': self._page([flavor], query)}
        elif path in ('/v2.1/flavors/%s' % FLAVOR['id'],
                      '/v2.1/flavors/%s' % FLAVOR['name']):
            body = {'flavor': flavor}
        elif path == '/v2.1/os-services':
            body = {'services': []}
        elif path == '/v2.1/os-migrations':
            body = {'migrations': []}
        else:
            status, body = '404 Not Found', {'itemNotFound': {
                'code': 404, 'message': 'not found'}}
        data = json.dumps(body).encode()
        start_response(status, [('Content-Type', 'application/json'),
                                ('Content-Length', str(len(data))),
                                ('OpenStack-API-Version', 'compute 2.96')])
        return [data]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


# -- measuring ------------------------------------------------------------

def write_clouds(path, placement_url, nova_url):
    path.write_text(json.dumps({'clouds': {'bench': {
        'auth_type': 'admin_token',
        'auth': {'token': 'admin', 'endpoint': placement_url},
        'placement_endpoint_override': placement_url,
        'compute_endpoint_override': nova_url + '/v2.1',
        'compute_api_version': '2.96',
        'region_name': 'RegionOne'}}}))


class Runner:
    def __init__(self, placement, clouds):
        self.placement = placement
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith('OS_')}
        self.env['OS_CLIENT_CONFIG_FILE'] = str(clouds)

    def openstack(self, *args, check=True):
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

    def measure(self, runs, *args, check=True):
        """Median time, requests of one run, and the last output."""
        times, counts = [], []
        for _ in range(runs):
            before = self.placement.requests()
            elapsed, out = self.openstack(*args, check=check)
            counts.append(self.placement.requests() - before)
            times.append(elapsed)
        return statistics.median(times), max(counts), out


def naive_reads(url):
    """The per-device requests one after another in this process:
    ``{(uuid, class): {...}}`` and the time it took.
    """
    session = requests.Session()
    session.headers.update({'X-Auth-Token': 'admin',
                            'OpenStack-API-Version': 'placement 1.14'})
    start = time.perf_counter()
    providers = session.get(url + '/resource_providers').json()[
        'resource_providers']
    by_uuid = {p['uuid']: p for p in providers}
    rows = {}
    for rp in providers:
        root = by_uuid.get(rp['root_provider_uuid'])
        if root is None or root is rp:
            continue
        nodedev = rp['name'][len(root['name']) + 1:]
        if not rp['name'].startswith(root['name'] + '_') or ':' in nodedev:
            continue
        base = url + '/resource_providers/' + rp['uuid']
        inv = session.get(base + '/inventories').json()['inventories']
        usages = session.get(base + '/usages').json()['usages']
        traits = session.get(base + '/traits').json()['traits']
        for rc, i in inv.items():
            if rc != 'VGPU' and not rc.startswith('CUSTOM_'):
                continue
            capacity = int((i['total'] - i['reserved'])
                           * i['allocation_ratio'])
            rows[(rp['uuid'], rc)] = {
                'Host': root['name'], 'Device': _address(nodedev),
                'Capacity': capacity, 'Total': i['total'],
                'Reserved': i['reserved'],
                'Allocation Ratio': i['allocation_ratio'],
                'Max Unit': i['max_unit'], 'Min Unit': i['min_unit'],
                'Step Size': i['step_size'],
                'Used': usages.get(rc, 0),
                'Free': max(capacity - usages.get(rc, 0), 0),
                'Traits': sorted(traits)}
    return rows, time.perf_counter() - start


DEFAULT = ('Host', 'Device', 'Capacity', 'Used', 'Free', 'Traits')
LONG = DEFAULT + ('Total', 'Reserved', 'Allocation Ratio', 'Max Unit',
                  'Min Unit', 'Step Size')


def _families(text):
    from prometheus_client import parser
    return list(parser.text_string_to_metric_families(text))


def metrics_same(text, baseline):
    """Whether ``mdev metrics`` gives each device's capacity, used and
    free as the per-device reads do, and says the run succeeded.
    """
    want = {}
    for (uuid, rc), row in baseline.items():
        want[(row['Host'], row['Device'], rc)] = (
            row['Capacity'], row['Used'], row['Free'])
    got = collections.defaultdict(dict)
    success = None
    for family in _families(text):
        for sample in family.samples:
            if family.name == 'openstack_mdev_scrape_success':
                success = sample.value
            field = {'openstack_mdev_device_capacity': 0,
                     'openstack_mdev_device_used': 1,
                     'openstack_mdev_device_free': 2}.get(family.name)
            if field is not None:
                key = (sample.labels['host'], sample.labels['device'],
                       sample.labels['resource_class'])
                got[key][field] = sample.value
    got = {k: (v.get(0), v.get(1), v.get(2)) for k, v in got.items()}
    return success == 1 and got == want


def audit_same(rows, baseline):
    """Whether the audit finds what the per-device reads say: an
    over-capacity finding for each device used beyond its capacity, and
    no orphaned or missing allocation (the stand-in Nova knows every
    consumer).
    """
    over = sorted('%s' % row['Device'] for row in baseline.values()
                  if row['Used'] > row['Capacity'])
    found = sorted(r['Device'] for r in rows
                   if r['Check'] == 'over-capacity')
    wrong = [r for r in rows if r['Check'] in (
        'orphaned-allocation', 'missing-allocation', 'node-mismatch',
        'nova-unreachable')]
    if wrong:
        print('  audit found %s' % wrong[:3], file=sys.stderr)
    return found == over and not wrong


def _address(nodedev):
    """``pci_0000_3b_00_0`` -> ``0000:3b:00.0``."""
    domain, bus, slot, function = nodedev.split('_')[1:5]
    return '%s:%s:%s.%s' % (domain, bus, slot, function)


def same_data(rows, baseline, fields):
    ours = {(r['UUID'], r['Resource Class']): r for r in rows}
    if set(ours) != set(baseline):
        return False
    return all(ours[k][f] == baseline[k][f]
               for k in baseline for f in fields)


def osc_placement_loop(runner, url, baseline, sample):
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
            print('  osc-placement differs on %s: %s %s %s vs %s' % (
                uuid, inv, usage, traits, row), file=sys.stderr)
        ok = ok and same
    return listing, statistics.mean(per_gpu), ok


def import_cost(runs=7):
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


def help_times(runner, runs):
    ours = [runner.openstack('mdev', 'provider', 'list', '--help')[0]
            for _ in range(runs)]
    theirs = [runner.openstack('resource', 'provider', 'list', '--help')[0]
              for _ in range(runs)]
    return statistics.median(ours), statistics.median(theirs)


def required_count(url, traits):
    """How many providers have every one of ``traits`` (one request)."""
    resp = requests.get(
        url + '/resource_providers', params={'required': ','.join(traits)},
        headers={'X-Auth-Token': 'admin',
                 'OpenStack-API-Version': 'placement 1.18'})
    return len(resp.json()['resource_providers'])


def measure_size(runner, url, gpus, nova, args):
    runs = args.runs
    result = {'gpus': gpus}
    naive = []
    baseline = None
    for _ in range(args.naive_runs):
        before = runner.placement.requests()
        rows, elapsed = naive_reads(url)
        naive.append(elapsed)
        naive_requests = runner.placement.requests() - before
        baseline = baseline or rows
    assert len(baseline) == gpus, (len(baseline), gpus)
    result['naive'] = (statistics.median(naive), naive_requests)
    print('  naive reads: %.1f s' % result['naive'][0], flush=True)

    result['capacity'] = measure_capacity(runner, baseline, runs)
    print('  mdev capacity: %s' % ', '.join(
        '%s %.2f s, %d requests, same data %s' % ((k,) + v)
        for k, v in result['capacity'].items()), flush=True)
    if args.only == 'capacity':
        return result

    t, n, out = runner.measure(runs, 'mdev', 'provider', 'list',
                               '-f', 'json')
    result['list'] = (t, n, same_data(json.loads(out), baseline, DEFAULT))
    t, n, out = runner.measure(runs, 'mdev', 'provider', 'list', '--long',
                               '-f', 'json')
    result['long'] = (t, n, same_data(json.loads(out), baseline, LONG))
    for flag in ('--free', '--full'):
        t, n, out = runner.measure(runs, 'mdev', 'provider', 'list', flag,
                                   '-f', 'json')
        keep = {k: v for k, v in baseline.items()
                if (v['Free'] > 0) == (flag == '--free')}
        result[flag] = (t, n, same_data(json.loads(out), keep, DEFAULT))
    t, n, out = runner.measure(runs, 'mdev', 'metrics')
    result['metrics'] = (t, n, metrics_same(out, baseline))
    nova_before = nova.requests
    t, n, out = runner.measure(runs, 'mdev', 'metrics', '--flavor',
                               FLAVOR['name'])
    nova_metrics = (nova.requests - nova_before) // runs
    fits = [s.value for f in _families(out) for s in f.samples
            if f.name == 'openstack_mdev_flavor_fits']
    nova_before = nova.requests
    tc, nc, cap = runner.measure(1, 'mdev', 'capacity', '--flavor',
                                 FLAVOR['name'], '-f', 'json')
    nova_capacity = nova.requests - nova_before
    total = [sum(r['Fits'] for r in json.loads(cap))]
    result['metrics_flavor'] = (t, n, metrics_same(out, baseline) and
                                fits == total, nova_metrics)
    result['capacity_flavor'] = (tc, nc, fits == total, nova_capacity)
    nova_before = nova.requests
    t, n, out = runner.measure(runs, 'mdev', 'audit', '-f', 'json',
                               check=False)
    result['audit'] = (t, n, audit_same(json.loads(out), baseline),
                       (nova.requests - nova_before) // runs)
    one = sorted(baseline)[0][0]
    t, n, out = runner.measure(runs, 'mdev', 'provider', 'show', one,
                               '-f', 'json')
    shown = json.loads(out)
    result['show'] = (t, n, all(
        shown[f] == baseline[(one, shown['Resource Class'])][f]
        for f in LONG))
    nova_before = nova.requests
    t, n, out = runner.measure(runs, 'mdev', 'allocation', 'list',
                               '-f', 'json')
    rows = json.loads(out)
    used = collections.Counter()
    for row in rows:
        used[(row['Provider UUID'], row['Resource Class'])] += row['Amount']
    result['alloc'] = (t, n, dict(used) == {
        k: v['Used'] for k, v in baseline.items() if v['Used']},
        (nova.requests - nova_before) // runs)
    server = rows[0]['Server']
    nova_before = nova.requests
    t, n, out = runner.measure(runs, 'mdev', 'allocation', 'show', server,
                               '-f', 'json')
    mine = [r for r in rows if r['Server'] == server]
    result['alloc_show'] = (t, n, sorted(
        (r['Provider UUID'], r['Amount']) for r in json.loads(out)) ==
        sorted((r['Provider UUID'], r['Amount']) for r in mine),
        (nova.requests - nova_before) // runs)
    print('  osc-mdev reads done', flush=True)
    result['loop'] = osc_placement_loop(runner, url, baseline, args.sample)
    print('  osc-placement loop sampled', flush=True)

    with tempfile.TemporaryDirectory() as out_dir:
        t, n, out = runner.measure(runs, 'mdev', 'trait', 'export',
                                   '--provider-config-dir', out_dir, '-f',
                                   'json')
        result['export'] = (t, n, exported_same(out_dir, baseline))

    fresh = 'CUSTOM_BENCH_%d' % gpus
    t, n, out = runner.measure(runs, 'mdev', 'trait', 'set', '--all',
                               '--trait', fresh, '--dry-run', '-f', 'json')
    result['dry'] = (t, n, len(json.loads(out)) == gpus)
    t, n, out = runner.measure(1, 'mdev', 'trait', 'set', '--all',
                               '--trait', fresh, '-f', 'json')
    # Every device gained the trait and kept each trait it had: as many
    # providers have (old trait + fresh) as had the old trait.
    had = collections.Counter(t for v in baseline.values()
                              for t in v['Traits'])
    result['set'] = (t, n, required_count(url, [fresh]) == gpus and all(
        required_count(url, [trait, fresh]) >= count
        for trait, count in had.items()) and all(
        r['Result'] == 'added %s' % fresh for r in json.loads(out)))
    return result


def exported_same(directory, baseline):
    """The provider config files hold each device's custom traits, by
    host and device, as the per-device reads found them.
    """
    import yaml

    expected = {}
    for row in baseline.values():
        custom = sorted(t for t in row['Traits'] if t.startswith('CUSTOM_'))
        if custom:
            expected[(row['Host'], row['Device'])] = custom
    found = {}
    for path in pathlib.Path(directory).glob('*.yaml'):
        host = path.name[:-len('.yaml')]
        for entry in yaml.safe_load(path.read_text())['providers']:
            name = entry['identification']['name']
            found[(host, _address(name[len(host) + 1:]))] = entry[
                'traits']['additional']
    return found == expected


# -- mdev capacity ----------------------------------------------------------

def capacity_expected(baseline, rclass, traits=()):
    """Per host, what a bare request of one ``rclass`` mdev with
    ``traits`` required should give, from the per-device reads: ``{host:
    (fits, free, [HOST:ADDR with room])}`` over the hosts with a device
    of any mdev class.
    """
    hosts = {}
    for row in baseline.values():
        hosts.setdefault(row['Host'], (0, 0, []))
    for (uuid, rc), row in baseline.items():
        if rc != rclass or not set(traits) <= set(row['Traits']):
            continue
        fits, free, devices = hosts[row['Host']]
        if row['Free']:
            devices = devices + ['%s:%s' % (row['Host'], row['Device'])]
        # Amount 1: every free mdev of a matching device is one server.
        hosts[row['Host']] = (fits + row['Free'], free + row['Free'],
                              devices)
    return hosts


def capacity_same(rows, expected):
    """Whether ``mdev capacity -f json`` rows (one per host) agree with
    ``expected``.
    """
    ours = {r['Host']: (r['Fits'], r['Free'], sorted(r['Devices']))
            for r in rows}
    want = {h: (f, n, sorted(d)) for h, (f, n, d) in expected.items()}
    if set(ours) - set(want) or len(ours) != len(rows):
        return False
    for host, value in want.items():
        if ours.get(host, (0, 0, [])) != value:
            print('  capacity differs on %s: %s, expected %s' % (
                host, ours.get(host), value), file=sys.stderr)
            return False
    return True


def explain_same(rows, baseline, rclass, trait):
    """Whether ``--explain`` counts what the per-device reads count: the
    devices and hosts left after the class, the trait and the room.
    """
    def left(keep):
        found = [(row['Host'], uuid) for (uuid, rc), row in baseline.items()
                 if keep(rc, row)]
        return len(found), len({h for h, _ in found})

    offers = left(lambda rc, r: rc == rclass)
    tagged = left(lambda rc, r: rc == rclass and trait in r['Traits'])
    room = left(lambda rc, r: rc == rclass and trait in r['Traits']
                and r['Free'] > 0)
    steps = {r['Constraint']: (r['Devices Left'], r['Hosts Left'])
             for r in rows}
    want = {'offers %s' % rclass: offers,
            'required trait %s' % trait: tagged,
            'room for 1 %s' % rclass: room}
    same = all(steps.get(k) == v for k, v in want.items())
    if not same:
        print('  explain differs: %s, expected %s' % (steps, want),
              file=sys.stderr)
    return same


def measure_capacity(runner, baseline, runs):
    """``{label: (median s, requests, same data)}`` for the capacity runs.
    """
    bare = ('mdev', 'capacity', '--resource-class', 'VGPU', '--amount', '1',
            '-f', 'json')
    traited = bare + ('--require-trait', CAPACITY_TRAIT)
    result = {}
    t, n, out = runner.measure(runs, *bare)
    result['bare'] = (t, n, capacity_same(
        json.loads(out), capacity_expected(baseline, 'VGPU')))
    t, n, out = runner.measure(runs, *traited)
    result['trait'] = (t, n, capacity_same(
        json.loads(out), capacity_expected(baseline, 'VGPU',
                                           [CAPACITY_TRAIT])))
    t, n, out = runner.measure(runs, *traited, '--explain')
    result['explain'] = (t, n, explain_same(json.loads(out), baseline,
                                            'VGPU', CAPACITY_TRAIT))
    return result


def capacity_table(results, help_ours, args):
    lines = [
        CAPACITY_HEADING, '',
        '| GPUs | Command | Median s | Requests | Same data |',
        '|---:|---|---:|---:|---|']
    for r in results:
        for key, label in (
                ('bare', '`mdev capacity --resource-class VGPU --amount 1`'),
                ('trait', '`mdev capacity --resource-class VGPU --amount 1 '
                          '--require-trait %s`' % CAPACITY_TRAIT),
                ('explain', 'the same with `--explain`')):
            t, n, ok = r['capacity'][key]
            lines.append('| %d | %s | %.2f | %d | %s |' % (
                r['gpus'], label, t, n, 'yes' if ok else 'NO'))
    lines += [
        '',
        'Measured by `python tools/bench.py --sizes %s --runs %d%s` on the '
        'same kind of cloud and machine as above (%s, %d CPUs, Python %s). '
        'Each figure is the median wall time of a whole `openstack` process '
        '(`openstack mdev provider list --help` took %.2f s in this run: '
        'the CLI starting); requests are counted by Placement. Same data: '
        'per host, the servers that fit, the free mdevs and the devices '
        'with room equal what the per-device reads (inventories, usages '
        'and traits of every GPU) give; `--explain`: the devices and '
        'hosts left after the class, the trait and the room.'
        % (','.join(str(r['gpus']) for r in results), args.runs,
           ' --only capacity' if args.only else '',
           platform.platform(terse=True), os.cpu_count(),
           platform.python_version(), help_ours)]
    return '\n'.join(lines) + '\n'


def write_output(path, main_text, capacity_text):
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


def table(results, import_ms, help_ours, help_theirs, fill_times, args):
    lines = [
        '| GPUs | Command | Median s | Requests | Req/GPU | ms/GPU | '
        'Speed-up vs naive | vs osc-placement loop | Same data |',
        '|---:|---|---:|---:|---:|---:|---:|---:|---|']
    for r in results:
        g = r['gpus']
        naive_t, naive_n = r['naive']
        listing, per_gpu, loop_ok = r['loop']
        loop_t = listing + per_gpu * g
        lines.append(
            '| %d | osc-placement loop (%d processes, extrapolated from %d '
            'GPUs) | %.0f | %d | 3.00 | %.0f | | 1x | %s |'
            % (g, 1 + 3 * g, args.sample, loop_t, 1 + 3 * g,
               loop_t / g * 1000, 'yes' if loop_ok else 'NO'))
        lines.append(
            '| %d | naive reads, one after another in one process | %.2f | '
            '%d | %.2f | %.2f | 1x | %.0fx | (baseline) |'
            % (g, naive_t, naive_n, naive_n / g, naive_t / g * 1000,
               loop_t / naive_t))
        for key, label in COMMANDS:
            t, n, ok = r[key][:3]
            extra = ''
            if len(r[key]) > 3:
                extra = ' (+%d Nova)' % r[key][3]
            speed = ('%.1fx' % (naive_t / t) if key in WHOLE else '')
            loop = '%.0fx' % (loop_t / t) if key in WHOLE else ''
            lines.append('| %d | %s | %.2f | %d%s | %.2f | %.2f | %s | %s | '
                         '%s |' % (g, label, t, n, extra, n / g, t / g * 1000,
                                   speed, loop, 'yes' if ok else 'NO'))
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
        'Median over %d runs (naive reads: %d). Requests are counted by '
        'Placement itself. The osc-placement loop '
        'is timed on %d GPUs and extrapolated: `resource provider list` '
        'once plus the sample\'s mean per GPU times the GPU count. Same '
        'data: our rows hold the same devices and classes, with the same '
        'host, device, capacity, used, free and traits (and with --long '
        'total, reserved, allocation ratio, max unit, min unit and step '
        'size) as the per-device reads, field by field; metrics: the same '
        'capacity, used and free per device, parsed with prometheus_client; '
        'with --flavor, openstack_mdev_flavor_fits equals the Total that '
        '`mdev capacity --flavor` prints; provider show: the long fields '
        'of one device; allocation list: amounts per device sum to the '
        'used count; allocation show: the same allocations as allocation '
        'list for that server; audit: an over-capacity finding for each '
        'device used beyond its capacity and none other about '
        'allocations (the stand-in Nova knows every consumer); trait set: '
        'every device gained the trait and kept the others. Nova\'s '
        'requests go to a stand-in that answers the server, flavor, '
        'service and migration lists, counted apart; trait export: the '
        'files name each device with the custom traits it carries.'
        % (','.join(str(r['gpus']) for r in results), args.runs,
           args.naive_runs, args.sample,
           '' if args.max_allocation_candidates is None else
           ' --max-allocation-candidates %d' % args.max_allocation_candidates,
           platform.platform(terse=True),
           os.cpu_count(), platform.python_version(),
           '' if args.max_allocation_candidates is None else
           ', with `[placement] max_allocation_candidates = %d`'
           % args.max_allocation_candidates, help_ours,
           help_ours, help_theirs, import_ms, args.runs, args.naive_runs,
           args.sample),
        '',
        'Filling the cloud (concurrent, %d writers): %s.' % (
            args.fill_workers, ', '.join(
                '%d GPUs in %.0f s' % f for f in fill_times)),
    ]
    return '\n'.join(lines + notes) + '\n'


# The rows of the main table, in order.
COMMANDS = (
    ('list', '`mdev provider list`'),
    ('--free', '`mdev provider list --free`'),
    ('--full', '`mdev provider list --full`'),
    ('long', '`mdev provider list --long`'),
    ('metrics', '`mdev metrics`'),
    ('metrics_flavor', '`mdev metrics --flavor %s`' % FLAVOR['name']),
    ('capacity_flavor', '`mdev capacity --flavor %s` (one run)'
     % FLAVOR['name']),
    ('show', '`mdev provider show <uuid>`'),
    ('alloc', '`mdev allocation list`'),
    ('alloc_show', '`mdev allocation show <server>`'),
    ('audit', '`mdev audit`'),
    ('dry', '`mdev trait set --all --dry-run`'),
    ('export', '`mdev trait export --provider-config-dir DIR` (one file '
               'per host)'),
    ('set', '`mdev trait set --all` (fresh trait, one run)'))
# The commands that read what the naive reads read: compared with them.
WHOLE = ('list', '--free', '--full', 'long', 'metrics')


def _interrupted(signum, frame):
    raise KeyboardInterrupt


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', default='250,1000,5000')
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--naive-runs', type=int, default=2,
                        help='runs of the in-process naive reads')
    parser.add_argument('--sample', type=int, default=3)
    parser.add_argument('--fill-workers', type=int, default=16)
    parser.add_argument('--only', choices=('capacity',),
                        help='measure only this command and rewrite only '
                             'its section of the output')
    parser.add_argument('--hold', action='store_true',
                        help='keep the cloud up after the last size, '
                             'until interrupted')
    parser.add_argument('--output', default=str(REPO / 'doc' /
                                                'bench-results.md'))
    parser.add_argument('--max-allocation-candidates', type=int,
                        help="Placement's [placement] "
                             'max_allocation_candidates (default: none)')
    args = parser.parse_args()
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
        nova = NovaServers(filler.servers, filler.classes)
        clouds = pathlib.Path(workdir) / 'clouds.yaml'
        write_clouds(clouds, placement.url, nova.url)
        runner = Runner(placement, clouds)
        import_ms = import_cost()
        help_ours, help_theirs = help_times(runner, args.runs)
        print('plugin import %.1f ms; --help %.2f s (osc-placement %.2f s)'
              % (import_ms, help_ours, help_theirs), flush=True)
        results, fill_times, hosts = [], [], 0
        for size in sizes:
            # Whole hosts: 250 GPUs are 63 hosts, 252 GPUs.
            start = time.perf_counter()
            filler.fill(hosts, -(-size // GPUS_PER_HOST))
            hosts = -(-size // GPUS_PER_HOST)
            gpus = hosts * GPUS_PER_HOST
            fill_times.append((gpus, time.perf_counter() - start))
            print('filled %d GPUs in %.0f s' % fill_times[-1], flush=True)
            results.append(measure_size(runner, placement.url, gpus, nova,
                                        args))
            text = None if args.only else table(
                results, import_ms, help_ours, help_theirs, fill_times, args)
            capacity_text = capacity_table(results, help_ours, args)
            print(text or '', capacity_text, flush=True)
            write_output(args.output, text, capacity_text)
        if args.hold:
            print('holding the cloud: OS_CLIENT_CONFIG_FILE=%s '
                  'openstack --os-cloud bench ... (Ctrl-C to stop)' % clouds,
                  flush=True)
            signal.signal(signal.SIGTERM, _interrupted)
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
        nova.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
