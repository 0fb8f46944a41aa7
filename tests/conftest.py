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

"""Shared pytest set-up: no OS_* variables of the developer's leak in."""

import importlib.util
import os
import sys

import pytest

from tests.fixtures import prometheus


@pytest.fixture(autouse=True)
def _clean_openstack_env(monkeypatch, tmp_path):
    for key in list(os.environ):
        if key.startswith('OS_'):
            monkeypatch.delenv(key)
    # An empty clouds.yaml so a developer's own clouds are never read.
    empty = tmp_path / 'no-clouds.yaml'
    empty.write_text('clouds: {}\n')
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(empty))


def _monkey_patched():
    patcher = sys.modules.get('eventlet.patcher')
    return patcher is not None and patcher.is_monkey_patched('thread')


@pytest.fixture(autouse=True)
def _no_eventlet_patching():
    """The tests' own process runs on real threads, as the commands do:
    importing Nova's test package (``nova.tests``) applies eventlet's
    monkey patching to the whole process, after which the thread pools
    of every later test may deadlock. Nova's harness runs in a process
    of its own (tests/cloud); a test that patches this one fails here.
    """
    patched = _monkey_patched()
    yield
    if not patched and _monkey_patched():
        pytest.fail('this test applied eventlet monkey patching to the '
                    'test process (it imported nova.tests?); run Nova\'s '
                    'harness in a process of its own', pytrace=False)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``nova`` compare a rule with Nova's own code; tests
    marked ``prometheus`` run the Prometheus, promtool and node_exporter
    of the distribution's packages. Where these are not installed (tox -e
    unit, py3-min, a developer's machine) the tests are skipped with a
    reason; where the full suite must run (OSC_MDEV_REQUIRE_CLOUD, as in
    tox -e py3) a missing one is an error.
    """
    nova = importlib.util.find_spec('nova') is None
    _require(items, 'nova', ['the nova package'] if nova else [],
             'tox -e py3 runs this cross-check')
    _require(items, 'prometheus', prometheus.missing(),
             'install the Debian packages prometheus and '
             'prometheus-node-exporter (.ci/run does)')


def _require(items, marker, missing, hint):
    if not missing:
        return
    marked = [item for item in items if item.get_closest_marker(marker)]
    if not marked:
        return
    if os.environ.get('OSC_MDEV_REQUIRE_CLOUD'):
        raise pytest.UsageError('%d tests need %s' % (
            len(marked), ', '.join(missing)))
    skip = pytest.mark.skip(reason='%s not installed here; %s' % (
        ', '.join(missing), hint))
    for item in marked:
        item.add_marker(skip)
