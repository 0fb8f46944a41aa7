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

"""A compute node's sysfs, read once into ``host.gpus.Host``.

``read_host`` reads the PCI functions under ``ROOT/bus/pci/devices``
(ids, class, driver, ``physfn``/``virtfnN`` links, the ``sriov_*`` files
and a VF's ``nvidia/current_vgpu_type`` and
``nvidia/creatable_vgpu_types``), the mdev parents under
``ROOT/class/mdev_bus`` (PCI functions, or virtual parents under
``ROOT/devices/virtual``) with their ``mdev_supported_types``, and the
mdevs under ``ROOT/bus/mdev/devices``. ROOT is ``/sys`` on a compute
node, or a copy of it. What a file says is ``host.gpus``' to judge.
"""

from collections.abc import Callable
import dataclasses
import os
import re

from osc_mdev.host import gpus as host_gpus
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver


def sysfs_virtual_parent(root: str) -> Callable[[str], bool]:
    """A ``virtual_parent_exists`` for
    ``libvirt_driver.validate_device_address`` that looks under ROOT
    like Nova looks under /sys.
    """
    def exists(address: str) -> bool:
        return os.path.exists(os.path.join(
            root, 'devices', 'virtual', address.replace('_', '/')))
    return exists


def read_host(root: str) -> host_gpus.Host:
    """The devices and mdevs of the node whose sysfs is under ROOT."""
    devices: dict[str, host_gpus.Device] = {}
    base = os.path.join(root, 'bus', 'pci', 'devices')
    for address in sorted(_listdir(base)):
        devices[address] = _device(address, os.path.join(base, address),
                                   pci_function=True)
    bus = os.path.join(root, 'class', 'mdev_bus')
    has_bus = os.path.isdir(bus)
    for entry in sorted(_listdir(bus)):
        path = os.path.join(bus, entry)
        address = _parent_address(root, entry, os.path.realpath(path))
        known = devices.get(address)
        devices[address] = (
            dataclasses.replace(known, mdev_parent=True)
            if known is not None else
            _device(address, path, mdev_parent=True))
    return host_gpus.Host(devices, has_bus, _mdevs(root), root)


def _parent_address(root: str, entry: str, real: str) -> str:
    """The address of an mdev parent at ``real``: its PCI address, or
    for a virtual parent the name libvirt gives it after its sysfs path
    (``devices/virtual/mtty/mtty`` is ``mtty_mtty``).
    """
    virtual = os.path.join(os.path.realpath(root), 'devices', 'virtual')
    if not libvirt_driver.matches_libvirt(entry) and real.startswith(
            virtual + os.sep):
        return os.path.relpath(real, virtual).replace(os.sep, '_')
    return entry


def _device(address: str, path: str, pci_function: bool = False,
            mdev_parent: bool = False) -> host_gpus.Device:
    """One device's files, at ``path``."""
    def number(name: str) -> int | None:
        return _read_int(os.path.join(path, name))
    return host_gpus.Device(
        address, _mdev_types(path), mdev_parent, pci_function,
        vendor_id=_read_id(os.path.join(path, 'vendor')),
        product_id=_read_id(os.path.join(path, 'device')),
        pci_class=_read_id(os.path.join(path, 'class')),
        driver=_link_name(os.path.join(path, 'driver')),
        physfn=_link_name(os.path.join(path, 'physfn')),
        virtfns=_virtfns(path),
        sriov_numvfs=number('sriov_numvfs'),
        sriov_totalvfs=number('sriov_totalvfs'),
        sriov_offset=number('sriov_offset'),
        sriov_stride=number('sriov_stride'),
        vgpu=_vgpu(os.path.join(path, 'nvidia')))


def _mdev_types(path: str) -> dict[str, host_gpus.SupportedType]:
    types_dir = os.path.join(path, 'mdev_supported_types')
    found = {}
    for name in sorted(_listdir(types_dir)):
        type_dir = os.path.join(types_dir, name)
        found[name] = host_gpus.SupportedType(
            name, _read_int(os.path.join(type_dir, 'available_instances')),
            _read_text(os.path.join(type_dir, 'name')),
            _read_text(os.path.join(type_dir, 'device_api')),
            _read_text(os.path.join(type_dir, 'description')))
    return found


def _virtfns(path: str) -> tuple[str, ...]:
    """The ``virtfnN`` links of a physical function, in N's order."""
    links = []
    for name in _listdir(path):
        match = re.match(r'^virtfn(\d+)$', name)
        if match:
            target = _link_name(os.path.join(path, name))
            # A link listed here is None only when it vanished since.
            if target is not None:
                links.append((int(match.group(1)), target))
    return tuple(target for _, target in sorted(links))


def _vgpu(path: str) -> host_gpus.VfVgpu | None:
    """A VF's ``nvidia/`` directory, None when it has none."""
    if not os.path.isdir(path):
        return None
    creatable = _read_text(os.path.join(path, 'creatable_vgpu_types'))
    return host_gpus.VfVgpu(
        _read_int(os.path.join(path, 'current_vgpu_type')),
        host_gpus.parse_creatable_vgpu_types(creatable or ''))


def _mdevs(root: str) -> tuple[host_gpus.Mdev, ...]:
    """The mdevs of ``ROOT/bus/mdev/devices``: each a link into its
    parent's directory, with ``mdev_type`` a link to
    ``../mdev_supported_types/<type>``.
    """
    base = os.path.join(root, 'bus', 'mdev', 'devices')
    found = []
    for uuid in sorted(_listdir(base)):
        path = os.path.join(base, uuid)
        real = os.path.realpath(path)
        parent = os.path.dirname(real)
        found.append(host_gpus.Mdev(
            uuid, _parent_address(root, os.path.basename(parent), parent),
            _link_name(os.path.join(path, 'mdev_type'))))
    return tuple(found)


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _read_text(path: str) -> str | None:
    try:
        with open(path) as value:
            return value.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _read_int(path: str) -> int | None:
    text = _read_text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _read_id(path: str) -> str:
    """A hex id file (``0x10de``) as ``10de``; '' when absent."""
    text = (_read_text(path) or '').lower()
    return text[2:] if text.startswith('0x') else text


def _link_name(path: str) -> str | None:
    if not os.path.islink(path) and not os.path.exists(path):
        return None
    return os.path.basename(os.path.realpath(path))
