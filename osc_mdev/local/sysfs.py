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

"""A compute node's sysfs, read as libvirt and Nova see it.

The mdev parents under ``ROOT/class/mdev_bus`` with the types they offer,
the PCI functions under ``ROOT/bus/pci/devices`` (ids, PF or VF) and the
virtual parents under ``ROOT/devices/virtual``, handed to
``osc_mdev.domain`` (``configcheck``, ``novaconf``, ``pci``) as data.
ROOT is ``/sys`` on a compute node, or a copy of it.
"""

from collections.abc import Callable
from collections.abc import Iterable
import os
import re

from osc_mdev.domain import configcheck
from osc_mdev.domain import novaconf
from osc_mdev.domain import pci_devspec


def sysfs_virtual_parent(root: str) -> Callable[[str], bool]:
    """A ``virtual_parent_exists`` for ``novaconf.validate_device_address``
    that looks under ROOT like Nova looks under /sys.
    """
    def exists(address: str) -> bool:
        return os.path.exists(os.path.join(
            root, 'devices', 'virtual', address.replace('_', '/')))
    return exists


def read_sysfs(root: str) -> dict[str, configcheck.SysfsDevice] | None:
    """``{address: configcheck.SysfsDevice}`` of ``ROOT/class/mdev_bus``
    (the mdev parents) and of the PCI functions they are linked with.
    """
    bus = os.path.join(root, 'class', 'mdev_bus')
    found = {}
    try:
        entries = sorted(os.listdir(bus))
    except OSError:
        return None
    for entry in entries:
        path = os.path.join(bus, entry)
        address = entry
        real = os.path.realpath(path)
        virtual = os.path.join(os.path.realpath(root), 'devices', 'virtual')
        if not novaconf.matches_libvirt(entry) and real.startswith(
                virtual + os.sep):
            # libvirt names a virtual parent after its sysfs path:
            # devices/virtual/mtty/mtty is mtty_mtty.
            address = os.path.relpath(real, virtual).replace(os.sep, '_')
        found[address] = _sysfs_device(address, path)
    return found


def _sysfs_device(address: str, path: str) -> configcheck.SysfsDevice:
    types: dict[str, int | None] = {}
    types_dir = os.path.join(path, 'mdev_supported_types')
    if os.path.isdir(types_dir):
        for mdev_type in sorted(os.listdir(types_dir)):
            types[mdev_type] = _read_int(os.path.join(
                types_dir, mdev_type, 'available_instances'))
    physfn = _link_name(os.path.join(path, 'physfn'))
    links = [_link_name(os.path.join(path, name)) for name in _listdir(path)
             if re.match(r'^virtfn\d+$', name)]
    # A link listed here is None only when it vanished since.
    virtfns = tuple(sorted(link for link in links if link is not None))
    return configcheck.SysfsDevice(address, types, physfn, virtfns)


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _read_int(path: str) -> int | None:
    try:
        with open(path) as value:
            return int(value.read().strip())
    except (OSError, ValueError):
        return None


def _link_name(path: str) -> str | None:
    if not os.path.islink(path) and not os.path.exists(path):
        return None
    return os.path.basename(os.path.realpath(path))


def pci_functions(root: str, addresses: Iterable[str]
                  ) -> dict[str, configcheck.SysfsDevice]:
    """``{address: configcheck.SysfsDevice}`` for PCI functions under
    ``ROOT/bus/pci/devices`` (to see PFs that are not mdev parents).
    """
    found = {}
    for address in addresses:
        path = os.path.join(root, 'bus', 'pci', 'devices', address)
        if os.path.exists(path):
            found[address] = _sysfs_device(address, path)
    return found


def read_pci_devices(root: str) -> list[pci_devspec.PciDevice]:
    """The PCI functions under ``ROOT/bus/pci/devices`` as libvirt reports
    them to Nova: ids, and type-VF (``physfn`` link) / type-PF
    (``virtfn*`` links or ``sriov_totalvfs`` > 0) / type-PCI.
    """
    base = os.path.join(root, 'bus', 'pci', 'devices')
    devices = []
    for address in sorted(_listdir(base)):
        path = os.path.join(base, address)
        vendor = _read_id(os.path.join(path, 'vendor'))
        product = _read_id(os.path.join(path, 'device'))
        physfn = _link_name(os.path.join(path, 'physfn'))
        if physfn:
            dev_type = pci_devspec.TYPE_VF
        elif any(re.match(r'^virtfn\d+$', n) for n in _listdir(path)) or \
                (_read_int(os.path.join(path, 'sriov_totalvfs')) or 0) > 0:
            dev_type = pci_devspec.TYPE_PF
        else:
            dev_type = pci_devspec.TYPE_PCI
        devices.append(pci_devspec.PciDevice(address, vendor, product,
                                             dev_type, physfn))
    return devices


def _read_id(path: str) -> str:
    try:
        with open(path) as value:
            text = value.read().strip().lower()
    except OSError:
        return ''
    return text[2:] if text.startswith('0x') else text
