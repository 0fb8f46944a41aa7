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

"""The production-shaped Placement fixture counts exactly and stops clean.
"""

from concurrent import futures

import psutil
import requests

from tests.fixtures import pg_placement as pg
from tests.fixtures import placement_data


def test_counts_every_request_across_workers(pg_placement):
    before = pg_placement.stats()
    session = requests.Session()
    session.headers['X-Auth-Token'] = pg_placement.token

    def get(i):
        path = ('/resource_providers' if i % 3 else
                '/resource_providers/%08d-0000-0000-0000-000000000000' % i)
        return session.get(pg_placement.url + path).status_code

    with futures.ThreadPoolExecutor(16) as pool:
        codes = list(pool.map(get, range(300)))
    after = pg_placement.stats()
    assert after['requests'] - before['requests'] == 300
    assert codes.count(404) == 100
    assert (after['status'].get('404', 0) - before['status'].get('404', 0)
            == 100)
    assert (after['paths']['GET /resource_providers/{uuid}']
            - before['paths'].get('GET /resource_providers/{uuid}', 0)
            == 100)


def test_concurrent_writers_do_not_lock_each_other_out(pg_placement):
    placement = placement_data.Placement(pg_placement.url)
    roots = [placement.create_provider('pg-host-%d' % i) for i in range(8)]

    def write(root):
        placement.set_inventory(root, placement_data.ROOT_INVENTORY)
        placement.set_traits(root, placement_data.ROOT_TRAITS)
        return placement.get_traits(root)

    with futures.ThreadPoolExecutor(8) as pool:
        traits = list(pool.map(write, roots))
    assert all(sorted(t) == sorted(placement_data.ROOT_TRAITS)
               for t in traits)


def test_stop_leaves_no_process():
    server = pg.PgPlacement(options={
        'placement': {'max_allocation_candidates': 3}})
    master = psutil.Process(server.proc.pid)
    children = master.children(recursive=True)
    postgres = psutil.Process(server._pg.get_pid())
    assert len(children) == 2   # the two gunicorn workers
    assert 'max_allocation_candidates = 3' in (
        server.workdir / 'etc' / 'placement.conf').read_text()
    server.stop()
    assert not server.workdir.exists()
    for proc in [master, postgres, *children]:
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
