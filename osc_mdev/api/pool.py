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

"""Bounded concurrency for independent API requests."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Hashable
from collections.abc import Iterable
from collections.abc import Mapping
from concurrent import futures
import typing

if typing.TYPE_CHECKING:
    from osc_mdev.api import http

DEFAULT_MAX_WORKERS = 8

T = typing.TypeVar('T')
R = typing.TypeVar('R')
K = typing.TypeVar('K', bound=Hashable)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during ``bounded_map``: the calls not started were dropped,
    the running ones were let finish. ``done`` maps the index of each
    finished item to its result.
    """

    def __init__(self, done: dict[int, typing.Any]) -> None:
        super().__init__()
        self.done = done


def call_all(calls: Iterable[Callable[[], R]],
             max_workers: int = DEFAULT_MAX_WORKERS) -> list[R]:
    """Run independent zero-argument ``calls`` at once; their results in
    order.
    """
    return bounded_map(lambda call: call(), calls, max_workers)


def call_named(calls: Mapping[K, Callable[[], R]],
               max_workers: int = DEFAULT_MAX_WORKERS) -> dict[K, R]:
    """Run independent zero-argument ``calls`` at once; each one's result
    under its key, so that a caller reads the answers by name, never by
    position.
    """
    keys = list(calls)
    return dict(zip(keys, call_all([calls[k] for k in keys], max_workers)))


def bounded_map(func: Callable[[T], R], items: Iterable[T],
                max_workers: int = DEFAULT_MAX_WORKERS) -> list[R]:
    """Return ``[func(item) for item in items]``, run at most N at a time.

    Results keep the order of ``items``. The first exception cancels the
    requests not yet started and is raised once the running ones end.
    Ctrl-C does the same and raises ``Interrupted`` with what finished, so
    a write command can say which objects were done.

    ``max_workers`` bounds the threads of this pool; the requests in
    flight for the whole command are bounded by the one semaphore every
    request takes (``api.http.Service``), however pools are combined.
    """
    items = list(items)
    workers = max(1, min(max_workers, len(items)))
    pooled = func

    if workers == 1:
        results: list[R] = []
        try:
            for item in items:
                results.append(pooled(item))
        except KeyboardInterrupt:
            raise Interrupted(dict(enumerate(results))) from None
        return results
    with futures.ThreadPoolExecutor(max_workers=workers) as executor:
        pending = [executor.submit(pooled, item) for item in items]
        try:
            return [future.result() for future in pending]
        except KeyboardInterrupt:
            for future in pending:
                future.cancel()
            futures.wait(pending)
            raise Interrupted({
                i: f.result() for i, f in enumerate(pending)
                if not f.cancelled() and f.exception() is None}) from None
        except BaseException:
            for future in pending:
                future.cancel()
            raise


class ServiceClient:
    """What every service client shares: its ``http.Service`` (the one
    keystoneauth Adapter path) and the bounded pool of the command.
    """

    def __init__(self, service: http.Service,
                 max_workers: int = DEFAULT_MAX_WORKERS) -> None:
        self._http = service
        self.max_workers = max_workers

    def _request(self, method: str, url: str, version: str | None,
                 **kwargs: typing.Any) -> typing.Any:
        return self._http.request(method, url, version,
                                  json_body=kwargs.pop('json', None),
                                  **kwargs)

    def map(self, func: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Run ``func`` over ``items`` with this client's bounded pool."""
        return bounded_map(func, items, self.max_workers)
