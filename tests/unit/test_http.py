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

"""The one error mapper of osc-mdev's HTTP path (api.http)."""

import json

from osc_lib import exceptions
import pytest
import requests

from osc_mdev.api import http


def answer(status, body, url='http://placement.example:8778/x'):
    response = requests.Response()
    response.status_code = status
    response._content = (json.dumps(body).encode()
                         if not isinstance(body, bytes) else body)
    response.url = url
    return response


def placement_error(status, detail, **extra):
    return {'errors': [dict(status=status, title='T', detail=detail,
                            **extra)]}


SERVICE = http.Service.__new__(http.Service)
SERVICE.label = 'Placement'
SERVICE.service_type = 'placement'
SERVICE.connect_retries = SERVICE.status_retries = 3


def mapped(status, body, transient=http.TRANSIENT_STATUSES,
           conflicts=(409,)):
    return SERVICE._answer('PUT', '/resource_providers/u/traits?x=1', '1.6',
                           answer(status, body), transient, conflicts)


def test_success_bodies():
    assert mapped(200, {'a': 1}) == {'a': 1}
    assert mapped(204, b'') is None


@pytest.mark.parametrize('status,body,exc_type,text', [
    (404, placement_error(404, 'The resource could not be found.\n\n No '
                               'resource provider with uuid u found'),
     http.NotFound, 'No resource provider with uuid u found'),
    (404, {'itemNotFound': {'code': 404, 'message': 'Flavor x could not be '
                                                    'found.'}},
     http.NotFound, 'Flavor x could not be found.'),
    (409, placement_error(409, 'generation conflict',
                          code='placement.concurrent_update'),
     http.Conflict, 'generation conflict'),
    (406, placement_error(406, 'Unacceptable version', max_version='1.39'),
     http.MicroversionUnsupported, 'supports up to 1.39.'),
    (403, placement_error(403, 'Policy does not allow x'),
     exceptions.CommandError,
     'Placement refused PUT /resource_providers/u/traits (HTTP 403: Policy '
     'does not allow x)'),
    (401, placement_error(401, 'no token'), exceptions.CommandError,
     'did not accept the credentials (HTTP 401)'),
    (400, placement_error(400, 'JSON does not validate'),
     exceptions.CommandError,
     'Placement rejected PUT /resource_providers/u/traits (HTTP 400): JSON '
     'does not validate.'),
    (503, placement_error(503, 'down'), exceptions.CommandError,
     'with HTTP 503 (down) after 4 attempts'),
    (501, placement_error(501, 'nope'), exceptions.CommandError,
     'with HTTP 501 (nope) after 1 attempt;'),
    (404, b'<html>not found</html>', exceptions.CommandError,
     'http://placement.example:8778 answered HTTP 404 with a page that is '
     'not from the Placement API'),
    (200, b'<html>login</html>', exceptions.CommandError,
     'answered something that is not JSON'),
    (502, {'unexpected': 'json', 'shape': 1}, exceptions.CommandError,
     'a page that is not from the Placement API'),
])
def test_error_answers(status, body, exc_type, text):
    with pytest.raises(exc_type) as err:
        mapped(status, body)
    assert text in str(err.value)
    assert '\n' not in str(err.value)
    assert '?x=1' not in str(err.value)


def test_conflict_keeps_code_and_status():
    with pytest.raises(http.Conflict) as err:
        mapped(500, placement_error(500, 'concurrently updated'),
               conflicts=(409, 500))
    assert err.value.status == 500
    with pytest.raises(http.Conflict) as err:
        mapped(409, placement_error(409, 'x',
                                    code='placement.concurrent_update'))
    assert (err.value.status, err.value.code) == (
        409, 'placement.concurrent_update')
