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

"""Flavor extra specs that ask Placement for devices: the writes.

Pure logic: turn a device request (``nova.scheduler.utils.Request``) into
extra specs, find the keys of the request a flavor already has (in any
group, by the one key parser of ``nova.scheduler.utils``), and plan the
change from one to the other. Reading a flavor's request and judging
whether the cloud can serve it is ``nova.scheduler.utils`` and ``cloud.fit``.
"""

from collections.abc import Collection
from collections.abc import Container
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses

from osc_mdev.base import words
from osc_mdev.cloud import explanation
from osc_mdev.cloud import fit
from osc_mdev.nova.scheduler import utils as rr

GROUP_POLICY = rr.GROUP_POLICY
REQUIRED = rr.REQUIRED
FORBIDDEN = rr.FORBIDDEN
CUSTOM = 'CUSTOM_'

#: A flavor's extra specs: key -> value.
Specs = Mapping[str, str]


def to_extra_specs(request: rr.Request,
                   used_groups: Container[str] = ()) -> dict[str, str]:
    """The extra specs that make Nova ask Placement for ``request`` (a
    ``nova.scheduler.utils.Request`` of device groups, as ``bare_request``
    builds it).

    The unnumbered group is written as ``resources:``; numbered groups
    get the lowest numbers not in ``used_groups`` (groups of other
    requests already in the flavor), and the request's group policy.
    """
    specs: dict[str, str] = {}
    numbers = (str(n) for n in range(1, 1 << 16)
               if str(n) not in used_groups)
    for group in request.groups:
        suffix = next(numbers) if group.numbered else ''
        for rc, amount in group.resources:
            specs['resources%s:%s' % (suffix, rc)] = str(amount)
        for trait in sorted(group.required):
            specs['trait%s:%s' % (suffix, trait)] = REQUIRED
        for trait in sorted(group.forbidden):
            specs['trait%s:%s' % (suffix, trait)] = FORBIDDEN
    if request.numbered_groups and request.group_policy:
        specs[GROUP_POLICY] = request.group_policy
    return specs


def _keys_by_group(specs: Iterable[str]
                   ) -> dict[str, list[tuple[rr.SpecKey, str]]]:
    """``{suffix: [SpecKey and key]}`` of the request group keys."""
    groups: dict[str, list[tuple[rr.SpecKey, str]]] = {}
    for key in specs:
        parsed = rr.spec_key(key)
        if parsed is not None:
            groups.setdefault(parsed.suffix, []).append((parsed, key))
    return groups


def managed_keys(specs: Specs, mdev_classes: Container[str],
                 device_traits: Container[str] = ()) -> set[str]:
    """The keys of ``specs`` that make up its mdev request, in whatever
    group it is written (unnumbered, numbered or named):

    * ``resources[S]:<class>`` for every mdev class;
    * every ``trait[S]:`` key of a suffixed group that holds mdev
      resources (such a group is about the device);
    * unnumbered ``trait:`` keys only for traits found on mdev devices
      (``device_traits``): the unnumbered group is shared with the compute
      node's VCPU/MEMORY_MB, so its other traits are not ours;
    * ``group_policy`` when the mdev request uses suffixed groups.
    """
    keys: set[str] = set()
    suffixed_mdev = False
    for suffix, group in _keys_by_group(specs).items():
        mdev = [key for parsed, key in group
                if parsed.is_resource and parsed.name in mdev_classes]
        keys.update(mdev)
        if suffix and mdev:
            suffixed_mdev = True
            keys.update(key for parsed, key in group
                        if not parsed.is_resource)
        elif not suffix:
            keys.update(key for parsed, key in group
                        if not parsed.is_resource
                        and parsed.name in device_traits)
    if suffixed_mdev and GROUP_POLICY in specs:
        keys.add(GROUP_POLICY)
    return keys


@dataclasses.dataclass(frozen=True)
class SpecChange:
    key: str
    before: str | None
    after: str | None
    note: str = ''

    @property
    def action(self) -> str:
        if self.before is None:
            return 'added'
        if self.after is None:
            return 'removed'
        return 'changed' if self.before != self.after else 'unchanged'


#: What ``plan`` and ``plan_pci`` write: ``(to_set, to_delete, changes)``.
Plan = tuple[dict[str, str], list[str], list[SpecChange]]


def stale_keys(specs: Specs, carried: Container[str],
               existing: Container[str] | None = None) -> dict[str, str]:
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
    devices by hand; a standard trait is Nova's or a driver's. A
    forbidden trait that exists but that no provider has is kept: it
    never stops a server from being scheduled and may guard against a tag
    to come (``trait:CUSTOM_BROKEN=forbidden``).
    """
    stale = {}
    for key, value in specs.items():
        parsed = rr.spec_key(key)
        if parsed is None or parsed.is_resource or parsed.suffix:
            continue
        trait = parsed.name
        if not trait.startswith(CUSTOM):
            continue
        if value == REQUIRED and trait not in carried:
            stale[key] = ('stale: no resource provider has %s any more'
                          % trait)
        elif (value == FORBIDDEN and existing is not None
              and trait not in existing):
            stale[key] = 'stale: trait %s no longer exists' % trait
    return stale


def _replaced(current: Specs, request: rr.Request | None,
              mdev_classes: Iterable[str], device_traits: Container[str],
              carried: Container[str] | None,
              existing: Container[str] | None
              ) -> tuple[set[str], dict[str, str]]:
    """``(keys of the current mdev request and stale keys, stale)``."""
    old = managed_keys(current, set(mdev_classes) | set(
        request.mdev_classes() if request else ()), device_traits)
    stale = ({} if carried is None
             else stale_keys(current, carried, existing))
    return old | set(stale), stale


def plan(current: Specs, request: rr.Request, mdev_classes: Iterable[str],
         device_traits: Container[str] = (),
         carried: Container[str] | None = None,
         existing: Container[str] | None = None) -> Plan:
    """What to set and delete on a flavor for ``request``.

    Returns ``(to_set, to_delete, changes)``: the managed keys of the
    current request are replaced wherever they are written, stale keys
    (``stale_keys``, when the ``carried`` traits are known) removed,
    unrelated extra specs stay.
    """
    old, stale = _replaced(current, request, mdev_classes, device_traits,
                           carried, existing)
    used = other_groups(current, old)
    new = to_extra_specs(request, used_groups=used)
    if GROUP_POLICY not in new and len(used) >= 2:
        # Other suffixed groups still need the policy Nova requires.
        old.discard(GROUP_POLICY)
    to_set = {k: v for k, v in new.items() if current.get(k) != v}
    to_delete = sorted(k for k in old if k not in new)
    keys = sorted(set(old) | set(new))
    changes = [SpecChange(k, current.get(k), new.get(k),
                          stale.get(k, '') if k not in new else '')
               for k in keys]
    return to_set, to_delete, changes


def other_groups(specs: Iterable[str], managed: Container[str]) -> set[str]:
    """Suffixes of the suffixed request groups that are not ``managed``.
    """
    return {parsed.suffix for k in specs if k not in managed
            for parsed in [rr.spec_key(k)] if parsed and parsed.suffix}


def isolate_reaches_others(current: Specs, request: rr.Request,
                           mdev_classes: Iterable[str],
                           device_traits: Container[str] = (),
                           carried: Container[str] | None = None,
                           existing: Container[str] | None = None
                           ) -> list[str]:
    """The other request groups ``group_policy=isolate`` would bind.

    Nova applies ``group_policy`` to every suffixed group of a flavor, so
    spreading an mdev request over numbered groups with ``isolate`` also
    forces the flavor's other suffixed groups onto separate providers.
    Returns their resource keys (``resources1:CUSTOM_NIC``...), sorted;
    empty when the request is not spread or the flavor has no other
    group.
    """
    if request.group_policy != rr.ISOLATE or len(
            request.numbered_groups) < 2:
        return []
    old, _ = _replaced(current, request, mdev_classes, device_traits,
                       carried, existing)
    used = other_groups(current, old)
    return sorted(k for k in current if k not in old
                  for parsed in [rr.spec_key(k)]
                  if parsed and parsed.is_resource
                  and parsed.suffix in used)


def resulting(current: Specs, to_set: Specs,
              to_delete: Container[str]) -> dict[str, str]:
    """The extra specs a flavor has once ``plan``'s writes are done."""
    specs = {k: v for k, v in current.items() if k not in to_delete}
    specs.update(to_set)
    return specs


def write_result(change: SpecChange, attempted: bool, failed: bool,
                 now: Specs | None = None) -> str:
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


def can_never_serve(request: rr.Request, trees: Sequence[fit.Host],
                    carried: Container[str],
                    known: Iterable[str]) -> str | None:
    """Why Placement can never serve ``request`` (a flavor's, as
    ``nova.scheduler.utils.request_for`` builds it) on ``trees`` (the
    compute node trees of ``features.capacity.reads``), or None: a trait
    that does not exist in Placement (``known``: it refuses the request),
    a required trait no provider has (``carried``), or the capacity
    explainer's reason (``explanation.unschedulable_reason``).
    """
    named = {t for g in request.groups for t in g.required | g.forbidden}
    unknown = sorted(named - set(known))
    if unknown:
        return ('it names trait %s, which does not exist in Placement, '
                'so Placement refuses every request for it'
                % ', '.join(unknown))
    for group in request.groups:
        missing = sorted(t for t in group.required if t not in carried)
        if missing:
            return '%s requires trait %s, which no resource provider has' % (
                group.label(), ', '.join(missing))
    return explanation.unschedulable_reason(request, trees)


def refused(specs: Specs) -> str | None:
    """The first request extra spec of ``specs`` Nova's API refuses, as
    one sentence, or None (``nova.scheduler.utils.nova_refuses``).
    """
    found = rr.nova_refuses(specs)
    if not found:
        return None
    key, reason = found[0]
    return "Nova refuses extra spec '%s': %s" % (key, reason)


# -- PCI devices: pci_passthrough:alias ------------------------------------

ALIAS_KEY = rr.PCI_ALIAS_KEY


@dataclasses.dataclass(frozen=True)
class PciRequest:
    """``pci_passthrough:alias``: ``count`` devices of each ``[pci]
    alias`` name, in the order given.
    """

    aliases: tuple[tuple[str, int], ...]

    @property
    def value(self) -> str:
        return ','.join('%s:%d' % alias for alias in self.aliases)

    def describe(self) -> str:
        return describe_pci(self.value)


def describe_pci(value: str) -> str:
    """A ``pci_passthrough:alias`` value in words."""
    from osc_mdev.nova.pci import request as pci_request

    try:
        requests = pci_request.parse_alias_request(value)
    except ValueError:
        return ('invalid: %r is not NAME:COUNT[,NAME:COUNT]; Nova refuses '
                'to boot servers with it' % value)
    return ', '.join(
        '%s of PCI alias %s' % (words.count(count, 'device'), name)
        for name, count in requests)


def plan_pci(current: Specs, pci: PciRequest | None) -> Plan:
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


def plan_without_mdev(current: Specs, mdev_classes: Iterable[str],
                      device_traits: Container[str] = (),
                      carried: Container[str] | None = None,
                      existing: Container[str] | None = None
                      ) -> tuple[list[str], list[SpecChange]]:
    """``(to_delete, changes)`` removing the flavor's mdev request (its
    managed keys and stale keys), for a flavor that asks for PCI devices
    only now.
    """
    old, stale = _replaced(current, None, mdev_classes, device_traits,
                           carried, existing)
    if GROUP_POLICY in old and len(other_groups(current, old)) >= 2:
        old.discard(GROUP_POLICY)
    to_delete = sorted(old)
    return to_delete, [SpecChange(k, current[k], None, stale.get(
        k, 'replaced by the PCI request')) for k in to_delete]


def pci_query(groups: Iterable[tuple[Mapping[str, int], Collection[str]]],
              group_policy: str | None = None) -> str:
    """The allocation candidates query string for PCI request groups
    (``nova.pci.request.alias_request_groups``), one numbered group per device
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
