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

"""Where the servers of a compute node go, jointly, and the commands
that move them.

The plan judges each server on each target as ``migration check`` does
(``verdict.judge``, strict about the devices' types) and takes
the room each move uses away from the next; a server that cannot move
gets the reasons of its targets and the smallest change that would let
it fit (``explanation.smallest_fix`` on devices of its type). Pure
logic.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses

from osc_mdev.cloud import explanation
from osc_mdev.cloud import fit
from osc_mdev.features.migration import model
from osc_mdev.features.migration import verdict as judging
from osc_mdev.nova import migration as rules
from osc_mdev.nova import objects
from osc_mdev.nova.scheduler import request_filter

#: What would let a server fit on one of the nodes, or None.
Fix = Callable[[model.Server, list[model.Node]], 'str | None']


@dataclasses.dataclass
class Move:
    """One row of a plan: where a server goes, or why it cannot; for a
    move, what it leans on that the APIs cannot show (``not_checked``)
    and its warnings (``reason``), as ``judge`` says them.
    """

    server: model.Server
    node: str | None = None
    service_host: str | None = None
    kind: str | None = None
    reason: str = ''
    not_checked: tuple[str, ...] = ()


def plan(servers: Sequence[model.Server], source: model.Node,
         targets: Sequence[model.Node],
         kinds: tuple[str, ...] = (rules.LIVE, rules.COLD),
         firsts: Mapping[tuple[str, str], judging.First] | None = None,
         owner_nova: bool = True, fix: Fix | None = None,
         skip_version_check: bool = False) -> list[Move]:
    """Where each of ``servers`` (on ``source``) goes, jointly.

    Biggest requests first; each takes the target where it fits best
    (live before cold when both are allowed, then the least room left
    on the devices it takes, then by name), and the room it takes on
    the devices ``judge`` places it on (in ``fit.pick_order``) is
    no longer offered to the next. ``firsts`` is ``{(server id, target
    node): Placement's first candidate}``; targets where the server's
    request could land on a device of another type are not used (the plan
    must hold whatever order Placement lists devices in). ``fix(server,
    nodes)`` says what would let a server that cannot move fit;
    ``skip_version_check`` is as for ``judge``. Each move carries the
    caveats ``judge`` gives for its kind.
    """
    firsts = firsts or {}
    free = {t.name: fit.free_map(t.tree) for t in targets
            if t.tree is not None}
    moves = []
    ordered = sorted(servers, key=lambda s: (
        tuple(-n for n in s.size()), s.name, s.id))
    for server in ordered:
        best, refusals = _best_target(
            server, source, targets, kinds, firsts, free, owner_nova,
            skip_version_check)
        if best is None:
            moves.append(Move(server, reason=_no_target(
                server, refusals, targets, free, fix)))
            continue
        target, kind, verdict = best
        for _, provider, amounts in verdict.placement[kind]:
            for rc, n in amounts.items():
                free[target.name][(provider.uuid, rc)] -= n
        not_checked, warnings = verdict.caveats[kind]
        moves.append(Move(
            server, target.name, target.service_host, kind,
            '; '.join('warning: %s' % w for w in warnings), not_checked))
    order = {s.id: i for i, s in enumerate(servers)}
    moves.sort(key=lambda m: order[m.server.id])
    return moves


#: A target for a server: ``(node, kind of move, verdict)``.
Choice = tuple[model.Node, str, judging.Verdict]


def _best_target(server: model.Server, source: model.Node,
                 targets: Sequence[model.Node], kinds: tuple[str, ...],
                 firsts: Mapping[tuple[str, str], judging.First],
                 free: dict[str, fit.FreeMap], owner_nova: bool,
                 skip_version_check: bool
                 ) -> tuple[Choice | None, list[tuple[str, str]]]:
    """Where ``server`` fits best (live before cold when both are
    allowed, then the least room left on the devices it takes, then by
    name), and the refusals of the targets it does not fit:
    ``(choice or None, [(node, refusal)])``.
    """
    best: tuple[tuple[int, int, str], Choice] | None = None
    refusals = []
    for target in sorted(targets, key=lambda t: t.name):
        if server.request is not None and not model.offers(
                server.request, target):
            continue
        verdict = judging.judge(
            server, source, target,
            firsts.get((server.id, target.name), judging.NOT_ASKED),
            free.get(target.name), owner_nova, strict_types=True,
            skip_version_check=skip_version_check)
        usable = [k for k in kinds if verdict.placement.get(k) and (
            verdict.live if k == rules.LIVE else verdict.cold) == judging.YES]
        if not usable:
            refusals.append((target.name, _refusal(verdict, kinds)))
            continue
        kind = usable[0]
        left = _room_left(verdict.placement[kind], free[target.name])
        rank = (kinds.index(kind), left, target.name)
        if best is None or rank < best[0]:
            best = (rank, (target, kind, verdict))
    return (None if best is None else best[1]), refusals


def _refusal(verdict: judging.Verdict, kinds: tuple[str, ...]) -> str:
    if kinds == (rules.LIVE,):
        return verdict.live_refusal or verdict.reason
    if kinds == (rules.COLD,):
        return verdict.cold_refusal or verdict.reason
    return verdict.reason


def _room_left(placed: fit.Placement, free: fit.FreeMap) -> int:
    """Room left on the devices a placement takes (best fit: least)."""
    left = 0
    for _, provider, amounts in placed:
        if provider.device:
            for rc, n in amounts.items():
                left += free[(provider.uuid, rc)] - n
    return left


def _no_target(server: model.Server, refusals: list[tuple[str, str]],
               targets: Sequence[model.Node],
               free: dict[str, fit.FreeMap], fix: Fix | None) -> str:
    if server.request is None:
        return server.problem or 'the server\'s request is not known'
    if not refusals:
        return ('no other compute node has a device of %s' % ', '.join(
            sorted(server.request.device_amounts())))
    counts = collections.Counter(r for _, r in refusals)
    parts = []
    for reason, _ in counts.most_common(3):
        hosts = [n for n, r in refusals if r == reason]
        parts.append('%s: %s' % (', '.join(hosts[:3]) + (
            ' and %d more' % (len(hosts) - 3) if len(hosts) > 3 else ''),
            reason))
    if len(counts) > 3:
        parts.append('%d more reasons' % (len(counts) - 3))
    text = 'no target: ' + '; '.join(parts)
    if fix is not None:
        change = fix(server, [
            dataclasses.replace(t, tree=model.with_free(t.tree, free[t.name]))
            for t in targets if t.tree is not None])
        if change:
            text += '; smallest change: %s' % change
    return text


def smallest_fix(server: model.Server, targets: Sequence[model.Node],
                 owner_nova: bool = True) -> str | None:
    """The smallest change on one target that lets ``server`` fit there,
    on devices of its type only (``explanation.smallest_fix``): traits to
    add to devices, mdevs to free, a compute service to enable.
    """
    if server.request is None:
        return None
    key = next(iter(server.type_keys)) if len(server.type_keys) == 1 \
        else None
    request = request_filter.process_reqspec(server.request,
                                             owner_nova=owner_nova)
    hosts = []
    for target in targets:
        tree = target.tree
        if tree is None:
            continue
        if key is not None:
            tree = dataclasses.replace(tree, children=tuple(
                c for c in tree.children if c.uuid not in target.nodedevs
                or model.key_of(target.types.get(c.uuid)) in (None, key)))
        hosts.append(dataclasses.replace(
            tree, disabled=target.hypervisor is not None and
            target.hypervisor.status == objects.DISABLED))
    return explanation.smallest_fix(request, hosts)


# -- commands ---------------------------------------------------------------

LIVE_COMMAND = ('openstack --os-compute-api-version 2.30 server migrate '
                '--live-migration --host %(host)s --wait %(server)s')
COLD_COMMAND = ('openstack --os-compute-api-version 2.56 server migrate '
                '--host %(host)s --wait %(server)s && openstack server '
                'migration confirm %(server)s')


def command(kind: str | None, service_host: str | None,
            server_id: str) -> str:
    """The ``openstack`` command that makes the move (the target is a
    service host: the one ``server migrate --host`` takes).
    """
    return (LIVE_COMMAND if kind == rules.LIVE else COLD_COMMAND) % {
        'host': service_host, 'server': server_id}
