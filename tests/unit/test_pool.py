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

import threading
import time

import pytest

from osc_mdev.api import pool


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
def test_nested_pools_finish(workers):
    # The bound on requests in flight is the HTTP layer's semaphore, so
    # a pooled step may run a pool of its own without deadlock.
    def nested(i):
        return sum(pool.call_all([lambda: i, lambda: i], workers))

    assert pool.bounded_map(nested, [1, 2, 3], workers) == [2, 4, 6]
