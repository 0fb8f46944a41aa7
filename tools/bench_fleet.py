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

"""Benchmark the check of a fleet of GPU nodes: 50, 200 and 500 nodes.

Starts openstack-placement on PostgreSQL behind gunicorn
(tests/fixtures/pg_placement.py), builds the collection with
``ansible-galaxy collection build ansible/`` and installs it, then for
each size makes a fleet (tests/fixtures/fleet.py: each node its own
sysfs tree and nova.conf, its providers in Placement, drift of every
kind, one node unreachable, one Placement does not know; the fleets of
all sizes share the Placement) and measures:

* the Ansible snapshot run: ``ansible-playbook osc_mdev.vgpu.check --tags
  snapshot`` (Ansible's local connection, ``--forks`` forks);
* the central check: ``openstack mdev config check --snapshot-dir`` on
  the snapshots, a real process; its Placement requests, counted at the
  server by path and split into the shared reads (the same whatever the
  number of nodes) and the lost-vGPU join of the nodes with findings (one
  allocations read per device in use on them, and Nova's server lists,
  which this cloud's endpoint answers at the same server);
* beside them, the node-by-node check: ``config check --sysfs --host``
  as each node would run it, a real process, timed and counted on
  ``--sample`` nodes and scaled to the fleet.

Same data: the central check's findings of the sampled nodes equal what
the node-by-node check gives on each.

Run by ``tools/bench.py`` (``tox -e bench``; ``--only fleet`` runs it
alone) or as ``python tools/bench_fleet.py [--sizes 50,200,500]
[--forks 10] [--sample 5] [--output doc/bench-fleet-results.md]``.
"""

import argparse
import dataclasses
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fixtures import fleet as fleet_fixture  # noqa: E402
from tests.fixtures import pg_placement  # noqa: E402

BIN = pathlib.Path(sys.executable).parent
SEVERITIES = ('error', 'warning', 'info')
OUTPUT = REPO / 'doc' / 'bench-fleet-results.md'


@dataclasses.dataclass
class Size:
    nodes: int
    ansible_s: float
    central_s: float
    central_requests: int
    shared_requests: int        # the central check's, beside the join
    join_requests: int          # allocations reads and Nova's lists
    with_findings: int          # nodes with an error or warning
    per_node_s: float           # one node's check, median of the sample
    per_node_requests: float    # mean of the sample
    same: bool


def install_collection(work: pathlib.Path) -> pathlib.Path:
    """Build and install the collection; answers the collections path."""
    subprocess.run([str(BIN / 'ansible-galaxy'), 'collection', 'build',
                    'ansible/', '--output-path', str(work)], cwd=REPO,
                   check=True, capture_output=True)
    [tarball] = work.glob('osc_mdev-vgpu-*.tar.gz')
    subprocess.run([str(BIN / 'ansible-galaxy'), 'collection', 'install',
                    str(tarball), '-p', str(work / 'collections')],
                   check=True, capture_output=True)
    return work / 'collections'


def openstack(env: dict, *args: str) -> tuple:
    """``openstack ARGS`` as a process: (seconds, exit status, stdout)."""
    start = time.perf_counter()
    proc = subprocess.run([str(BIN / 'openstack'), *args], env=env,
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1) or not proc.stdout.startswith('['):
        raise RuntimeError('openstack %s failed: %s' % (
            ' '.join(args), proc.stderr[-2000:]))
    return elapsed, proc.stdout


def findings(rows: list, node=None) -> set:
    """The findings of ``rows`` (of ``node``'s, when given: the rows of
    the central check whose Node names it).
    """
    return {(r['Severity'], r['Where'], r['Message']) for r in rows
            if r['Severity'] in SEVERITIES and (
                node is None or r.get('Node') in (node.host, node.name))}


def is_join(path: str) -> bool:
    """Whether a request (``METHOD PATH`` as Placement counts it) is of
    the lost-vGPU join: a device's allocations, or Nova's servers.
    """
    path = path.split(' ', 1)[1]
    return (path == '/resource_providers/{uuid}/allocations'
            or '/servers' in path)


def paths_since(placement: pg_placement.PgPlacement, before: dict) -> dict:
    """``{METHOD PATH: requests}`` answered since ``before``."""
    now = placement.stats()['paths']
    return {p: n - before.get(p, 0) for p, n in now.items()
            if n > before.get(p, 0)}


def measure(placement: pg_placement.PgPlacement, fleet, env: dict,
            work: pathlib.Path, sample: int) -> Size:
    snapshots = work / 'snapshots'
    start = time.perf_counter()
    proc = subprocess.run(
        [str(BIN / 'ansible-playbook'), 'osc_mdev.vgpu.check', '--tags',
         'snapshot', '-i', str(fleet.inventory), '-e',
         'osc_mdev_snapshot_dir=%s' % snapshots], env=env,
        capture_output=True, text=True)
    ansible_s = time.perf_counter() - start
    taken = len(list(snapshots.glob('*.json')))
    if taken != len(fleet.reachable()):
        raise RuntimeError('%d snapshots of %d nodes: %s' % (
            taken, len(fleet.reachable()), proc.stdout[-3000:]))
    print('  %d snapshots taken by Ansible in %.1f s' % (taken, ansible_s),
          flush=True)
    before = placement.stats()['paths']
    central_s, out = openstack(env, 'mdev', 'config', 'check',
                               '--snapshot-dir', str(snapshots), '-f',
                               'json')
    paths = paths_since(placement, before)
    join = sum(n for p, n in paths.items() if is_join(p))
    print('  central check requests: %s' % json.dumps(paths, indent=1),
          flush=True)
    rows = json.loads(out)
    with_findings = len({r.get('Node') for r in rows
                         if r['Severity'] in ('error', 'warning')})
    times, counts, same = [], [], True
    sampled = [n for n in fleet.reachable() if n.in_placement]
    for node in sampled[:: max(1, len(sampled) // sample)][:sample]:
        before = placement.requests()
        elapsed, out = openstack(env, 'mdev', 'config', 'check',
                                 node.nova_conf, '--sysfs', node.sysfs,
                                 '--host', node.name, '-f', 'json')
        counts.append(placement.requests() - before)
        times.append(elapsed)
        same = same and findings(rows, node) == findings(json.loads(out))
    return Size(len(fleet.nodes), ansible_s, central_s,
                sum(paths.values()), sum(paths.values()) - join, join,
                with_findings, statistics.median(times),
                statistics.mean(counts), same)


def table(results: list, args: argparse.Namespace) -> str:
    lines = [
        '# osc-mdev fleet benchmark results', '',
        '| Nodes | Ansible snapshot run s | Central check s | Central '
        'check requests | Shared requests | Join requests | Nodes with '
        'findings | Node by node s (scaled) | Node by node requests '
        '(scaled) | Same data |',
        '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|']
    for r in results:
        lines.append(
            '| %d | %.1f | %.1f | %d | %d | %d | %d | %.0f | %.0f | %s |' % (
                r.nodes, r.ansible_s, r.central_s, r.central_requests,
                r.shared_requests, r.join_requests, r.with_findings,
                r.per_node_s * r.nodes, r.per_node_requests * r.nodes,
                'yes' if r.same else 'NO'))
    lines += [
        '',
        'Measured by `python tools/bench_fleet.py --sizes %s --forks %d '
        '--sample %d` (%s, %d CPUs, Python %s). The Ansible run is '
        '`ansible-playbook osc_mdev.vgpu.check --tags snapshot` on the '
        "fleet (local connection, strategy free, %d forks): every node's "
        'snapshot, brought to the controller. The central check is one '
        '`openstack mdev config check --snapshot-dir` process; its '
        'requests are counted by Placement (PostgreSQL, gunicorn), which '
        'holds the fleets of every size: the shared requests are its reads '
        'of the whole cloud, the same at every size; the join requests '
        'name the servers on the devices of the nodes with findings (an '
        'error or a warning): one allocations read per device in use on '
        "them, and Nova's server lists, one per node whose findings name "
        "servers on a real Nova (this cloud's Nova endpoint is the "
        'Placement server: it counts them and answers 404, which ends the '
        'lists early; the servers are then named by their IDs). '
        'Node by node: `config check '
        '--sysfs --host` as a process on %d nodes of the fleet, the median '
        'time and the mean requests times the nodes. Same data: the '
        "central check's findings of those nodes equal theirs." % (
            ','.join(str(r.nodes) for r in results), args.forks,
            args.fleet_sample, platform.platform(terse=True),
            os.cpu_count(), platform.python_version(), args.forks,
            args.fleet_sample)]
    return '\n'.join(lines) + '\n'


def run(args: argparse.Namespace) -> list:
    sizes = sorted(int(s) for s in args.fleet_sizes.split(','))
    results = []
    with tempfile.TemporaryDirectory() as workdir, \
            pg_placement.running(pathlib.Path(workdir) / 'pg') as placement:
        work = pathlib.Path(workdir)
        env = fleet_fixture.ansible_env(install_collection(work), work,
                                        forks=args.forks)
        env = {k: v for k, v in env.items() if not k.startswith('OS_')}
        env.update(fleet_fixture.write_clouds_yaml(work / 'clouds.yaml',
                                                   placement.url))
        for size in sizes:
            start = time.perf_counter()
            fleet = fleet_fixture.build(work / ('fleet-%d' % size),
                                        placement.url, size,
                                        prefix='n%d' % size)
            print('fleet of %d nodes made in %.0f s' % (
                size, time.perf_counter() - start), flush=True)
            results.append(measure(placement, fleet, env,
                                   work / ('run-%d' % size),
                                   args.fleet_sample))
            print(results[-1], flush=True)
            # Each size's figures as soon as they are measured.
            text = table(results, args)
            pathlib.Path(args.fleet_output).write_text(text)
    print(text, flush=True)
    return results


def add_arguments(parser: argparse.ArgumentParser,
                  prefix: str = '') -> None:
    """The options (``--<prefix>sizes``, ``--<prefix>sample``,
    ``--<prefix>output``, ``--forks``), read by :func:`run` as
    ``fleet_sizes``, ``fleet_sample``, ``fleet_output``, ``forks``.
    """
    parser.add_argument('--%ssizes' % prefix, dest='fleet_sizes',
                        default='50,200,500', help='fleet sizes, in nodes')
    parser.add_argument('--%ssample' % prefix, dest='fleet_sample',
                        type=int, default=5,
                        help='nodes checked one by one, at each size')
    parser.add_argument('--%soutput' % prefix, dest='fleet_output',
                        default=str(OUTPUT))
    parser.add_argument('--forks', type=int, default=10,
                        help="Ansible's forks")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    add_arguments(parser)
    run(parser.parse_args())
    return 0


if __name__ == '__main__':
    sys.exit(main())
