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

"""What nova-compute reports to Placement of the PCI devices its device
specs match, with ``[pci] report_in_placement``.

Mirrors nova/compute/pci_placement_translator.py: the resource class and
traits of a device (and of an alias, which the scheduler asks the same
way), one provider ``<node>_<ADDRESS>`` per PCI or physical function
with the virtual functions of a physical function sharing their parent's
(``PlacementView``), and the rules nova-compute stops at.
"""

from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import re
import typing

import os_resource_classes
import os_traits

from osc_mdev.nova import names
from osc_mdev.nova.pci import devspec

COMPUTE_MANAGED_PCI_DEVICE = 'COMPUTE_MANAGED_PCI_DEVICE'
HW_PCI_LIVE_MIGRATABLE = 'HW_PCI_LIVE_MIGRATABLE'
HW_PCI_ONE_TIME_USE = 'HW_PCI_ONE_TIME_USE'
#: ``PARENT_TYPES``: the devices that are a provider of their own.
PARENT_TYPES = (devspec.TYPE_PCI, devspec.TYPE_PF)
#: Where nova-compute stops: (Nova's exception, what is wrong).
Problem = tuple[str, str]


def normalize_resource_class(name: str) -> str:
    """Mirrors ``_normalize_resource_class``: upper case; a name that is
    neither a standard class nor ``CUSTOM_...`` becomes
    os-resource-classes' ``normalize_name`` of it (``a16-16a`` ->
    ``CUSTOM_A16_16A``).
    """
    rc = name.upper()
    if (rc not in os_resource_classes.STANDARDS
            and not os_resource_classes.is_custom(rc)):
        rc = os_resource_classes.normalize_name(rc)
    return rc


def pci_resource_class(requested: str | None, vendor_id: str | None,
                       product_id: str | None) -> str:
    """Mirrors ``get_resource_class``: the normalized ``resource_class``
    when one is given, else ``CUSTOM_PCI_<VENDOR>_<PRODUCT>``.
    """
    if requested:
        return normalize_resource_class(requested)
    return ('CUSTOM_PCI_%s_%s' % (vendor_id, product_id)).upper()


def normalize_traits(names_: Iterable[str]) -> list[str]:
    """Mirrors ``_normalize_traits``: standard traits as written (a
    lower-case standard name is not standard: it becomes
    ``CUSTOM_<NAME>``), any other name upper-cased and normalized by
    os-traits (``" big"`` -> ``CUSTOM__BIG``, ``""`` -> ``CUSTOM_``).
    """
    standard, rest = os_traits.check_traits(list(names_))
    custom = []
    for name in rest:
        name = name.upper()
        custom.append(name if os_traits.is_custom(name)
                      else os_traits.normalize_name(name))
    return list(standard) + custom


def pci_traits(text: str | None) -> set[str]:
    """Mirrors ``get_traits``: the set of normalized traits of a
    comma-separated string.
    """
    if not text:
        return set()
    return set(normalize_traits(text.split(',')))


def device_traits(tags: Mapping[str, typing.Any]) -> set[str]:
    """Mirrors ``_get_traits_for_dev``: the spec's ``traits`` plus
    COMPUTE_MANAGED_PCI_DEVICE, and HW_PCI_LIVE_MIGRATABLE when
    ``live_migratable`` is true.
    """
    traits = pci_traits(tags.get('traits', '')) | {
        COMPUTE_MANAGED_PCI_DEVICE}
    if devspec.bool_from_string(tags.get('live_migratable', 'false')):
        traits.add(HW_PCI_LIVE_MIGRATABLE)
    return traits


def device_resource_class(spec: devspec.DeviceSpec,
                          device: devspec.PciDevice) -> str:
    """Mirrors ``_get_rc_for_dev``: the class of a device the spec
    matches.
    """
    return pci_resource_class(spec.tags.get('resource_class'),
                              device.vendor_id, device.product_id)


def spec_resource_class(spec: devspec.DeviceSpec) -> str | None:
    """The class of every device of a spec (``get_resource_class`` of its
    ``resource_class``, or of its ids), None when it depends on each
    device's vendor and product.
    """
    requested = spec.tags.get('resource_class')
    if requested:
        return pci_resource_class(requested, None, None)
    if devspec.ANY in (spec.vendor_id, spec.product_id):
        return None
    return pci_resource_class(None, spec.vendor_id, spec.product_id)


def in_placement(spec: devspec.DeviceSpec) -> bool:
    """Whether Nova reports the devices of a spec to Placement: as
    ``PlacementView._add_dev``, not those of a spec with a
    ``physical_network`` (Neutron's SR-IOV).
    """
    return not spec.tags.get('physical_network')


def placement_name_problem(name: str, kind: str) -> str | None:
    """Why Placement refuses a class or trait name Nova made, or None.

    Placement takes standard names and ``^CUSTOM_[A-Z0-9_]+$`` of at most
    255 characters.
    """
    if len(name) > names.MAX_NAME_LENGTH:
        return '%s %s... is %d characters long, more than the %d Placement ' \
            'accepts' % (kind, name[:40], len(name), names.MAX_NAME_LENGTH)
    if name.startswith('CUSTOM_') and not re.match(
            r'^CUSTOM_[A-Z0-9_]+$', name):
        return "%s '%s' has nothing after CUSTOM_, which Placement " \
            'refuses' % (kind, name)
    return None


@dataclasses.dataclass
class PciProvider:
    """The provider Nova makes for a PF/PCI function and its VFs
    (``PciResourceProvider``).
    """

    name: str
    parent: devspec.PciDevice | None = None
    children: list[devspec.PciDevice] = dataclasses.field(
        default_factory=list)
    resource_class: str | None = None
    traits: set[str] | None = None

    @property
    def devices(self) -> list[devspec.PciDevice]:
        return [self.parent] if self.parent else self.children


def _addresses(devices: Iterable[devspec.PciDevice]) -> str:
    return ','.join(d.address for d in devices)


def _dependent(device: devspec.PciDevice, listed: str) -> Problem:
    return ('PlacementPciDependentDeviceException', (
        'both %s and %s are listed, but either the physical function or '
        'its virtual functions can be given to servers'
        % (device.address, listed)))


def parent_traits(tags: Mapping[str, typing.Any]) -> set[str]:
    """Mirrors the traits ``PciResourceProvider.add_parent`` gives the
    provider of a PCI or physical function: ``device_traits``, and
    HW_PCI_ONE_TIME_USE when ``one_time_use`` is true. Only those
    functions may set ``one_time_use`` (``add_child``), so these are
    the traits of every device a spec matches.
    """
    traits = device_traits(tags)
    if devspec.bool_from_string(tags.get('one_time_use', 'false')):
        traits.add(HW_PCI_ONE_TIME_USE)
    return traits


def add_parent(rp: PciProvider, device: devspec.PciDevice,
               tags: Mapping[str, typing.Any], rc: str) -> Problem | None:
    """Mirrors ``PciResourceProvider.add_parent``: a PCI or physical
    function is the provider's only device, with ``parent_traits``.
    """
    if rp.parent or rp.children:
        return _dependent(device, _addresses(rp.devices))
    rp.parent, rp.resource_class, rp.traits = device, rc, parent_traits(tags)
    return None


def add_child(rp: PciProvider, device: devspec.PciDevice,
              tags: Mapping[str, typing.Any], rc: str) -> Problem | None:
    """Mirrors ``PciResourceProvider.add_child``: the virtual functions
    of one physical function share one class and one set of traits, and
    none is one_time_use.
    """
    if rp.parent:
        return _dependent(device, rp.parent.address)
    traits = device_traits(tags)
    if rp.resource_class and rc != rp.resource_class:
        return ('PlacementPciMixedResourceClassException', (
            'virtual functions of %s get different resource classes: '
            '%s for %s and %s for %s' % (
                device.parent_addr, rc, device.address, rp.resource_class,
                _addresses(rp.children))))
    if rp.traits is not None and rp.traits != traits:
        return ('PlacementPciMixedTraitsException', (
            'virtual functions of %s get different traits: %s for %s '
            'and %s for %s' % (
                device.parent_addr, ','.join(sorted(traits)),
                device.address, ','.join(sorted(rp.traits)),
                _addresses(rp.children))))
    if 'one_time_use' in tags:
        return ('PlacementPciException', (
            'one_time_use is set for virtual function %s; only PCI and '
            'physical functions may set it' % device.address))
    rp.children.append(device)
    rp.resource_class, rp.traits = rc, traits
    return None


def provider_name(root_name: str, device: devspec.PciDevice) -> str:
    """Mirrors ``PlacementView._get_rp_name_for_address`` (and
    ``_get_rp_name_for_child``): ``<root>_<ADDRESS>`` of the device, or
    of its physical function for a virtual function.
    """
    if device.dev_type in PARENT_TYPES:
        return '%s_%s' % (root_name, device.address.upper())
    return '%s_%s' % (root_name, (device.parent_addr or '').upper())


def pci_providers(root_name: str, devices: Iterable[devspec.PciDevice],
                  specs: Sequence[devspec.DeviceSpec],
                  physical_functions: Collection[str] = ()
                  ) -> tuple[dict[str, PciProvider], list[Problem]]:
    """Mirrors ``PlacementView`` (``process_dev``, ``_add_dev``): each
    device a spec matches (``devspec.device_spec_for``) goes to its
    provider (``provider_name``, ``add_parent``, ``add_child``).

    Returns ``(providers, problems)``: ``problems`` are the
    ``(Nova exception, message)`` pairs where nova-compute stops:
    PlacementPciDependentDeviceException (a PF and its VFs both listed),
    PlacementPciMixedResourceClassException and
    PlacementPciMixedTraitsException (VFs of one PF differing), and
    PlacementPciException (one_time_use on a VF). Nova stops at the
    first; this goes on.
    """
    providers: dict[str, PciProvider] = {}
    problems = []
    for device in devices:
        spec = devspec.device_spec_for(specs, device, physical_functions)
        if spec is None or not in_placement(spec):
            continue
        name = provider_name(root_name, device)
        rp = providers.setdefault(name, PciProvider(name))
        add = add_parent if device.dev_type in PARENT_TYPES else add_child
        problem = add(rp, device, spec.tags,
                      device_resource_class(spec, device))
        if problem is not None:
            problems.append(problem)
    return providers, problems


def specs_with_devname(specs: Iterable[devspec.DeviceSpec]
                       ) -> list[devspec.DeviceSpec]:
    """Mirrors ``ensure_no_dev_spec_with_devname``: with ``[pci]
    report_in_placement`` on, nova-compute refuses to start
    (PlacementPciException) while any device spec names a ``devname``,
    whether it has a ``physical_network`` or not. The specs that do.
    """
    return [spec for spec in specs if spec.conf.get('devname')]


def tracking_disabled_after_enabled(
        report_in_placement: bool,
        provider_traits: Iterable[Collection[str]]) -> bool:
    """Mirrors ``ensure_tracking_was_not_enabled_before``: with ``[pci]
    report_in_placement`` off, a node whose providers (``provider_traits``:
    the traits of each provider of its tree) include one with
    COMPUTE_MANAGED_PCI_DEVICE had it on before, and nova-compute refuses
    to start (PlacementPciException): it cannot be turned off again.
    """
    if report_in_placement:
        return False
    return any(COMPUTE_MANAGED_PCI_DEVICE in traits
               for traits in provider_traits)
