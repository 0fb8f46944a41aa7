"""Bounded concurrency for independent API requests."""

from concurrent import futures
import threading

DEFAULT_MAX_WORKERS = 8

_in_pool = threading.local()


def call_all(calls, max_workers=DEFAULT_MAX_WORKERS):
    """Run independent zero-argument ``calls`` at once; their results in
    order."""
    return bounded_map(lambda call: call(), calls, max_workers)


def bounded_map(func, items, max_workers=DEFAULT_MAX_WORKERS):
    """Return ``[func(item) for item in items]``, run at most N at a time.

    Results keep the order of ``items``. The first exception cancels the
    requests not yet started and is raised once the running ones end.

    Pools never nest: a command runs its steps one after another, each
    bounded by ``max_workers``, so that number bounds the whole command.
    Calling this from inside a pooled function raises RuntimeError.
    """
    if getattr(_in_pool, 'active', False):
        raise RuntimeError('bounded_map called inside a pooled function; '
                           'run the step after the pool instead')
    items = list(items)
    workers = max(1, min(max_workers, len(items)))

    def pooled(item):
        _in_pool.active = True
        try:
            return func(item)
        finally:
            _in_pool.active = False

    if workers == 1:
        return [pooled(item) for item in items]
    with futures.ThreadPoolExecutor(max_workers=workers) as executor:
        pending = [executor.submit(pooled, item) for item in items]
        try:
            return [future.result() for future in pending]
        except BaseException:
            for future in pending:
                future.cancel()
            raise
