import threading
import time

import pytest

from osc_mdev.client import pool


def test_results_keep_order_and_at_most_n_run_at_once():
    running, peak = [0], [0]
    lock = threading.Lock()

    def work(i):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1
        return i * 2

    assert pool.bounded_map(work, range(20), 3) == [i * 2 for i in range(20)]
    assert peak[0] == 3


@pytest.mark.parametrize('workers', [1, 4])
def test_pools_never_nest(workers):
    def nested(_):
        return pool.call_all([lambda: 1], workers)

    with pytest.raises(RuntimeError, match='inside a pooled function'):
        pool.bounded_map(nested, [1, 2], workers)
    # Steps after one another are fine.
    assert pool.bounded_map(lambda i: i, [1, 2], workers) == [1, 2]
