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
compute node trees of ``capacity`` and counts, per constraint, the
devices and hosts it rules out; ``smallest_fix`` finds the fewest
changes (traits, mdevs to free, a compute service to enable) that let
one server fit on one host. Pure logic.
"""

import collections
import dataclasses

from osc_mdev.domain import capacity
from osc_mdev.domain import names
from osc_mdev.domain import resource_request as rr
from osc_mdev.domain import words


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
    step('all groups at once', keep_host=lambda h: capacity.place(
        request, h) is not None)
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
    request = rr.with_prefilters(
        request, owner_nova=capacity.owner_nova_in_effect(trees))
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
