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

"""Two clouds in one process each get their own clients.

Two real Placements (``tests.fixtures.servers.PlacementProcess``), each
with its own compute nodes, read from one process: through two API
clients at the same time, and through the ``openstack`` CLI run in this
process once per cloud (as a program, the exporter or a test suite
would), with nothing reset between the runs.
"""

import contextlib
import io
import json
import threading

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from openstackclient import shell
import pytest

from osc_mdev.api import http
from osc_mdev.api import placement as placement_api
from osc_mdev.base import errors
from tests.fixtures import cli
from tests.fixtures import placement_data
from tests.fixtures.placement_data import Gpu
from tests.fixtures import servers

CLOUDS = {'east': ('east1', 'east2'), 'west': ('west1',)}


@pytest.fixture(scope='module')
def clouds(tmp_path_factory):
    """``{cloud: Placement URL}``: two real Placements, each with its own
    compute nodes (one GPU each).
    """
    started = {}
    try:
        for name, hosts in CLOUDS.items():
            server = servers.PlacementProcess(tmp_path_factory.mktemp(name))
            started[name] = server
            data = placement_data.Placement(server.url)
            for host in hosts:
                data.add_compute_node(host, [Gpu('pci_0000_81_00_0')])
        yield {name: server.url for name, server in started.items()}
    finally:
        for server in started.values():
            server.stop()


def _client(url):
    """A Placement client of the cloud at ``url``, on its own session."""
    session = ks_session.Session(auth=token_endpoint.Token(url, 'admin'))
    return placement_api.PlacementClient(
        http.Service(session, 'placement', 'Placement'))


def _hosts(listing):
    return sorted(p['name'] for p in listing
                  if p['uuid'] == p['root_provider_uuid'])


def test_two_clients_read_their_own_cloud_at_once(clouds):
    """Each client reads its own Placement, also when both read at the
    same time and with ``shared_reads`` (whose answers are the client's
    own, never another client's).
    """
    clients = {name: _client(url) for name, url in clouds.items()}
    shared = {name: c.shared_reads() for name, c in clients.items()}
    found = {}
    barrier = threading.Barrier(2 * len(clients))

    def read(key, client):
        barrier.wait()
        found[key] = [_hosts(client.list_providers()) for _ in range(5)]

    threads = [threading.Thread(target=read, args=((name, kind), client))
               for kind, which in (('own', clients), ('shared', shared))
               for name, client in which.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for (name, _), answers in found.items():
        assert answers == [list(CLOUDS[name])] * 5
    # Nothing of one client is another's: its request log and the
    # answers it shares.
    east, west = clients['east'], clients['west']
    assert east._http._log is not west._http._log
    assert shared['east']._shared is not shared['west']._shared
    assert shared['east']._shared_lock is not shared['west']._shared_lock


def test_a_failure_names_its_own_cloud(clouds):
    """A 404 of one cloud is that cloud's, with the request as data;
    the other cloud still answers.
    """
    east, west = _client(clouds['east']), _client(clouds['west'])
    west_root = west.find_providers(name='west1')[0]['uuid']
    with pytest.raises(http.NotFound) as caught:
        east.get_provider(west_root)
    assert isinstance(caught.value, errors.NotFound)
    assert caught.value.data == {
        'service': 'Placement', 'method': 'GET', 'status': 404,
        'path': '/resource_providers/%s' % west_root}
    assert west.get_provider(west_root)['name'] == 'west1'


def _openstack(*args):
    """``openstack ARGS`` in this process, nothing reset before it (unlike
    ``cli.openstack``): as a program that runs several commands.
    """
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = shell.main(list(args))
    assert rc == 0, err.getvalue()
    return out.getvalue()


def test_commands_of_two_clouds_in_one_process_read_their_own(clouds):
    """Commands run in one process against one cloud, then the other,
    then the first again each list the nodes of the cloud they name.
    """
    for name in ('east', 'west', 'east'):
        listed = json.loads(_openstack(
            *cli.admin_token_args(clouds[name]), 'mdev', 'provider',
            'list', '-f', 'json', '-c', 'Host'))
        assert sorted({row['Host'] for row in listed}) == list(
            CLOUDS[name]), name
