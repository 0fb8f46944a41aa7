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

"""Short, one-line descriptions of transport errors.

Told by the exceptions keystoneauth's connection error was raised from
(the operating system's error, urllib3's pool and path), never by their
words.
"""

from collections.abc import Iterator
import errno
import socket
import ssl

from keystoneauth1 import exceptions as ks_exc

_DEFAULT_PORTS = {'http': 80, 'https': 443}
_NO_SUCH_NAME = {getattr(socket, name) for name in ('EAI_NONAME',
                                                    'EAI_NODATA')
                 if hasattr(socket, name)}


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception it was raised from or wraps."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        item = todo.pop(0)
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        todo += [item.__cause__, item.__context__,
                 getattr(item, 'reason', None), *item.args]


def _reason(exc: BaseException) -> str | None:
    """What went wrong, in a few words, from the type of one error."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return 'TLS certificate not trusted'
    if isinstance(exc, socket.gaierror):
        return ('unknown host name' if exc.errno in _NO_SUCH_NAME
                else 'host name not resolved')
    if isinstance(exc, (TimeoutError, ks_exc.ConnectTimeout)):
        return 'timed out'
    if isinstance(exc, ConnectionRefusedError):
        return 'connection refused'
    if isinstance(exc, OSError) and exc.errno == errno.EHOSTUNREACH:
        return 'no route to host'
    return None


def _url(exc: BaseException) -> str | None:
    """The URL of a urllib3 error that names its pool and path."""
    path = getattr(exc, 'url', None)
    pool = getattr(exc, 'pool', None) if isinstance(path, str) else None
    if pool is None:
        return None
    scheme = getattr(pool, 'scheme', 'http')
    port = getattr(pool, 'port', None)
    netloc = getattr(pool, 'host', '')
    if port and port != _DEFAULT_PORTS.get(scheme):
        netloc = '%s:%s' % (netloc, port)
    return '%s://%s%s' % (scheme, netloc, path)


def connection_problem(exc: BaseException) -> str:
    """``http://host:port/path: connection refused`` from a keystoneauth
    connection error, instead of urllib3's nested repr.
    """
    chain = list(_chain(exc))
    reason = next(filter(None, map(_reason, chain)), None)
    url = next(filter(None, map(_url, chain)), None)
    if reason:
        return '%s: %s' % (url, reason) if url else reason
    return first_line(exc)
