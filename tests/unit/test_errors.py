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

from keystoneauth1 import exceptions as ks_exc

from osc_mdev.api import errors


def test_connection_refused_is_short():
    exc = ks_exc.ConnectFailure(
        "Unable to establish connection to http://127.0.0.1:9/"
        "resource_providers: HTTPConnectionPool(host='127.0.0.1', port=9): "
        "Max retries exceeded with url: /resource_providers (Caused by "
        "NewConnectionError(\"HTTPConnection(host='127.0.0.1', port=9): "
        "Failed to establish a new connection: [Errno 111] Connection "
        "refused\"))")
    assert errors.connection_problem(exc) == (
        'http://127.0.0.1:9/resource_providers: connection refused')


def test_unknown_reason_keeps_the_first_line():
    exc = ks_exc.ConnectFailure('something odd\nand more')
    assert errors.connection_problem(exc) == 'something odd'
    assert errors.first_line(ValueError()) == 'ValueError'
