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

"""Flavor extra specs that ask Placement for mediated devices.

Pure logic: turn an mdev request into extra specs, read one back out of a
flavor's extra specs, plan the change from one to the other, and check it
against the devices a cloud has.
"""

import dataclasses
import re

_RESOURCE_KEY = re.compile(r'^resources(\d*):([A-Z0-9_]+)$')
_TRAIT_KEY = re.compile(r'^trait(\d*):([A-Z0-9_]+)$')
GROUP_POLICY = 'group_policy'
REQUIRED = 'required'
FORBIDDEN = 'forbidden'


@dataclasses.dataclass(frozen=True)
class MdevRequest:
    """``amount`` mdevs of ``resource_class`` for one server.

    Without ``spread`` they come from one device (one unnumbered request
    group: ``resources:VGPU=2``); with ``spread`` each comes from a
    different device of the host (numbered groups ``resources1:VGPU=1``,
    ``resources2:VGPU=1``... with ``group_policy=isolate``).
    """

    resource_class: str
    amount: int = 1
    required: tuple = ()
    forbidden: tuple = ()
    spread: bool = False

    def describe(self):
        """The request in plain words."""
        if self.spread and self.amount > 1:
            text = ('%d x %s, each from a different device of one host'
                    % (self.amount, self.resource_class))
        else:
            text = '%d x %s from one device' % (self.amount,
                                                self.resource_class)
        conditions = []
        if self.required:
            conditions.append('with ' + ', '.join(self.required))
        if self.forbidden:
            conditions.append('without ' + ', '.join(self.forbidden))
        return ' '.join([text] + conditions)

    def per_device(self):
        return 1 if self.spread else self.amount

    def devices_needed(self):
        return self.amount if self.spread else 1


def validate_amount(amount):
    if amount < 1:
        raise ValueError('--amount must be at least 1, not %d' % amount)
    return amount


def to_extra_specs(request, used_groups=()):
    """The extra specs that make Nova ask Placement for ``request``.

    Numbered groups skip the numbers in ``used_groups`` (groups of other
    requests already in the flavor).
    """
    specs = {}
    if not request.spread or request.amount == 1:
        groups = [('', request.amount)]
    else:
        numbers, n = [], 1
        while len(numbers) < request.amount:
            if str(n) not in used_groups:
                numbers.append(str(n))
            n += 1
        groups = [(number, 1) for number in numbers]
        specs[GROUP_POLICY] = 'isolate'
    for suffix, amount in groups:
        specs['resources%s:%s' % (suffix, request.resource_class)] = str(
            amount)
        for trait in request.required:
            specs['trait%s:%s' % (suffix, trait)] = REQUIRED
        for trait in request.forbidden:
            specs['trait%s:%s' % (suffix, trait)] = FORBIDDEN
    return specs


def _groups(specs):
    """``{suffix: {'resources': {rc: n}, 'traits': {trait: value}}}``."""
    groups = {}
    for key, value in specs.items():
        match = _RESOURCE_KEY.match(key)
        if match:
            group = groups.setdefault(match.group(1),
                                      {'resources': {}, 'traits': {}})
            group['resources'][match.group(2)] = value
            continue
        match = _TRAIT_KEY.match(key)
        if match:
            group = groups.setdefault(match.group(1),
                                      {'resources': {}, 'traits': {}})
            group['traits'][match.group(2)] = value
    return groups


def managed_keys(specs, mdev_classes, device_traits=()):
    """The keys of ``specs`` that make up its mdev request.

    * ``resourcesN:<class>`` for every mdev class;
    * every ``traitN:`` key of a numbered group that holds mdev resources
      (such a group is about the device);
    * unnumbered ``trait:`` keys only for traits found on mdev devices
      (``device_traits``): the unnumbered group is shared with the compute
      node's VCPU/MEMORY_MB, so its other traits are not ours;
    * ``group_policy`` when the mdev request uses numbered groups.
    """
    keys = set()
    numbered_mdev = False
    for suffix, group in _groups(specs).items():
        mdev = [rc for rc in group['resources'] if rc in mdev_classes]
        for rc in mdev:
            keys.add('resources%s:%s' % (suffix, rc))
        if suffix and mdev:
            numbered_mdev = True
            keys.update('trait%s:%s' % (suffix, t) for t in group['traits'])
        elif not suffix:
            keys.update('trait:%s' % t for t in group['traits']
                        if t in device_traits)
    if numbered_mdev and GROUP_POLICY in specs:
        keys.add(GROUP_POLICY)
    return keys


def parse(specs, mdev_classes):
    """Read the mdev request back out of a flavor's extra specs.

    Returns None when the flavor asks for no mdev class. Unnumbered
    ``trait:`` keys count as conditions on the device (Placement checks
    them on the providers that give the group's resources).
    """
    groups = _groups(specs)
    mdev_groups = {s: g for s, g in groups.items()
                   if any(rc in mdev_classes for rc in g['resources'])}
    if not mdev_groups:
        return None
    suffix, group = sorted(mdev_groups.items())[0]
    rc = next(rc for rc in sorted(group['resources'])
              if rc in mdev_classes)
    required = tuple(sorted(t for t, v in group['traits'].items()
                            if v == REQUIRED))
    forbidden = tuple(sorted(t for t, v in group['traits'].items()
                             if v == FORBIDDEN))
    amounts = []
    for g in mdev_groups.values():
        for name, value in g['resources'].items():
            if name in mdev_classes:
                try:
                    amounts.append(int(value))
                except ValueError:
                    amounts.append(0)
    numbered = [s for s in mdev_groups if s]
    return MdevRequest(rc, sum(amounts), required, forbidden,
                       spread=len(numbered) > 1)


@dataclasses.dataclass(frozen=True)
class SpecChange:
    key: str
    before: str | None
    after: str | None

    @property
    def action(self):
        if self.before is None:
            return 'added'
        if self.after is None:
            return 'removed'
        return 'changed' if self.before != self.after else 'unchanged'


def plan(current, request, mdev_classes, device_traits=()):
    """What to set and delete on a flavor for ``request``.

    Returns ``(to_set, to_delete, changes)``: the managed keys of the
    current request are replaced, unrelated extra specs stay.
    """
    old = managed_keys(current, set(mdev_classes) | {request.resource_class},
                       device_traits)
    used = {m.group(1) for k in current if k not in old
            for m in [_RESOURCE_KEY.match(k) or _TRAIT_KEY.match(k)]
            if m and m.group(1)}
    new = to_extra_specs(request, used_groups=used)
    if GROUP_POLICY not in new and len(used) >= 2:
        # Other numbered groups still need the policy Nova requires.
        old.discard(GROUP_POLICY)
    to_set = {k: v for k, v in new.items() if current.get(k) != v}
    to_delete = sorted(k for k in old if k not in new)
    keys = sorted(set(old) | set(new))
    changes = [SpecChange(k, current.get(k), new.get(k)) for k in keys]
    return to_set, to_delete, changes


@dataclasses.dataclass(frozen=True)
class Fit:
    """Whether, and where, a cloud's devices can serve a request."""

    devices: tuple           # Device rows that can serve one server now
    problem: str | None      # why no device can ever serve it, or None


def fit(request, devices):
    """Check ``request`` against the cloud's mdev devices.

    ``devices`` are domain.providers.Device rows with traits read. The
    problem names the first unmet condition: no such class, no device with
    a required trait, every device forbidden, or too small a device.
    """
    of_class = [d for d in devices
                if d.resource_class == request.resource_class]
    if not of_class:
        return Fit((), 'no mdev device offers resource class %s'
                   % request.resource_class)
    candidates = of_class
    for trait in request.required:
        candidates = [d for d in candidates if trait in (d.traits or ())]
        if not candidates:
            return Fit((), 'no %s device has trait %s'
                       % (request.resource_class, trait))
    for trait in request.forbidden:
        candidates = [d for d in candidates
                      if trait not in (d.traits or ())]
        if not candidates:
            return Fit((), 'every %s device that matches has trait %s'
                       % (request.resource_class, trait))
    per_device = request.per_device()
    big_enough = [d for d in candidates if d.inventory.max_unit >= per_device]
    if not big_enough:
        largest = max(d.inventory.max_unit for d in candidates)
        return Fit((), 'the largest matching device offers %d %s per '
                   'server (max_unit), fewer than the %d asked for'
                   % (largest, request.resource_class, per_device))
    needed = request.devices_needed()
    if needed > 1:
        per_host = {}
        for d in big_enough:
            per_host.setdefault(d.host, []).append(d)
        if max(len(v) for v in per_host.values()) < needed:
            return Fit((), 'no host has %d matching devices for a spread '
                       'request (the most on one host is %d)'
                       % (needed, max(len(v) for v in per_host.values())))
        big_enough = [d for ds in per_host.values() if len(ds) >= needed
                      for d in ds]
    ready = tuple(d for d in big_enough if d.free >= per_device)
    return Fit(ready, None)


def servers_that_fit(request, devices):
    """How many more servers of ``request`` the ``devices`` hold now."""
    per_device = request.per_device()
    needed = request.devices_needed()
    if needed == 1:
        return sum(d.free // per_device for d in devices)
    per_host = {}
    for d in devices:
        per_host.setdefault(d.host, []).append(d.free)
    total = 0
    for frees in per_host.values():
        # Each server takes one from `needed` different devices.
        frees = sorted(frees, reverse=True)
        while len([f for f in frees if f > 0]) >= needed:
            for i in range(needed):
                frees[i] -= 1
            frees.sort(reverse=True)
            total += 1
    return total
