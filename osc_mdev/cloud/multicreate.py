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

"""Nova's multi-create: what one ``server create --min N --max N`` places.

Mirrors how ``SchedulerManager._schedule`` (nova/scheduler/manager.py)
claims one allocation candidate per host for each server of a request,
over the answer of one ``GET /allocation_candidates`` (its allocation
requests and provider summaries, as Placement gives them). Pure logic;
the servers that fit one by one are ``fit``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence

from osc_mdev.cloud import allocation_candidates
from osc_mdev.cloud import fit
from osc_mdev.cloud import providers
from osc_mdev.nova.scheduler import utils as rr

#: A host's allocation requests, in Placement's order.
Requests = Sequence[allocation_candidates.AllocationRequest]
#: Placement's ``provider_summaries``: ``{provider uuid: Summary}``.
Summaries = Mapping[str, providers.Summary]


def multi_create(count: int, candidates: Mapping[str, Requests],
                 summaries: Summaries) -> tuple[int, dict[str, int]]:
    """Whether one ``server create --min N --max N`` of ``count`` servers
    would be placed, and how many would be.

    Mirrors ``SchedulerManager._schedule`` (nova/scheduler/manager.py):
    the allocation candidates are read once for the whole request; for
    each server in turn the scheduler walks the sorted hosts and tries to
    claim **only the first allocation request of each host**
    (``host.allocation_candidates[0]``, bug 1874664: ``fit.claimed``); a
    host whose first candidate no longer fits is skipped, never asked
    for its other candidates. ``_ensure_sufficient_hosts`` then raises
    NoValidHost unless every server got a host, and the claims are
    undone.

    So one request places at most, per host, the number of times its
    first candidate still fits: ``min(free / amount)`` over the providers
    and classes of that candidate.

    ``candidates`` is ``{host: [allocation requests]}`` (each host's, in
    Placement's answer), ``summaries`` the answer's summaries. Returns
    ``(placed, per_host)``: ``placed`` is min(count, what one request
    can place); ``per_host`` ``{host: servers its first candidate
    holds}``.
    """
    per_host = {}
    for host, requests in candidates.items():
        first = fit.claimed(requests)
        per_host[host] = 0 if first is None else _times_it_fits(
            first, summaries)
    return min(count, sum(per_host.values())), per_host


def _times_it_fits(request: allocation_candidates.AllocationRequest,
                   summaries: Summaries) -> int:
    """How many times one allocation request still fits its providers."""
    times: int | None = None
    for rp, amounts in request.allocations.items():
        summary = summaries.get(rp)
        resources = summary.resources if summary is not None else {}
        for rc, amount in amounts.items():
            info = resources.get(rc)
            if info is None or amount <= 0:
                continue
            room = max(info[0] - info[1], 0) // amount
            times = room if times is None else min(times, room)
    return times or 0


def candidate_order_is_fixed(request: rr.Request) -> bool:
    """Whether Placement lists a host's candidates in the same order for
    every server create of this request.

    Not when it has PCI groups: Nova names each after a new random id
    for every request (``RequestSpec.generate_request_groups_from_pci_
    requests``: ``requester_id`` from the PCI request's UUID, used as the
    group suffix), and Placement's candidate order follows the group
    names, so which candidate of a host comes first changes from one
    server create to the next.
    """
    return not any(g.is_pci for g in request.groups)


def multi_create_bounds(
        count: int, candidates: Mapping[str, Requests],
        summaries: Summaries) -> tuple[int, int, dict[str, int]]:
    """``multi_create`` when any candidate of a host may be the first.

    ``candidates`` is ``{host: [allocation requests]}``. Returns
    ``(least, most, least_per_host)``: what one request places when each
    host's first candidate is the one that fits the fewest times, and
    when it is the one that fits the most (both capped at ``count``).
    """
    least: dict[str, int] = {}
    most: dict[str, int] = {}
    for host, requests in candidates.items():
        times = [_times_it_fits(a, summaries) for a in requests] or [0]
        least[host], most[host] = min(times), max(times)
    return (min(count, sum(least.values())), min(count, sum(most.values())),
            least)


def batches(count: int, per_host: Mapping[str, int],
            fits: Mapping[str, int]) -> list[int]:
    """Request sizes, one request after another, that are sure to be
    placed, for ``count`` servers (capped by the servers that fit).

    The first request places what ``multi_create`` says (``per_host``:
    each host's first-candidate room). Which candidate Placement lists
    first afterwards is not known in advance, but a host with room for
    one more server always has a first candidate that fits once: so each
    later request is sized at the number of hosts that still have room,
    one server each (``fits``: ``{host: servers that fit}``). Real
    requests may place more; these never fail for lack of room.
    """
    left = {h: n for h, n in fits.items() if n > 0}
    wanted = min(count, sum(left.values()))
    plan: list[int] = []
    first = min(wanted, sum(min(per_host.get(h, 0), n)
                            for h, n in left.items()))
    if first:
        plan.append(first)
        wanted -= first
        taken = first
        for host in sorted(left):
            take = min(per_host.get(host, 0), left[host], taken)
            left[host] -= take
            taken -= take
    while wanted > 0:
        hosts = sorted(h for h, n in left.items() if n > 0)
        step = min(len(hosts), wanted)
        if not step:
            break
        for host in hosts[:step]:
            left[host] -= 1
        plan.append(step)
        wanted -= step
    return plan


def multi_create_verdict(count: int, placed: int, one: Mapping[str, int],
                         per_host: Sequence[fit.HostCapacity],
                         most: int) -> str:
    """The verdict on one ``server create --min N --max N`` of ``count``
    servers, in words: ``placed`` and ``most`` servers one request places
    at least and at most (``multi_create``, ``multi_create_bounds``),
    ``one`` what each host takes in it, ``per_host`` the HostCapacity
    rows; when it is not sure to be placed, the request sizes that are
    (``batches``).
    """
    if placed >= count:
        return 'one request of %d servers is placed' % count
    total = sum(h.fits for h in per_host)
    if total < count:
        return ('NoValidHost: only %d servers fit, and one request places '
                'at most %d' % (total, most))
    plan = batches(count, one, {h.host: h.fits for h in per_host})
    if most >= count:
        return ('one request of %d servers may be placed: it places %d to '
                '%d, as Nova names the PCI groups anew for each request and '
                "Placement's first candidate of a host changes with the "
                'names; requests of %s one after the other are placed' % (
                    count, placed, most, ', '.join(str(n) for n in plan)))
    return ('NoValidHost: one request places at most %d (the scheduler '
            'claims only the first candidate of each host); requests of '
            '%s one after the other are placed' % (
                most, ', '.join(str(n) for n in plan)))
