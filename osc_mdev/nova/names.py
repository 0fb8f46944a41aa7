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

"""Names used by Nova and Placement for mediated devices.

Pure functions: no network, no OpenStack client imports.
"""

import re
import uuid

# libvirt names a PCI node device ``pci_DDDD_BB_SS_F``.
_PCI_NODEDEV_RE = re.compile(
    r'^pci_([0-9a-f]{4})_([0-9a-f]{2})_([0-9a-f]{2})_([0-7])$', re.IGNORECASE)
# A PCI address as operators write it: ``0000:84:00.0`` or ``84:00.0``.
_PCI_ADDRESS_RE = re.compile(
    r'^(?:([0-9a-f]{4}):)?([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$',
    re.IGNORECASE)
# What is left of a child provider's name once ``<root name>_`` is removed
# must be a libvirt node device name: PCI-in-Placement providers
# (``host_0000:81:00.0``) and Neutron agents (``host:Open vSwitch agent``)
# never match it.
_NODEDEV_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]*$')

# Nova names the provider of a PCI-in-Placement device
# ``<root name>_<PCI ADDRESS upper-cased>``: a whole device or a physical
# function, or ONE provider for all the listed virtual functions of a PF.
_PCI_PROVIDER_ADDRESS_RE = re.compile(
    r'^[0-9A-F]{4}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]$')
# Nova's default class of a PCI-in-Placement device.
_PCI_CLASS_RE = re.compile(r'^CUSTOM_PCI_([0-9A-F]{4})_([0-9A-F]{4})$')
# The trait Nova puts on every provider it manages for a PCI device.
PCI_DEVICE_TRAIT = 'COMPUTE_MANAGED_PCI_DEVICE'

_CUSTOM_NAME_RE = re.compile(r'^CUSTOM_[A-Z0-9_]+$')
_STANDARD_TRAIT_RE = re.compile(r'^[A-Z][A-Z0-9_]*$')
MAX_NAME_LENGTH = 255

VGPU = 'VGPU'
CUSTOM_NAME_RULE = ('CUSTOM_ followed by upper-case letters, digits and _, '
                    'at most %d characters' % MAX_NAME_LENGTH)


def nodedev_from_provider_name(provider_name: str,
                               root_name: str) -> str | None:
    """Return the libvirt node device part of a Nova mdev provider name.

    Nova names the provider of a parent device ``<root name>_<nodedev>``.
    Host names may contain ``_`` and ``.``, so the split is on the root
    provider's name, never on the first ``_``. Returns None when the name
    is not of that form.
    """
    prefix = root_name + '_'
    if not provider_name.startswith(prefix):
        return None
    nodedev = provider_name[len(prefix):]
    return nodedev if is_nodedev_name(nodedev) else None


def pci_address_from_provider_name(provider_name: str,
                                   root_name: str) -> str | None:
    """Return the PCI address a PCI-in-Placement provider is named after.

    Mirrors ``nova.compute.pci_placement_translator.PlacementView.
    _get_rp_name_for_address``: ``<root name>_<address.upper()>``
    (``gpu5_0000:AF:00.0`` -> ``0000:af:00.0``, lower-cased as libvirt
    writes addresses). Returns None for other names, mdev devices
    (``gpu5_pci_0000_af_00_0``) included.
    """
    prefix = root_name + '_'
    if not provider_name.startswith(prefix):
        return None
    address = provider_name[len(prefix):]
    if not _PCI_PROVIDER_ADDRESS_RE.match(address):
        return None
    return address.lower()


def pci_ids_from_resource_class(
        resource_class: str) -> tuple[str, str] | None:
    """``(vendor id, product id)`` of Nova's default PCI class, else None.

    Mirrors ``nova.compute.pci_placement_translator.get_resource_class``
    with no requested class: ``CUSTOM_PCI_<VENDOR>_<PRODUCT>`` upper-cased
    (``CUSTOM_PCI_10DE_1EB8`` -> ``('10de', '1eb8')``, lower-cased as
    ``lspci -n`` writes them). A class set with ``resource_class`` in
    ``[pci] device_spec`` tells neither.
    """
    match = _PCI_CLASS_RE.match(resource_class)
    if not match:
        return None
    return match.group(1).lower(), match.group(2).lower()


def is_nodedev_name(text: str) -> bool:
    """True for names libvirt gives node devices (``mtty_mtty``)."""
    return bool(_NODEDEV_RE.match(text))


def pci_address_from_nodedev(nodedev: str) -> str | None:
    """``pci_0000_84_00_0`` -> ``0000:84:00.0``; None for other devices."""
    match = _PCI_NODEDEV_RE.match(nodedev)
    if not match:
        return None
    domain, bus, slot, function = match.groups()
    return ('%s:%s:%s.%s' % (domain, bus, slot, function)).lower()


def normalize_pci_address(text: str) -> str:
    """Return the canonical ``dddd:bb:ss.f`` form of a PCI address.

    Accepts upper or lower case and a missing domain (``84:00.0``).
    Raises ValueError with the expected form when ``text`` is not one.
    """
    match = _PCI_ADDRESS_RE.match(text.strip())
    if not match:
        raise ValueError(
            "'%s' is not a PCI address: write it as DOMAIN:BUS:SLOT.FUNCTION "
            "in hexadecimal, e.g. 0000:84:00.0" % text)
    domain, bus, slot, function = match.groups()
    return ('%s:%s:%s.%s' % (domain or '0000', bus, slot, function)).lower()


def looks_like_pci_address(text: str) -> bool:
    return bool(_PCI_ADDRESS_RE.match(text.strip()))


def is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def canonical_uuid(text: str) -> str:
    """The lower-case, dashed form Nova and Placement store a UUID in
    (``B103...`` or ``{b103...}`` -> ``b103...``).
    """
    return str(uuid.UUID(text))


def is_mdev_resource_class(name: str) -> bool:
    """True for the classes Nova reports mdev inventories with."""
    return name == VGPU or bool(_CUSTOM_NAME_RE.match(name))


def validate_mdev_resource_class(name: str) -> str:
    """Return ``name`` if it can be an mdev resource class, else raise.

    Nova accepts ``VGPU`` or ``CUSTOM_<NAME>`` in ``[mdev_<type>]
    mdev_class``; anything else can never be an mdev inventory.
    """
    if len(name) <= MAX_NAME_LENGTH and is_mdev_resource_class(name):
        return name
    raise ValueError(
        "'%s' is not an mdev resource class: use VGPU or %s"
        % (name, CUSTOM_NAME_RULE))


def is_custom_name(name: str) -> bool:
    """True for a custom trait or class name Placement accepts."""
    return len(name) <= MAX_NAME_LENGTH and bool(_CUSTOM_NAME_RE.match(name))


def validate_trait_name(name: str) -> str:
    """Return ``name`` if it is a well-formed trait name, else raise.

    Custom traits follow Placement's ``^CUSTOM_[A-Z0-9_]+$``; standard
    traits (``OWNER_NOVA``, ``COMPUTE_...``) are upper case too. Whether
    a standard trait exists is Placement's to say.
    """
    if len(name) > MAX_NAME_LENGTH or not _STANDARD_TRAIT_RE.match(name):
        raise ValueError(
            "'%s' is not a valid trait name: use a standard trait such as "
            "OWNER_NOVA or %s" % (name, CUSTOM_NAME_RULE))
    if name.startswith('CUSTOM') and not _CUSTOM_NAME_RE.match(name):
        raise ValueError(
            "'%s' is not a valid custom trait name: use %s"
            % (name, CUSTOM_NAME_RULE))
    return name
