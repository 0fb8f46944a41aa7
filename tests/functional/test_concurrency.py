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

"""Concurrent writers on a production-shaped Placement lose nothing.

PostgreSQL behind a multi-worker gunicorn (tests.fixtures.pg_placement):
no lock serializes the requests, so writers really race. Sixteen
``openstack mdev trait set/unset`` processes run at once on the same
devices while a writer that behaves like nova-compute's periodic update
keeps bumping every device's generation (inventory PUT) and re-adding
its own trait. Afterwards every trait that should be there is there and
none that should be gone is left, read directly from Placement.
"""

import concurrent.futures
import os
import subprocess
import sys
import threading
import time

import pytest
import requests

from tests.fixtures import cli
from tests.fixtures import placement_data
from tests.fixtures.placement_data import Gpu

WRITERS = 8          # trait set processes, and as many trait unset ones
DEVICES = 6
NOVA_SECONDS = 60    # upper bound of the nova-compute-like writer


@pytest.fixture(scope='module')
def pg(pg_placement):
    return placement_data.Placement(pg_placement.url)


class NovaLikeWriter(threading.Thread):
    """nova-compute's periodic update, as Placement sees it: an inventory
    PUT with the generation it read, then a read-modify-write of the
    traits that keeps everything and adds OWNER_NOVA; 409 means re-read.
    Runs until told to stop or NOVA_SECONDS pass.
    """

    def __init__(self, url, uuids):
        super().__init__(daemon=True)
        self.url = url
        self.uuids = uuids
        self.done = threading.Event()
        self.writes = 0
        self.conflicts = 0
        self.session = requests.Session()
        self.session.headers.update({
            'X-Auth-Token': 'admin',
            'OpenStack-API-Version': 'placement 1.39'})

    def _put(self, path, body):
        rsp = self.session.put(self.url + path, json=body, timeout=30)
        if rsp.status_code in (409, 500):
            self.conflicts += 1
            return False
        rsp.raise_for_status()
        self.writes += 1
        return True

    def run(self):
        deadline = time.monotonic() + NOVA_SECONDS
        while not self.done.is_set() and time.monotonic() < deadline:
            for uuid in self.uuids:
                path = '/resource_providers/%s' % uuid
                inv = self.session.get(self.url + path + '/inventories',
                                       timeout=30).json()
                self._put(path + '/inventories', {
                    'resource_provider_generation':
                        inv['resource_provider_generation'],
                    'inventories': inv['inventories']})
                traits = self.session.get(self.url + path + '/traits',
                                          timeout=30).json()
                self._put(path + '/traits', {
                    'resource_provider_generation':
                        traits['resource_provider_generation'],
                    'traits': sorted(set(traits['traits']) | {
                        'OWNER_NOVA'})})


def openstack(url, *args):
    return subprocess.Popen(
        [sys.executable, '-m', 'openstackclient.shell',
         *cli.admin_token_args(url), 'mdev', *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ))


def test_sixteen_trait_writers_and_nova_lose_nothing(pg, pg_placement):
    host = 'race.gpu.example.net'
    keep = ['CUSTOM_KEEP_%d' % i for i in range(2)]
    doomed = ['CUSTOM_DOOMED_%d' % i for i in range(WRITERS)]
    gpus = [Gpu('pci_0000_%02x_00_0' % (0x40 + i), 'VGPU', 4,
                tuple(keep + doomed)) for i in range(DEVICES)]
    pg.add_compute_node(host, gpus)
    answers_before = pg_placement.stats()['status']

    nova = NovaLikeWriter(pg_placement.url, [g.uuid for g in gpus])
    nova.start()
    added = ['CUSTOM_ADDED_%d' % i for i in range(WRITERS)]
    procs = [openstack(pg_placement.url, 'trait', 'set', '--trait', trait,
                       '--host', host) for trait in added]
    procs += [openstack(pg_placement.url, 'trait', 'unset', '--trait',
                        trait, '--host', host) for trait in doomed]
    with concurrent.futures.ThreadPoolExecutor(len(procs)) as pool:
        outputs = list(pool.map(lambda p: p.communicate(timeout=300),
                                procs))
    nova.done.set()
    nova.join(timeout=60)

    for proc, (stdout, stderr) in zip(procs, outputs):
        assert proc.returncode == 0, stderr
        assert 'Traceback' not in stderr
    for gpu in gpus:
        assert set(pg.get_traits(gpu.uuid)) == set(
            ['OWNER_NOVA'] + keep + added), gpu.name
    # The writers really raced: Placement refused stale writes.
    answers = pg_placement.stats()['status']
    refused = sum(answers.get(code, 0) - answers_before.get(code, 0)
                  for code in ('409', '500'))
    assert refused > 0, answers
    assert nova.writes > 0
    print('%d trait processes and a Nova-like writer on %d devices: '
          'Placement refused %d stale writes (409: %d, 500: %d); the Nova-'
          'like writer made %d writes and met %d conflicts; nothing lost.'
          % (len(procs), DEVICES, refused,
             answers.get('409', 0) - answers_before.get('409', 0),
             answers.get('500', 0) - answers_before.get('500', 0),
             nova.writes, nova.conflicts))
