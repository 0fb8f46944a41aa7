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

"""Benchmark the central check of many nodes against the node-by-node
check.

Starts a real Placement (tests/fixtures/servers.py) and grows a cloud
through each size (default 50, 200 and 500 compute nodes in Nova's
layout, two mdev GPUs each, one vGPU in use on each node); one node in
ten lost its mdev (a drift whose finding names the servers, so their
allocations are read). Each node has a host snapshot
(``local.snapshot.take`` of a kernel-shaped sysfs tree and its
nova.conf). Measured at each size, each run a real ``openstack``
process, requests counted by Placement:

* the central check, ``config check --snapshot-dir`` of every node;
* node by node, ``config check <nova.conf> --sysfs <root> --host
  <node>``, timed on SAMPLE nodes and scaled to all of them.

Each node's findings from the central check are compared with its own
check's on the sampled nodes. ``section()`` answers the results as a
Markdown section (for tools/bench.py to gather).

Usage: python tools/bench_fleet_check.py [--sizes 50,200,500]
       [--sample 3] [--runs 1]
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from osc_mdev.local import snapshot  # noqa: E402
from tests.fixtures import placement_data  # noqa: E402
from tests.fixtures import servers  # noqa: E402
from tests.fixtures import sysfs  # noqa: E402

HEADING = '## The central check of many nodes (`config check --snapshot-dir`)'
CONF = """[devices]
enabled_mdev_types = nvidia-36
[mdev_nvidia-36]
device_addresses = 0000:84:00.0,0000:85:00.0
[libvirt]
live_migration_downtime = 500000
live_migration_downtime_steps = 3
live_migration_downtime_delay = 3
"""
GPUS = ('0000:84:00.0', '0000:85:00.0')
FINDINGS = ('error', 'warning', 'info')


def node_name(n: int) -> str:
    return 'gpu%04d.example.com' % n


def drifted(n: int) -> bool:
    return n % 10 == 3


def openstack(url: str, *args: str) -> tuple[float, int, list]:
    """``(seconds, exit status, rows)`` of one ``openstack`` process."""
    cmd = [sys.executable, '-m', 'openstackclient.shell',
           '--os-auth-type', 'admin_token', '--os-token', 'admin',
           '--os-endpoint', url, *args, '-f', 'json']
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1) or not proc.stdout:
        raise SystemExit('%s failed: %s' % (' '.join(args), proc.stderr))
    return elapsed, proc.returncode, json.loads(proc.stdout)


def served(url: str) -> int:
    return placement_data.server_stats(url)['requests']


class Fleet:
    """The nodes: in Placement, and a snapshot each in ``snapshots``."""

    def __init__(self, url: str, base: pathlib.Path) -> None:
        self.placement = placement_data.Placement(url)
        self.base = base
        self.snapshots = base / 'snapshots'
        self.snapshots.mkdir()
        self.conf = base / 'nova.conf'
        self.conf.write_text(CONF)
        # One tree with the mdev in use, one that lost it.
        self.trees = {}
        self.documents = {}
        for lost in (False, True):
            root = sysfs.build(base / ('lost' if lost else 'kept'), devices=[
                (a, {'nvidia-36': 4}, None) for a in GPUS],
                mdevs=[] if lost else [(str(uuid.uuid4()), GPUS[0],
                                        'nvidia-36')])
            self.trees[lost] = root
            self.documents[lost] = snapshot.take(
                root, [str(self.conf)], str(base / 'qemu'))
        self.size = 0

    def grow(self, size: int) -> None:
        for n in range(self.size, size):
            name = node_name(n)
            gpus = [placement_data.Gpu('pci_%s' % a.replace(':', '_').replace(
                '.', '_'), 'VGPU', 4, ('CUSTOM_NVIDIA_36',)) for a in GPUS]
            root = self.placement.add_compute_node(name, gpus)
            self.placement.boot_server(root, gpus[0])
            document = json.loads(json.dumps(self.documents[drifted(n)]))
            document['node']['given'] = name
            (self.snapshots / ('%s.json' % name)).write_text(
                snapshot.dumps(document))
        self.size = size


def findings(rows: list) -> list:
    return [(r['Severity'], r['Where'], r['Message']) for r in rows
            if r['Severity'] in FINDINGS]


def measure(url: str, fleet: Fleet, sample: int, runs: int) -> dict:
    """The central check and the node-by-node one at the fleet's size."""
    times, counts = [], []
    for _ in range(runs):
        before = served(url)
        elapsed, _, rows = openstack(url, 'mdev', 'config', 'check',
                                     '--snapshot-dir', str(fleet.snapshots))
        counts.append(served(url) - before)
        times.append(elapsed)
    by_node: dict[str, list] = {}
    for row in rows:
        by_node.setdefault(row['Node'], []).append(row)
    same = len(by_node) == fleet.size
    node_times, node_counts = [], []
    picked = sorted({0, 3, fleet.size - 1} | set(range(sample)))[:max(
        sample, 2)]
    for n in picked:
        before = served(url)
        elapsed, _, alone = openstack(
            url, 'mdev', 'config', 'check', str(fleet.conf), '--sysfs',
            fleet.trees[drifted(n)], '--host', node_name(n))
        node_counts.append(served(url) - before)
        node_times.append(elapsed)
        same = same and findings(alone) == findings(by_node[node_name(n)])
    return {'nodes': fleet.size, 'time': statistics.median(times),
            'requests': max(counts),
            'node_time': statistics.mean(node_times) * fleet.size,
            'node_requests': round(statistics.mean(node_counts) *
                                   fleet.size),
            'drifted': sum(1 for n in range(fleet.size) if drifted(n)),
            'same': same}


def markdown(results: list[dict], args: argparse.Namespace) -> str:
    lines = ['| Nodes | Drifted | Central: time | Central: requests | '
             'Node by node: time | Node by node: requests | Same findings |',
             '|---:|---:|---:|---:|---:|---:|:---:|']
    for r in results:
        lines.append('| %d | %d | %.1f s | %d | %.0f s | %d | %s |' % (
            r['nodes'], r['drifted'], r['time'], r['requests'],
            r['node_time'], r['node_requests'],
            'yes' if r['same'] else 'NO'))
    lines += ['', 'Measured by `python tools/bench_fleet_check.py --sizes '
              '%s --sample %d --runs %d`. Central: one `openstack mdev '
              'config check --snapshot-dir` of every node (median time, '
              'most requests). Node by node: `config check --sysfs --host` '
              'on %d sampled nodes, scaled to all. The central requests '
              'beyond the shared reads are the allocations of the devices '
              'in use on drifted nodes (one each) and their servers in '
              "Nova (one list per node; this Placement answers Nova's URL "
              'too, so they are counted here).'
              % (args.sizes, args.sample, args.runs, args.sample)]
    return '\n'.join(lines) + '\n'


def run(args: argparse.Namespace) -> str:
    sizes = [int(s) for s in args.sizes.split(',')]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        server = servers.PlacementProcess(pathlib.Path(tmp) / 'placement')
        try:
            fleet = Fleet(server.url, pathlib.Path(tmp))
            for size in sizes:
                fleet.grow(size)
                results.append(measure(server.url, fleet, args.sample,
                                       args.runs))
                print(results[-1], flush=True)
        finally:
            server.stop()
    return markdown(results, args)


def section(sizes: str = '50,200,500', sample: int = 3,
            runs: int = 1) -> str:
    """The Markdown section of the results, with its heading, for
    tools/bench.py.
    """
    return '%s\n\n%s' % (HEADING, run(argparse.Namespace(
        sizes=sizes, sample=sample, runs=runs)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', default='50,200,500')
    parser.add_argument('--sample', type=int, default=3)
    parser.add_argument('--runs', type=int, default=1)
    args = parser.parse_args(argv)
    print(HEADING + '\n\n' + run(args))
    return 0


if __name__ == '__main__':
    sys.exit(main())
