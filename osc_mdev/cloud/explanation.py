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

"""Why no more server of a request fits, constraint by constraint, and
the smallest change that lets one fit.

The explainer walks Placement's rules in Placement's order over the
compute node trees of ``fit`` and counts, per constraint, the
devices and hosts it rules out. Each step says what kind of constraint
it is (``Kind``) and on what (its subject: a class, a trait, amounts);
its sentence is rendered in one place (``render``), so what reads the
steps decides on their kind, never on their words. ``smallest_fix``
finds the fewest changes (traits, mdevs to free, a compute service to
enable) that let one server fit on one host. Pure logic.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
import dataclasses
import enum
import typing

from osc_mdev.base import words
from osc_mdev.cloud import fit
from osc_mdev.nova import names
from osc_mdev.nova.scheduler import request_filter
from osc_mdev.nova.scheduler import utils as rr

#: ``((class, amount), ...)``, by class.
Amounts = tuple[tuple[str, int], ...]
#: What a step is about: a trait, classes, amounts, a number of devices.
Subject = typing.Union[str, int, tuple[str, ...], Amounts, None]


class Kind(enum.Enum):
    """What kind of constraint an explainer step checks, in Placement's
    order; the comment says what its subject is.
    """

    OFFERS = 'offers'                  # the mdev classes asked
    REQUIRED_TRAIT = 'required trait'  # the trait
    FORBIDDEN_TRAIT = 'forbidden trait'  # the trait
    ROOM = 'room'                      # Amounts: the most one group asks
    UNITS = 'units'                    # None (min_unit, max_unit, step)
    ISOLATE = 'isolate'                # the number of isolated groups
    ROOT_ROOM = 'root room'            # Amounts asked of the root
    NODE_WITHOUT = 'node without'      # a forbidden trait of the
    #                                    unnumbered group, on the root
    SERVICE_ENABLED = 'service enabled'  # COMPUTE_STATUS_DISABLED
    ROOT_WITHOUT = 'root without'      # a forbidden root trait
    ROOT_TRAIT = 'root trait'          # a required root trait
    ALL_GROUPS = 'all groups'          # None


@dataclasses.dataclass(frozen=True)
class Step:
    """One constraint and what it rules out, after the steps before it.
    """

    kind: Kind
    subject: Subject
    devices_out: int
    hosts_out: int
    devices_left: int
    hosts_left: int

    @property
    def constraint(self) -> str:
        """The step in words (``render``)."""
        return render(self)


def amounts_text(amounts: Amounts) -> str:
    """``1 VGPU, 2 CUSTOM_X``."""
    return ', '.join('%d %s' % (n, rc) for rc, n in amounts)


def _classes(subject: typing.Any) -> str:
    return ', '.join(subject)


#: The sentence of each kind of step, from its subject: the one place
#: steps are put in words.
SENTENCES: dict[Kind, Callable[[typing.Any], str]] = {
    Kind.OFFERS: lambda classes: 'offers %s' % _classes(classes),
    Kind.REQUIRED_TRAIT: lambda trait: 'required trait %s' % trait,
    Kind.FORBIDDEN_TRAIT: lambda trait: 'forbidden trait %s' % trait,
    Kind.ROOM: lambda amounts: 'room for %s' % amounts_text(amounts),
    Kind.UNITS: lambda _: 'units allowed (min_unit, max_unit, step_size)',
    Kind.ISOLATE: lambda n: (
        '%d different devices on one host (group_policy=isolate)' % n),
    Kind.ROOT_ROOM: lambda amounts: 'root room for %s' % ', '.join(
        '%s:%d' % item for item in amounts),
    Kind.NODE_WITHOUT: lambda trait: 'compute node without %s' % trait,
    Kind.SERVICE_ENABLED: lambda trait: (
        'compute service enabled (root without %s)' % trait),
    Kind.ROOT_WITHOUT: lambda trait: 'root without %s' % trait,
    Kind.ROOT_TRAIT: lambda trait: 'root trait %s' % trait,
    Kind.ALL_GROUPS: lambda _: 'all groups at once',
}


def render(step: Step) -> str:
    """The sentence of ``step``."""
    return SENTENCES[step.kind](step.subject)


def _mdev_groups(request: rr.Request) -> list[rr.Group]:
    return [g for g in request.groups
            if any(names.is_mdev_resource_class(rc) for rc, _ in g.resources)]


def _mdev_amounts(group: rr.Group) -> list[tuple[str, int]]:
    return [(rc, n) for rc, n in group.resources
            if names.is_mdev_resource_class(rc)]


def _group_devices(group: rr.Group,
                   host: fit.Host) -> list[fit.Provider]:
    return [d for d in host.devices
            if any(rc in d.inventories for rc, _ in _mdev_amounts(group))]


KeepDevice = Callable[[fit.Host, rr.Group, fit.Provider], bool]
KeepHost = Callable[[fit.Host], bool]


class _Explainer:
    """The hosts and, per host and mdev group, the devices still in the
    running, and the steps taken so far.
    """

    def __init__(self, request: rr.Request,
                 hosts: Iterable[fit.Host]) -> None:
        self.request = request
        self.groups = _mdev_groups(request)
        self.alive = {h.name: h for h in hosts}
        self.left = {name: {g.suffix: list(h.devices) for g in self.groups}
                     for name, h in self.alive.items()}
        self.steps: list[Step] = []

    def devices_left(self) -> int:
        return len({d.uuid for name in self.alive
                    for ds in self.left[name].values() for d in ds})

    def step(self, kind: Kind, subject: Subject = None,
             keep_device: KeepDevice | None = None,
             keep_host: KeepHost | None = None) -> None:
        """Rule out what fails the constraint; a host is out once a group
        has no device left on it.
        """
        before_devices, before_hosts = self.devices_left(), len(self.alive)
        for name in list(self.alive):
            host, left = self.alive[name], self.left[name]
            if keep_device:
                for group in self.groups:
                    left[group.suffix] = [
                        d for d in left[group.suffix]
                        if keep_device(host, group, d)]
            if any(not left[g.suffix] for g in self.groups) or (
                    keep_host and not keep_host(host)):
                del self.alive[name]
        self.steps.append(Step(
            kind, subject, before_devices - self.devices_left(),
            before_hosts - len(self.alive), self.devices_left(),
            len(self.alive)))


def explain(request: rr.Request, hosts: Sequence[fit.Host]
            ) -> tuple[list[Step], str | None]:
    """Per constraint, how many devices and hosts it rules out.

    The order is the one Placement applies: the class offered, required
    traits, forbidden traits, room, the units allowed (``max_unit``,
    ``min_unit``, ``step_size``), enough separate devices on one host for
    isolated groups, the root's resources, the root's traits
    (``COMPUTE_STATUS_DISABLED`` for a disabled compute service,
    ``OWNER_NOVA``), then all groups at once. Each step counts what the
    previous ones left; a host is ruled out once a group of the request
    has no device left on it. A required trait of the unnumbered group
    also counts when the root has it and the group asks resources of the
    root (Placement accepts it on any provider of the allocation).
    Returns ``(steps, fix)``: ``fix`` is the smallest change that lets
    one more server fit (None when one fits or no change of traits, usage
    or service state can make one fit).
    """
    explainer = _Explainer(request, hosts)
    if explainer.groups:
        _device_steps(explainer)
    _root_steps(explainer)
    explainer.step(Kind.ALL_GROUPS, keep_host=lambda h: fit.place(
        request, h) is not None)
    return explainer.steps, (None if explainer.alive
                             else smallest_fix(request, hosts))


def _device_steps(explainer: _Explainer) -> None:
    """The steps on the devices of the request's mdev groups."""
    request, groups, step = explainer.request, explainer.groups, \
        explainer.step
    roots = request.root_amounts()
    step(Kind.OFFERS, tuple(request.mdev_classes()),
         lambda h, g, d: all(rc in d.inventories
                             for rc, _ in _mdev_amounts(g)))
    for trait in sorted({t for g in groups for t in g.required}):
        step(Kind.REQUIRED_TRAIT, trait,
             _keeps_required(trait, asks_root=bool(roots)))
    for trait in sorted({t for g in groups for t in g.forbidden}):
        step(Kind.FORBIDDEN_TRAIT, trait, _keeps_forbidden(trait))
    step(Kind.ROOM, _most_asked(groups),
         lambda h, g, d: all(d.free(rc) >= n for rc, n in _mdev_amounts(g)))
    step(Kind.UNITS, None,
         lambda h, g, d: all(d.inventories[rc].allows(n)
                             for rc, n in _mdev_amounts(g)))
    numbered = [g for g in groups if g.numbered]
    if request.group_policy == rr.ISOLATE and len(numbered) > 1:
        step(Kind.ISOLATE, len(numbered),
             keep_host=lambda h: _distinct(
                 [explainer.left[h.name][g.suffix] for g in numbered]))


def _root_steps(explainer: _Explainer) -> None:
    """The steps on the compute node (the root provider) of each host."""
    request, step = explainer.request, explainer.step
    roots = request.root_amounts()
    if roots:
        step(Kind.ROOT_ROOM, tuple(sorted(roots.items())),
             keep_host=lambda h: all(h.root.free(rc) >= n
                                     for rc, n in roots.items()))
    unnumbered = request.group('')
    if roots and unnumbered is not None:
        # The compute node gives the unnumbered group its VCPU, MEMORY_MB
        # and DISK_GB, so it must not carry the group's forbidden traits.
        for trait in sorted(unnumbered.forbidden):
            step(Kind.NODE_WITHOUT, trait,
                 keep_host=_root_has(trait, wanted=False))
    if rr.COMPUTE_STATUS_DISABLED in request.root_forbidden:
        step(Kind.SERVICE_ENABLED, rr.COMPUTE_STATUS_DISABLED,
             keep_host=lambda h: not h.disabled and
             rr.COMPUTE_STATUS_DISABLED not in h.root.traits)
    for trait in sorted(request.root_forbidden -
                        {rr.COMPUTE_STATUS_DISABLED}):
        step(Kind.ROOT_WITHOUT, trait,
             keep_host=_root_has(trait, wanted=False))
    for trait in sorted(request.root_required):
        step(Kind.ROOT_TRAIT, trait, keep_host=_root_has(trait, wanted=True))


def _keeps_required(trait: str, asks_root: bool) -> KeepDevice:
    """Devices that serve a group requiring ``trait``: those with it;
    for the unnumbered group that asks resources of the root
    (``asks_root``), any device when the root has it (Placement accepts
    it on any provider of the allocation).
    """
    def keep(host: fit.Host, group: rr.Group,
             device: fit.Provider) -> bool:
        return trait not in group.required or trait in device.traits or (
            not group.numbered and asks_root and trait in host.root.traits)
    return keep


def _keeps_forbidden(trait: str) -> KeepDevice:
    """Devices that serve a group forbidding ``trait``."""
    def keep(host: fit.Host, group: rr.Group,
             device: fit.Provider) -> bool:
        return trait not in group.forbidden or trait not in device.traits
    return keep


def _root_has(trait: str, wanted: bool) -> KeepHost:
    """Hosts whose root has ``trait`` (``wanted``) or has not."""
    def keep(host: fit.Host) -> bool:
        return (trait in host.root.traits) == wanted
    return keep


def _distinct(device_lists: Sequence[Sequence[fit.Provider]]) -> bool:
    """Whether each list can give a different device (a matching)."""
    def search(i: int, used: frozenset[str]) -> bool:
        if i == len(device_lists):
            return True
        return any(search(i + 1, used | {d.uuid})
                   for d in device_lists[i] if d.uuid not in used)
    return search(0, frozenset())


def _most_asked(groups: Iterable[rr.Group]) -> Amounts:
    """The most of each mdev class one group asks, by class."""
    per_class: collections.Counter[str] = collections.Counter()
    for g in groups:
        for rc, n in _mdev_amounts(g):
            per_class[rc] = max(per_class[rc], n)
    return tuple(sorted(per_class.items()))


# -- the smallest change -----------------------------------------------------

#: A change on a device: a sentence, or ``('free', class, device,
#: amount)`` for mdevs to free (added up over the groups).
Todo = typing.Union[str, tuple[str, str, str, int]]


def _device_option(request: rr.Request, group: rr.Group,
                   host: fit.Host, device: fit.Provider,
                   used: set[str],
                   taken: collections.Counter[tuple[str, str]]
                   ) -> tuple[int, list[Todo]] | None:
    """``(mdevs to free, changes)`` for ``group`` to take ``device``, or
    None when it never can (class, units, isolation, capacity).
    """
    if (request.group_policy == rr.ISOLATE and group.numbered
            and device.uuid in used):
        return None
    if not all(rc in device.inventories and
               device.inventories[rc].allows(n) and
               taken[(device.uuid, rc)] + n <=
               device.inventories[rc].capacity
               for rc, n in _mdev_amounts(group)):
        return None
    todo: list[Todo] = []
    moves = 0
    add = sorted(group.required - device.traits)
    if add:
        todo.append('tag %s:%s with %s' % (
            host.name, device.device, ', '.join(add)))
    remove = sorted(group.forbidden & device.traits)
    if remove:
        todo.append('remove %s from %s:%s' % (
            ', '.join(remove), host.name, device.device))
    for rc, n in group.resources:
        short = n - max(device.free(rc) - taken[(device.uuid, rc)], 0)
        if rc in device.inventories and short > 0:
            moves += 1
            todo.append(('free', rc, device.device, short))
    return moves, todo


def _devices_fix(request: rr.Request, host: fit.Host
                 ) -> tuple[int, list[str]] | None:
    """``(servers to move, changes)`` on the devices of ``host`` for
    each mdev group to get one, or None when a group can get none.

    Each group takes the device that needs the fewest changes; several
    groups may share one without group_policy=isolate (as PCI devices of
    an alias do): what earlier groups take counts.
    """
    changes: list[Todo] = []
    used: set[str] = set()
    taken: collections.Counter[tuple[str, str]] = collections.Counter()
    to_free: collections.Counter[tuple[str, str]] = collections.Counter()
    moves_total = 0
    for group in _mdev_groups(request):
        options = []
        for device in _group_devices(group, host):
            option = _device_option(request, group, host, device, used,
                                    taken)
            if option is not None:
                moves, todo = option
                options.append(((moves, len(todo)), device.device, device,
                                todo))
        if not options:
            return None
        options.sort(key=lambda o: (o[0], o[1]))
        (moved, _), _, device, todo = options[0]
        used.add(device.uuid)
        for rc, n in group.resources:
            taken[(device.uuid, rc)] += n
        moves_total += moved
        for item in todo:
            if isinstance(item, tuple):
                _, rc, where, short = item
                to_free[(rc, where)] += short
                item = ('free', rc, where, 0)
            changes.append(item)
    return moves_total, [
        'free %d %s on %s:%s' % (to_free[(c[1], c[2])], c[1], host.name,
                                 c[2])
        if isinstance(c, tuple) else c for c in dict.fromkeys(changes)]


def _root_fix(request: rr.Request,
              host: fit.Host) -> tuple[int, list[str]]:
    """``(servers to move, changes)`` on the compute node of ``host``:
    root room to free, a compute service to enable, root traits to add.
    """
    moves, changes = 0, []
    for rc, n in sorted(request.root_amounts().items()):
        short = n - host.root.free(rc)
        if short > 0:
            moves += 1
            changes.append('free %d %s on %s' % (short, rc, host.name))
    if rr.COMPUTE_STATUS_DISABLED in request.root_forbidden and (
            host.disabled or
            rr.COMPUTE_STATUS_DISABLED in host.root.traits):
        changes.append('enable the compute service of %s' % host.name)
    for trait in sorted(request.root_required - host.root.traits):
        changes.append('add %s to the root provider %s' % (
            trait, host.name))
    return moves, changes


def smallest_fix(request: rr.Request,
                 hosts: Iterable[fit.Host]) -> str | None:
    """The smallest change on one host that lets one server fit there.

    Per host, each mdev group takes the device of its class whose
    units allow the amount and that needs the fewest changes: traits to
    add or remove (``mdev trait set`` / ``unset``) and mdevs to free;
    changes that free resources (servers to delete or move) weigh more
    than any number of trait and service changes;
    isolated groups take different devices. Root room to free and a
    compute service to enable count as changes too. A host whose devices
    can never serve a group (wrong class, amount above max_unit) is not
    considered. Returns a sentence, or None.
    """
    best: tuple[tuple[int, int, str], list[str]] | None = None
    for host in sorted(hosts, key=lambda h: h.name):
        devices = _devices_fix(request, host)
        if devices is None:
            continue
        root_moves, root_changes = _root_fix(request, host)
        changes = devices[1] + root_changes
        if not changes:
            continue
        key = (devices[0] + root_moves, len(changes), host.name)
        if best is None or key < best[0]:
            best = (key, changes)
    return None if best is None else '; '.join(best[1])


# -- the whole cloud --------------------------------------------------------

def _empty(trees: Iterable[fit.Host]) -> list[fit.Host]:
    """The same trees with nothing used: what the cloud could serve at all.
    """
    return [dataclasses.replace(
        h, root=dataclasses.replace(h.root, usages={}),
        children=tuple(dataclasses.replace(c, usages={})
                       for c in h.children)) for h in trees]


def unschedulable_reason(request: rr.Request,
                         trees: Sequence[fit.Host]) -> str | None:
    """Why no server of ``request`` can be placed on ``trees`` even when
    nothing is used, or None when one could be (a cloud that is only full
    is not unschedulable).

    ``request`` is the flavor's (without prefilters: they are added here,
    as the scheduler adds them), ``trees`` the compute node trees. The
    reason is what ``openstack mdev capacity --explain`` shows on the
    cloud as it is now: the constraint that rules out the last host, with
    the devices and hosts it rules out, and the smallest change that lets
    one server fit; or what Placement refuses in the request itself.
    """
    try:
        rr.check_request(request)
    except rr.RequestError as exc:
        return str(exc)
    request = request_filter.process_reqspec(
        request, owner_nova=fit.owner_nova_in_effect(trees))
    steps, _ = explain(request, _empty(trees))
    if not steps or steps[-1].hosts_left:
        return None
    empty = next(s for s in steps if not s.hosts_left)
    steps, fix = explain(request, trees)
    last = next((s for s in steps if not s.hosts_left), steps[-1])
    return '%s rules out %s and %s, leaving none%s; smallest change: %s' % (
        last.constraint, words.count(last.devices_out, 'device'),
        words.count(last.hosts_out, 'host'), _largest(request, trees)
        if empty.kind is Kind.ROOM else '',
        fix or 'none found on the devices')


def _largest(request: rr.Request,
             trees: Iterable[fit.Host]) -> str:
    """`` (the largest VGPU device holds 16)``: why no device has room
    even when nothing is used.
    """
    sizes = []
    for rc in request.mdev_classes():
        held = [d.inventories[rc].capacity for h in trees for d in h.devices
                if rc in d.inventories]
        if held:
            sizes.append('the largest %s device holds %d' % (rc, max(held)))
    return ' (%s)' % ', '.join(sizes) if sizes else ''
