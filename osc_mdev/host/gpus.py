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

"""The devices of one compute node as its sysfs shows them: one model.

A ``Host`` is what ``osc_mdev.local.sysfs`` read under ROOT (``/sys`` on
the node): every PCI function of ``bus/pci/devices`` (a ``Device``: its
ids, driver, SR-IOV links and counts and, for a virtual function of an
NVIDIA GPU on the vendor-specific VFIO framework of vGPU 17 and later,
its ``nvidia/`` files), the mdev parents of ``class/mdev_bus`` (PCI
functions, or virtual parents such as ``mtty_mtty``) with the types they
offer, and the mdevs of ``bus/mdev/devices``.

Every check and generator takes the host from here, through its views:
the mdev parents (``mdev_parents``), the PCI functions as libvirt
reports them to Nova (``pci_devices``), the SR-IOV vGPU GPUs and their
virtual functions (``vgpu_gpus``, ``vfs_of``), the names of their vGPU
types (``vgpu_type_names``, and per GPU ``vgpu_types_of``), the mdevs
of a parent (``mdevs_of``).
``parse_creatable_vgpu_types`` reads a VF's ``creatable_vgpu_types``.
"""

from collections.abc import Mapping
import dataclasses
import re

import os_resource_classes

from osc_mdev.nova.pci import devspec as pci_devspec
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

#: PCI vendor id of NVIDIA.
NVIDIA = '10de'
#: The driver an NVIDIA GPU's physical function is bound to for vGPUs.
NVIDIA_DRIVER = 'nvidia'


# -- vGPU types of a virtual function ---------------------------------------

@dataclasses.dataclass(frozen=True)
class VgpuType:
    """One vGPU type of ``nvidia/creatable_vgpu_types``: the number
    written to ``current_vgpu_type`` and the name the driver gives it.
    """

    number: int
    name: str                      # 'NVIDIA L4-8Q'

    @property
    def short_name(self) -> str:
        """The name without its product prefix (``L4-8Q``): its last
        word, as NVIDIA's vgpu-device-manager names types in its
        configuration files.
        """
        words = self.name.split()
        return words[-1] if words else self.name

    @property
    def resource_class(self) -> str:
        """The custom resource class named after the type:
        ``CUSTOM_NVIDIA_L4_8Q``, its name normalised as os-resource-classes
        normalises names.
        """
        return os_resource_classes.normalize_name(self.name)

    def named_by(self, resource_class: str) -> bool:
        """Whether a resource class is named after this type, by its name
        or its short name (``CUSTOM_NVIDIA_L4_8Q``, ``CUSTOM_L4_8Q``).
        """
        return resource_class in (
            self.resource_class,
            os_resource_classes.normalize_name(self.short_name))

    def names_another(self, resource_class: str) -> bool:
        """Whether a resource class is named after another type of the
        same GPU: the name up to the profile is this type's
        (``CUSTOM_NVIDIA_L4_8Q`` for ``NVIDIA L4-4Q``, the product being
        the short name up to its first ``-``).
        """
        product = self.short_name.split('-')[0]
        full = self.name[:len(self.name) - len(self.short_name)] + product
        return not self.named_by(resource_class) and any(
            resource_class.startswith(
                os_resource_classes.normalize_name(prefix) + '_')
            for prefix in {full, product})


def parse_creatable_vgpu_types(text: str) -> tuple[VgpuType, ...]:
    """The types of a ``creatable_vgpu_types`` file, one a line as
    ``<number> : <name>`` (``1162  : NVIDIA L4-8Q``), with or without
    an ``ID    : vGPU Name`` header; liberal in whitespace, and in the
    colon (``1162 NVIDIA L4-8Q``). A line that does not start with a
    number (a header) or has no name is skipped.
    """
    found = []
    for line in text.splitlines():
        line = line.strip()
        number, colon, name = line.partition(':')
        if not colon:
            number, _, name = line.partition(' ')
        number, name = number.strip(), ' '.join(name.split())
        if re.fullmatch(r'\d+', number) and name:
            found.append(VgpuType(int(number), name))
    return tuple(found)


@dataclasses.dataclass(frozen=True)
class VfVgpu:
    """The ``nvidia/`` directory of a virtual function: its vGPU type
    (``current_vgpu_type``: 0 for none, as after a reboot; None when it
    cannot be read) and the types it can take now
    (``creatable_vgpu_types``: they depend on the types of the other
    VFs of its GPU, and a typed VF's own type is not listed).
    """

    current: int | None
    creatable: tuple[VgpuType, ...] = ()

    @property
    def typed(self) -> bool:
        return bool(self.current)


# -- Devices ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class SupportedType:
    """One type of a parent's ``mdev_supported_types``: what the kernel
    offers (``cloud.traits.MdevType`` is a type as the cloud names it).
    """

    name: str                              # the directory: 'nvidia-35'
    available_instances: int | None        # None when it cannot be read
    readable_name: str | None = None       # its ``name`` file
    device_api: str | None = None
    description: str | None = None         # its ``description`` file


@dataclasses.dataclass(frozen=True)
class Mdev:
    """One mdev of ``bus/mdev/devices``: its UUID (libvirt's, not the
    server's), its parent's address (``0000:84:00.0``, or libvirt's name
    of a virtual parent, ``mtty_mtty``) and its type.
    """

    uuid: str
    parent: str
    mdev_type: str | None


@dataclasses.dataclass(frozen=True)
class Device:
    """One device of the host: a PCI function of ``bus/pci/devices``, a
    virtual mdev parent, or both an mdev parent and a PCI function.

    ``address`` is the PCI address (``0000:84:00.0``) or libvirt's name of
    a virtual parent (``mtty_mtty``); ``types`` its ``mdev_supported_types``
    by name (empty for a device that offers none); ``mdev_parent`` whether
    it is in ``class/mdev_bus``, ``pci_function`` whether it is in
    ``bus/pci/devices``. For a physical function ``virtfns`` are its VFs
    in ``virtfnN`` order and ``sriov_*`` its SR-IOV files (None when
    absent); a VF has ``physfn`` and, on NVIDIA's VFIO framework,
    ``vgpu``.
    """

    address: str
    types: Mapping[str, SupportedType] = dataclasses.field(
        default_factory=dict)
    mdev_parent: bool = False
    pci_function: bool = False             # in bus/pci/devices
    vendor_id: str = ''                    # '10de', '' when unknown
    product_id: str = ''
    pci_class: str = ''                    # '030200'
    driver: str | None = None
    physfn: str | None = None
    virtfns: tuple[str, ...] = ()
    sriov_numvfs: int | None = None
    sriov_totalvfs: int | None = None
    sriov_offset: int | None = None
    sriov_stride: int | None = None
    vgpu: VfVgpu | None = None

    @property
    def is_vf(self) -> bool:
        return self.physfn is not None

    @property
    def is_pf(self) -> bool:
        """A physical function: it has ``virtfnN`` links or can have VFs
        (``sriov_totalvfs`` > 0), as libvirt tells type-PF.
        """
        return not self.is_vf and (
            bool(self.virtfns) or (self.sriov_totalvfs or 0) > 0)

    @property
    def dev_type(self) -> str:
        """Nova's ``dev_type`` of the function, as libvirt reports it."""
        if self.is_vf:
            return pci_devspec.TYPE_VF
        if self.is_pf:
            return pci_devspec.TYPE_PF
        return pci_devspec.TYPE_PCI

    def vf_addresses(self) -> tuple[str, ...]:
        """The addresses of every VF this physical function can have
        (``sriov_totalvfs``), enabled or not: the kernel places VF ``n``
        at routing ID ``PF + sriov_offset + n * sriov_stride``. Empty when
        the files are not there.
        """
        if None in (self.sriov_totalvfs, self.sriov_offset,
                    self.sriov_stride) or not libvirt_driver.matches_libvirt(
                        self.address):
            return ()
        assert self.sriov_totalvfs is not None
        assert self.sriov_offset is not None
        assert self.sriov_stride is not None
        domain, rid = _routing_id(self.address)
        found = []
        for index in range(self.sriov_totalvfs):
            vf = rid + self.sriov_offset + index * self.sriov_stride
            if vf > 0xffff:
                break
            found.append('%s:%02x:%02x.%x' % (domain, vf >> 8,
                                              (vf >> 3) & 0x1f, vf & 7))
        return tuple(found)


def _routing_id(address: str) -> tuple[str, int]:
    """``(domain, bus << 8 | slot << 3 | function)`` of an address."""
    domain, bus, rest = address.split(':')
    slot, function = rest.split('.')
    return domain, (int(bus, 16) << 8) | (int(slot, 16) << 3) | int(
        function, 16)


# -- The host --------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Host:
    """A compute node's devices: ``devices`` by address (its PCI
    functions and virtual mdev parents), whether it has
    ``class/mdev_bus`` at all, its mdevs, and the root of the tree.
    """

    devices: Mapping[str, Device] = dataclasses.field(default_factory=dict)
    mdev_bus: bool = False
    mdevs: tuple[Mdev, ...] = ()
    #: Where the tree was read (``/sys`` on the node), for messages.
    root: str = dataclasses.field(default='/sys', compare=False)

    def mdev_parents(self) -> dict[str, Device] | None:
        """The devices of ``class/mdev_bus`` by address; None when the
        host has no ``class/mdev_bus`` (no mdev driver is loaded).
        """
        if not self.mdev_bus:
            return None
        return {a: d for a, d in sorted(self.devices.items())
                if d.mdev_parent}

    def pci_devices(self) -> list[pci_devspec.PciDevice]:
        """The PCI functions as libvirt reports them to Nova: ids, and
        type-VF (with its PF) / type-PF / type-PCI.
        """
        return [pci_devspec.PciDevice(d.address, d.vendor_id, d.product_id,
                                      d.dev_type, d.physfn)
                for _, d in sorted(self.devices.items())
                if d.pci_function]

    def vfs_of(self, pf: Device) -> list[Device]:
        """The enabled VFs of a physical function, in ``virtfnN`` order."""
        return [self.devices[a] for a in pf.virtfns if a in self.devices]

    def vgpu_gpus(self) -> list[Device]:
        """The NVIDIA GPUs whose vGPUs are VFs typed through sysfs
        (NVIDIA's vendor-specific VFIO framework): physical functions of
        vendor 10de bound to the ``nvidia`` driver, or with a VF that has
        ``nvidia/`` files; not those whose VFs are mdev parents (the mdev
        framework of vGPU 16 and earlier).
        """
        found = []
        for _, device in sorted(self.devices.items()):
            if (device.vendor_id != NVIDIA or not device.is_pf
                    or not device.pci_function):
                continue
            vfs = self.vfs_of(device)
            if any(vf.mdev_parent for vf in vfs) or device.mdev_parent:
                continue
            if device.driver == NVIDIA_DRIVER or any(
                    vf.vgpu is not None for vf in vfs):
                found.append(device)
        return found

    def vgpu_type_names(self) -> dict[int, VgpuType]:
        """Every vGPU type some VF of the host lists as creatable, by
        number. A type no VF can create any more (every VF able to take
        it is typed) is not listed anywhere in sysfs.
        """
        found: dict[int, VgpuType] = {}
        for _, device in sorted(self.devices.items()):
            if device.vgpu is not None:
                for vgpu_type in device.vgpu.creatable:
                    found.setdefault(vgpu_type.number, vgpu_type)
        return found

    def vgpu_types_of(self, pf: Device) -> dict[int, VgpuType]:
        """The vGPU types of one SR-IOV vGPU GPU, by number: those its
        enabled VFs list as creatable now, and those its typed VFs have.
        A typed VF does not list its own type: its name is taken from
        any VF of the host that lists it, and a type no VF lists is left
        out (its name is not in sysfs).
        """
        found: dict[int, VgpuType] = {}
        named = self.vgpu_type_names()
        for vf in self.vfs_of(pf):
            if vf.vgpu is None:
                continue
            for vgpu_type in vf.vgpu.creatable:
                found.setdefault(vgpu_type.number, vgpu_type)
            current = vf.vgpu.current
            if current and current in named:
                found.setdefault(current, named[current])
        return dict(sorted(found.items()))

    def mdevs_of(self, parent: str) -> list[Mdev]:
        """The mdevs whose parent is ``parent`` (an address or a virtual
        parent's name).
        """
        return [m for m in self.mdevs if m.parent == parent]

    def pf_for_vf_address(self, address: str) -> Device | None:
        """The SR-IOV vGPU GPU one of whose VFs, enabled or not, would
        sit at ``address``; None when no GPU can have a VF there.
        """
        for pf in self.vgpu_gpus():
            if address in pf.virtfns or address in pf.vf_addresses():
                return pf
        return None
