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

import pytest
import requests

from osc_mdev.api import http
from osc_mdev.base import errors


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
     errors.ServiceError,
     'Placement refused PUT /resource_providers/u/traits (HTTP 403: Policy '
     'does not allow x)'),
    (401, placement_error(401, 'no token'), errors.ServiceError,
     'did not accept the credentials (HTTP 401)'),
    (400, placement_error(400, 'JSON does not validate'),
     errors.ServiceError,
     'Placement rejected PUT /resource_providers/u/traits (HTTP 400): JSON '
     'does not validate.'),
    (503, placement_error(503, 'down'), errors.ServiceError,
     'with HTTP 503 (down) after 4 attempts'),
    (501, placement_error(501, 'nope'), errors.ServiceError,
     'with HTTP 501 (nope) after 1 attempt;'),
    (404, b'<html>not found</html>', errors.ServiceError,
     'http://placement.example:8778 answered HTTP 404 with a page that is '
     'not from the Placement API'),
    (200, b'<html>login</html>', errors.ServiceError,
     'answered something that is not JSON'),
    (502, {'unexpected': 'json', 'shape': 1}, errors.ServiceError,
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


@pytest.mark.parametrize('status,body,data', [
    (404, placement_error(404, 'gone'), dict(status=404)),
    (409, placement_error(409, 'moved', code='placement.concurrent_update'),
     dict(status=409, code='placement.concurrent_update')),
    (406, placement_error(406, 'old', max_version='1.29'),
     dict(status=406, microversion='1.6', max_version='1.29')),
    (403, placement_error(403, 'policy'), dict(status=403)),
    (503, placement_error(503, 'down'), dict(status=503, attempts=4)),
    (501, placement_error(501, 'nope'), dict(status=501, attempts=1)),
    (400, placement_error(400, 'bad'), dict(status=400)),
    (502, b'<html>proxy</html>', dict(status=502)),
])
def test_error_answers_carry_their_data(status, body, data):
    """Each failure is one of the library's errors, and says as data
    what its sentence says: the service, the request and the answer.
    """
    with pytest.raises(errors.Error) as err:
        mapped(status, body)
    expected = dict(service='Placement', method='PUT',
                    path='/resource_providers/u/traits', **data)
    assert {k: err.value.data.get(k) for k in expected} == expected


def test_error_kinds():
    """404 is the library's NotFound, a conflict its Refused, an older
    service a ServiceError, as every other failure of the service.
    """
    assert issubclass(http.NotFound, errors.NotFound)
    assert issubclass(http.Conflict, errors.Refused)
    assert issubclass(http.MicroversionUnsupported, errors.ServiceError)
    for kind in (http.NotFound, http.Conflict):
        assert not issubclass(kind, errors.ServiceError)
