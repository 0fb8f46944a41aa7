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
