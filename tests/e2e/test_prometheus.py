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

"""The dashboards, documented queries and alerts on a real Prometheus.

The demo cloud (real Nova, Placement and Keystone) with servers of three
projects on its GPUs; ``openstack mdev metrics --allocations --quota``
writes its file into the directory of a real node_exporter's textfile
collector, two more node_exporters serve NVIDIA DCGM exporter series of
the same GPUs (tests/fixtures/dcgm: one as dcgm-exporter's releases
label them, ``Hostname``, one as its main branch does, ``hostname``), and
a real Prometheus scrapes the three every second with the shipped rules
loaded. Every query of the shipped Grafana dashboards (template variables
substituted), every PromQL query of the metrics pages and every alert of
the rules file is evaluated through Prometheus's HTTP API; each returns
the series the cloud says it should.
"""

from __future__ import annotations

import collections
import json
import pathlib
import re
import time

from prometheus_client import parser
import pytest
import yaml

from tests.cloud import client
from tests.e2e.helpers import fits
from tests.e2e.helpers import mdev
from tests.e2e.helpers import mdev_json
from tests.fixtures import prometheus
from tools import sandbox

pytestmark = pytest.mark.prometheus

ROOT = pathlib.Path(__file__).resolve().parents[2]
ADMIN = ROOT / 'doc' / 'source' / 'admin'
RULES = ADMIN / 'osc-mdev-alerts.yml'
DCGM = ROOT / 'tests' / 'fixtures' / 'dcgm'
SMALL, HUGE, L40S = 'vgpu.nvidia-12', 'vgpu.huge', 'vgpu.l40s-2'
#: (project, server of SMALL, service host: only the admin of the
#: harness's project, demo, may choose one). gpu_node.rack3 has one VGPU
#: device, 0000:3b:01.0: demo-vm-2 is there.
SERVERS = (('demo', 'demo-vm-1', 'compute2'),
           ('demo', 'demo-vm-2', 'gpu_node.rack3'),
           ('demo', 'demo-fqdn', 'gpu4'),
           ('ml-team', 'ml-team-vm', None),
           ('ml-team', 'ml-team-vm2', None),
           # render-farm's VGPU limit is 1: at its limit.
           ('render-farm', 'render-farm-vm', None))
#: What the counts below add up to.
EVALUATED = collections.Counter()


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('cloud'),
                              keystone=True) as cloud:
        for name, specs in (
                (SMALL, {'resources:VGPU': '1'}),
                # More than any GPU holds: fits nowhere.
                (HUGE, {'resources:VGPU': '32'}),
                (L40S, {'pci_passthrough:alias': 'l40s-vf:2'})):
            cloud.control('create_flavor', name=name, extra_specs=specs)
        for project, name, host in SERVERS:
            server, = cloud.control(
                'boot', flavor=SMALL, name=name, host=host,
                project=None if host else cloud.projects[project])
            assert server['status'] == 'ACTIVE', server
        server, = cloud.control('boot', flavor=L40S, name='demo-pci')
        assert server['status'] == 'ACTIVE', server
        yield cloud


@pytest.fixture(autouse=True)
def keystone_cli(cloud, os_cloud, monkeypatch):
    """The CLI logs in to the cloud's Keystone (--quota needs it)."""
    monkeypatch.setenv('OS_CLOUD', cloud.keystone_cloud)


class Stack:
    """The cloud's metrics file, the exporters and Prometheus."""

    def __init__(self, cloud, workdir: pathlib.Path) -> None:
        self.cloud = cloud
        self.workdir = workdir
        self.textfile = workdir / 'textfile' / 'openstack_mdev.prom'
        self.textfile.parent.mkdir()
        self.conf = workdir / 'nova-compute2.conf'
        self.conf.write_text(sandbox.nova_conf(cloud.hosts['compute2']))

    def write(self, *flavors: str) -> int:
        """Run ``openstack mdev metrics`` into the textfile directory, as
        cron does; its exit status.
        """
        args = [a for f in (SMALL, HUGE) + flavors for a in ('--flavor', f)]
        result = mdev('metrics', *args, '--allocations', '--quota',
                      '--compute-conf', 'compute2=%s' % self.conf,
                      '--output', str(self.textfile))
        assert 'Traceback' not in result.stderr
        return result.rc

    def samples(self) -> dict[str, list]:
        """``{family: [(labels, value)]}`` of the file."""
        return {f.name: [(s.labels, s.value) for s in f.samples]
                for f in parser.text_string_to_metric_families(
                    self.textfile.read_text())}


def with_env(cloud, monkeypatch_context):
    monkeypatch_context.setenv('OS_CLIENT_CONFIG_FILE',
                               str(cloud.clouds_yaml))
    monkeypatch_context.setenv('OS_CLOUD', cloud.keystone_cloud)


@pytest.fixture(scope='module')
def stack(cloud, tmp_path_factory):
    workdir = tmp_path_factory.mktemp('prometheus')
    found = Stack(cloud, workdir)
    with pytest.MonkeyPatch.context() as patch:
        with_env(cloud, patch)
        assert found.write() == 0
    with prometheus.NodeExporter(found.textfile.parent,
                                 workdir / 'node.log') as node, \
            prometheus.NodeExporter(DCGM / 'released',
                                    workdir / 'dcgm1.log') as dcgm1, \
            prometheus.NodeExporter(DCGM / 'main',
                                    workdir / 'dcgm2.log') as dcgm2, \
            prometheus.Prometheus(workdir / 'prom',
                                  [node.target, dcgm1.target, dcgm2.target],
                                  rule_files=(RULES,)) as prom:
        # The textfile collector read both files without an error.
        for exporter in (node, dcgm1, dcgm2):
            assert 'node_textfile_scrape_error 0' in exporter.metrics()
        # The first scrapes of the three are in.
        prom.wait_for('openstack_mdev_scrape_success == 1')
        prom.wait_for('count(DCGM_FI_DEV_GPU_UTIL) == 10')
        found.prom = prom
        yield found


def short(host: str) -> str:
    return host.split('.')[0]


def regex(values) -> str:
    """A multi-value Grafana variable as Grafana writes it into a regex
    matcher: the values regex-escaped, in a PromQL string.
    """
    return '(%s)' % '|'.join(re.escape(v).replace('\\', '\\\\')
                             for v in sorted(values))


def substitute(expr: str, variables: dict[str, str]) -> str:
    """``expr`` with Grafana's variables replaced by values."""
    values = dict(variables, __rate_interval='1m', __interval='15s',
                  __range='1h')
    for name in sorted(values, key=len, reverse=True):
        expr = expr.replace('${%s}' % name, values[name]).replace(
            '$' + name, values[name])
    assert not re.search(r'\$[A-Za-z_{]', expr), expr
    return expr


def query(stack, expr, at=None):
    EVALUATED['query'] += 1
    return stack.prom.query(expr, at=at)


def by(result, *labels):
    """``{(label values): value}`` of a query's result."""
    found = {}
    for series in result:
        key = tuple(series['metric'].get(label, '') for label in labels)
        assert key not in found, (key, result)
        found[key] = series['value']
    return found


def file_values(stack, family, *labels):
    return {tuple(found[k] for k in labels): v
            for found, v in stack.samples().get(family, [])}


def providers():
    return mdev_json('provider', 'list', '--kind', 'all', '--long')


def dashboard_targets(name):
    dashboard = json.loads((ADMIN / name).read_text())
    for panel in dashboard['panels']:
        for target in panel.get('targets', []):
            yield panel['title'], target['refId'], target['expr']


def dcgm_fixture(metric):
    """``{(short host, pci_bus_id): value}`` of the DCGM files."""
    found = {}
    for path in DCGM.glob('*/*.prom'):
        for family in parser.text_string_to_metric_families(
                path.read_text()):
            for s in family.samples:
                if s.name == metric:
                    host = s.labels.get('Hostname') or s.labels['hostname']
                    found[short(host), s.labels['pci_bus_id']] = s.value
    return found


def expected_gpu_dashboard(stack):
    """``{(panel, refId): (labels, {label values: value})}``."""
    rows = providers()
    kind_sum = collections.defaultdict(lambda: collections.Counter())
    host_sum = collections.defaultdict(lambda: collections.Counter())
    for row in rows:
        for column in ('Free', 'Used'):
            kind_sum[column][(row['Kind'],)] += row[column]
        host_sum['Used'][row['Host']] += row['Used']
        host_sum['Capacity'][row['Host']] += row['Capacity']
    free = file_values(stack, 'openstack_mdev_device_free', 'host', 'device',
                       'kind', 'type', 'resource_class')
    by_type = collections.Counter()
    for (_, _, kind, type_, rc), value in free.items():
        by_type[kind, type_, rc] += value
    fits_now = file_values(stack, 'openstack_mdev_flavor_fits', 'flavor')
    alloc_labels = ('server', 'host', 'device', 'resource_class')
    allocations = file_values(stack, 'openstack_mdev_allocation_used',
                              *alloc_labels)
    device_free = file_values(stack, 'openstack_mdev_device_free', 'host',
                              'device', 'resource_class')
    projects = collections.Counter()
    for labels, value in stack.samples()['openstack_mdev_allocation_used']:
        projects[labels['project'], labels['kind']] += value
    util, fb_used = (dcgm_fixture('DCGM_FI_DEV_GPU_UTIL'),
                     dcgm_fixture('DCGM_FI_DEV_FB_USED'))
    on_gpu = {
        (labels['server'], labels['host'], labels['device'],
         labels['resource_class']): (short(labels['host']),
                                     labels['pci_bus_id'])
        for labels, _ in stack.samples()['openstack_mdev_allocation_used']}
    device = ('host', 'device', 'resource_class')
    return {
        ('Free', 'A'): (('kind',), dict(kind_sum['Free'])),
        ('In use', 'A'): (('kind',), dict(kind_sum['Used'])),
        ('Last read', 'A'): ((), {(): 1}),
        ('Last read', 'C'): ((), {(): 0}),
        ('Last read', 'D'): ((), {(): 0}),
        ('Read time', 'A'): ((), {(): stack.samples()[
            'openstack_mdev_scrape_duration_seconds'][0][1]}),
        ('Free GPUs by type', 'A'): (('kind', 'type', 'resource_class'),
                                     dict(by_type)),
        ('Fits per flavor', 'A'): (('flavor',), fits_now),
        ('Usage per host', 'A'): (('host',), {
            (h,): host_sum['Used'][h] / c
            for h, c in host_sum['Capacity'].items()}),
        ('Devices', 'A'): (device, file_values(
            stack, 'openstack_mdev_device_capacity', *device)),
        ('Devices', 'B'): (device, file_values(
            stack, 'openstack_mdev_device_used', *device)),
        ('Devices', 'C'): (device, device_free),
        ('Servers on the GPUs', 'A'): (alloc_labels, allocations),
        ('Servers on the GPUs', 'B'): (alloc_labels, {
            k: device_free[k[1:]] for k in allocations}),
        ('GPU units per project', 'A'): (('project', 'kind'),
                                         dict(projects)),
        # Every server's GPU is in DCGM's series: each row joined.
        ('GPU utilisation of the servers (DCGM)', 'A'): (alloc_labels, {
            k: util[gpu] for k, gpu in on_gpu.items()}),
        ('GPU utilisation of the servers (DCGM)', 'B'): (alloc_labels, {
            k: fb_used[gpu] for k, gpu in on_gpu.items()}),
    }


def test_every_query_of_the_gpu_dashboard(stack):
    expected = expected_gpu_dashboard(stack)
    hosts = {row['Host'] for row in providers()}
    # The Host variable's query, as Grafana runs label_values().
    assert set(stack.prom.api('label/host/values', **{
        'match[]': 'openstack_mdev_device_up'})) == hosts
    EVALUATED['query'] += 1
    seen = set()
    for title, ref, expr in dashboard_targets('grafana-mdev.json'):
        got = query(stack, substitute(expr, {'host': regex(hosts)}))
        if (title, ref) == ('Last read', 'B'):
            # The age of the file: seconds.
            assert len(got) == 1 and 0 <= got[0]['value'] < 120
        else:
            labels, want = expected[title, ref]
            got = by(got, *labels)
            assert got and got == pytest.approx(want), (title, ref, expr)
        seen.add((title, ref))
    assert seen == set(expected) | {('Last read', 'B')}
    EVALUATED['dashboard queries'] += len(seen)
    # The free GPUs per host equal what provider list says.
    free = collections.Counter()
    for row in providers():
        free[row['Host']] += row['Free']
    assert by(query(stack, 'sum by (host) (openstack_mdev_host_free)'),
              'host') == {(h,): v for h, v in free.items()}
    # And the flavor's fits what capacity --flavor says.
    assert expected['Fits per flavor', 'A'][1] == {
        (SMALL,): fits(SMALL), (HUGE,): 0}


def test_the_host_variable_narrows_the_panels(stack):
    one = 'gpu4.dc2.example.net'
    for title, ref, expr in dashboard_targets('grafana-mdev.json'):
        if '$host' not in expr:
            continue
        got = query(stack, substitute(expr, {'host': regex([one])}))
        assert got, (title, ref)
        for series in got:
            assert series['metric'].get('host', one) == one, (title, ref)


def expected_quota_dashboard(stack):
    used = file_values(stack, 'openstack_mdev_project_used', 'project',
                       'project_name', 'resource_class')
    limit = file_values(stack, 'openstack_mdev_project_limit', 'project',
                        'project_name', 'resource_class')
    assert used.keys() == limit.keys()
    # A limit of 0 (a class the project may not use) is left out by the
    # panel and the alert alike.
    at_limit = [k for k in used if 0 < limit[k] <= used[k]]
    labels = ('project', 'project_name', 'resource_class')
    return {
        ('Projects at their GPU limit', 'A'): ((), {(): len(at_limit)}),
        ('GPUs held under a limit', 'A'): ((), {(): sum(
            v for k, v in used.items() if limit[k] >= 0)}),
        ('Projects holding GPUs', 'A'): ((), {(): len(
            {k[0] for k, v in used.items() if v > 0})}),
        ('Quota pressure', 'A'): (labels, {
            k: used[k] / limit[k] for k in used if limit[k] > 0}),
        ('GPU used per project', 'A'): (labels, used),
        ('Quota per project', 'A'): (labels, used),
        ('Quota per project', 'B'): (labels, limit),
    }, at_limit


def test_every_query_of_the_quota_dashboard(stack):
    expected, at_limit = expected_quota_dashboard(stack)
    # render-farm holds its one vGPU.
    assert [(k[1], k[2]) for k in at_limit] == [('render-farm', 'VGPU')]
    classes = stack.prom.api('label/resource_class/values', **{
        'match[]': 'openstack_mdev_project_used'})
    EVALUATED['query'] += 1
    assert {'VGPU', 'CUSTOM_NVIDIA_L40S_VF'} <= set(classes)
    seen = set()
    for title, ref, expr in dashboard_targets('grafana-mdev-quota.json'):
        labels, want = expected[title, ref]
        got = by(query(stack, substitute(
            expr, {'resource_class': regex(classes)})), *labels)
        assert got and got == pytest.approx(want), (title, ref, expr)
        seen.add((title, ref))
    assert seen == set(expected)
    EVALUATED['dashboard queries'] += len(seen)


def promql_blocks(page: str):
    """The ``.. code-block:: promql`` blocks of a page: (caption, text)."""
    text = (ADMIN / page).read_text()
    for match in re.finditer(
            r'^\.\. code-block:: promql\n((?:    :.*\n)*)\n'
            r'((?:(?:    .*)?\n)+)', text, re.M):
        caption = re.search(r':caption: (.*)', match.group(1)).group(1)
        body = '\n'.join(line[4:] for line in match.group(2).splitlines())
        yield caption, body.strip()


def test_every_documented_query(stack):
    util = dcgm_fixture('DCGM_FI_DEV_GPU_UTIL')
    bus = collections.defaultdict(float)
    for (host, pci), value in util.items():
        key = host, pci.rsplit(':', 1)[0]
        bus[key] = max(bus[key], value)
    allocations = stack.samples()['openstack_mdev_allocation_used']
    projects = collections.Counter()
    for labels, value in allocations:
        projects[labels['project']] += value
    # A server's hold on one device: (server, host, device).
    hold = ('server', 'host', 'device')
    gpu = {tuple(labels[k] for k in hold): (short(labels['host']),
                                            labels['pci_bus_id'])
           for labels, _ in allocations}
    free = file_values(stack, 'openstack_mdev_device_free', 'host', 'device',
                       'resource_class')
    checks = {
        'GPU units per project': (('project',), {
            (p,): v for p, v in projects.items()}),
        'The servers on one GPU': (('server_name',), {
            (labels['server_name'],): value for labels, value in allocations
            if (labels['host'], labels['device']) == (
                'gpu_node.rack3', '0000:3b:01.0')}),
        'Each server with what is left on its GPU': (hold, {
            tuple(labels[k] for k in hold): free[
                labels['host'], labels['device'], labels['resource_class']]
            for labels, _ in allocations}),
        'The utilisation of the GPU each server is on': (hold, {
            k: util[g] for k, g in gpu.items()}),
        'The utilisation of the physical GPU of each server on a VF': (
            hold, {k: bus[g[0], g[1].rsplit(':', 1)[0]]
                   for k, g in gpu.items()}),
    }
    seen = set()
    for caption, expr in promql_blocks('metrics.rst'):
        labels, want = checks[caption]
        got = by(query(stack, expr), *labels)
        assert got and got == pytest.approx(want), (caption, expr)
        seen.add(caption)
    assert seen == set(checks)
    EVALUATED['documented queries'] += len(seen)


def without_target(labels):
    """A series' labels but those Prometheus adds for the target."""
    return {k: v for k, v in labels.items()
            if k not in ('instance', 'job', '__name__')}


def alert_rules():
    groups = yaml.safe_load(RULES.read_text())['groups']
    return {rule['alert']: rule['expr'] for group in groups
            for rule in group['rules']}


def test_every_alert_on_the_cloud(stack):
    rules = alert_rules()
    fired = {name: query(stack, expr) for name, expr in rules.items()}
    EVALUATED['alerts'] += len(fired)
    _, at_limit = expected_quota_dashboard(stack)
    assert {name: [without_target(s['metric']) for s in found]
            for name, found in fired.items() if found} == {
        'OpenstackMdevFlavorFull': [{'flavor': HUGE}],
        'OpenstackMdevProjectAtGpuLimit': [
            {'project': k[0], 'project_name': k[1], 'resource_class': k[2]}
            for k in at_limit]}
    # Nothing is stale now; seven minutes on, with no new run, it is.
    stale = rules['OpenstackMdevMetricsStale']
    assert len(query(stack, stale, at=time.time() + 420)) == 1
    assert query(stack, stale, at=time.time() + 120) == []
    # Every device read, none unreadable: the same series at 1.
    assert query(stack, 'count(openstack_mdev_device_up == 1)')[0][
        'value'] == len(providers())
    # Prometheus loaded the file; its alerts with a "for" are pending.
    loaded = stack.prom.api('rules')
    health = {r['name']: r['health'] for g in loaded['groups']
              for r in g['rules']}
    assert health == {name: 'ok' for name in rules}
    deadline = time.monotonic() + 30
    while True:
        alerts = stack.prom.api('alerts')['alerts']
        if len(alerts) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert {(a['labels']['alertname'], a['state']) for a in alerts} == {
        ('OpenstackMdevFlavorFull', 'pending'),
        ('OpenstackMdevProjectAtGpuLimit', 'pending')}


def test_alerts_of_a_run_that_fails(stack):
    """A flavor that does not exist: the run fails, the file is replaced
    and Prometheus alerts on it.
    """
    rules = alert_rules()
    assert stack.write('vgpu.never-created') == 1
    stack.prom.wait_for('openstack_mdev_scrape_success == 0')
    assert [s['metric']['flavor'] for s in query(
        stack, rules['OpenstackMdevFlavorUnreadable'])] == [
            'vgpu.never-created']
    assert len(query(stack, rules['OpenstackMdevMetricsFailing'])) == 1
    assert query(stack, rules['OpenstackMdevDeviceUnreadable']) == []
    # Back to a good run.
    assert stack.write() == 0
    stack.prom.wait_for('openstack_mdev_scrape_success == 1')
    assert query(stack, rules['OpenstackMdevFlavorUnreadable']) == []


def test_count_of_what_was_evaluated(stack):
    # Runs last in the module: every query above went to Prometheus.
    print('\nOn Prometheus: %s' % ', '.join(
        '%s %d' % item for item in sorted(EVALUATED.items())))
    assert EVALUATED['dashboard queries'] == len(list(
        dashboard_targets('grafana-mdev.json'))) + len(list(
            dashboard_targets('grafana-mdev-quota.json')))
    assert EVALUATED['alerts'] == len(alert_rules())
    assert EVALUATED['documented queries'] == len(list(
        promql_blocks('metrics.rst')))
