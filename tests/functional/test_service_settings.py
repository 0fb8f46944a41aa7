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

"""A service's own settings in clouds.yaml (``placement_...``) win over
the cloud's, as openstacksdk reads them, with the CLI in front of a real
Placement behind the fault proxy (tests.fixtures.faults).
"""

import collections
import json

from tests.fixtures import cli
from tests.fixtures import faults


def clouds_yaml(proxy, tmp_path, monkeypatch, **settings):
    path = tmp_path / 'clouds.yaml'
    path.write_text(json.dumps({'clouds': {'tuned': dict({
        'auth_type': 'admin_token',
        'auth': {'token': 'admin', 'endpoint': 'http://127.0.0.1:9/dead'},
        'placement_endpoint_override': proxy.url,
        'status_code_retry_delay': 0.05,
        'connect_retry_delay': 0.05}, **settings)}}))
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(path))
    return ['--os-cloud', 'tuned']


def test_placement_status_code_retries_win_over_the_clouds(
        proxy, tmp_path, monkeypatch):
    args = clouds_yaml(proxy, tmp_path, monkeypatch,
                       status_code_retries=5,
                       placement_status_code_retries=1)
    proxy.reset(lambda req: faults.status(503))
    result = cli.openstack(*args, 'mdev', 'provider', 'list')
    cli.assert_one_line_error(
        result, 'Placement failed on GET /resource_providers with HTTP 503',
        'after 2 attempts')
    attempts = collections.Counter(req.path.split('?')[0]
                                   for req, _ in proxy.log)
    assert set(attempts.values()) == {2}, attempts


def test_placement_api_timeout_and_connect_retries(
        proxy, tmp_path, monkeypatch):
    args = clouds_yaml(proxy, tmp_path, monkeypatch,
                       placement_api_timeout=0.5,
                       placement_connect_retries=1)
    proxy.reset(lambda req: faults.delay(2))
    result = cli.openstack(*args, 'mdev', 'provider', 'list')
    cli.assert_one_line_error(result, 'Cannot reach the Placement API',
                              'timed out', 'after 2 attempts')
