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

``read_host`` reads (through ``local.snapshot``, the one reader of a
node's raw files) and ``host_of`` interprets a snapshot's sysfs part:
the PCI functions under ``ROOT/bus/pci/devices``
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
import typing

from osc_mdev.host import gpus as host_gpus
from osc_mdev.local import snapshot
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver


Raw = typing.Mapping[str, typing.Any]


def sysfs_virtual_parent(root: str) -> Callable[[str], bool]:
    """A ``virtual_parent_exists`` for
    ``libvirt_driver.validate_device_address`` that looks under ROOT
    like Nova looks under /sys.
    """
    def exists(address: str) -> bool:
        return os.path.exists(os.path.join(
            root, 'devices', 'virtual', address.replace('_', '/')))
    return exists


def virtual_parent_in(raw: Raw) -> Callable[[str], bool]:
    """``sysfs_virtual_parent`` for a snapshot's sysfs part: the
    virtual devices (``devices/virtual/<class>/<name>``) it lists.
    """
    listed = set(raw.get('virtual_devices') or ())

    def exists(address: str) -> bool:
        return address.replace('_', '/') in listed
    return exists


def read_host(root: str) -> host_gpus.Host:
    """The devices and mdevs of the node whose sysfs is under ROOT."""
    return host_of(snapshot.take_sysfs(root))


def host_of(raw: Raw) -> host_gpus.Host:
    """The devices and mdevs of a snapshot's sysfs part
    (``snapshot.take_sysfs``).
    """
    devices: dict[str, host_gpus.Device] = {
        address: _device(address, found, pci_function=True)
        for address, found in sorted(raw['pci_devices'].items())}
    bus = raw.get('mdev_bus')
    for entry, found in sorted((bus or {}).items()):
        address = _parent_address(entry, found['path'])
        known = devices.get(address)
        devices[address] = (
            dataclasses.replace(known, mdev_parent=True)
            if known is not None else
            _device(address, found.get('device') or {}, mdev_parent=True))
    mdevs = tuple(
        host_gpus.Mdev(uuid, _parent_address(
            os.path.basename(found['parent']), found['parent']),
            found.get('mdev_type'))
        for uuid, found in sorted(raw['mdevs'].items()))
    return host_gpus.Host(devices, bus is not None, mdevs, raw['root'])


def _parent_address(entry: str, real: str) -> str:
    """The address of an mdev parent at ``real`` (relative to the sysfs
    root): its PCI address, or for a virtual parent the name libvirt
    gives it after its sysfs path (``devices/virtual/mtty/mtty`` is
    ``mtty_mtty``).
    """
    virtual = os.path.join('devices', 'virtual')
    if not libvirt_driver.matches_libvirt(entry) and real.startswith(
            virtual + os.sep):
        return os.path.relpath(real, virtual).replace(os.sep, '_')
    return entry


def _device(address: str, raw: Raw, pci_function: bool = False,
            mdev_parent: bool = False) -> host_gpus.Device:
    """One device, from its files as a snapshot keeps them."""
    files = raw.get('files') or {}
    links = raw.get('links') or {}

    def number(name: str) -> int | None:
        return _int(files.get(name))
    return host_gpus.Device(
        address, _mdev_types(raw.get('mdev_supported_types') or {}),
        mdev_parent, pci_function,
        vendor_id=_id(files.get('vendor')),
        product_id=_id(files.get('device')),
        pci_class=_id(files.get('class')),
        driver=links.get('driver'),
        physfn=links.get('physfn'),
        virtfns=_virtfns(links),
        sriov_numvfs=number('sriov_numvfs'),
        sriov_totalvfs=number('sriov_totalvfs'),
        sriov_offset=number('sriov_offset'),
        sriov_stride=number('sriov_stride'),
        vgpu=_vgpu(raw.get('nvidia')))


def _mdev_types(raw: Raw) -> dict[str, host_gpus.SupportedType]:
    return {name: host_gpus.SupportedType(
        name, _int(files.get('available_instances')), _text(files, 'name'),
        _text(files, 'device_api'), _text(files, 'description'))
        for name, files in sorted(raw.items())}


def _virtfns(links: Raw) -> tuple[str, ...]:
    """The ``virtfnN`` links of a physical function, in N's order."""
    found = sorted((int(name[len('virtfn'):]), target)
                   for name, target in links.items()
                   if name.startswith('virtfn'))
    return tuple(target for _, target in found)


def _vgpu(raw: Raw | None) -> host_gpus.VfVgpu | None:
    """A VF's ``nvidia/`` directory, None when it has none."""
    if raw is None:
        return None
    return host_gpus.VfVgpu(
        _int(raw.get('current_vgpu_type')),
        host_gpus.parse_creatable_vgpu_types(
            _text(raw, 'creatable_vgpu_types') or ''))


def _text(files: Raw, name: str) -> str | None:
    text = files.get(name)
    return text.strip() if text is not None else None


def _int(text: str | None) -> int | None:
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def _id(text: str | None) -> str:
    """A hex id file (``0x10de``) as ``10de``; '' when absent."""
    text = (text or '').strip().lower()
    return text[2:] if text.startswith('0x') else text
