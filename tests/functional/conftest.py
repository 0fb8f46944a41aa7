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

import pytest

from tests.fixtures import cli
from tests.fixtures import faults
from tests.fixtures import placement_data
from tests.fixtures import servers


@pytest.fixture(scope='module')
def placement_url(tmp_path_factory):
    """A fresh, empty Placement for each test module."""
    server = servers.PlacementProcess(tmp_path_factory.mktemp('placement'))
    yield server.url
    server.stop()


@pytest.fixture(scope='module')
def placement(placement_url):
    return placement_data.Placement(placement_url)


@pytest.fixture(scope='module')
def auth(placement_url):
    """The openstack CLI's arguments for the module's Placement."""
    return cli.admin_token_args(placement_url)


@pytest.fixture(scope='module')
def pg_placement():
    """A fresh production-shaped Placement (PostgreSQL, gunicorn) per test
    module: a tests.fixtures.pg_placement.PgPlacement (``url``,
    ``requests()``, ``stats()``).
    """
    from tests.fixtures import pg_placement as pg
    with pg.running() as server:
        yield server


@pytest.fixture
def proxy(placement_url):
    """A fault proxy (tests.fixtures.faults) in front of the module's
    Placement; it forwards everything until given a rule.
    """
    with faults.FaultProxy(placement_url) as proxy:
        yield proxy


@pytest.fixture
def faulty(proxy, tmp_path, monkeypatch):
    """The CLI's arguments for a clouds.yaml entry that reaches Placement
    through ``proxy``, with short retry delays (the cloud's own retry
    settings are honoured).
    """
    path = tmp_path / 'clouds.yaml'
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(path))
    return faults.write_clouds_yaml(proxy, path)
