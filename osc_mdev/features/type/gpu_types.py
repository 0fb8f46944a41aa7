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

"""The types each GPU of a compute node can serve, one ``GpuType`` per
GPU and type, and whether Nova uses it there.

An mdev parent (``class/mdev_bus``) serves the types of its
``mdev_supported_types``; Nova uses one of them, the type its libvirt
driver gives the device (``vgpu_type_per_pgpu``, mirroring
``_get_vgpu_type_per_pgpu``). An NVIDIA GPU whose vGPUs are virtual
functions typed through sysfs (vGPU 17 and later) serves the types its
VFs list as creatable or have; nothing in Nova reads a VF's type, so Nova
uses a type there when a VF of the GPU has it and a ``[pci]
device_spec`` offers that VF (``device_spec_for``, mirroring
``Whitelist.get_devspec``).
"""

from collections.abc import Iterator
import dataclasses

from osc_mdev.features.config.check import mdev as configcheck
from osc_mdev.host import gpus as host_gpus
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.pci import devspec
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver


@dataclasses.dataclass(frozen=True)
class GpuType:
    """One type one GPU can serve.

    ``gpu``: the mdev parent's address (``0000:84:00.0``, or libvirt's
    name of a virtual parent, ``mtty_mtty``), or the physical function of
    an SR-IOV vGPU GPU. ``name``: the type's directory (``nvidia-35``) or
    a vGPU type's number (``1162``). ``readable_name``: its ``name`` file,
    or the name ``creatable_vgpu_types`` gives the number (None when no
    VF lists it any more). ``available``: ``available_instances``, or how
    many VFs of the GPU can take the type now. ``enabled``: whether Nova
    uses the type on this GPU with the files given, None without files.
    """

    gpu: str
    name: str
    readable_name: str | None
    available: int | None
    enabled: bool | None = None
    device_api: str | None = None
    description: str | None = None


def gpu_types(host: host_gpus.Host,
              conf: libvirt_driver.MdevConfig | None = None,
              pci: pci_rules.PciConfig | None = None) -> list[GpuType]:
    """Every type each GPU of ``host`` can serve, by GPU then type; with
    the files' ``conf`` and ``pci`` (both or neither), whether Nova uses
    each.
    """
    found = list(mdev_types(host, conf)) + list(vf_types(host, pci))
    return sorted(found, key=lambda t: (t.gpu, _order(t.name)))


def _order(name: str) -> tuple[int, str]:
    """Types in their natural order: numbers by value, then names."""
    return (int(name), '') if name.isdigit() else (1 << 31, name)


def mdev_types(host: host_gpus.Host,
               conf: libvirt_driver.MdevConfig | None
               ) -> Iterator[GpuType]:
    """The types of each mdev parent; Nova uses the one its libvirt
    driver gives the device (``_get_vgpu_type_per_pgpu``).
    """
    for address, device in (host.mdev_parents() or {}).items():
        used = (libvirt_driver.vgpu_type_per_pgpu(
            conf, configcheck.nodedev_of(address))
            if conf is not None else None)
        for name, offered in sorted(device.types.items()):
            yield GpuType(address, name, offered.readable_name,
                          offered.available_instances,
                          None if conf is None else used == name,
                          offered.device_api, offered.description)


def vf_types(host: host_gpus.Host,
             pci: pci_rules.PciConfig | None) -> Iterator[GpuType]:
    """The vGPU types of each SR-IOV vGPU GPU: those its VFs list as
    creatable (``available``: how many VFs list it) and those its VFs
    have; Nova uses a type a VF has when a device spec offers the VF.
    """
    for pf in host.vgpu_gpus():
        vfs = [(vf, vf.vgpu) for vf in host.vfs_of(pf)
               if vf.vgpu is not None]
        named = host.vgpu_types_of(pf)
        numbers = set(named) | {v.current for _, v in vfs if v.current}
        used = offered_types(host, pf, pci) if pci is not None else set()
        for number in sorted(n for n in numbers if n is not None):
            vgpu_type = named.get(number)
            yield GpuType(
                pf.address, str(number),
                vgpu_type.name if vgpu_type is not None else None,
                sum(1 for _, v in vfs
                    if any(t.number == number for t in v.creatable)),
                None if pci is None else number in used)


def offered_types(host: host_gpus.Host, pf: host_gpus.Device,
                  pci: pci_rules.PciConfig) -> set[int]:
    """The types of the typed VFs of ``pf`` that a device spec offers,
    as Nova matches a device with the specs (``Whitelist.get_devspec``).
    """
    devices = {d.address: d for d in host.pci_devices()}
    pfs = devspec.physical_functions(devices.values())
    found = set()
    for vf in host.vfs_of(pf):
        device = devices.get(vf.address)
        current = vf.vgpu.current if vf.vgpu is not None else None
        if current and device is not None and devspec.device_spec_for(
                pci.specs, device, pfs) is not None:
            found.add(current)
    return found
