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
TRAIT_KEY = re.compile(r'^trait(\d*):([A-Z0-9_]+)$')
GROUP_POLICY = 'group_policy'
REQUIRED = 'required'
FORBIDDEN = 'forbidden'
CUSTOM = 'CUSTOM_'
POLICIES = ('isolate', 'none')


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
        match = TRAIT_KEY.match(key)
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
    note: str = ''

    @property
    def action(self):
        if self.before is None:
            return 'added'
        if self.after is None:
            return 'removed'
        return 'changed' if self.before != self.after else 'unchanged'


def stale_keys(specs, carried, existing=None):
    """``{key: why}`` for the stale mdev keys of ``specs``.

    ``carried``: the traits at least one resource provider of the cloud
    has; ``existing``: the traits that exist in Placement (None: not
    known). An unnumbered ``trait:CUSTOM_X=required`` whose trait no
    provider has any more is stale: Placement can never satisfy it, so it
    only makes the flavor unschedulable (typically the type trait of
    devices that were re-tagged). So is an unnumbered
    ``trait:CUSTOM_X=forbidden`` whose trait no longer exists: it guards
    against nothing, and Placement refuses every request naming a trait
    it does not know. Only custom traits count, as only those are set on
    devices by hand; a standard trait is Nova's or a driver's, and one
    that no provider has is reported by the check instead (``check``).
    A forbidden trait that exists but that no provider has is kept: it
    never stops a server from being scheduled and may guard against a tag
    to come (``trait:CUSTOM_BROKEN=forbidden``).
    """
    stale = {}
    for key, value in specs.items():
        match = TRAIT_KEY.match(key)
        if not match or match.group(1):
            continue
        trait = match.group(2)
        if not trait.startswith(CUSTOM):
            continue
        if value == REQUIRED and trait not in carried:
            stale[key] = ('stale: no resource provider has %s any more'
                          % trait)
        elif (value == FORBIDDEN and existing is not None
              and trait not in existing):
            stale[key] = 'stale: trait %s no longer exists' % trait
    return stale


def plan(current, request, mdev_classes, device_traits=(), carried=None,
         existing=None):
    """What to set and delete on a flavor for ``request``.

    Returns ``(to_set, to_delete, changes)``: the managed keys of the
    current request are replaced, stale keys (``stale_keys``, when the
    ``carried`` traits are known) removed, unrelated extra specs stay.
    """
    old = managed_keys(current, set(mdev_classes) | {request.resource_class},
                       device_traits)
    stale = ({} if carried is None
             else stale_keys(current, carried, existing))
    old |= set(stale)
    used = other_groups(current, old)
    new = to_extra_specs(request, used_groups=used)
    if GROUP_POLICY not in new and len(used) >= 2:
        # Other numbered groups still need the policy Nova requires.
        old.discard(GROUP_POLICY)
    to_set = {k: v for k, v in new.items() if current.get(k) != v}
    to_delete = sorted(k for k in old if k not in new)
    keys = sorted(set(old) | set(new))
    changes = [SpecChange(k, current.get(k), new.get(k),
                          stale.get(k, '') if k not in new else '')
               for k in keys]
    return to_set, to_delete, changes


def other_groups(specs, managed):
    """Numbers of the numbered request groups that are not ``managed``."""
    return {m.group(1) for k in specs if k not in managed
            for m in [_RESOURCE_KEY.match(k) or TRAIT_KEY.match(k)]
            if m and m.group(1)}


def isolate_reaches_others(current, request, mdev_classes,
                           device_traits=(), carried=None, existing=None):
    """The other request groups ``group_policy=isolate`` would bind.

    Nova applies ``group_policy`` to every numbered group of a flavor, so
    spreading an mdev request over numbered groups with ``isolate`` also
    forces the flavor's other numbered groups onto separate providers.
    Returns their keys (``resources1:CUSTOM_NIC``...), sorted; empty when
    the request is not spread or the flavor has no other group.
    """
    if not request.spread or request.amount < 2:
        return []
    old = managed_keys(current, set(mdev_classes) | {request.resource_class},
                       device_traits)
    if carried is not None:
        old |= set(stale_keys(current, carried, existing))
    used = other_groups(current, old)
    return sorted(k for k in current if k not in old
                  for m in [_RESOURCE_KEY.match(k)]
                  if m and m.group(1) in used)


def resulting(current, to_set, to_delete):
    """The extra specs a flavor has once ``plan``'s writes are done."""
    specs = {k: v for k, v in current.items() if k not in to_delete}
    specs.update(to_set)
    return specs


def write_result(change, attempted, failed, now=None):
    """The outcome of one key's write, for the table.

    ``attempted``: a write of the key was sent; ``failed``: that request
    did not answer success; ``now``: the flavor's extra specs read back
    after a failure (None when not read). What was read back wins over
    the answers: a request whose answer was lost may still have been
    done, and a retried one may not.
    """
    if change.action == 'unchanged':
        return 'unchanged'
    if not attempted:
        return 'not written'
    if now is not None:
        if change.after is None:
            done = change.key not in now
        else:
            done = now.get(change.key) == change.after
        return change.action if done else 'failed'
    return 'failed' if failed else change.action


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


@dataclasses.dataclass(frozen=True)
class Group:
    """One request group of a flavor, as Nova hands it to Placement."""

    suffix: str
    resources: dict
    required: frozenset
    forbidden: frozenset

    @property
    def label(self):
        return ('request group %s' % self.suffix if self.suffix
                else 'the unnumbered request group')


def request_groups(specs):
    """The flavor's request groups, sorted, unnumbered first.

    Amounts that are not integers count as 0 (Nova refuses such a flavor
    when a server is created).
    """
    groups = []
    for suffix, group in sorted(_groups(specs).items(),
                                key=lambda item: (len(item[0]), item[0])):
        resources = {}
        for rc, value in group['resources'].items():
            try:
                resources[rc] = int(value)
            except ValueError:
                resources[rc] = 0
        traits = group['traits']
        groups.append(Group(
            suffix, resources,
            frozenset(t for t, v in traits.items() if v == REQUIRED),
            frozenset(t for t, v in traits.items() if v == FORBIDDEN)))
    return groups


def _on_tree(device, trait, root_traits, same_provider):
    """Whether Placement sees ``trait`` for a group served by ``device``.

    A numbered group's traits must be on the provider that gives its
    resources; the unnumbered group's on any provider of the tree that
    gives it resources: the device, or the compute node (which gives
    VCPU, MEMORY_MB and DISK_GB to that group).
    """
    if trait in (device.traits or ()):
        return True
    return (not same_provider and trait in root_traits.get(
        device.candidate.root_uuid, ()))


def _group_devices(group, rc, devices, root_traits):
    """``(devices that can serve ``rc`` of ``group``, problem)``."""
    amount = group.resources[rc]
    numbered = bool(group.suffix)
    where = '' if numbered else ', nor its compute node'
    candidates = [d for d in devices if d.resource_class == rc]
    if not candidates:
        return [], 'no mdev device offers resource class %s' % rc
    for trait in sorted(group.required):
        candidates = [d for d in candidates
                      if _on_tree(d, trait, root_traits, numbered)]
        if not candidates:
            return [], 'no %s device has trait %s%s (%s)' % (
                rc, trait, where, group.label)
    for trait in sorted(group.forbidden):
        candidates = [d for d in candidates
                      if not _on_tree(d, trait, root_traits, numbered)]
        if not candidates:
            owner = ('%s device that matches' if numbered else
                     '%s device that matches, or its compute node,') % rc
            return [], 'every %s has trait %s (%s)' % (
                owner, trait, group.label)
    big_enough = [d for d in candidates if d.inventory.max_unit >= amount]
    if not big_enough:
        largest = max(d.inventory.max_unit for d in candidates)
        return [], ('the largest matching device offers %d %s per server '
                    '(max_unit), fewer than the %d asked for (%s)'
                    % (largest, rc, amount, group.label))
    return big_enough, None


def _distinct(options):
    """Size of the largest choice of one distinct device per option.

    ``options``: per request group the set of device UUIDs that can serve
    it (a bipartite matching, by augmenting paths; groups are few).
    """
    owner = {}

    def assign(index, seen):
        for uuid in sorted(options[index]):
            if uuid in seen:
                continue
            seen.add(uuid)
            if uuid not in owner or assign(owner[uuid], seen):
                owner[uuid] = index
                return True
        return False

    return sum(1 for index in range(len(options)) if assign(index, set()))


def other_group_queries(specs, mdev_classes):
    """``{suffix: (resources, required, forbidden)}`` of the numbered
    request groups without mdev resources (another request's), to ask
    Placement which providers can serve each.
    """
    return {g.suffix: ({rc: n for rc, n in g.resources.items() if n > 0},
                       sorted(g.required), sorted(g.forbidden))
            for g in request_groups(specs)
            if g.suffix and any(g.resources.values())
            and not any(rc in mdev_classes for rc in g.resources)}


def check(specs, devices, mdev_classes, carried, existing,
          root_traits=None, other_roots=None):
    """Whether Placement can ever serve a flavor with extra specs ``specs``.

    The whole flavor is checked, as Nova asks Placement for it: every
    request group's resources, required and forbidden traits, and
    ``group_policy``. Answers the first problem, or None.

    ``devices``: the cloud's mdev devices (traits read); ``mdev_classes``:
    classes that are mdev classes; ``carried``: the traits at least one
    resource provider has and ``existing`` those that exist in Placement
    (of those named in ``specs``); ``root_traits``:
    ``{compute node provider UUID: traits}`` for the unnumbered group's
    traits; ``other_roots``: ``{suffix: compute node UUIDs}`` of the trees
    where Placement has a provider for each group of
    ``other_group_queries`` (with its traits and room for it now), None
    when not read. The unnumbered group's other resources (the flavor's
    VCPU, MEMORY_MB, DISK_GB) are not checked.
    """
    root_traits = root_traits or {}
    other_roots = other_roots or {}
    groups = request_groups(specs)
    numbered = [g for g in groups if g.suffix]
    policy = specs.get(GROUP_POLICY)
    if len(numbered) > 1 and policy not in POLICIES:
        return ('the flavor has %d numbered request groups and no '
                'group_policy (isolate or none), which Nova requires'
                % len(numbered))
    for group in groups:
        if group.suffix and not any(group.resources.values()):
            return ('%s has traits but no resources, which Placement '
                    'refuses' % group.label)
        unknown = sorted(t for t in group.required | group.forbidden
                         if t not in existing)
        if unknown:
            return ('%s names trait %s, which does not exist in Placement '
                    '(Placement refuses such a request)'
                    % (group.label, ', '.join(unknown)))
        missing = sorted(t for t in group.required if t not in carried)
        if missing:
            return '%s requires trait %s, which no resource provider has' % (
                group.label, ', '.join(missing))
    for suffix, roots in sorted(other_roots.items()):
        if not roots:
            group = next(g for g in groups if g.suffix == suffix)
            return ('no resource provider has %s with the traits of %s '
                    'and room for it now'
                    % (', '.join('%s:%d' % rc for rc in sorted(
                        group.resources.items())), group.label))
    wanted = []      # (group, {device uuid: device}) per mdev request
    for group in groups:
        for rc in sorted(group.resources):
            if rc not in mdev_classes or group.resources[rc] < 1:
                continue
            found, problem = _group_devices(group, rc, devices, root_traits)
            if problem:
                return problem
            wanted.append((group, {d.uuid: d for d in found}))
    if not wanted:
        return None
    hosts = sorted({d.host for _, found in wanted for d in found.values()})
    isolate = policy == 'isolate'
    spread = [found for group, found in wanted if group.suffix and isolate]
    best = 0
    for host in hosts:
        on_host = [{u for u, d in found.items() if d.host == host}
                   for _, found in wanted]
        if not all(on_host):
            continue
        root = next(d.candidate.root_uuid for _, found in wanted
                    for d in found.values() if d.host == host)
        if not all(root in roots for roots in other_roots.values()):
            continue
        if not spread:
            return None
        options = [{u for u, d in found.items() if d.host == host}
                   for found in spread]
        got = _distinct(options)
        if got == len(spread):
            return None
        best = max(best, got)
    if spread:
        return ('no host has %d matching devices for a spread request '
                '(the most on one host is %d)' % (len(spread), best))
    return ('no host has devices for every mdev request group of the '
            'flavor and providers for its other request groups')


# -- PCI devices: pci_passthrough:alias ------------------------------------

ALIAS_KEY = 'pci_passthrough:alias'


@dataclasses.dataclass(frozen=True)
class PciRequest:
    """``pci_passthrough:alias``: ``count`` devices of each ``[pci]
    alias`` name, in the order given.
    """

    aliases: tuple             # ((name, count), ...)

    @property
    def value(self):
        return ','.join('%s:%d' % alias for alias in self.aliases)

    def describe(self):
        return describe_pci(self.value)


def parse_pci_aliases(values):
    """A PciRequest from ``--pci-alias`` values (``NAME[:COUNT]``, each
    possibly a comma list, as Nova's ``name:count[,name:count]``).

    Raises ValueError for a name Nova's syntax refuses, a count below 1
    or a name given twice.
    """
    from osc_mdev.domain import novaconf

    aliases = []
    for value in values:
        for part in value.split(','):
            name, sep, count = part.strip().partition(':')
            text = '%s:%s' % (name.strip(), count.strip() if sep else '1')
            try:
                [(name, number)] = novaconf.parse_alias_request(text)
            except ValueError:
                raise ValueError(
                    "--pci-alias '%s' is not NAME or NAME:COUNT (a [pci] "
                    "alias name and a whole number of devices)" % part)
            if not name or number < 1:
                raise ValueError(
                    "--pci-alias '%s' asks for no device: give a name and a "
                    'count of at least 1' % part)
            if name in dict(aliases):
                raise ValueError(
                    '--pci-alias %s is given twice; give it once with the '
                    'total count' % name)
            aliases.append((name, number))
    if not aliases:
        raise ValueError('--pci-alias needs at least one alias name')
    return PciRequest(tuple(aliases))


def describe_pci(value):
    """A ``pci_passthrough:alias`` value in words."""
    from osc_mdev.domain import novaconf

    try:
        requests = novaconf.parse_alias_request(value)
    except ValueError:
        return ('invalid: %r is not NAME:COUNT[,NAME:COUNT]; Nova refuses '
                'to boot servers with it' % value)
    return ', '.join(
        '%d device%s of PCI alias %s' % (count, '' if count == 1 else 's',
                                         name)
        for name, count in requests)


def plan_pci(current, pci):
    """``(to_set, to_delete, changes)`` for the alias key: set to
    ``pci``'s value, or removed when ``pci`` is None (the flavor's device
    request is an mdev request only now).
    """
    before = current.get(ALIAS_KEY)
    if pci is None:
        if before is None:
            return {}, [], []
        return {}, [ALIAS_KEY], [SpecChange(
            ALIAS_KEY, before, None, 'replaced by the mdev request')]
    to_set = {ALIAS_KEY: pci.value} if before != pci.value else {}
    return to_set, [], [SpecChange(ALIAS_KEY, before, pci.value)]


def plan_without_mdev(current, mdev_classes, device_traits=(), carried=None,
                      existing=None):
    """``(to_delete, changes)`` removing the flavor's mdev request (its
    managed keys and stale keys), for a flavor that asks for PCI devices
    only now.
    """
    old = managed_keys(current, mdev_classes, device_traits)
    stale = ({} if carried is None
             else stale_keys(current, carried, existing))
    old |= set(stale)
    if GROUP_POLICY in old and len(other_groups(current, old)) >= 2:
        old.discard(GROUP_POLICY)
    to_delete = sorted(old)
    return to_delete, [SpecChange(k, current[k], None, stale.get(
        k, 'replaced by the PCI request')) for k in to_delete]


def pci_query(groups, group_policy=None):
    """The allocation candidates query string for PCI request groups
    (``novaconf.alias_request_groups``), one numbered group per device
    as Nova asks, ``group_policy`` none unless the flavor says isolate.
    """
    import urllib.parse

    params = []
    for number, (resources, traits) in enumerate(groups, 1):
        suffix = '_PCI%d' % number
        params.append(('resources' + suffix, ','.join(
            '%s:%d' % rc for rc in sorted(resources.items()))))
        if traits:
            params.append(('required' + suffix, ','.join(sorted(traits))))
    params.append(('group_policy', group_policy or 'none'))
    params.append(('limit', '1'))
    return urllib.parse.urlencode(params)
