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

"""Placement's answer to ``GET /allocation_candidates``, typed.

The one reading of that answer: its allocation requests in the order
Placement lists them, each with the root provider of its tree, and its
provider summaries (``providers.Summary``). Which of them Nova claims is
``fit.claimed``'s. Pure logic.
"""

from __future__ import annotations

from collections.abc import Mapping
import dataclasses
import typing

from osc_mdev.cloud import providers


@dataclasses.dataclass(frozen=True)
class AllocationRequest:
    """One allocation request: ``{provider uuid: {class: amount}}``, all
    in the tree of ``root`` ('' when it names no provider).
    """

    allocations: dict[str, dict[str, int]]
    root: str


@dataclasses.dataclass(frozen=True)
class Candidates:
    """An allocation candidates answer: ``requests`` in Placement's
    order, ``summaries`` ``{provider uuid: Summary}``.
    """

    requests: tuple[AllocationRequest, ...]
    summaries: dict[str, providers.Summary]

    def by_root(self) -> dict[str, list[AllocationRequest]]:
        """``{root uuid: [allocation requests of its tree]}``, each list
        in Placement's order.
        """
        found: dict[str, list[AllocationRequest]] = {}
        for request in self.requests:
            if request.root:
                found.setdefault(request.root, []).append(request)
        return found


def parse(answer: Mapping[str, typing.Any]) -> Candidates:
    """The Candidates of a ``GET /allocation_candidates`` answer.

    A request's tree is the root (``root_provider_uuid``, microversion
    1.29) of the first provider it names; a provider with no summary is
    taken for its own root.
    """
    raw = answer.get('provider_summaries') or {}
    return Candidates(
        tuple(_request(areq, raw)
              for areq in answer.get('allocation_requests') or ()),
        providers.parse_summaries({'provider_summaries': raw}))


def _request(areq: Mapping[str, typing.Any],
             raw: Mapping[str, typing.Any]) -> AllocationRequest:
    allocations = {
        uuid: dict(alloc.get('resources') or {})
        for uuid, alloc in (areq.get('allocations') or {}).items()}
    root = ''
    for uuid in allocations:
        root = (raw.get(uuid) or {}).get('root_provider_uuid') or uuid
        break
    return AllocationRequest(allocations, root)
