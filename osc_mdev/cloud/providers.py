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

"""GPUs as Nova reports them to Placement: mdev parent devices and
PCI-in-Placement devices.

Pure logic over Placement's JSON: which providers are mdev devices (kind
``mdev``: ``<root>_<libvirt nodedev>`` with a VGPU or CUSTOM_* inventory)
or PCI devices (kind ``pci``: ``<root>_<PCI ADDRESS>`` with Nova's
COMPUTE_MANAGED_PCI_DEVICE trait, ``[pci] report_in_placement``), what
their rows look like, how filters apply and how an operator's name for a
device resolves to one provider.
"""

from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import re
import typing

from osc_mdev.base import errors
from osc_mdev.nova import names
from osc_mdev.nova.pci import placement_translator


_HEX_ADDRESS_RE = re.compile(r'^[0-9a-fA-F]+(:[0-9a-fA-F.]*)+$')


MDEV = 'mdev'
PCI = 'pci'
KINDS = (MDEV, PCI)
KIND_CHOICES = {MDEV: (MDEV,), PCI: (PCI,), 'all': KINDS}

#: A device's state (the State column): consumers hold part of it; it
#: has room; Nova reserved it after its one use and it waits to be
#: cleaned and released; it has no room and no consumer (reserved by
#: someone else).
IN_USE = 'in use'
FREE = 'free'
TO_CLEAN = 'used once, to clean'
RESERVED = 'reserved'
STATES = (IN_USE, FREE, TO_CLEAN, RESERVED)

#: A provider as Placement's JSON gives it.
_Json = Mapping[str, typing.Any]


class DeviceLookupError(LookupError):
    """An operator's device reference matched no device or several."""


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A child provider named as Nova names a device.

    Kind ``mdev``: ``<root>_<nodedev>``; whether it really is an mdev
    device is known only once its inventory is read (it must hold
    ``VGPU`` or ``CUSTOM_*``). Kind ``pci``: ``<root>_<PCI ADDRESS>``
    (``nodedev`` is the address as the name writes it); it is a PCI
    device when it carries COMPUTE_MANAGED_PCI_DEVICE, which only its
    traits tell.
    """

    uuid: str
    name: str
    host: str
    root_uuid: str
    nodedev: str
    pci_address: str | None
    generation: int
    kind: str = MDEV

    @property
    def device(self) -> str:
        """What operators call the device: PCI address or nodedev name."""
        return self.pci_address or self.nodedev


_I = typing.TypeVar('_I', bound='Inventory')


@dataclasses.dataclass(frozen=True)
class Inventory:
    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = 1
    step_size: int = 1
    allocation_ratio: float = 1.0

    @classmethod
    def from_api(cls: type[_I], data: Mapping[str, typing.Any]) -> _I:
        return cls(total=data['total'],
                   reserved=data.get('reserved', 0),
                   min_unit=data.get('min_unit', 1),
                   max_unit=data.get('max_unit', data['total']),
                   step_size=data.get('step_size', 1),
                   allocation_ratio=data.get('allocation_ratio', 1.0))

    @property
    def capacity(self) -> int:
        return int((self.total - self.reserved) * self.allocation_ratio)


class OnCandidate:
    """Where a row about one device provider (``self.candidate``, a
    Candidate) is: its host, device address and kind.
    """

    candidate: Candidate

    @property
    def host(self) -> str:
        return self.candidate.host

    @property
    def device(self) -> str:
        return self.candidate.device

    @property
    def kind(self) -> str:
        return self.candidate.kind


@dataclasses.dataclass(frozen=True)
class Device(OnCandidate):
    """One mdev inventory (resource class) of one parent device.

    ``inventory`` is None when only a provider summary was read (it
    gives ``summary_capacity``, (total - reserved) x allocation ratio, but
    not the inventory's fields).
    """

    candidate: Candidate
    resource_class: str
    inventory: Inventory | None
    used: int
    generation: int
    traits: tuple[str, ...] | None  # None when traits were not read
    summary_capacity: int | None = None

    @property
    def uuid(self) -> str:
        return self.candidate.uuid

    @property
    def capacity(self) -> int:
        """What the device can hold: (total - reserved) x ratio."""
        if self.inventory is not None:
            return self.inventory.capacity
        assert self.summary_capacity is not None    # read in its stead
        return self.summary_capacity

    @property
    def free(self) -> int:
        return max(self.capacity - self.used, 0)

    @property
    def one_time_use(self) -> bool:
        """True for a one-time-use device (Nova's HW_PCI_ONE_TIME_USE
        trait; False when the traits were not read).
        """
        return placement_translator.HW_PCI_ONE_TIME_USE in (self.traits or ())

    @property
    def waiting(self) -> bool:
        """True for a one-time-use device Nova reserved after its use:
        no consumer, ``reserved`` = ``total``.

        Mirrors ``nova.compute.pci_placement_translator.
        PciResourceProvider._handle_one_time_use``: Nova sets
        ``reserved`` to the total while the device is allocated and never
        resets it, so once its server is gone the device stays reserved
        until someone releases it. Without the inventory, a capacity of 0
        stands for it (Nova leaves the allocation ratio at 1.0).
        """
        if self.used or not self.one_time_use:
            return False
        if self.inventory is not None:
            return self.inventory.total > 0 and (
                self.inventory.reserved == self.inventory.total)
        return self.capacity <= 0

    @property
    def state(self) -> str:
        """IN_USE, TO_CLEAN, RESERVED or FREE."""
        if self.used:
            return IN_USE
        if self.waiting:
            return TO_CLEAN
        return RESERVED if self.capacity <= 0 else FREE

    @property
    def pci_ids(self) -> tuple[str, str] | None:
        """``(vendor id, product id)`` when the class shows them."""
        if self.kind != PCI:
            return None
        return names.pci_ids_from_resource_class(self.resource_class)

    @property
    def holds_vfs(self) -> bool:
        """True when the provider is known to hold the VFs of a PF.

        Nova makes one provider per whole device or PF (total 1) and one
        per PF for all of its VFs (total = the VFs listed): a total above
        1 can only be VFs. One VF listed (total 1) looks like a whole
        device, so False means "not known", not "no VFs". Without the
        inventory, the total is at least the summary's capacity (Nova
        writes allocation ratio 1.0) and at least what is used: either
        above 1 tells VFs.
        """
        if self.kind != PCI:
            return False
        if self.inventory is not None:
            return self.inventory.total > 1
        return max(self.summary_capacity or 0, self.used) > 1


def find_candidates(providers: Sequence[_Json],
                    kinds: Collection[str] = (MDEV,)) -> list[Candidate]:
    """Return the providers that are named like Nova's devices.

    ``providers`` is the ``resource_providers`` list of ``GET
    /resource_providers`` at microversion 1.14 or later (it must carry
    ``root_provider_uuid``). Roots are compute nodes; their name is the
    host. A child qualifies as an mdev device (kind ``mdev``) when its
    name is ``<root name>_<nodedev>``, as a PCI device (kind ``pci``)
    when it is ``<root name>_<PCI ADDRESS>``; ``kinds`` says which are
    wanted.
    """
    by_uuid = {p['uuid']: p for p in providers}
    candidates = []
    for provider in providers:
        root_uuid = provider.get('root_provider_uuid') or provider['uuid']
        if root_uuid == provider['uuid'] or root_uuid not in by_uuid:
            continue
        host = by_uuid[root_uuid]['name']
        nodedev = names.nodedev_from_provider_name(provider['name'], host)
        if nodedev is None:
            address = names.pci_address_from_provider_name(
                provider['name'], host)
            if address is not None and PCI in kinds:
                candidates.append(Candidate(
                    uuid=provider['uuid'], name=provider['name'], host=host,
                    root_uuid=root_uuid,
                    nodedev=provider['name'][len(host) + 1:],
                    pci_address=address,
                    generation=provider.get('generation', 0), kind=PCI))
            continue
        if MDEV not in kinds:
            continue
        candidates.append(Candidate(
            uuid=provider['uuid'], name=provider['name'], host=host,
            root_uuid=root_uuid, nodedev=nodedev,
            pci_address=names.pci_address_from_nodedev(nodedev),
            generation=provider.get('generation', 0)))
    return candidates


def hosts_of(providers: Iterable[_Json]) -> set[str]:
    """Names of the root providers (compute nodes)."""
    return {p['name'] for p in providers
            if (p.get('root_provider_uuid') or p['uuid']) == p['uuid']}


def is_pci_device(traits: Collection[str] | None) -> bool:
    """True for the traits of a provider Nova manages for a PCI device.

    Mirrors ``nova.compute.pci_placement_translator.PlacementView.
    _remove_managed_rps_from_tree_not_in_view``: Nova tells its PCI
    providers by the COMPUTE_MANAGED_PCI_DEVICE trait.
    """
    return names.PCI_DEVICE_TRAIT in (traits or ())


def device_classes(candidate: Candidate, classes: Iterable[str],
                   traits: Collection[str] | None = None) -> list[str]:
    """The classes of ``classes`` that make device rows of ``candidate``.

    An mdev device: its ``VGPU`` and ``CUSTOM_*`` classes. A PCI device:
    every class (Nova gives it one, ``CUSTOM_PCI_<VENDOR>_<PRODUCT>`` or
    the ``resource_class`` of its device spec), unless ``traits`` are
    known and lack COMPUTE_MANAGED_PCI_DEVICE: then it is no device.
    """
    if candidate.kind == PCI:
        if traits is not None and not is_pci_device(traits):
            return []
        return sorted(classes)
    return sorted(rc for rc in classes if names.is_mdev_resource_class(rc))


def build_devices(candidate: Candidate,
                  inventories: Mapping[str, Mapping[str, typing.Any]],
                  generation: int, usages: Mapping[str, int],
                  traits: Collection[str] | None = None) -> list[Device]:
    """Turn one candidate's Placement data into Device rows.

    ``inventories`` and ``usages`` are the dicts of ``GET
    /resource_providers/{uuid}/inventories`` and ``.../usages``. Only the
    classes ``device_classes`` keeps make rows; a candidate with none is
    not a device and gives an empty list.
    """
    devices = []
    for rc in device_classes(candidate, inventories, traits):
        devices.append(Device(
            candidate=candidate, resource_class=rc,
            inventory=Inventory.from_api(inventories[rc]),
            used=usages.get(rc, 0), generation=generation,
            traits=tuple(sorted(traits)) if traits is not None else None))
    return devices


@dataclasses.dataclass(frozen=True)
class Summary:
    """A provider as ``GET /allocation_candidates`` summarizes it.

    ``resources`` is ``{resource class: (capacity, used)}`` for every
    class the provider has inventory of (microversion 1.27 and later);
    ``traits`` its traits (1.17 and later).
    """

    resources: dict[str, tuple[int, int]]
    traits: tuple[str, ...]


def parse_summaries(body: Mapping[str, typing.Any]) -> dict[str, Summary]:
    """``{provider uuid: Summary}`` from an allocation candidates answer.

    From microversion 1.29 the summaries cover every provider of each
    candidate's tree, not only the providers in the candidates; trees
    with no candidate (or cut off by ``[placement]
    max_allocation_candidates``) are absent, and a provider absent here
    must be read on its own.
    """
    return {
        uuid: Summary(
            resources={rc: (res['capacity'], res['used'])
                       for rc, res in summary.get('resources', {}).items()},
            traits=tuple(sorted(summary.get('traits', ()))))
        for uuid, summary in body.get('provider_summaries', {}).items()}


def may_wait(summary: Summary) -> bool:
    """True when a summarized provider may be a one-time-use device
    waiting to be cleaned: its inventory tells (``Device.waiting``).
    Only providers with the HW_PCI_ONE_TIME_USE trait, no consumer and
    no room: a cloud without such devices reads no inventory for it.
    """
    return placement_translator.HW_PCI_ONE_TIME_USE in summary.traits and any(
        capacity <= 0 and not used
        for capacity, used in summary.resources.values())


def has_device_inventory(candidate: Candidate, summary: Summary) -> bool:
    """True when a summarized candidate makes device rows."""
    return bool(device_classes(candidate, summary.resources,
                               summary.traits))


def devices_from_summary(
        candidate: Candidate, summary: Summary,
        inventories: Mapping[str, Mapping[str, typing.Any]] | None = None,
        generation: int | None = None) -> list[Device]:
    """Device rows of one candidate from its provider summary.

    ``Used``, ``Free`` and ``Traits`` come from the summary. The
    summary's capacity is (total - reserved) x allocation ratio, so the
    inventory's own fields (total, reserved, max unit, ratio) need
    ``inventories`` (``GET .../inventories``, with its ``generation``):
    given, its classes make the rows and its capacity the free count.
    Without them the generation is the one of the provider listing.
    A class in the summary but no longer in the inventories (or the
    reverse) was changed in between: the inventories, read later, win.
    """
    traits = summary.traits
    if inventories is None:
        return [Device(candidate=candidate, resource_class=rc,
                       inventory=None, used=summary.resources[rc][1],
                       generation=candidate.generation, traits=traits,
                       summary_capacity=summary.resources[rc][0])
                for rc in device_classes(candidate, summary.resources,
                                         traits)]
    usages = {rc: used for rc, (_, used) in summary.resources.items()}
    assert generation is not None       # read with the inventories
    return build_devices(candidate, inventories, generation, usages, traits)


def usages_from_allocations(
        allocations: Mapping[str, Mapping[str, typing.Any]]
) -> dict[str, int]:
    """Sum ``GET /resource_providers/{uuid}/allocations`` into usages."""
    usages: dict[str, int] = {}
    for alloc in allocations.values():
        for rc, amount in alloc['resources'].items():
            usages[rc] = usages.get(rc, 0) + amount
    return usages


def consumers_of(allocations: Mapping[str, Mapping[str, typing.Any]],
                 resource_class: str) -> list[dict[str, typing.Any]]:
    """Consumers holding ``resource_class`` on a provider, by UUID."""
    return [{'consumer': consumer,
             'resource_class': resource_class,
             'amount': alloc['resources'][resource_class]}
            for consumer, alloc in sorted(allocations.items())
            if alloc['resources'].get(resource_class)]


@dataclasses.dataclass(frozen=True)
class DeviceFilter:
    hosts: tuple[str, ...] = ()
    resource_class: str | None = None
    traits: tuple[str, ...] = ()
    free: bool = False
    full: bool = False
    kinds: tuple[str, ...] = (MDEV,)

    def wants_candidate(self, candidate: Candidate) -> bool:
        return candidate.kind in self.kinds and (
            not self.hosts or candidate.host in self.hosts)

    def wants(self, device: Device) -> bool:
        if not self.wants_candidate(device.candidate):
            return False
        if self.resource_class and device.resource_class != (
                self.resource_class):
            return False
        if self.traits and device.traits is not None and not set(
                self.traits) <= set(device.traits):
            return False
        if self.free and device.free <= 0:
            return False
        if self.full and device.free > 0:
            return False
        return True


#: What selects devices besides their names: their compute node, their
#: resource class.
BY_HOST = 'host'
BY_RESOURCE_CLASS = 'resource_class'


#: How a device that a selector leaves out is worded, by selector.
_OUTSIDE = {BY_HOST: 'is on host %s, not on %s',
            BY_RESOURCE_CLASS: 'has resource class %s, not %s'}


class OutsideSelection(errors.Invalid):
    """A device named (``reference``) that the other selectors leave out:
    by ``selector`` (BY_HOST or BY_RESOURCE_CLASS, the parameter that
    gives it) it is ``value``, not one of ``wanted``.
    """

    def __init__(self, reference: str, selector: str, value: str,
                 wanted: tuple[str, ...]) -> None:
        super().__init__(
            "The selection contradicts itself: device '%s' %s given with "
            '%s; drop the option or the name.'
            % (reference, _OUTSIDE[selector] % (value, ', '.join(wanted)),
               errors.given(selector)),
            parameter=selector, reference=reference, value=value,
            wanted=wanted)
        self.reference = reference
        self.selector = selector
        self.value = value
        self.wanted = wanted


def outside_selection(reference: str, device: Candidate | Device,
                      hosts: Collection[str] = (),
                      resource_class: str | None = None
                      ) -> OutsideSelection | None:
    """Why a named device is not among the devices of ``hosts`` and of
    ``resource_class``, or None when it is (``device`` is a Candidate or
    a Device). Selectors narrow one another: a named device must match
    them too.
    """
    host = device.host
    if hosts and host not in hosts:
        return OutsideSelection(reference, BY_HOST, host, tuple(hosts))
    rc = getattr(device, 'resource_class', None)
    if resource_class and rc is not None and rc != resource_class:
        return OutsideSelection(reference, BY_RESOURCE_CLASS, rc,
                                (resource_class,))
    return None


def sort_key(device: Device) -> tuple[str, str, str]:
    return (device.host, device.device, device.resource_class)


def resolve_device(reference: str,
                   candidates: Sequence[Candidate]) -> Candidate:
    """Find the one candidate an operator's ``reference`` names.

    Accepted forms: provider UUID, provider name, ``HOST:PCI_ADDRESS`` or
    ``HOST:NODEDEV`` (``compute1:0000:84:00.0``, ``compute1:mtty_mtty``),
    and a bare PCI address or node device name when only one host has it.
    Raises DeviceLookupError (no match, or several) or ValueError
    (malformed address).
    """
    ref = reference.strip()
    for candidate in candidates:
        if ref in (candidate.uuid, candidate.name):
            return candidate

    matches: list[Candidate] = []
    host, sep, device = ref.partition(':')
    hosts = {c.host for c in candidates}
    if sep and host not in hosts and _HEX_ADDRESS_RE.match(ref):
        # A bare PCI address, well formed or not.
        names.normalize_pci_address(ref)
    if sep and device and not names.looks_like_pci_address(ref):
        # HOST:ADDRESS or HOST:NODEDEV (host names never contain ':').
        wanted = _device_key(device)
        matches = [c for c in candidates
                   if c.host == host and _candidate_key(c) == wanted]
        if not matches:
            where = ('host %s has no mdev device %s' % (host, device)
                     if host in hosts else
                     'no host named %s has mdev devices' % host)
            raise DeviceLookupError(
                "No mdev device matches '%s': %s; run 'openstack mdev "
                "provider list' to see the devices." % (reference, where))
    else:
        wanted = _device_key(ref)
        matches = [c for c in candidates if _candidate_key(c) == wanted]

    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise DeviceLookupError(
            "No mdev device matches '%s'; name it by provider UUID, provider "
            "name or HOST:PCI_ADDRESS, as 'openstack mdev provider list' "
            "shows them." % reference)
    raise DeviceLookupError(
        "'%s' matches %d devices (%s); name one as HOST:%s."
        % (reference, len(matches),
           ', '.join(sorted('%s:%s' % (c.host, c.device) for c in matches)),
           'PCI_ADDRESS' if matches[0].pci_address else 'DEVICE'))


def _device_key(text: str) -> str:
    if names.looks_like_pci_address(text):
        return names.normalize_pci_address(text)
    if text.lower().startswith('pci_'):
        address = names.pci_address_from_nodedev(text)
        if address is None:
            raise ValueError(
                "'%s' is not a libvirt PCI device name: write it as "
                "pci_DDDD_BB_SS_F or as a PCI address such as 0000:84:00.0"
                % text)
        return address
    if ':' in text:
        # Node device names have no ':'; this is meant as an address.
        names.normalize_pci_address(text)
    return text


def _candidate_key(candidate: Candidate) -> str:
    return candidate.pci_address or candidate.nodedev
