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

"""The fit engine: how many more servers of a request fit, and where.

Pure logic over Placement's data (no network). The request is the one
model of ``nova.scheduler.utils``, built from a flavor the way Nova builds its
allocation candidate query; each compute node tree (root provider plus
its children) is then checked the way Placement checks it, one server at
a time, to count the servers that still fit. Which GPU of a host Nova
and Placement pick is ``pick_order``'s alone: the fit engine, the
multi-create, the migration verdict and plan and the reads of
Placement's first candidate all take it from there. Why a server does
not fit is ``explanation``'s; what one multi-create places is
``multicreate``'s.

What Placement decides is modelled; what the scheduler's host filters
decide afterwards (NUMA, PCI, affinity, image properties) is not.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
import dataclasses
import typing

from osc_mdev.cloud import providers
from osc_mdev.nova import names
from osc_mdev.nova.scheduler import utils as rr

# A safety stop for the per-host count (no host holds this many servers).
MAX_FITS = 100000

#: ``{(provider uuid, class): free}``: what a placement takes from.
FreeMap = dict[tuple[str, str], int]
#: Where one server goes: ``[(group, provider, {class: amount})]``.
Placement = list[tuple[rr.Group, 'Provider', dict[str, int]]]

# -- the cloud --------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Inventory(providers.Inventory):
    """An inventory as ``providers.Inventory`` has it (``capacity``,
    ``from_api``), with what counting servers needs: ``max_unit`` None
    when it was not read (the total then), and the amounts Placement said
    the units refuse (when the units themselves were not read).
    """

    # None where providers.Inventory always has a number.
    max_unit: int | None = None  # type: ignore[assignment]
    refused: frozenset[int] = frozenset()

    def allows(self, amount: int) -> bool:
        """Whether one allocation of ``amount`` is allowed at all."""
        max_unit = self.total if self.max_unit is None else self.max_unit
        return (amount not in self.refused
                and self.min_unit <= amount <= max_unit
                and amount % (self.step_size or 1) == 0)


@dataclasses.dataclass(frozen=True)
class Provider:
    uuid: str
    name: str
    inventories: dict[str, Inventory]
    usages: dict[str, int]
    traits: frozenset[str]
    device: str = ''       # PCI address or node device name; '' for roots

    def free(self, rclass: str) -> int:
        inventory = self.inventories.get(rclass)
        if inventory is None:
            return 0
        return max(inventory.capacity - self.usages.get(rclass, 0), 0)

    @property
    def is_mdev(self) -> bool:
        return any(names.is_mdev_resource_class(rc)
                   for rc in self.inventories)


@dataclasses.dataclass(frozen=True)
class Host:
    """A compute node tree: its root and the children Placement has."""

    name: str
    root: Provider
    children: tuple[Provider, ...] = ()
    disabled: bool = False    # the compute service is disabled in Nova

    @property
    def providers(self) -> tuple[Provider, ...]:
        return (self.root,) + tuple(self.children)

    @property
    def devices(self) -> list[Provider]:
        return [c for c in self.children if c.is_mdev]


# -- which GPU Nova picks ---------------------------------------------------

_O = typing.TypeVar('_O')


def pick_order(options: Iterable[_O],
               room: Callable[[_O], int] | None = None,
               first: Callable[[_O], bool] | None = None) -> list[_O]:
    """The order in which Nova and Placement pick among ``options``:
    the GPUs (or allocation requests) of one host that can serve a
    request. The one answer to "which physical GPU does Nova pick?".

    Nova's scheduler claims only the first allocation request Placement
    lists for a host (``SchedulerManager._schedule``:
    ``host.allocation_candidates[0]``, bug 1874664), and the libvirt
    driver creates the server's mdevs on the devices it names. So:

    - options that Placement's answer lists come in its order (allocation
      requests are given in that order, and ``claimed`` takes the first);
    - where that answer was read, what its first allocation request
      names comes first (``first``: whether an option is in it);
    - where it was not, the fit engine tries the most room first
      (``room``), which spreads servers evenly: the order that fits the
      most servers of equal groups.

    Ties keep the order of ``options``.
    """
    def key(option: _O) -> tuple[bool, int]:
        return (first is not None and not first(option),
                -room(option) if room is not None else 0)
    return sorted(options, key=key)


def claimed(requests: Sequence[_O]) -> _O | None:
    """The allocation request the scheduler claims on a host among
    ``requests`` (Placement's, for one tree, in its order): the first in
    ``pick_order``; None when there is none.
    """
    ordered = pick_order(requests)
    return ordered[0] if ordered else None


# -- one server on one host -------------------------------------------------

def _root_ok(request: rr.Request, host: Host) -> bool:
    traits = host.root.traits
    if host.disabled and rr.COMPUTE_STATUS_DISABLED in request.root_forbidden:
        return False
    return (request.root_required <= traits
            and not request.root_forbidden & traits)


def _eligible(group: rr.Group, provider: Provider,
              rclass: str | None = None) -> bool:
    """Whether ``provider`` may serve ``group`` (a class of it for the
    unnumbered group) regardless of what is used.
    """
    amounts = group.amounts
    classes = [rclass] if rclass else list(amounts)
    for rc in classes:
        inventory = provider.inventories.get(rc)
        if inventory is None or not inventory.allows(amounts[rc]):
            return False
    if group.forbidden & provider.traits:
        return False
    if group.numbered and not group.required <= provider.traits:
        return False
    return True


#: One part of a server's request: ``(group, class or None, providers
#: that may serve it)``.
Task = tuple[rr.Group, 'str | None', list[Provider]]


def _tasks(request: rr.Request, host: Host,
           ignore_root_classes: bool = False) -> list[Task]:
    """What one server needs, as ``(group, class or None, providers
    that may serve it)``: each numbered group whole, each class of the
    unnumbered group alone. Depends on traits and units only, not on
    usage, so it is worked out once per host.
    """
    tasks: list[Task] = []
    for group in request.groups:
        if group.numbered:
            tasks.append((group, None, [
                p for p in host.providers if _eligible(group, p)]))
        else:
            for rc, _ in group.resources:
                if ignore_root_classes and rc in rr.ROOT_CLASSES:
                    continue
                tasks.append((group, rc, [
                    p for p in host.providers if _eligible(group, p, rc)]))
    return tasks


def _place(request: rr.Request, host: Host, free: FreeMap,
           ignore_root_classes: bool = False,
           tasks: list[Task] | None = None) -> Placement | None:
    """One allocation for one server on ``host`` given ``free``
    (``{(uuid, class): free}``), or None.

    Each numbered group takes all its classes from one provider with its
    required traits and none of its forbidden ones; the unnumbered group
    takes each class from any provider of the tree, its forbidden traits
    on none of them and its required traits on at least one of them;
    with ``group_policy=isolate`` numbered groups use different
    providers. The providers that can serve a group are tried in
    ``pick_order``, the one with the most room left first.
    """
    if not _root_ok(request, host):
        return None
    if tasks is None:
        tasks = _tasks(request, host, ignore_root_classes)
    if any(not candidates for _, _, candidates in tasks):
        return None
    isolate = request.group_policy == rr.ISOLATE
    plan: Placement = []

    def room(provider: Provider, group: rr.Group, rc: str | None) -> int:
        classes = [rc] if rc else list(group.amounts)
        return min(free.get((provider.uuid, c), 0) for c in classes)

    def search(i: int, used_numbered: frozenset[str]) -> bool:
        if i == len(tasks):
            return _unnumbered_traits_ok(request, plan)
        group, rc, candidates = tasks[i]
        amounts = group.amounts
        classes = [rc] if rc else list(amounts)
        for provider in pick_order(
                candidates, room=lambda p: room(p, group, rc)):
            if group.numbered and isolate and provider.uuid in used_numbered:
                continue
            if any(free.get((provider.uuid, c), 0) < amounts[c]
                   for c in classes):
                continue
            for c in classes:
                free[(provider.uuid, c)] -= amounts[c]
            plan.append((group, provider, {c: amounts[c] for c in classes}))
            if search(i + 1, used_numbered | (
                    {provider.uuid} if group.numbered else frozenset())):
                return True
            plan.pop()
            for c in classes:
                free[(provider.uuid, c)] += amounts[c]
        return False

    if not search(0, frozenset()):
        return None
    return list(plan)


def _unnumbered_traits_ok(request: rr.Request, plan: Placement) -> bool:
    unnumbered = request.group('')
    if unnumbered is None or not unnumbered.required:
        return True
    have: set[str] = set()
    for group, provider, _ in plan:
        if not group.numbered:
            have |= provider.traits
    return unnumbered.required <= have


def _free_map(host: Host) -> FreeMap:
    return {(p.uuid, rc): p.free(rc) for p in host.providers
            for rc in p.inventories}


def free_map(host: Host) -> FreeMap:
    """``{(provider uuid, class): free}`` of every provider of ``host``:
    what ``place`` takes from.
    """
    return _free_map(host)


def place(request: rr.Request, host: Host,
          free: FreeMap | None = None) -> Placement | None:
    """Where one server of ``request`` goes on ``host``, as Placement
    would place it: ``[(group, provider, {class: amount})]``, or None
    when it does not fit. ``free`` (``free_map``) is what is left; the
    server's amounts are taken out of it. None: the host as read.
    """
    return _place(request, host, _free_map(host) if free is None else free)


def serving_devices(request: rr.Request, host: Host,
                    free: FreeMap | None = None) -> list[Provider]:
    """The devices of ``host`` that can serve one of ``request``'s device
    groups now: the group's classes with room (``free``, or as read) and
    units, its forbidden traits absent and, for a numbered group, its
    required traits present.
    """
    free = _free_map(host) if free is None else free
    found = []
    for device in host.children:
        for group in request.device_groups():
            classes = [rc for rc, _ in group.resources
                       if rc in device.inventories]
            if not classes:
                continue
            if group.numbered:
                ok = _eligible(group, device)
            else:
                ok = all(_eligible(group, device, rc) for rc in classes)
            if ok and all(free.get((device.uuid, rc), 0) >=
                          group.amounts[rc] for rc in classes):
                found.append(device)
                break
    return found


@dataclasses.dataclass(frozen=True)
class HostCapacity:
    host: str
    fits: int
    devices: tuple[str, ...]  # devices that can serve a group now
    free: int           # free mdevs of the request's classes on them
    limit: str          # what stops one more server ('' when unbounded)


def host_capacity(request: rr.Request, host: Host) -> HostCapacity:
    """How many more servers of ``request`` fit on ``host`` now.

    Servers are placed one after the other as Placement would place each
    (see ``_place``) until one more does not fit. ``devices`` are the
    devices those servers would take mdevs from; ``free`` counts the free
    mdevs of the request's classes on every device that can serve one of
    its groups (class, traits and units).
    """
    free = _free_map(host)
    fits = 0
    used: set[str] = set()
    # Without isolated groups every server takes the same amounts from
    # providers that serve each other server independently, so the order
    # does not change the count: a found placement is repeated while it
    # fits. Isolated groups are placed one server at a time.
    repeat = not (request.group_policy == rr.ISOLATE and
                  len(request.numbered_groups) > 1)
    tasks = _tasks(request, host)
    while fits < MAX_FITS:
        plan = _place(request, host, free, tasks=tasks)
        if plan is None:
            break
        # _place took the server's amounts out of ``free``.
        fits += 1
        used.update(p.uuid for _, p, _ in plan)
        if repeat:
            taken: collections.Counter[tuple[str, str]] = (
                collections.Counter())
            for _, provider, amounts in plan:
                for rc, n in amounts.items():
                    taken[(provider.uuid, rc)] += n
            more = min(free[key] // n for key, n in taken.items())
            more = min(more, MAX_FITS - fits)
            for key, n in taken.items():
                free[key] -= more * n
            fits += more
    devices = tuple(sorted(d.device for d in host.devices if d.uuid in used))
    return HostCapacity(host.name, fits, devices,
                        _free_of_class(request, host),
                        _limit(request, host, free))


def _free_of_class(request: rr.Request, host: Host) -> int:
    mdev_classes = set(request.mdev_classes())
    total = 0
    for device in host.devices:
        if any(_eligible(group, device, None if group.numbered else rc)
               and (group.numbered or group.required <= (
                   device.traits | host.root.traits))
               for group in request.groups for rc, _ in group.resources
               if rc in mdev_classes):
            total += sum(device.free(rc) for rc in mdev_classes)
    return total


def _limit(request: rr.Request, host: Host, free: FreeMap) -> str:
    """Why the next server does not fit on ``host`` (after the others)."""
    if rr.COMPUTE_STATUS_DISABLED in request.root_forbidden and (
            host.disabled or rr.COMPUTE_STATUS_DISABLED in host.root.traits):
        return 'compute disabled'
    missing = sorted(request.root_required - host.root.traits)
    if missing:
        return 'root lacks %s' % ', '.join(missing)
    present = sorted(request.root_forbidden & host.root.traits)
    if present:
        return 'root has %s' % ', '.join(present)
    plenty = {key: MAX_FITS for key in free}
    if _place(request, host, plenty) is None:
        return 'no matching device'
    short = [rc for rc, n in request.root_amounts().items()
             if free.get((host.root.uuid, rc), 0) < n]
    if short and _place(request, host, dict(free),
                        ignore_root_classes=True) is not None:
        return ', '.join(sorted(short))
    return ', '.join(request.mdev_classes()) or ', '.join(
        sorted({rc for g in request.groups for rc, _ in g.resources}))


# -- the whole cloud --------------------------------------------------------

def owner_nova_in_effect(hosts: Iterable[Host]) -> bool:
    """Whether Nova's scheduler requires OWNER_NOVA on roots.

    ``owner_nova_filter`` adds it once every nova-compute service is new
    enough to report it; that version is not visible through Placement,
    so the sign used is the trait itself: every compute node root carries
    it. (When one does not, Nova does not filter on it either.)
    """
    return all(rr.OWNER_NOVA in h.root.traits for h in hosts)


def capacity(request: rr.Request,
             hosts: Iterable[Host]) -> list[HostCapacity]:
    """``[HostCapacity]`` for every host, by name."""
    return [host_capacity(request, h)
            for h in sorted(hosts, key=lambda h: h.name)]
