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

"""What one server asks Placement for: the one request builder.

Pure logic. Every command that turns a flavor or a server into a request
calls ``request_for``, which builds the request groups in the named
steps of Nova's ``ResourceRequest`` (nova/scheduler/utils.py), one
function each, naming the Nova function it mirrors: the flavor's extra
specs, its CPU pinning, the devices of its PCI aliases
(``nova.pci.request``), the flavor's own sizes with the boot-from-volume rule
for the root disk, the hardware constraints ``hardware`` reads, and the
default group policy of ``resources_from_request_spec``. The scheduler's
prefilters are ``request_filter``'s.

``spec_key`` is the one parser of ``resources[S]:`` and ``trait[S]:``
keys (Nova's ``XS_KEYPAT``), and ``nova_refuses`` says which of those
keys Nova's API refuses (nova/api/validation/extra_specs).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses
import re
import typing
import urllib.parse

import os_resource_classes
import os_traits

from osc_mdev.nova import names
from osc_mdev.nova.pci import request as pci_request
from osc_mdev.nova.virt import hardware

if typing.TYPE_CHECKING:
    from osc_mdev.nova import objects
    from osc_mdev.nova.pci import config as pci_rules

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

#: ``((resource class, amount), ...)``, sorted by class.
Resources = tuple[tuple[str, int], ...]


@dataclasses.dataclass(frozen=True)
class Group:
    """One request group: ``suffix`` '' is Nova's unnumbered group."""

    suffix: str
    resources: Resources = ()
    required: frozenset[str] = frozenset()
    forbidden: frozenset[str] = frozenset()
    alias: str = ''        # the [pci] alias of a PCI device's group

    @property
    def amounts(self) -> dict[str, int]:
        return dict(self.resources)

    @property
    def numbered(self) -> bool:
        return bool(self.suffix)

    def label(self) -> str:
        return group_label(self.suffix)

    @property
    def is_pci(self) -> bool:
        return bool(self.alias)


@dataclasses.dataclass(frozen=True)
class Request:
    """What one server asks of Placement; ``pci_requests``: the PCI
    devices its flavor asks by alias (Nova's ``InstancePCIRequests``),
    asked of Placement as PCI groups only with ``pci_in_placement``.
    """

    groups: tuple[Group, ...]
    group_policy: str | None = None
    root_required: frozenset[str] = frozenset()
    root_forbidden: frozenset[str] = frozenset()
    pci_requests: tuple[pci_request.PciRequest, ...] = ()

    @property
    def numbered_groups(self) -> list[Group]:
        return [g for g in self.groups if g.numbered]

    def mdev_classes(self) -> list[str]:
        return sorted({rc for g in self.groups for rc, _ in g.resources
                       if names.is_mdev_resource_class(rc)})

    def device_amounts(self, classes: Iterable[str] | None = None
                       ) -> dict[str, int]:
        """``{class: amount}`` of the devices one server asks for, summed
        over the groups: the classes in ``classes`` (None: every class an
        mdev can have, VGPU and CUSTOM_*) and every PCI group's class.
        """
        wanted = None if classes is None else set(classes)
        amounts: collections.Counter[str] = collections.Counter()
        for group in self.groups:
            for rc, n in group.resources:
                if group.is_pci or (
                        rc in wanted if wanted is not None
                        else names.is_mdev_resource_class(rc)):
                    amounts[rc] += n
        return dict(amounts)

    def device_groups(self) -> list[Group]:
        """The groups that ask for an mdev class, and PCI groups."""
        return [g for g in self.groups if g.is_pci or any(
            names.is_mdev_resource_class(rc) and rc not in ROOT_CLASSES
            for rc, _ in g.resources)]

    def describe_devices(self) -> str | None:
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

    def root_amounts(self) -> dict[str, int]:
        """Root classes (VCPU, MEMORY_MB, DISK_GB) of the unnumbered group.
        """
        unnumbered = self.group('')
        return {rc: n for rc, n in (unnumbered.resources if unnumbered
                                    else ()) if rc in ROOT_CLASSES}

    def group(self, suffix: str) -> Group | None:
        for group in self.groups:
            if group.suffix == suffix:
                return group
        return None

    def describe(self) -> str:
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
    def is_resource(self) -> bool:
        return self.prefix == RESOURCES


def spec_key(key: str) -> SpecKey | None:
    """The SpecKey of a request group key, or None for any other key
    (``XS_KEYPAT``, as ``ResourceRequest._process_extra_specs`` reads it).
    """
    match = XS_KEYPAT.match(key)
    if not match:
        return None
    prefix, suffix, name = match.groups()
    return SpecKey(prefix, suffix or '', name)


def group_label(suffix: str) -> str:
    """The name a group has in a flavor: ``resources`` (unnumbered),
    ``resources1``, ``resources_GPU``.
    """
    return RESOURCES + suffix


def _valid_class(rclass: str) -> bool:
    """``RequestGroup.add_resource`` (nova/objects/request_spec.py):
    a custom class or one of os-resource-classes' standard classes.
    """
    return (rclass.startswith(os_resource_classes.CUSTOM_NAMESPACE)
            or rclass in os_resource_classes.STANDARDS)


def nova_refuses(specs: Mapping[str, object]) -> list[tuple[str, str]]:
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
    standard_traits: set[str] | None = None
    for key, raw in sorted(specs.items()):
        value = str(raw)
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


# -- the builder: Nova's ResourceRequest, step by step ---------------------

class _RequestGroup:
    """A ``RequestGroup`` (nova/objects/request_spec.py) while the
    request is built: its resources and traits, and the alias of a PCI
    device's group.
    """

    def __init__(self, alias: str = '') -> None:
        self.resources: dict[str, int] = {}
        self.required: set[str] = set()
        self.forbidden: set[str] = set()
        self.alias = alias

    def add_resource(self, rclass: str, amount: object) -> None:
        """Mirrors ``RequestGroup.add_resource``: a custom or standard
        class and a non-negative integer amount (Nova only warns about
        anything else); the last one wins.
        """
        if not _valid_class(rclass):
            return
        try:
            value = int(typing.cast(typing.Any, amount))
        except (TypeError, ValueError):
            return
        if value >= 0:
            self.resources[rclass] = value

    def add_trait(self, trait: str, trait_type: str) -> None:
        """Mirrors ``RequestGroup.add_trait``: ``required`` or
        ``forbidden`` (Nova only warns about any other value).
        """
        if trait_type == REQUIRED:
            self.required.add(trait)
        elif trait_type == FORBIDDEN:
            self.forbidden.add(trait)

    def is_empty(self) -> bool:
        """Mirrors ``RequestGroup.is_empty``."""
        return not (self.resources or self.required or self.forbidden)

    def strip_zeros(self) -> None:
        """Mirrors ``RequestGroup.strip_zeros``."""
        self.resources = {rc: n for rc, n in self.resources.items() if n}

    def frozen(self, suffix: str) -> Group:
        return Group(suffix, tuple(sorted(self.resources.items())),
                     frozenset(self.required), frozenset(self.forbidden),
                     self.alias)


class ResourceRequest:
    """Mirrors ``ResourceRequest.__init__`` (nova/scheduler/utils.py): the
    request groups by suffix ('' for Nova's unnumbered group, its
    ``None``), the group policy and how many suffixed groups the flavor
    itself made.
    """

    def __init__(self) -> None:
        self.groups: dict[str, _RequestGroup] = {}
        self.group_policy: str | None = None
        self.suffixed_groups_from_flavor = 0

    def get_request_group(self, suffix: str = '') -> _RequestGroup:
        """Mirrors ``ResourceRequest.get_request_group``: a group is made
        the first time it is named, whatever is added to it then.
        """
        return self.groups.setdefault(suffix, _RequestGroup())

    def add_resource(self, rclass: str, amount: object,
                     group: str = '') -> None:
        """Mirrors ``ResourceRequest._add_resource``."""
        self.get_request_group(group).add_resource(rclass, amount)

    def add_trait(self, trait: str, trait_type: str,
                  group: str = '') -> None:
        """Mirrors ``ResourceRequest._add_trait``."""
        self.get_request_group(group).add_trait(trait, trait_type)

    def add_group_policy(self, policy: str) -> None:
        """Mirrors ``ResourceRequest._add_group_policy``: ``none`` or
        ``isolate`` (Nova only warns about any other value).
        """
        if policy in POLICIES:
            self.group_policy = policy

    def add_request_group(self, suffix: str, group: _RequestGroup) -> None:
        """Mirrors ``ResourceRequest._add_request_group``: a group from
        outside the flavor under a suffix of its own (Nova's requester
        ID; here ``suffix``, made unique with leading ``_``).
        """
        while suffix in self.groups:
            suffix = '_' + suffix
        self.groups[suffix] = group

    def get_num_of_suffixed_groups(self) -> int:
        """Mirrors ``ResourceRequest.get_num_of_suffixed_groups``."""
        return sum(1 for suffix in self.groups if suffix)

    def merged_resources(self) -> dict[str, int]:
        """Mirrors ``ResourceRequest.merged_resources``."""
        merged: collections.Counter[str] = collections.Counter()
        for group in self.groups.values():
            merged.update(group.resources)
        return dict(merged)

    def strip_zeros(self) -> None:
        """Mirrors ``ResourceRequest.strip_zeros``: zero amounts go, and
        the groups they leave empty.
        """
        for group in self.groups.values():
            group.strip_zeros()
        self.groups = {s: g for s, g in self.groups.items()
                       if not g.is_empty()}


def process_extra_specs(res_req: ResourceRequest,
                        specs: Mapping[str, str]) -> None:
    """Mirrors ``ResourceRequest._process_extra_specs``:
    ``resources[S]:RC=N`` and ``trait[S]:T=required|forbidden`` keys add
    to group ``S``, ``group_policy`` sets the policy.
    """
    for key, value in specs.items():
        if key == GROUP_POLICY:
            res_req.add_group_policy(value)
            continue
        parsed = spec_key(key)
        if parsed is None:
            continue
        if parsed.is_resource:
            res_req.add_resource(parsed.name, value, group=parsed.suffix)
        else:
            res_req.add_trait(parsed.name, value, group=parsed.suffix)


def translate_pinning_policies(res_req: ResourceRequest,
                               flavor: objects.Flavor) -> None:
    """Mirrors ``ResourceRequest._translate_pinning_policies``:
    ``hw:cpu_policy=dedicated`` asks PCPU for every vCPU, ``mixed`` PCPU
    for the dedicated (or realtime) CPUs and VCPU for the rest, one PCPU
    more with ``hw:emulator_threads_policy=isolate``;
    ``hw:cpu_thread_policy`` isolate/require forbids/requires
    HW_CPU_HYPERTHREADING.
    """
    specs = flavor.extra_specs
    cpu_policy = hardware.get_cpu_policy_constraint(specs)
    pcpus = 0
    if cpu_policy == hardware.DEDICATED:
        pcpus = flavor.vcpus
    if cpu_policy == hardware.MIXED:
        mask = (hardware.get_dedicated_cpu_constraint(specs, flavor.vcpus)
                or hardware.get_realtime_cpu_constraint(specs, flavor.vcpus)
                or ())
        pcpus = len(mask)
        res_req.add_resource(VCPU, flavor.vcpus - pcpus)
    if cpu_policy in (hardware.DEDICATED, hardware.MIXED):
        if hardware.get_emulator_thread_policy_constraint(
                specs) == hardware.ISOLATE:
            pcpus += 1
        res_req.add_resource(PCPU, pcpus)
    trait = {hardware.ISOLATE: FORBIDDEN, hardware.REQUIRE: REQUIRED}.get(
        hardware.get_cpu_thread_policy_constraint(specs) or '')
    if trait:
        res_req.add_trait(HW_CPU_HYPERTHREADING, trait)


def process_requested_resources(
        res_req: ResourceRequest,
        pci_requests: tuple[pci_request.PciRequest, ...],
        pci_in_placement: bool) -> None:
    """Mirrors ``ResourceRequest._process_requested_resources`` for the
    groups ``RequestSpec.generate_request_groups_from_pci_requests`` makes
    of the flavor's PCI requests (``nova.pci.request``): with
    ``pci_in_placement``, one group per device. Nova names each after a
    fresh request UUID; here they are ``_pci<N>_<I>`` (alias N of the
    extra spec, device I). Raises RequestError where Nova raises
    ValueError (an alias with several definitions).
    """
    try:
        made = pci_request.generate_request_groups_from_pci_requests(
            pci_requests, pci_in_placement)
    except ValueError as exc:
        raise RequestError('PCI alias %s: %s' % (
            pci_requests[0].alias.name, exc)) from exc
    for n, (wanted, groups) in enumerate(zip(pci_requests, made), 1):
        for i, (resources, traits) in enumerate(groups):
            group = _RequestGroup(alias=wanted.alias.name)
            group.resources.update(resources)
            group.required.update(traits)
            res_req.add_request_group('_pci%d_%d' % (n, i), group)


def add_flavor_resources(res_req: ResourceRequest, flavor: objects.Flavor,
                         is_bfv: bool) -> None:
    """Mirrors the part of ``ResourceRequest.from_request_spec`` that
    reads the flavor's own sizes: its vcpus, ram and disk (root +
    ephemeral + swap in GiB, rounded up; no root disk when the server is
    booted from volume, ``is_bfv``) go to the unnumbered group, each only
    when no group names its class (``resources:VCPU=0`` therefore asks no
    VCPU at all).
    """
    merged = res_req.merged_resources()
    if VCPU not in merged and PCPU not in merged:
        res_req.add_resource(VCPU, flavor.vcpus)
    if MEMORY_MB not in merged:
        res_req.add_resource(MEMORY_MB, flavor.ram)
    if DISK_GB not in merged:
        # compute_utils.convert_mb_to_ceil_gb: swap is in MiB.
        disk = flavor.ephemeral + -(-flavor.swap // 1024)
        if not is_bfv:
            disk += flavor.disk
        if disk:
            res_req.add_resource(DISK_GB, disk)


def translate_mem_encryption_request(res_req: ResourceRequest,
                                     specs: Mapping[str, str]) -> None:
    """Mirrors ``ResourceRequest._translate_mem_encryption_request``:
    memory encryption asks one MEM_ENCRYPTION_CONTEXT and its model's CPU
    trait.
    """
    encryption = hardware.get_mem_encryption_constraint(specs)
    if encryption is None:
        return
    res_req.add_resource(os_resource_classes.MEM_ENCRYPTION_CONTEXT, 1)
    res_req.add_trait(encryption.required_trait, REQUIRED)


def translate_vpmems_request(res_req: ResourceRequest,
                             specs: Mapping[str, str]) -> None:
    """Mirrors ``ResourceRequest._translate_vpmems_request``: one
    ``CUSTOM_PMEM_NAMESPACE_<LABEL>`` per ``hw:pmem`` label.
    """
    amounts: collections.Counter[str] = collections.Counter(
        os_resource_classes.normalize_name('PMEM_NAMESPACE_' + label)
        for label in hardware.get_vpmems(specs))
    for rclass, amount in amounts.items():
        res_req.add_resource(rclass, amount)


def translate_vtpm_request(res_req: ResourceRequest,
                           specs: Mapping[str, str]) -> None:
    """Mirrors ``ResourceRequest._translate_vtpm_request``: an emulated
    TPM requires its model's and its version's trait.
    """
    vtpm = hardware.get_vtpm_constraint(specs)
    if vtpm is None:
        return
    version, model = vtpm
    res_req.add_trait('COMPUTE_SECURITY_TPM_CRB' if model == hardware.TPM_CRB
                      else 'COMPUTE_SECURITY_TPM_TIS', REQUIRED)
    res_req.add_trait('COMPUTE_SECURITY_TPM_2_0' if version == '2.0'
                      else 'COMPUTE_SECURITY_TPM_1_2', REQUIRED)


def translate_pci_numa_affinity_policy(res_req: ResourceRequest,
                                       specs: Mapping[str, str]) -> None:
    """Mirrors ``ResourceRequest._translate_pci_numa_affinity_policy``:
    the ``socket`` policy requires COMPUTE_SOCKET_PCI_NUMA_AFFINITY.
    """
    if hardware.get_pci_numa_policy_constraint(specs) == 'socket':
        res_req.add_trait('COMPUTE_SOCKET_PCI_NUMA_AFFINITY', REQUIRED)


def translate_secure_boot_request(res_req: ResourceRequest,
                                  specs: Mapping[str, str]) -> None:
    """Mirrors ``ResourceRequest._translate_secure_boot_request``:
    ``os:secure_boot=required`` requires
    COMPUTE_SECURITY_UEFI_SECURE_BOOT.
    """
    if hardware.get_secure_boot_constraint(specs) == 'required':
        res_req.add_trait('COMPUTE_SECURITY_UEFI_SECURE_BOOT', REQUIRED)


def translate_maxphysaddr_request(res_req: ResourceRequest,
                                  specs: Mapping[str, str]) -> None:
    """Mirrors ``ResourceRequest._translate_maxphysaddr_request``: the
    mode's COMPUTE_ADDRESS_SPACE_* trait.
    """
    mode = hardware.get_maxphysaddr_mode(specs)
    if mode == 'passthrough':
        res_req.add_trait('COMPUTE_ADDRESS_SPACE_PASSTHROUGH', REQUIRED)
    elif mode == 'emulate':
        res_req.add_trait('COMPUTE_ADDRESS_SPACE_EMULATED', REQUIRED)


def translate_stateless_firmware_request(res_req: ResourceRequest,
                                         specs: Mapping[str, str]) -> None:
    """Mirrors ``ResourceRequest._translate_stateless_firmware_request``,
    which reads the image only: a memory encryption model that needs
    stateless firmware (Intel TDX) boots only from an image that asks for
    it, so COMPUTE_SECURITY_STATELESS_FIRMWARE is required.
    """
    encryption = hardware.get_mem_encryption_constraint(specs)
    if encryption is not None and encryption.needs_stateless_firmware:
        res_req.add_trait('COMPUTE_SECURITY_STATELESS_FIRMWARE', REQUIRED)


def from_request_spec(flavor: objects.Flavor,
                      pci_requests: tuple[pci_request.PciRequest, ...] = (),
                      pci_in_placement: bool = False,
                      is_bfv: bool = False) -> ResourceRequest:
    """Mirrors ``ResourceRequest.from_request_spec``: the steps above in
    Nova's order, then ``strip_zeros``.

    The image is Nova's image with no properties: the Compute API does
    not show a server's image properties, so ``_process_image_meta``
    (the image's ``traits_required``) has nothing to add and each
    constraint is the flavor's (``hardware``).
    """
    res_req = ResourceRequest()
    specs = flavor.extra_specs
    process_extra_specs(res_req, specs)
    res_req.suffixed_groups_from_flavor = (
        res_req.get_num_of_suffixed_groups())
    translate_pinning_policies(res_req, flavor)
    process_requested_resources(res_req, pci_requests, pci_in_placement)
    add_flavor_resources(res_req, flavor, is_bfv)
    translate_mem_encryption_request(res_req, specs)
    translate_vpmems_request(res_req, specs)
    translate_vtpm_request(res_req, specs)
    translate_pci_numa_affinity_policy(res_req, specs)
    translate_secure_boot_request(res_req, specs)
    translate_maxphysaddr_request(res_req, specs)
    translate_stateless_firmware_request(res_req, specs)
    res_req.strip_zeros()
    return res_req


def resources_from_request_spec(res_req: ResourceRequest,
                                pci_requests: tuple[
                                    pci_request.PciRequest, ...] = ()
                                ) -> Request:
    """Mirrors the end of ``resources_from_request_spec``
    (nova/scheduler/utils.py): two or more numbered groups and no
    ``group_policy`` get ``group_policy=none`` when the flavor itself made
    at most one of them (else it stays unset and Placement refuses the
    request: ``check_request``). The groups in order: the unnumbered,
    the flavor's by suffix, then the PCI devices'.
    """
    if res_req.get_num_of_suffixed_groups() >= 2 and \
            not res_req.group_policy and \
            res_req.suffixed_groups_from_flavor <= 1:
        res_req.group_policy = NONE
    groups = sorted((g.frozen(suffix) for suffix, g in
                     res_req.groups.items()),
                    key=lambda g: (g.is_pci, g.numbered, '' if g.is_pci
                                   else g.suffix))
    return Request(tuple(groups), res_req.group_policy,
                   pci_requests=pci_requests)


def pci_requests_of(flavor: objects.Flavor,
                    pci_config: pci_rules.PciConfig
                    ) -> tuple[pci_request.PciRequest, ...]:
    """Mirrors ``get_pci_requests_from_flavor`` (``nova.pci.request``) with
    the controller's aliases, raising RequestError where Nova's API
    refuses the boot: an alias ``pci_config`` does not define
    (PciRequestAliasNotDefined), a value it refuses.
    """
    try:
        return pci_request.get_pci_requests_from_flavor(
            flavor.extra_specs, pci_config.aliases)
    except pci_request.AliasNotDefined as exc:
        raise RequestError(str(exc)) from exc
    except ValueError as exc:
        raise RequestError('the flavor\'s %s is not valid: %s' % (
            PCI_ALIAS_KEY, exc)) from exc


def request_for(flavor: objects.Flavor,
                pci_config: pci_rules.PciConfig | None = None,
                booted_from_volume: bool = False) -> Request:
    """The request Nova's scheduler builds for one server of ``flavor``
    (``resources_from_request_spec`` of ``from_request_spec``): the one
    entry point from a flavor, or a server (its embedded flavor and
    ``booted_from_volume``: no root disk is asked), to a request.

    ``pci_config``: the controller's ``[pci]``, whole; the devices of the
    flavor's ``pci_passthrough:alias`` are its ``pci_requests``, asked of
    Placement as groups only with its ``pci_in_placement``. None: the
    controller's aliases are not known, the PCI devices are left out.
    Raises RequestError for a ``pci_passthrough:alias`` Nova refuses.
    """
    pci_requests: tuple[pci_request.PciRequest, ...] = ()
    pci_in_placement = False
    if pci_config is not None:
        pci_requests = pci_requests_of(flavor, pci_config)
        pci_in_placement = pci_config.pci_in_placement
    return resources_from_request_spec(
        from_request_spec(flavor, pci_requests, pci_in_placement,
                          booted_from_volume), pci_requests)


def bare_request(resource_class: str, amount: int = 1,
                 required: Iterable[str] = (), forbidden: Iterable[str] = (),
                 spread: bool = False) -> Request:
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


def check_request(request: Request) -> None:
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


def to_querystring(request: Request, in_tree: str | None = None,
                   limit: int | None = MAX_PLACEMENT_RESULTS) -> str:
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
