import pytest

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
def pg_placement():
    """A fresh production-shaped Placement (PostgreSQL, gunicorn) per test
    module: a tests.fixtures.pg_placement.PgPlacement (``url``,
    ``requests()``, ``stats()``)."""
    from tests.fixtures import pg_placement as pg
    with pg.running() as server:
        yield server
