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

"""How many more servers of a request fit, where, and why not.

Pure logic over Placement's data (no network). The request is the one
model of ``resource_request``, built from a flavor the way Nova builds its
allocation candidate query; each compute
node tree (root provider plus its children) is then checked the way
Placement checks it, one server at a time, to count the servers that
still fit.

What Placement decides is modelled; what the scheduler's host filters
decide afterwards (NUMA, PCI, affinity, image properties) is not.
"""

import collections
import dataclasses

from osc_mdev.domain import names
from osc_mdev.domain import providers
from osc_mdev.domain import resource_request as rr
from osc_mdev.domain import words

# A safety stop for the per-host count (no host holds this many servers).
MAX_FITS = 100000

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
    refused: frozenset = frozenset()

    def allows(self, amount):
        """Whether one allocation of ``amount`` is allowed at all."""
        max_unit = self.total if self.max_unit is None else self.max_unit
        return (amount not in self.refused
                and self.min_unit <= amount <= max_unit
                and amount % (self.step_size or 1) == 0)


@dataclasses.dataclass(frozen=True)
class Provider:
    uuid: str
    name: str
    inventories: dict      # {class: Inventory}
    usages: dict           # {class: used}
    traits: frozenset
    device: str = ''       # PCI address or node device name; '' for roots

    def free(self, rclass):
        inventory = self.inventories.get(rclass)
        if inventory is None:
            return 0
        return max(inventory.capacity - self.usages.get(rclass, 0), 0)

    @property
    def is_mdev(self):
        return any(names.is_mdev_resource_class(rc)
                   for rc in self.inventories)


@dataclasses.dataclass(frozen=True)
class Host:
    """A compute node tree: its root and the children Placement has."""

    name: str
    root: Provider
    children: tuple = ()
    disabled: bool = False    # the compute service is disabled in Nova

    @property
    def providers(self):
        return (self.root,) + tuple(self.children)

    @property
    def devices(self):
        return [c for c in self.children if c.is_mdev]


# -- one server on one host -------------------------------------------------

def _root_ok(request, host):
    traits = host.root.traits
    if host.disabled and rr.COMPUTE_STATUS_DISABLED in request.root_forbidden:
        return False
    return (request.root_required <= traits
            and not request.root_forbidden & traits)


def _eligible(group, provider, rclass=None):
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


def _tasks(request, host, ignore_root_classes=False):
    """What one server needs, as ``(group, class or None, providers
    that may serve it)``: each numbered group whole, each class of the
    unnumbered group alone. Depends on traits and units only, not on
    usage, so it is worked out once per host.
    """
    tasks = []
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


def _place(request, host, free, ignore_root_classes=False, tasks=None):
    """One allocation for one server on ``host`` given ``free``
    (``{(uuid, class): free}``), or None.

    Each numbered group takes all its classes from one provider with its
    required traits and none of its forbidden ones; the unnumbered group
    takes each class from any provider of the tree, its forbidden traits
    on none of them and its required traits on at least one of them;
    with ``group_policy=isolate`` numbered groups use different
    providers. Among the providers that can serve a group, the one with
    the most room left is tried first (which spreads servers evenly, the
    order that fits the most servers of equal groups).
    """
    if not _root_ok(request, host):
        return None
    if tasks is None:
        tasks = _tasks(request, host, ignore_root_classes)
    if any(not candidates for _, _, candidates in tasks):
        return None
    isolate = request.group_policy == rr.ISOLATE
    plan = []

    def room(provider, group, rc):
        classes = [rc] if rc else list(group.amounts)
        return min(free.get((provider.uuid, c), 0) for c in classes)

    def search(i, used_numbered):
        if i == len(tasks):
            return _unnumbered_traits_ok(request, plan)
        group, rc, candidates = tasks[i]
        amounts = group.amounts
        classes = [rc] if rc else list(amounts)
        ordered = sorted(candidates, key=lambda p: -room(p, group, rc))
        for provider in ordered:
            if group.numbered and isolate and provider.uuid in used_numbered:
                continue
            if any(free.get((provider.uuid, c), 0) < amounts[c]
                   for c in classes):
                continue
            for c in classes:
                free[(provider.uuid, c)] -= amounts[c]
            plan.append((group, provider, {c: amounts[c] for c in classes}))
            if search(i + 1, used_numbered | (
                    {provider.uuid} if group.numbered else set())):
                return True
            plan.pop()
            for c in classes:
                free[(provider.uuid, c)] += amounts[c]
        return False

    if not search(0, frozenset()):
        return None
    return list(plan)


def _unnumbered_traits_ok(request, plan):
    unnumbered = request.group('')
    if unnumbered is None or not unnumbered.required:
        return True
    have = set()
    for group, provider, _ in plan:
        if not group.numbered:
            have |= provider.traits
    return unnumbered.required <= have


def _free_map(host):
    return {(p.uuid, rc): p.free(rc) for p in host.providers
            for rc in p.inventories}


def free_map(host):
    """``{(provider uuid, class): free}`` of every provider of ``host``:
    what ``place`` takes from.
    """
    return _free_map(host)


def place(request, host, free=None):
    """Where one server of ``request`` goes on ``host``, as Placement
    would place it: ``[(group, provider, {class: amount})]``, or None
    when it does not fit. ``free`` (``free_map``) is what is left; the
    server's amounts are taken out of it. None: the host as read.
    """
    return _place(request, host, _free_map(host) if free is None else free)


def serving_devices(request, host, free=None):
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
    devices: tuple      # devices that can serve a group of the request now
    free: int           # free mdevs of the request's classes on them
    limit: str          # what stops one more server ('' when unbounded)


def host_capacity(request, host):
    """How many more servers of ``request`` fit on ``host`` now.

    Servers are placed one after the other as Placement would place each
    (see ``_place``) until one more does not fit. ``devices`` are the
    devices those servers would take mdevs from; ``free`` counts the free
    mdevs of the request's classes on every device that can serve one of
    its groups (class, traits and units).
    """
    free = _free_map(host)
    fits = 0
    used = set()
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
            taken = collections.Counter()
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


def _free_of_class(request, host):
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


def _limit(request, host, free):
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


# -- Nova's multi-create ----------------------------------------------------

def multi_create(count, first_candidates, summaries):
    """Whether one ``server create --min N --max N`` of ``count`` servers
    would be placed, and how many would be.

    Mirrors ``SchedulerManager._schedule`` (nova/scheduler/manager.py):
    the allocation candidates are read once for the whole request; for
    each server in turn the scheduler walks the sorted hosts and tries to
    claim **only the first allocation request of each host**
    (``host.allocation_candidates[0]``, bug 1874664); a host whose first
    candidate no longer fits is skipped, never asked for its other
    candidates. ``_ensure_sufficient_hosts`` then raises NoValidHost
    unless every server got a host, and the claims are undone.

    So one request places at most, per host, the number of times its
    first candidate still fits: ``min(free / amount)`` over the providers
    and classes of that candidate.

    ``first_candidates`` is ``{host: allocation request}`` (each host's
    first ``allocations`` dict in Placement's answer), ``summaries`` the
    answer's ``provider_summaries``. Returns ``(placed, per_host)``:
    ``placed`` is min(count, what one request can place); ``per_host``
    ``{host: servers its first candidate holds}``.
    """
    per_host = {host: _times_it_fits(allocations, summaries)
                for host, allocations in first_candidates.items()}
    return min(count, sum(per_host.values())), per_host


def _times_it_fits(allocations, summaries):
    """How many times one allocation request still fits its providers."""
    times = None
    for rp, alloc in allocations.items():
        resources = summaries.get(rp, {}).get('resources', {})
        for rc, amount in alloc['resources'].items():
            info = resources.get(rc)
            if info is None or amount <= 0:
                continue
            room = max(info['capacity'] - info['used'], 0) // amount
            times = room if times is None else min(times, room)
    return times or 0


def candidate_order_is_fixed(request):
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


def multi_create_bounds(count, candidates, summaries):
    """``multi_create`` when any candidate of a host may be the first.

    ``candidates`` is ``{host: [allocation requests]}``. Returns
    ``(least, most, least_per_host)``: what one request places when each
    host's first candidate is the one that fits the fewest times, and
    when it is the one that fits the most (both capped at ``count``).
    """
    least, most = {}, {}
    for host, requests in candidates.items():
        times = [_times_it_fits(a, summaries) for a in requests] or [0]
        least[host], most[host] = min(times), max(times)
    return (min(count, sum(least.values())), min(count, sum(most.values())),
            least)


def batches(count, per_host, fits):
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
    plan = []
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


def multi_create_verdict(count, placed, one, per_host, most):
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


# -- the explainer ----------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Step:
    constraint: str
    devices_out: int
    hosts_out: int
    devices_left: int
    hosts_left: int


def _mdev_groups(request):
    return [g for g in request.groups
            if any(names.is_mdev_resource_class(rc) for rc, _ in g.resources)]


def _group_devices(group, host):
    return [d for d in host.devices
            if any(rc in d.inventories for rc, _ in group.resources
                   if names.is_mdev_resource_class(rc))]


def explain(request, hosts):
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
    steps = []
    groups = _mdev_groups(request)
    alive = {h.name: h for h in hosts}
    left = {h.name: {g.suffix: list(h.devices) for g in groups}
            for h in hosts}

    def devices_left():
        return len({d.uuid for name in alive
                    for ds in left[name].values() for d in ds})

    def step(name, keep_device=None, keep_host=None):
        before_devices, before_hosts = devices_left(), len(alive)
        for hname in list(alive):
            host = alive[hname]
            if keep_device:
                for group in groups:
                    left[hname][group.suffix] = [
                        d for d in left[hname][group.suffix]
                        if keep_device(host, group, d)]
            if any(not left[hname][g.suffix] for g in groups) or (
                    keep_host and not keep_host(host)):
                del alive[hname]
        steps.append(Step(name, before_devices - devices_left(),
                          before_hosts - len(alive), devices_left(),
                          len(alive)))

    def mdev_amounts(group):
        return [(rc, n) for rc, n in group.resources
                if names.is_mdev_resource_class(rc)]

    roots = request.root_amounts()
    if groups:
        step('offers %s' % ', '.join(request.mdev_classes()),
             lambda h, g, d: all(rc in d.inventories
                                 for rc, _ in mdev_amounts(g)))
        for trait in sorted({t for g in groups for t in g.required}):
            step('required trait %s' % trait,
                 lambda h, g, d, t=trait: t not in g.required or
                 t in d.traits or (not g.numbered and roots and
                                   t in h.root.traits))
        for trait in sorted({t for g in groups for t in g.forbidden}):
            step('forbidden trait %s' % trait,
                 lambda h, g, d, t=trait: t not in g.forbidden or
                 t not in d.traits)
        step('room for %s' % _amounts_text(groups),
             lambda h, g, d: all(d.free(rc) >= n
                                 for rc, n in mdev_amounts(g)))
        step('units allowed (min_unit, max_unit, step_size)',
             lambda h, g, d: all(d.inventories[rc].allows(n)
                                 for rc, n in mdev_amounts(g)))
        numbered = [g for g in groups if g.numbered]
        if request.group_policy == rr.ISOLATE and len(numbered) > 1:
            step('%d different devices on one host (group_policy=isolate)'
                 % len(numbered),
                 keep_host=lambda h: _distinct(
                     [left[h.name][g.suffix] for g in numbered]))
    if roots:
        step('root room for %s' % ', '.join(
            '%s:%d' % rc for rc in sorted(roots.items())),
            keep_host=lambda h: all(h.root.free(rc) >= n
                                    for rc, n in roots.items()))
    unnumbered = request.group('')
    if roots and unnumbered is not None:
        # The compute node gives the unnumbered group its VCPU, MEMORY_MB
        # and DISK_GB, so it must not carry the group's forbidden traits.
        for trait in sorted(unnumbered.forbidden):
            step('compute node without %s' % trait,
                 keep_host=lambda h, t=trait: t not in h.root.traits)
    if rr.COMPUTE_STATUS_DISABLED in request.root_forbidden:
        step('compute service enabled (root without '
             'COMPUTE_STATUS_DISABLED)',
             keep_host=lambda h: not h.disabled and
             rr.COMPUTE_STATUS_DISABLED not in h.root.traits)
    for trait in sorted(request.root_forbidden -
                        {rr.COMPUTE_STATUS_DISABLED}):
        step('root without %s' % trait,
             keep_host=lambda h, t=trait: t not in h.root.traits)
    for trait in sorted(request.root_required):
        step('root trait %s' % trait,
             keep_host=lambda h, t=trait: t in h.root.traits)
    step('all groups at once', keep_host=lambda h: _place(
        request, h, _free_map(h)) is not None)
    return steps, None if alive else smallest_fix(request, hosts)


def _distinct(device_lists):
    """Whether each list can give a different device (a matching)."""
    def search(i, used):
        if i == len(device_lists):
            return True
        return any(search(i + 1, used | {d.uuid})
                   for d in device_lists[i] if d.uuid not in used)
    return search(0, frozenset())


def _amounts_text(groups):
    per_class = collections.Counter()
    for g in groups:
        for rc, n in g.resources:
            if names.is_mdev_resource_class(rc):
                per_class[rc] = max(per_class[rc], n)
    return ', '.join('%d %s' % (n, rc) for rc, n in sorted(per_class.items()))


def smallest_fix(request, hosts):
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
    best = None
    groups = _mdev_groups(request)
    for host in sorted(hosts, key=lambda h: h.name):
        changes = []
        used = set()
        # What earlier groups take from a device (several groups may
        # share one without group_policy=isolate, as PCI devices of an
        # alias do), and the mdevs to free per device and class.
        taken = collections.Counter()
        to_free = collections.Counter()
        moves_total = 0
        possible = True
        for group in groups:
            options = []
            for device in _group_devices(group, host):
                if (request.group_policy == rr.ISOLATE and group.numbered
                        and device.uuid in used):
                    continue
                if not all(rc in device.inventories and
                           device.inventories[rc].allows(n) and
                           taken[(device.uuid, rc)] + n <=
                           device.inventories[rc].capacity
                           for rc, n in group.resources
                           if names.is_mdev_resource_class(rc)):
                    continue
                todo, moves = [], 0
                add = sorted(group.required - device.traits)
                if add:
                    todo.append('tag %s:%s with %s' % (
                        host.name, device.device, ', '.join(add)))
                remove = sorted(group.forbidden & device.traits)
                if remove:
                    todo.append('remove %s from %s:%s' % (
                        ', '.join(remove), host.name, device.device))
                for rc, n in group.resources:
                    short = n - max(device.free(rc) -
                                    taken[(device.uuid, rc)], 0)
                    if rc in device.inventories and short > 0:
                        moves += 1
                        todo.append(('free', rc, device.device, short))
                options.append(((moves, len(todo)), device.device, device,
                                todo))
            if not options:
                possible = False
                break
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
                    item = ('free', rc, where)
                changes.append(item)
        if not possible:
            continue
        changes = [
            'free %d %s on %s:%s' % (to_free[c[1:]], c[1], host.name, c[2])
            if isinstance(c, tuple) else c for c in dict.fromkeys(changes)]
        for rc, n in sorted(request.root_amounts().items()):
            short = n - host.root.free(rc)
            if short > 0:
                moves_total += 1
                changes.append('free %d %s on %s' % (short, rc, host.name))
        if rr.COMPUTE_STATUS_DISABLED in request.root_forbidden and (
                host.disabled or
                rr.COMPUTE_STATUS_DISABLED in host.root.traits):
            changes.append('enable the compute service of %s' % host.name)
        for trait in sorted(request.root_required - host.root.traits):
            changes.append('add %s to the root provider %s' % (
                trait, host.name))
        if not changes:
            continue
        key = (moves_total, len(changes), host.name)
        if best is None or key < best[0]:
            best = (key, changes)
    if best is None:
        return None
    return '; '.join(best[1])


# -- the whole cloud --------------------------------------------------------

def owner_nova_in_effect(hosts):
    """Whether Nova's scheduler requires OWNER_NOVA on roots.

    ``owner_nova_filter`` adds it once every nova-compute service is new
    enough to report it; that version is not visible through Placement,
    so the sign used is the trait itself: every compute node root carries
    it. (When one does not, Nova does not filter on it either.)
    """
    return all(rr.OWNER_NOVA in h.root.traits for h in hosts)


def capacity(request, hosts):
    """``[HostCapacity]`` for every host, by name."""
    return [host_capacity(request, h)
            for h in sorted(hosts, key=lambda h: h.name)]


def _empty(trees):
    """The same trees with nothing used: what the cloud could serve at all.
    """
    return [dataclasses.replace(
        h, root=dataclasses.replace(h.root, usages={}),
        children=tuple(dataclasses.replace(c, usages={})
                       for c in h.children)) for h in trees]


def unschedulable_reason(request, trees):
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
    request = rr.with_prefilters(request,
                                 owner_nova=owner_nova_in_effect(trees))
    steps, _ = explain(request, _empty(trees))
    if not steps or steps[-1].hosts_left:
        return None
    empty = next(s for s in steps if not s.hosts_left)
    steps, fix = explain(request, trees)
    last = next((s for s in steps if not s.hosts_left), steps[-1])
    return '%s rules out %s and %s, leaving none%s; smallest change: %s' % (
        last.constraint, words.count(last.devices_out, 'device'),
        words.count(last.hosts_out, 'host'), _largest(request, trees)
        if empty.constraint.startswith('room for') else '',
        fix or 'none found on the devices')


def _largest(request, trees):
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
