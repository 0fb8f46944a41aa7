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

import errno
import socket
import ssl

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session
import pytest

from osc_mdev.api import errors


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def test_connection_refused_is_short() -> None:
    port = _closed_port()
    with pytest.raises(ks_exc.ConnectFailure) as caught:
        ks_session.Session().get('http://127.0.0.1:%d/resource_providers'
                                 % port, connect_retries=0)
    assert errors.connection_problem(caught.value) == (
        'http://127.0.0.1:%d/resource_providers: connection refused' % port)


def test_an_answer_that_never_comes_timed_out() -> None:
    with socket.socket() as server:
        server.bind(('127.0.0.1', 0))
        server.listen(1)
        url = 'http://127.0.0.1:%d/traits' % server.getsockname()[1]
        with pytest.raises(ks_exc.ConnectTimeout) as caught:
            ks_session.Session().get(url, timeout=0.2, connect_retries=0)
    assert errors.connection_problem(caught.value) == (
        '%s: timed out' % url)


def _raised_from(cause: BaseException) -> ks_exc.ConnectFailure:
    try:
        try:
            raise cause
        except OSError:
            raise ks_exc.ConnectFailure('Unable to establish connection')
    except ks_exc.ConnectFailure as exc:
        return exc


@pytest.mark.parametrize('cause, reason', [
    (socket.gaierror(socket.EAI_NONAME, 'x'), 'unknown host name'),
    (socket.gaierror(socket.EAI_AGAIN, 'x'), 'host name not resolved'),
    (OSError(errno.EHOSTUNREACH, 'x'), 'no route to host'),
    (ssl.SSLCertVerificationError(1, 'x'), 'TLS certificate not trusted'),
])
def test_the_cause_is_told_by_its_type(cause: BaseException,
                                       reason: str) -> None:
    assert errors.connection_problem(_raised_from(cause)) == reason


def test_words_alone_tell_nothing() -> None:
    exc = ks_exc.ConnectFailure('Connection refused, it says\nand more')
    assert errors.connection_problem(exc) == 'Connection refused, it says'
    assert errors.first_line(ValueError()) == 'ValueError'
