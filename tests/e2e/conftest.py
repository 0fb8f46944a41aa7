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

"""The end-to-end tier needs Nova's harness in this Python.

Without it the tier is skipped with a reason, except where
OSC_MDEV_REQUIRE_CLOUD is set (tox sets it): there a missing module is an
error, so the tier can never be skipped unseen.
"""

import os

import pytest

from tests.cloud import client


def pytest_collection_modifyitems(config, items):
    missing = client.missing_modules()
    if not missing:
        return
    if os.environ.get('OSC_MDEV_REQUIRE_CLOUD'):
        raise pytest.UsageError(
            'the end-to-end tests need these modules: %s'
            % ', '.join(missing))
    skip = pytest.mark.skip(
        reason='the embedded cloud needs: %s' % ', '.join(missing))
    for item in items:
        if 'tests/e2e/' in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture(scope='module')
def cloud(request, tmp_path_factory):
    """The module's embedded cloud: on the module's ``TOPOLOGY`` if it
    has one (else on the demo topology), with a real Keystone if its
    ``KEYSTONE`` is true, and the flavors of its ``FLAVORS`` (``{name:
    extra specs}``) made, in that order.

    A module that needs a cloud set up its own way defines its own
    ``cloud`` fixture. The module's tests share this one: each deletes
    the servers it boots.
    """
    module = request.module
    with client.EmbeddedCloud(
            tmp_path_factory.mktemp('cloud'),
            topology=getattr(module, 'TOPOLOGY', None),
            keystone=getattr(module, 'KEYSTONE', False)) as cloud:
        for name, specs in getattr(module, 'FLAVORS', {}).items():
            cloud.control('create_flavor', name=name, extra_specs=specs)
        yield cloud


@pytest.fixture(autouse=True)
def os_cloud(cloud, monkeypatch):
    """The in-process CLI reaches the module's embedded cloud."""
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(cloud.clouds_yaml))
    monkeypatch.setenv('OS_CLOUD', cloud.cloud_name)


@pytest.fixture(scope='module')
def controller(request, tmp_path_factory):
    """Path of the controller's nova.conf: the module's
    ``CONTROLLER_CONF`` if it has one, else the demo cloud's (its
    aliases).
    """
    path = tmp_path_factory.mktemp('controller') / 'nova.conf'
    path.write_text(getattr(request.module, 'CONTROLLER_CONF',
                            client.DEMO_CONTROLLER_CONF))
    return str(path)


@pytest.fixture
def keystone_cli(cloud, os_cloud, monkeypatch):
    """The CLI logs in to the cloud's Keystone with a password (a
    ``keystone=True`` cloud); a module asks for it with
    ``pytest.mark.usefixtures``.
    """
    monkeypatch.setenv('OS_CLOUD', cloud.keystone_cloud)
