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

"""What the bulk reads tell of the unit rules of inventories.

Placement gives ``n`` of a class from a provider only when ``min_unit <=
n <= max_unit`` and ``n`` is a multiple of ``step_size``, besides
room. Allocation candidate summaries carry capacity and used, not these
rules; what tells them without one inventories read per provider:

* an anchor's allocation requests (``GET
  /allocation_candidates?resources=<class>:1``): a provider that gives
  one unit takes 1, so its ``min_unit`` and ``step_size`` are 1;
* a ``GET /resource_providers?resources=`` listing: a provider listed
  takes each amount asked; one left out though the summaries give it
  room for the one class asked refuses that amount;
* for a few providers, their own inventories.

A provider that takes 1 has ``min_unit`` and ``step_size`` 1: it takes
every amount up to the largest one it takes (``max_unit`` is at least
that) and refuses every amount from the smallest one it refuses.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses
import threading
import typing

from osc_mdev.cloud import allocation_candidates

#: ``{(provider uuid, class): free}`` of the summarized providers.
Free = Mapping[tuple[str, str], int]


@dataclasses.dataclass
class _Rules:
    taken: set[int] = dataclasses.field(default_factory=set)
    refused: set[int] = dataclasses.field(default_factory=set)

    def takes(self, amount: int) -> bool | None:
        if amount in self.refused:
            return False
        if amount in self.taken:
            return True
        if 1 in self.taken:
            if any(amount <= n for n in self.taken):
                return True
            if any(n <= amount for n in self.refused):
                return False
        return None


class Known:
    """What the reads so far tell of whose units take which amount;
    filled from the pool's threads.
    """

    def __init__(self) -> None:
        self._rules: dict[tuple[str, str], _Rules] = {}
        self._lock = threading.Lock()

    def _of(self, uuid: str, rc: str) -> _Rules:
        return self._rules.setdefault((uuid, rc), _Rules())

    def takes(self, uuid: str, rc: str, amount: int) -> bool | None:
        """Whether the units of the provider's class allow one
        allocation of ``amount``; None when no read told.
        """
        rules = self._rules.get((uuid, rc))
        return None if rules is None else rules.takes(amount)

    def add_candidates(self, answer: Mapping[str, typing.Any]) -> None:
        """An allocation candidates answer: whoever gives one unit of a
        class in an allocation request takes 1 of it.
        """
        requests = allocation_candidates.parse(answer).requests
        with self._lock:
            for areq in requests:
                for uuid, resources in areq.allocations.items():
                    for rc, n in resources.items():
                        if n == 1:
                            self._of(uuid, rc).taken.add(1)

    def add_listing(self, amounts: Mapping[str, int],
                    listed: Iterable[str], free: Free) -> None:
        """A ``?resources=`` listing of ``amounts``: its providers take
        them; for one class, a provider ``free`` gives room that is not
        listed refuses the amount.
        """
        listed = set(listed)
        with self._lock:
            for uuid in listed:
                for rc, n in amounts.items():
                    self._of(uuid, rc).taken.add(n)
            if len(amounts) != 1:
                return
            [(rc, n)] = amounts.items()
            for (uuid, c), room in free.items():
                if c == rc and room >= n and uuid not in listed:
                    self._of(uuid, rc).refused.add(n)

    def add_inventories(self, uuid: str,
                        inventories: Mapping[str, Mapping[str, int]] | None,
                        amounts: Mapping[str, Iterable[int]]) -> None:
        """The provider's own inventories (``None``: it is gone, and
        takes nothing): their unit rules for each of ``amounts``
        (``{class: amounts}``).
        """
        with self._lock:
            for rc, asked in amounts.items():
                inv = (inventories or {}).get(rc)
                for n in asked:
                    ok = inv is not None and (
                        inv.get('min_unit', 1) <= n
                        <= inv.get('max_unit', n)
                        and n % (inv.get('step_size') or 1) == 0)
                    (self._of(uuid, rc).taken if ok
                     else self._of(uuid, rc).refused).add(n)
