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

"""Benchmark the Placement-bound commands on a big simulated cloud.

Starts a real Placement (SQLite) that answers every request after a fixed
delay standing for a real cloud's round trip, fills it the way Nova does
(HOSTS compute nodes with GPUS mdev devices each, some allocations), then
measures, each as a real ``openstack`` process:

* osc-mdev with --os-mdev-max-workers 1 (the same requests, one at a time,
  as a shell loop over providers would send them) and with the default
  bounded pool;
* the requests each run sent (counted by the server), per device;
* ``mdev trait set --all`` and ``trait unset --all`` the same two ways;
* today's way, a shell loop over osc-placement commands
  (``resource provider inventory list`` + ``usage show`` + ``trait list``
  per provider), timed on SAMPLE providers and scaled to all of them.

Usage: python tools/bench_provider_list.py [--hosts 50] [--gpus 4]
       [--latency-ms 20] [--runs 3] [--sample 5]
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
import urllib.request

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fixtures import placement_data  # noqa: E402
from tests.fixtures import servers  # noqa: E402


def served(url):
    with urllib.request.urlopen(url + '/_stats') as resp:
        return json.loads(resp.read())['requests']


def openstack(url, *args):
    cmd = [sys.executable, '-m', 'openstackclient.shell',
           '--os-auth-type', 'admin_token', '--os-token', 'admin',
           '--os-endpoint', url, *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit('%s failed: %s' % (' '.join(args), proc.stderr))
    return elapsed, proc.stdout


def fill(placement, hosts, gpus):
    devices = []
    for h in range(hosts):
        layout = [placement_data.Gpu('pci_0000_%02x_00_0' % (0x84 + g),
                                     'VGPU', 16, ('CUSTOM_NVIDIA_11',))
                  for g in range(gpus)]
        root = placement.add_compute_node('compute%03d.example.com' % h,
                                          layout)
        for g, gpu in enumerate(layout):
            for _ in range((h + g) % 4):
                placement.boot_server(root, gpu)
        devices.extend(layout)
    return devices


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=50)
    parser.add_argument('--gpus', type=int, default=4)
    parser.add_argument('--latency-ms', type=float, default=20.0)
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--sample', type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as workdir:
        server = servers.PlacementProcess(workdir, args.latency_ms)
        try:
            placement = placement_data.Placement(server.url)
            devices = fill(placement, args.hosts, args.gpus)
            report(server.url, devices, args)
        finally:
            server.stop()


def report(url, devices, args):
    print('cloud: %d hosts x %d GPUs = %d mdev devices; Placement answers '
          'after %.0f ms' % (args.hosts, args.gpus, len(devices),
                             args.latency_ms))
    listed = None
    results = {}
    for workers in ('1', '8'):
        times = []
        for _ in range(args.runs):
            before = served(url)
            elapsed, out = openstack(url, '--os-mdev-max-workers', workers,
                                     'mdev', 'provider', 'list', '-f', 'json')
            requests = served(url) - before
            times.append(elapsed)
        rows = json.loads(out)
        assert len(rows) == len(devices), (len(rows), len(devices))
        listed = listed or rows
        assert rows == listed
        results[workers] = statistics.median(times)
        print('osc-mdev provider list, %s worker(s): median %.2f s over %d '
              'runs, %d requests (%.2f per device)'
              % (workers, results[workers], args.runs, requests,
                 requests / len(devices)))
    print('speed-up of the bounded pool over one request at a time: %.1fx'
          % (results['1'] / results['8']))

    for workers in ('1', '8'):
        for verb in ('set', 'unset'):
            before = served(url)
            elapsed, _ = openstack(
                url, '--os-mdev-max-workers', workers, 'mdev', 'trait', verb,
                '--trait', 'CUSTOM_BENCH', '--all', '-f', 'json')
            requests = served(url) - before
            print('osc-mdev trait %s --all, %s worker(s): %.2f s, %d requests '
                  '(%.2f per device)' % (verb, workers, elapsed, requests,
                                         requests / len(devices)))

    # Today's way: one osc-placement process per provider and question.
    sample = devices[:args.sample]
    before = served(url)
    start = time.perf_counter()
    openstack(url, 'resource', 'provider', 'list', '-f', 'json')
    for gpu in sample:
        openstack(url, '--os-placement-api-version', '1.6', 'resource',
                  'provider', 'inventory', 'list', gpu.uuid, '-f', 'json')
        openstack(url, 'resource', 'provider', 'usage', 'show', gpu.uuid,
                  '-f', 'json')
        openstack(url, '--os-placement-api-version', '1.6', 'resource',
                  'provider', 'trait', 'list', gpu.uuid, '-f', 'json')
    loop = time.perf_counter() - start
    per_device = loop / len(sample)
    print('osc-placement shell loop: %.2f s for %d devices (%d requests), '
          'about %.0f s for all %d devices; osc-mdev with the pool is %.0fx '
          'faster' % (loop, len(sample), served(url) - before,
                      per_device * len(devices), len(devices),
                      per_device * len(devices) / results['8']))


if __name__ == '__main__':
    main()
