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

"""Benchmark ``openstack mdev quota list`` at 1,000 projects.

A real Keystone (tests/fixtures/keystone_server.py) holds PROJECTS
projects and Nova's unified limits (registered limits, and project limits
for one project in four); openstack-placement on PostgreSQL behind
gunicorn (tests/fixtures/pg_placement.py), validating Keystone's tokens
with keystonemiddleware, holds a cloud of GPUs in Nova's layout whose
allocations belong to those projects: the projects with a limit of their
own, and HOLDERS more that use the registered default. The CLI logs in to
Keystone with a password and finds Placement and Nova in its catalog;
Nova is a stand-in that answers the server list (every consumer of the
fill, as a server of its project), one flavor, the services and each
project's count of servers.

Measured, each run a real ``openstack`` process, with requests counted
by each server (Keystone, Placement, Nova):

* ``quota list`` while projects without a limit of their own hold GPUs
  (the holders are looked for), and again once every holder has a limit
  of its own;
* ``quota list --project`` of one project;
* ``quota list --flavor``;
* the per-project way: every project's ``GET /usages`` with Keystone's
  limits, one request after another, in this process.

Each answer's rows are checked against the per-project reads (project,
resource, used, limit). ``section()`` answers the results as a Markdown
section (for tools/bench.py to gather); ``main`` writes it to
doc/bench-quota-results.md, which the performance page includes.

Usage: python tools/bench_quota.py [--projects 1000] [--hosts 250]
       [--holders 150] [--runs 3] [--output doc/bench-quota-results.md]
(``tox -e bench-quota -- [options]``).
"""

import argparse
import collections
import collections.abc
from concurrent import futures
import json
import os
import pathlib
import platform
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

from tests.fixtures import keystone_server  # noqa: E402
from tests.fixtures import pg_placement  # noqa: E402
from tests.fixtures import servers  # noqa: E402
from tests.fixtures import wsgi_server  # noqa: E402

OUTPUT = REPO / 'doc' / 'bench-quota-results.md'
GPUS_PER_HOST = 4
BUSES = (0x3b, 0x5e, 0x86, 0xaf)
A40 = 'CUSTOM_NVIDIA_A40'
REGISTERED = {'servers': 50, 'class:VGPU': 2, 'class:%s' % A40: 0}
FLAVOR = {'id': 'f0a1b2c3-0000-4000-8000-0000000000bb',
          'name': 'vgpu.bench', 'vcpus': 4, 'ram': 8192, 'disk': 0,
          'extra_specs': {'resources:VGPU': '1'}}


# -- the cloud ----------------------------------------------------------------

class Identity:
    """Keystone as its administrator: projects, catalog, limits."""

    def __init__(self, keystone: servers.KeystoneProcess) -> None:
        self.url = keystone.url + '/v3'
        self.session = requests.Session()
        resp = self.session.post(self.url + '/auth/tokens', json={'auth': {
            'identity': {'methods': ['password'], 'password': {'user': {
                'name': keystone.admin_user, 'domain': {'name': 'Default'},
                'password': keystone.admin_password}}},
            'scope': {'project': {'name': keystone.admin_project,
                                  'domain': {'name': 'Default'}}}}})
        resp.raise_for_status()
        self.token = resp.headers['X-Subject-Token']
        self.session.headers['X-Auth-Token'] = self.token

    def call(self, method: str, path: str,
             body: dict | None = None) -> dict | None:
        resp = self.session.request(method, self.url + path, json=body)
        if resp.status_code >= 400:
            raise RuntimeError('%s %s: %s' % (method, path, resp.text))
        return resp.json() if resp.content else None

    def service(self, kind: str, url: str) -> str:
        service = self.call('POST', '/services', {'service': {
            'type': kind, 'name': kind}})['service']['id']
        for interface in ('public', 'internal'):
            self.call('POST', '/endpoints', {'endpoint': {
                'service_id': service, 'interface': interface, 'url': url,
                'region_id': keystone_server.REGION}})
        return service

    def limits(self, service: str, registered: dict | None = None,
               projects: list[tuple[str, str, int]] = ()) -> None:
        """Registered limits ``{name: value}``; project limits
        ``[(project id, name, value)]``, 100 a request.
        """
        region = keystone_server.REGION
        if registered:
            self.call('POST', '/registered_limits', {'registered_limits': [
                {'service_id': service, 'region_id': region,
                 'resource_name': n, 'default_limit': v}
                for n, v in sorted(registered.items())]})
        projects = list(projects)
        for start in range(0, len(projects), 100):
            self.call('POST', '/limits', {'limits': [
                {'service_id': service, 'region_id': region,
                 'project_id': p, 'resource_name': n, 'resource_limit': v}
                for p, n, v in projects[start:start + 100]]})


def gpu_class(h: int, g: int) -> str:
    return A40 if (h % 5 == 4 and g == 3) else 'VGPU'


def fill_placement(url: str, token: str, hosts: int,
                   holders: list[str]) -> dict[str, tuple[str, str]]:
    """``hosts`` compute nodes of 4 GPUs; each GPU's consumers belong to
    the ``holders`` (project IDs) in turn. Answers ``{consumer:
    (project, resource class)}``.
    """
    session = requests.Session()
    session.headers.update({'X-Auth-Token': token,
                            'OpenStack-API-Version': 'placement 1.38'})

    def call(method: str, path: str, body: dict | None = None) -> dict | None:
        resp = session.request(method, url + path, json=body)
        if resp.status_code >= 400:
            raise RuntimeError('%s %s: %s' % (method, path, resp.text))
        return resp.json() if resp.content else None

    def provider(name: str, inventories: dict,
                 parent: str | None = None) -> str:
        body = {'name': name, 'uuid': str(uuidlib.uuid4())}
        if parent:
            body['parent_provider_uuid'] = parent
        rp = call('POST', '/resource_providers', body)
        call('PUT', '/resource_providers/%s/inventories' % rp['uuid'], {
            'resource_provider_generation': rp['generation'],
            'inventories': inventories})
        return rp['uuid']

    call('PUT', '/resource_classes/%s' % A40)
    owners = {}
    lock = threading.Lock()
    turn = iter(range(10 ** 9))

    def host(h: int) -> None:
        name = 'gpu%05d.example.net' % h
        root = provider(name, {
            'VCPU': {'total': 128, 'allocation_ratio': 4.0},
            'MEMORY_MB': {'total': 1048576}, 'DISK_GB': {'total': 4000}})
        consumers = {}
        for g in range(GPUS_PER_HOST):
            rc = gpu_class(h, g)
            total = 8 if rc == A40 else 16
            gpu = provider('%s_pci_0000_%02x_00_0' % (name, BUSES[g]), {
                rc: {'total': total, 'max_unit': total}}, parent=root)
            for _ in range([0, 1, 2, 4, total, 3][(h + g) % 6]):
                with lock:
                    project = holders[next(turn) % len(holders)]
                consumer = str(uuidlib.uuid4())
                consumers[consumer] = {
                    'allocations': {
                        root: {'resources': {'VCPU': 4,
                                             'MEMORY_MB': 8192}},
                        gpu: {'resources': {rc: 1}}},
                    'project_id': project, 'user_id': 'bench',
                    'consumer_generation': None,
                    'consumer_type': 'INSTANCE'}
                owners[consumer] = (project, rc)
        if consumers:
            call('POST', '/allocations', consumers)

    with futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(host, range(hosts)))
    return owners


class Nova:
    """A stand-in for what ``quota list`` asks Nova: the server list (all
    projects, paged; each consumer of the fill as a server of its
    project whose flavor asks for what it holds), one flavor, the
    services, a project's quota set. Counts the requests it answers.
    With ``listing`` False it answers no server list, as a Nova that
    cannot be reached.
    """

    def __init__(self, owners: dict[str, tuple[str, str]]) -> None:
        self.owners = owners
        self.ids = sorted(owners)
        self.count = collections.Counter(p for p, _ in owners.values())
        self.requests = 0
        self.listing = True
        self.server = wsgi_server.make_server(self.app)
        self.url = 'http://127.0.0.1:%d' % self.server.server_port
        threading.Thread(target=self.server.serve_forever,
                         daemon=True).start()

    def _servers(self, query: dict) -> dict:
        ids = self.ids
        if 'marker' in query:
            ids = ids[ids.index(query['marker']) + 1:]
        limit = int(query.get('limit', 1000))
        page = [{'id': s, 'tenant_id': self.owners[s][0], 'name': s[:8],
                 'flavor': {'original_name': 'vgpu', 'extra_specs': {
                     'resources:%s' % self.owners[s][1]: '1'}}}
                for s in ids[:limit]]
        body = {'servers': page}
        if len(ids) > limit:
            body['servers_links'] = [{'rel': 'next', 'href': '%s?%s' % (
                self.url + '/v2.1/servers/detail', urllib.parse.urlencode(
                    dict(query, marker=page[-1]['id'])))}]
        return body

    def answer(self, path: str, query: dict) -> dict | None:
        version = {'id': 'v2.1', 'status': 'CURRENT', 'version': '2.96',
                   'min_version': '2.1', 'updated': '2013-07-23T11:33:21Z',
                   'links': [{'rel': 'self', 'href': self.url + '/v2.1/'}]}
        if path in ('', '/v2.1'):
            return {'version': version} if path else {'versions': [version]}
        if path == '/v2.1/servers/detail' and self.listing:
            return self._servers(query)
        if path == '/v2.1/flavors/detail':
            return {'flavors': [FLAVOR]}
        if path in ('/v2.1/flavors/%s' % FLAVOR['id'],
                    '/v2.1/flavors/%s' % FLAVOR['name']):
            return {'flavor': FLAVOR}
        if path == '/v2.1/os-services':
            return {'services': []}
        if path.startswith('/v2.1/os-quota-sets/'):
            project = path.split('/')[3]
            return {'quota_set': {'id': project, 'instances': {
                'in_use': self.count[project], 'limit': 0, 'reserved': 0}}}
        return None

    def app(self, environ: dict,
            start_response: collections.abc.Callable) -> list[bytes]:
        self.requests += 1
        body = self.answer(environ['PATH_INFO'].rstrip('/'), dict(
            urllib.parse.parse_qsl(environ.get('QUERY_STRING', ''))))
        status = '200 OK'
        if body is None:
            status, body = '404 Not Found', {'itemNotFound': {
                'code': 404, 'message': 'not found'}}
        data = json.dumps(body).encode()
        start_response(status, [('Content-Type', 'application/json'),
                                ('Content-Length', str(len(data)))])
        return [data]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- measuring ----------------------------------------------------------------

class Cloud:
    """The filled cloud and the counters of its three services."""

    def __init__(self, keystone: servers.KeystoneProcess,
                 placement: pg_placement.PgPlacement, nova: Nova,
                 workdir: str) -> None:
        self.keystone, self.placement, self.nova = keystone, placement, nova
        clouds = pathlib.Path(workdir) / 'clouds.yaml'
        clouds.write_text(json.dumps({'clouds': {'bench': {
            'auth': {'auth_url': keystone.url + '/v3',
                     'username': keystone.admin_user,
                     'password': keystone.admin_password,
                     'project_name': keystone.admin_project,
                     'user_domain_name': 'Default',
                     'project_domain_name': 'Default'},
            'region_name': keystone.region, 'identity_api_version': '3',
            'compute_api_version': '2.96'}}}))
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith('OS_')}
        self.env['OS_CLIENT_CONFIG_FILE'] = str(clouds)

    def counts(self) -> tuple[int, int, int, int]:
        """Requests so far: Keystone's reads of limits, services and
        projects, Keystone's other requests (authentication, version
        discovery, Placement's validation of the token), Placement's,
        Nova's.
        """
        paths = self.keystone.stats()['paths']
        reads = sum(n for path, n in paths.items() if path.split()[1] in (
            '/v3/registered_limits', '/v3/limits', '/v3/projects',
            '/v3/services'))
        return (reads, sum(paths.values()) - reads,
                self.placement.requests(), self.nova.requests)

    def run(self, runs: int, *args: str) -> tuple[float, tuple, list]:
        """Median seconds, requests of the last run per service
        (Keystone's reads, Keystone's authentication, Placement, Nova),
        and its JSON rows.
        """
        times = []
        for _ in range(runs):
            before = self.counts()
            start = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, '-m', 'openstackclient.shell',
                 '--os-cloud', 'bench', 'mdev', 'quota', 'list', *args,
                 '-f', 'json'], capture_output=True, text=True, env=self.env)
            times.append(time.perf_counter() - start)
            if proc.returncode:
                raise RuntimeError(proc.stderr[-2000:])
            spent = tuple(a - b for a, b in zip(self.counts(), before))
        return statistics.median(times), spent, json.loads(proc.stdout)


def per_project_reads(cloud: Cloud, identity: Identity,
                      projects: list[str]) -> tuple[dict, float, int]:
    """Every project's usages and Nova's limits, one request after
    another: ``({(project, resource): (used, limit)}, seconds, requests)``
    with the rows ``quota list`` must show (GPU usage or a project limit
    of its own on a GPU class).
    """
    start = time.perf_counter()
    session = requests.Session()
    session.headers.update({'X-Auth-Token': identity.token,
                            'OpenStack-API-Version': 'placement 1.9'})
    registered = {r['resource_name']: r['default_limit'] for r in
                  identity.call('GET', '/registered_limits')[
                      'registered_limits']}
    own = {(lim['project_id'], lim['resource_name']): lim['resource_limit']
           for lim in identity.call('GET', '/limits')['limits']}
    rows = {}
    for project in projects:
        usages = session.get(cloud.placement.url + '/usages', params={
            'project_id': project}).json()['usages']
        for rc in ('VGPU', A40):
            name = 'class:%s' % rc
            if usages.get(rc) or (project, name) in own:
                rows[(project, name)] = (usages.get(rc, 0), own.get(
                    (project, name), registered[name]))
    return rows, time.perf_counter() - start, 2 + len(projects)


def same(rows: list[dict], expected: dict) -> bool:
    got = {(r['Project'], r['Resource']): (r['Used'], r['Limit'])
           for r in rows}
    return got == expected


def measure(cloud: Cloud, identity: Identity, projects: list[str],
            limited: list[str], others: list[str],
            runs: int) -> tuple[list[tuple], int]:
    """The table rows of the benchmark."""
    results = []
    expected, naive_time, naive_requests = per_project_reads(
        cloud, identity, projects)
    t, spent, rows = cloud.run(runs)
    results.append(('quota list, %d projects hold GPUs without a limit of '
                    'their own' % len(others), t, spent, same(rows,
                                                              expected)))
    cloud.nova.listing = False
    t, spent, rows = cloud.run(runs)
    cloud.nova.listing = True
    results.append(('the same, Nova listing no server (each device in use '
                    'and each consumer asked)', t, spent,
                    same(rows, expected)))
    t, spent, rows = cloud.run(runs, '--project', limited[0])
    results.append(('quota list --project (one project)', t, spent,
                    same(rows, {k: v for k, v in expected.items()
                                if k[0] == limited[0]})))
    t, spent, rows = cloud.run(runs, '--flavor', FLAVOR['name'])
    results.append(('quota list --flavor (servers limit enforced: one '
                    'count of servers per project)', t, spent,
                    {r['Project'] for r in rows} == {p for p, _ in
                                                     expected}))
    service = identity.call('GET', '/services?type=compute')['services'][0]
    identity.limits(service['id'], projects=[
        (p, 'class:VGPU', 4) for p in others])
    expected, _, _ = per_project_reads(cloud, identity, projects)
    t, spent, rows = cloud.run(runs)
    results.append(('quota list, every holder has a limit of its own', t,
                    spent, same(rows, expected)))
    results.append(('per-project reads (every project\'s usages), one '
                    'after another', naive_time,
                    (2, 0, naive_requests - 2, 0), True))
    return results, len(expected)


HEADING = '## `openstack mdev quota list` at %d projects'


def markdown(args: argparse.Namespace, results: list[tuple], gpus: int,
             holders: int, rows: int) -> str:
    lines = [
        'Keystone (SQLite, requests served one at a time) with %d projects, '
        'registered limits and project limits for one project in four; '
        'Placement on PostgreSQL behind gunicorn with %d GPUs (%d compute '
        'nodes), their allocations held by %d projects; a stand-in Nova. '
        'Median of %d runs of a real `openstack` process; requests counted '
        'by each server: Keystone\'s reads of limits, services and projects, '
        'and apart its other requests (the CLI\'s authentication and version '
        'discovery, Placement\'s validation of the token). Same data: the '
        'rows (project, resource, used, limit) are those of the per-project '
        'reads. %d rows. Python %s.' % (
            args.projects, gpus, args.hosts, holders, args.runs, rows,
            platform.python_version()), '',
        '| Command | Time (s) | Keystone reads | Keystone auth | Placement '
        '| Nova | Same data |',
        '|---|---:|---:|---:|---:|---:|---|']
    for name, seconds, (k, auth, p, n), ok in results:
        lines.append('| %s | %.2f | %d | %d | %d | %d | %s |' % (
            name, seconds, k, auth, p, n, 'yes' if ok else 'NO'))
    return '\n'.join(lines) + '\n'


def run(args: argparse.Namespace) -> str:
    """Build the cloud, measure, answer the Markdown section."""
    with tempfile.TemporaryDirectory(prefix='osc-mdev-bench-quota-') as tmp:
        keystone = servers.KeystoneProcess(pathlib.Path(tmp) / 'keystone')
        nova = None
        try:
            identity = Identity(keystone)
            print('creating %d projects' % args.projects, flush=True)
            projects = [identity.call('POST', '/projects', {'project': {
                'name': 'project-%04d' % i, 'domain_id': 'default'}})[
                'project']['id'] for i in range(args.projects)]
            limited = projects[::4]
            others = [p for p in projects if p not in set(limited)][
                :args.holders]
            with pg_placement.running(options={
                    'api': {'auth_strategy': 'keystone'},
                    'keystone_authtoken': {
                        'auth_url': keystone.url, 'auth_type': 'password',
                        'www_authenticate_uri': keystone.url,
                        'username': keystone.admin_user,
                        'password': keystone.admin_password,
                        'project_name': keystone.admin_project,
                        'user_domain_name': 'Default',
                        'project_domain_name': 'Default'}}) as placement:
                print('filling Placement', flush=True)
                owners = fill_placement(placement.url, identity.token,
                                        args.hosts, limited + others)
                nova = Nova(owners)
                compute = identity.service('compute', nova.url + '/v2.1')
                identity.service('placement', placement.url)
                identity.limits(compute, REGISTERED, [
                    (p, rc, value) for p in limited
                    for rc, value in (('class:VGPU', 8),
                                      ('class:%s' % A40, 4))])
                cloud = Cloud(keystone, placement, nova, tmp)
                print('measuring', flush=True)
                results, rows = measure(cloud, identity, projects, limited,
                                        others, args.runs)
                return markdown(args, results, args.hosts * GPUS_PER_HOST,
                                len({p for p, _ in owners.values()}), rows)
        finally:
            if nova is not None:
                nova.stop()
            keystone.stop()


def section(projects: int = 1000, hosts: int = 250, holders: int = 150,
            runs: int = 3) -> str:
    """The Markdown section of the results, with its heading, for a
    caller such as tools/bench.py that gathers every benchmark in one
    document.
    """
    return '%s\n\n%s' % (HEADING % projects, run(argparse.Namespace(
        projects=projects, hosts=hosts, holders=holders, runs=runs)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--projects', type=int, default=1000)
    parser.add_argument('--hosts', type=int, default=250)
    parser.add_argument('--holders', type=int, default=150,
                        help='projects without a limit of their own that '
                             'hold GPUs')
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--output', default=str(OUTPUT))
    args = parser.parse_args(argv)
    text = run(args)
    print(text)
    pathlib.Path(args.output).write_text(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
