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

"""What one server of a flavor asks Placement for: the one reading of a
flavor's extra specs.

Pure logic. ``request_from_flavor`` builds the request groups exactly as
Nova's ``ResourceRequest`` does (nova/scheduler/utils.py); ``spec_key``
is the one parser of ``resources[S]:`` and ``trait[S]:`` keys (Nova's
``XS_KEYPAT``), and ``nova_refuses`` says which of those keys Nova's API
refuses (nova/api/validation/extra_specs). Every command that reads or
writes a flavor goes through here.
"""

import collections
import dataclasses
import re
import urllib.parse

import os_resource_classes
import os_traits

from osc_mdev.domain import names
from osc_mdev.domain import pci_request

VCPU = 'VCPU'
PCPU = 'PCPU'
MEMORY_MB = 'MEMORY_MB'
DISK_GB = 'DISK_GB'
ROOT_CLASSES = (VCPU, PCPU, MEMORY_MB, DISK_GB)
OWNER_NOVA = 'OWNER_NOVA'
COMPUTE_STATUS_DISABLED = 'COMPUTE_STATUS_DISABLED'
HW_CPU_HYPERTHREADING = 'HW_CPU_HYPERTHREADING'
ISOLATE = 'isolate'
NONE = 'none'
# Nova's [scheduler] max_placement_results default: the ``limit`` of the
# allocation candidate query.
MAX_PLACEMENT_RESULTS = 1000
PCI_ALIAS_KEY = pci_request.ALIAS_KEY

GROUP_POLICY = 'group_policy'
POLICIES = (ISOLATE, NONE)
REQUIRED = 'required'
FORBIDDEN = 'forbidden'
RESOURCES = 'resources'
TRAIT = 'trait'

# ResourceRequest.XS_KEYPAT in nova/scheduler/utils.py (nova 34): the one
# pattern of request group keys.
XS_KEYPAT = re.compile(r'^(resources|trait)([a-zA-Z0-9_-]{1,64})?:(.*)$')
# The name part of a custom class or trait (nova/api/validation/
# extra_specs/resources.py and traits.py).
_CUSTOM = re.compile(r'^CUSTOM_[A-Z0-9_]+$')


class RequestError(ValueError):
    """A request that cannot be asked of Placement as given."""


# -- the request ------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Group:
    """One request group: ``suffix`` '' is Nova's unnumbered group."""

    suffix: str
    resources: tuple = ()          # ((resource class, amount), ...)
    required: frozenset = frozenset()
    forbidden: frozenset = frozenset()
    alias: str = ''        # the [pci] alias of a PCI device's group

    @property
    def amounts(self):
        return dict(self.resources)

    @property
    def numbered(self):
        return bool(self.suffix)

    def label(self):
        return group_label(self.suffix)

    @property
    def is_pci(self):
        return bool(self.alias)


@dataclasses.dataclass(frozen=True)
class Request:
    """What one server asks of Placement."""

    groups: tuple
    group_policy: str | None = None
    root_required: frozenset = frozenset()
    root_forbidden: frozenset = frozenset()

    @property
    def numbered_groups(self):
        return [g for g in self.groups if g.numbered]

    def mdev_classes(self):
        return sorted({rc for g in self.groups for rc, _ in g.resources
                       if names.is_mdev_resource_class(rc)})

    def device_amounts(self, classes=None):
        """``{class: amount}`` of the devices one server asks for, summed
        over the groups: the classes in ``classes`` (None: every class an
        mdev can have, VGPU and CUSTOM_*) and every PCI group's class.
        """
        amounts = collections.Counter()
        for group in self.groups:
            for rc, n in group.resources:
                if group.is_pci or (
                        rc in classes if classes is not None
                        else names.is_mdev_resource_class(rc)):
                    amounts[rc] += n
        return dict(amounts)

    def device_groups(self):
        """The groups that ask for an mdev class, and PCI groups."""
        return [g for g in self.groups if g.is_pci or any(
            names.is_mdev_resource_class(rc) and rc not in ROOT_CLASSES
            for rc, _ in g.resources)]

    def describe_devices(self):
        """The mdev groups in words, each by its name in the flavor:
        ``resources_GPU: 1 x VGPU with CUSTOM_NVIDIA_12``; ``None`` when
        the request asks for no mdev.
        """
        parts = []
        for group in self.device_groups():
            if group.is_pci:
                continue
            text = '%s: %s' % (group.label(), ', '.join(
                '%d x %s' % (n, rc) for rc, n in group.resources
                if names.is_mdev_resource_class(rc)))
            if group.required:
                text += ' with %s' % ', '.join(sorted(group.required))
            if group.forbidden:
                text += ' without %s' % ', '.join(sorted(group.forbidden))
            parts.append(text)
        if not parts:
            return None
        numbered = self.numbered_groups
        if self.group_policy and len(numbered) > 1:
            parts.append('group_policy=%s' % self.group_policy)
        return '; '.join(parts)

    def root_amounts(self):
        """Root classes (VCPU, MEMORY_MB, DISK_GB) of the unnumbered group.
        """
        unnumbered = self.group('')
        return {rc: n for rc, n in (unnumbered.resources if unnumbered
                                    else ()) if rc in ROOT_CLASSES}

    def group(self, suffix):
        for group in self.groups:
            if group.suffix == suffix:
                return group
        return None

    def describe(self):
        parts = []
        for group in self.groups:
            text = '%s=%s' % (group.label(), ','.join(
                '%s:%d' % rc for rc in group.resources))
            traits = sorted(group.required) + [
                '!' + t for t in sorted(group.forbidden)]
            if traits:
                text += ' required%s=%s' % (group.suffix, ','.join(traits))
            parts.append(text)
        if self.group_policy:
            parts.append('group_policy=%s' % self.group_policy)
        roots = sorted(self.root_required) + [
            '!' + t for t in sorted(self.root_forbidden)]
        if roots:
            parts.append('root_required=%s' % ','.join(roots))
        return ' '.join(parts)


@dataclasses.dataclass(frozen=True)
class SpecKey:
    """A ``resources[S]:<class>`` or ``trait[S]:<trait>`` extra spec key:
    ``suffix`` '' for the unnumbered group, else the group's name
    (``1``, ``_GPU``...).
    """

    prefix: str            # RESOURCES or TRAIT
    suffix: str
    name: str

    @property
    def is_resource(self):
        return self.prefix == RESOURCES


def spec_key(key):
    """The SpecKey of a request group key, or None for any other key
    (``XS_KEYPAT``, as ``ResourceRequest._process_extra_specs`` reads it).
    """
    match = XS_KEYPAT.match(key)
    if not match:
        return None
    prefix, suffix, name = match.groups()
    return SpecKey(prefix, suffix or '', name)


def group_label(suffix):
    """The name a group has in a flavor: ``resources`` (unnumbered),
    ``resources1``, ``resources_GPU``.
    """
    return RESOURCES + suffix


def _valid_class(rclass):
    """``RequestGroup.add_resource`` (nova/objects/request_spec.py):
    a custom class or one of os-resource-classes' standard classes.
    """
    return (rclass.startswith(os_resource_classes.CUSTOM_NAMESPACE)
            or rclass in os_resource_classes.STANDARDS)


def nova_refuses(specs):
    """``[(key, reason)]`` for the request extra specs Nova's API refuses
    (microversion 2.86 and later: ``validators.validate`` of
    nova/api/validation/extra_specs), in key order.

    Only the namespaces a request is read from are judged:
    ``resources[S]:`` (a standard or custom class, an integer amount),
    ``trait[S]:`` (a standard or custom trait, ``required`` or
    ``forbidden``), ``group_policy`` (``isolate`` or ``none``) and
    ``pci_passthrough:alias`` (``NAME:COUNT[,NAME:COUNT]``). The reasons
    are Nova's words.
    """
    refused = []
    standard_traits = None
    for key, value in sorted(specs.items()):
        value = str(value)
        if key == GROUP_POLICY:
            if value not in POLICIES:
                refused.append((key, "'%s' is not one of: isolate, none"
                                % value))
            continue
        if key == PCI_ALIAS_KEY:
            if not pci_request.ALIAS_SPEC_RE.fullmatch(value):
                refused.append((key, "'%s' is not of the format '%s'" % (
                    value, pci_request.ALIAS_SPEC_RE.pattern)))
            continue
        parsed = spec_key(key)
        if parsed is None:
            continue
        if parsed.is_resource:
            known = (parsed.name in os_resource_classes.STANDARDS
                     or _CUSTOM.match(parsed.name))
        else:
            if standard_traits is None:
                standard_traits = set(os_traits.get_traits())
            known = (parsed.name in standard_traits
                     or _CUSTOM.match(parsed.name))
        if not known:
            refused.append((key, 'does not appear to be a valid extra '
                            'spec'))
        elif parsed.is_resource:
            try:
                int(value)
            except ValueError:
                refused.append((key, "'%s' is not a valid integer value"
                                % value))
        elif value not in (REQUIRED, FORBIDDEN):
            refused.append((key, "'%s' is not one of: required, forbidden"
                            % value))
    return refused


def request_from_flavor(flavor, is_bfv=False, pci_config=None):
    """The groups Nova asks Placement for, for one server of ``flavor``.

    Mirrors ``ResourceRequest.from_request_spec`` (nova/scheduler/utils.py)
    with ``_process_extra_specs``, ``RequestGroup.add_resource`` /
    ``add_trait`` (nova/objects/request_spec.py), the flavor part of
    ``_translate_pinning_policies`` and ``strip_zeros``:

    * ``resources[S]:RC=N`` and ``trait[S]:T=required|forbidden`` keys form
      group ``S`` ('' is the unnumbered group); an invalid class, a
      negative or non-integer amount and any other trait value are ignored
      (Nova logs a warning); the last key wins;
    * ``group_policy`` is kept when it is ``none`` or ``isolate``;
    * ``hw:cpu_policy=dedicated`` asks PCPU (plus one for
      ``hw:emulator_threads_policy=isolate``) instead of VCPU;
      ``hw:cpu_thread_policy`` isolate/require forbids/requires
      HW_CPU_HYPERTHREADING;
    * the flavor's vcpus, ram and disk (root + ephemeral + swap in GiB,
      rounded up; no root disk when booted from volume) go to the
      unnumbered group **only for classes no group of the extra specs
      names** (``resources:VCPU=0`` therefore asks no VCPU at all);
    * zero amounts are dropped, and groups left empty with them;
    * with ``pci_config`` (``pci.PciConfig``, the controller's ``[pci]``)
      and its ``pci_in_placement``, the flavor's ``pci_passthrough:alias``
      (its aliases defined in ``pci_config``) adds one numbered group per
      device (``pci_groups``); then, as ``resources_from_request_spec`` does,
      a request with two or more numbered groups and no ``group_policy``
      gets ``group_policy=none`` when the flavor itself has at most one
      numbered group (else it stays unset and Placement refuses it).
      ``pci_config`` None leaves the PCI devices out.

    Image properties and ports are not part of a flavor and are left out.
    Raises RequestError for a ``pci_passthrough:alias`` Nova refuses.
    """
    specs = flavor.get('extra_specs') or {}
    groups = collections.OrderedDict()

    def group(suffix):
        return groups.setdefault(suffix or '', {
            'resources': {}, 'required': set(), 'forbidden': set()})

    policy = None
    for key, value in specs.items():
        if key == GROUP_POLICY:
            if value in POLICIES:
                policy = value
            continue
        parsed = spec_key(key)
        if parsed is None:
            continue
        suffix, name = parsed.suffix, parsed.name
        if parsed.is_resource:
            if not _valid_class(name):
                continue
            try:
                amount = int(value)
            except (TypeError, ValueError):
                continue
            if amount < 0:
                continue
            group(suffix)['resources'][name] = amount
        elif value == REQUIRED:
            group(suffix)['required'].add(name)
        elif value == FORBIDDEN:
            group(suffix)['forbidden'].add(name)

    cpu_policy = specs.get('hw:cpu_policy')
    if cpu_policy == 'dedicated':
        pcpus = int(flavor.get('vcpus') or 0)
        if specs.get('hw:emulator_threads_policy') == 'isolate':
            pcpus += 1
        group('')['resources'][PCPU] = pcpus
    thread = {'isolate': 'forbidden', 'require': 'required'}.get(
        specs.get('hw:cpu_thread_policy'))
    if thread and cpu_policy == 'dedicated':
        group('')[thread].add(HW_CPU_HYPERTHREADING)

    # ResourceRequest.suffixed_groups_from_flavor: every suffix of a key
    # of the form, whatever its value.
    from_flavor = {k.suffix for k in map(spec_key, specs)
                   if k and k.suffix}
    pci = []
    if pci_config is not None and pci_config.pci_in_placement:
        pci = pci_groups(flavor_aliases(flavor), pci_config.aliases,
                         taken=set(groups) | from_flavor)

    merged = {rc for g in groups.values() for rc in g['resources']} | {
        rc for g in pci for rc, _ in g.resources}
    if VCPU not in merged and PCPU not in merged:
        group('')['resources'][VCPU] = int(flavor.get('vcpus') or 0)
    if MEMORY_MB not in merged:
        group('')['resources'][MEMORY_MB] = int(flavor.get('ram') or 0)
    if DISK_GB not in merged:
        disk = int(flavor.get('OS-FLV-EXT-DATA:ephemeral')
                   or flavor.get('ephemeral') or 0)
        # swap is in MiB ('' when none); Nova rounds it up to GiB.
        disk += -(-int(flavor.get('swap') or 0) // 1024)
        if not is_bfv:
            disk += int(flavor.get('disk') or 0)
        if disk:
            group('')['resources'][DISK_GB] = disk

    result = []
    for suffix, g in groups.items():
        resources = tuple(sorted((rc, n) for rc, n in g['resources'].items()
                                 if n))
        if resources or g['required'] or g['forbidden']:
            result.append(Group(suffix, resources, frozenset(g['required']),
                                frozenset(g['forbidden'])))
    result.sort(key=lambda g: (g.suffix != '', g.suffix))
    result.extend(pci)
    numbered = sum(1 for g in result if g.numbered)
    if numbered >= 2 and policy is None and len(from_flavor) <= 1:
        policy = NONE
    return Request(tuple(result), policy)


def flavor_aliases(flavor):
    """``[(alias name, count)]`` of the flavor's
    ``pci_passthrough:alias`` (``[]`` without one). RequestError for a
    value Nova's API refuses.
    """
    text = (flavor.get('extra_specs') or {}).get(PCI_ALIAS_KEY)
    if text is None:
        return []
    try:
        return pci_request.parse_alias_request(text)
    except ValueError as exc:
        raise RequestError('the flavor\'s %s is not valid: %s' % (
            PCI_ALIAS_KEY, exc)) from exc


def pci_groups(requested, aliases, taken=()):
    """The request groups Nova makes of ``requested`` (``[(alias name,
    count)]``) with the controller's ``aliases``: as
    ``get_pci_requests_from_flavor`` (nova/pci/request.py) and
    ``RequestSpec.generate_request_groups_from_pci_requests``
    (nova/objects/request_spec.py), one numbered group per device asking
    ``{class: 1}`` with the alias' traits
    (``pci_request.alias_request_groups``).

    Nova names each group after a fresh request UUID; here they are
    ``_pci<N>_<I>`` (alias N of the extra spec, device I), never one of
    ``taken``. RequestError for an alias the controller does not define
    (Nova's API refuses the boot: PciRequestAliasNotDefined).
    """
    unknown = [name for name, _ in requested if name not in aliases]
    if unknown:
        raise RequestError(
            'PCI alias %s of the flavor is not defined in [pci] alias '
            '(defined: %s), so Nova refuses to boot it' % (
                ', '.join(dict.fromkeys(unknown)),
                ', '.join(sorted(aliases)) or 'none'))
    result = []
    for n, (name, count) in enumerate(requested, 1):
        try:
            made = pci_request.alias_request_groups(aliases[name], count)
        except ValueError as exc:
            raise RequestError('PCI alias %s: %s' % (name, exc)) from exc
        for i, (resources, traits) in enumerate(made):
            suffix = '_pci%d_%d' % (n, i)
            while suffix in taken:
                suffix = '_' + suffix
            result.append(Group(suffix, tuple(sorted(resources.items())),
                                frozenset(traits), alias=name))
    return result


def bare_request(resource_class, amount=1, required=(), forbidden=(),
                 spread=False):
    """An mdev request with no flavor: ``amount`` of ``resource_class``.

    One unnumbered group (all from one device) or, with ``spread``, one
    numbered group per mdev with ``group_policy=isolate`` (the extra specs
    ``mdev flavor configure --spread`` writes). Nothing on the root.
    """
    if amount < 1:
        raise RequestError('a request asks for at least 1 mdev, not %d'
                           % amount)
    if spread and amount > 1:
        groups = tuple(Group(str(n), ((resource_class, 1),),
                             frozenset(required), frozenset(forbidden))
                       for n in range(1, amount + 1))
        return Request(groups, ISOLATE)
    return Request((Group('', ((resource_class, amount),),
                          frozenset(required), frozenset(forbidden)),))


def check_request(request):
    """Refuse what Placement refuses: several numbered groups and no
    ``group_policy`` (``resources_from_request_spec`` warns; Placement
    answers 400).
    """
    if len(request.numbered_groups) >= 2 and not request.group_policy:
        raise RequestError(
            'the flavor has %d numbered request groups but no group_policy '
            'extra spec, so Placement rejects every request for it; set '
            'group_policy=isolate or none' % len(request.numbered_groups))
    for group in request.numbered_groups:
        if not group.resources:
            # Placement: a suffixed group without resources needs
            # same_subtree, which a flavor cannot give.
            raise RequestError(
                '%s has traits but no resources, which Placement refuses'
                % group.label())
    if not any(g.resources for g in request.groups):
        raise RequestError('the request asks for no resources')


def with_prefilters(request, owner_nova=True):
    """Add the root traits Nova's mandatory prefilters add.

    Mirrors ``compute_status_filter`` (root_forbidden
    COMPUTE_STATUS_DISABLED) and ``owner_nova_filter`` (root_required
    OWNER_NOVA, only once every nova-compute reports it: ``owner_nova``)
    of nova/scheduler/request_filter.py. ``owner_nova_filter`` adds
    OWNER_NOVA to PCI groups (``Group.is_pci``) too, never to mdev
    groups. The aggregate,
    availability zone and image prefilters depend on the project, zone and
    image of a boot and are not applied.
    """
    required = set(request.root_required)
    groups = request.groups
    if owner_nova:
        required.add(OWNER_NOVA)
        groups = tuple(dataclasses.replace(
            g, required=g.required | {OWNER_NOVA}) if g.is_pci else g
            for g in groups)
    return dataclasses.replace(
        request, groups=groups, root_required=frozenset(required),
        root_forbidden=request.root_forbidden | {COMPUTE_STATUS_DISABLED})


def to_querystring(request, in_tree=None, limit=MAX_PLACEMENT_RESULTS):
    """``GET /allocation_candidates`` parameters for ``request``.

    As ``ResourceRequest.to_querystring`` (nova/scheduler/utils.py) and
    ``RequestGroup.to_queryparams`` build them; ``in_tree`` limits the
    unnumbered group to one tree (as Nova does for a requested host).
    """
    params = []
    if limit is not None:
        params.append(('limit', str(limit)))
    if request.group_policy:
        params.append(('group_policy', request.group_policy))
    if request.root_required or request.root_forbidden:
        params.append(('root_required', ','.join(
            sorted(request.root_required) +
            ['!' + t for t in sorted(request.root_forbidden)])))
    groups = list(request.groups)
    if in_tree and not request.group(''):
        groups.append(Group(''))
    for group in groups:
        s = group.suffix
        if group.resources:
            params.append(('resources' + s, ','.join(
                '%s:%d' % rc for rc in sorted(group.resources))))
        traits = sorted(group.required) + [
            '!' + t for t in sorted(group.forbidden)]
        if traits:
            params.append(('required' + s, ','.join(traits)))
        if in_tree and not s:
            params.append(('in_tree', in_tree))
    return urllib.parse.urlencode(sorted(params))
