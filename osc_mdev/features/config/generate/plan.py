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

"""What ``config generate`` makes of a host and the type chosen per GPU:
the plan of the files (``features.config.generate.files`` writes their text).

A choice is ``GPU=TYPE[:COUNT]``. GPU is the PCI address of
- an NVIDIA GPU whose vGPUs are SR-IOV virtual functions typed through
  sysfs (vGPU 17 and later): every enabled VF takes the type, or the
  first COUNT (VFs that have the type already first, then in ``virtfnN``
  order);
- one such VF;
- an mdev parent (``class/mdev_bus``), or a physical function whose VFs
  are mdev parents (each of them).
TYPE is a vGPU type as ``creatable_vgpu_types`` lists it (``NVIDIA
L4-8Q``, ``L4-8Q``, its last word, or its number ``1162``) or an mdev
type as ``mdev_supported_types`` names it (``nvidia-35``, its ``name``
file with or without its vendor word, or its number ``35``), in any
case.

Everything the host or Nova would refuse is refused here, before a file
is written (``GenerateError``, one sentence): a GPU the host does not
have, a type the GPU cannot create, two types for one device, and VFs of
one physical function with different types (Nova stops with
PlacementPciMixedResourceClassException, ``nova.pci.placement_translator``).

What the files are made of is checked too, since one of them is a
script root runs: a choice with a control character, and a name read
from sysfs that the kernel never writes (``SysfsNameError``): a device
to be written whose name is not a PCI address as the kernel names one
(``is_pci_address``; a virtual mdev parent's as libvirt names it), or a
type name with a control character. A device of the host that no
choice names is not looked at.
"""

from collections.abc import Iterable
from collections.abc import Sequence
import dataclasses
import re

import os_resource_classes

from osc_mdev.base import words
from osc_mdev.host import gpus as host_gpus
from osc_mdev.nova import names
from osc_mdev.nova.pci import utils as pci_utils
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

#: The words a vGPU or mdev type's name starts with, left out in the
#: short spellings (``L4-8Q`` for ``NVIDIA L4-8Q``).
VENDOR_WORDS = ('NVIDIA', 'GRID')

_CHOICE = re.compile(r'^(?P<gpu>[^=]+)=(?P<type>.+?)(?::(?P<count>\d+))?$')


class GenerateError(ValueError):
    """One sentence: what is wrong with the choices, and what to do;
    ``choice``: the choice it is about, when one.
    """

    def __init__(self, message: str, choice: 'Choice | None' = None
                 ) -> None:
        super().__init__(message)
        self.choice = choice


class SysfsNameError(GenerateError):
    """A name read from sysfs that no file may hold: ``path`` the file or
    directory it was read from, ``name`` the name, ``reason`` what it
    should be.
    """

    def __init__(self, path: str, name: str, reason: str,
                 choice: 'Choice | None' = None) -> None:
        super().__init__(
            '%s: %s; no file is written from a sysfs tree the kernel did '
            'not lay out' % (words.escaped(path), reason), choice)
        self.path = path
        self.name = name
        self.reason = reason


def is_pci_address(address: str) -> bool:
    """Whether a name read from sysfs is a PCI function's address as the
    kernel names one and Nova reads one: accepted by Nova's
    ``parse_address`` (``pci_utils.parse_address``), in libvirt's
    lower-case form with a ``.`` before the function
    (``libvirt_driver.matches_libvirt``).
    """
    try:
        pci_utils.parse_address(address)
    except ValueError:
        return False
    return libvirt_driver.matches_libvirt(address)


@dataclasses.dataclass(frozen=True)
class Choice:
    """One GPU=TYPE[:COUNT] choice: the device (its PCI address in libvirt's
    lower-case form, or a virtual parent's name), the type as written,
    the count if any, and the value as written.
    """

    device: str
    type_name: str
    count: int | None
    text: str


def parse_choice(text: str) -> Choice:
    """``GPU=TYPE[:COUNT]``; GenerateError when it is not one, or
    holds a control character.
    """
    bad = words.control_character(text)
    if bad is not None:
        raise GenerateError(
            "'%s' holds the control character %s: write GPU=TYPE on one "
            'line, in printable characters'
            % (words.escaped(text), words.escaped(bad)))
    match = _CHOICE.match(text.strip())
    if not match:
        raise GenerateError(
            "%s is not GPU=TYPE: give the GPU's PCI address and the vGPU "
            'type, e.g. 0000:25:00.0=L4-8Q' % text)
    gpu = match.group('gpu').strip()
    if names.looks_like_pci_address(gpu):
        gpu = names.normalize_pci_address(gpu)
    count = match.group('count')
    if count is not None and int(count) < 1:
        raise GenerateError('%s: COUNT must be at least 1' % text)
    return Choice(gpu, match.group('type').strip(),
                  int(count) if count is not None else None, text)


# -- What the plan holds ---------------------------------------------------

@dataclasses.dataclass(frozen=True)
class VfGpu:
    """The VFs of one physical function that take one vGPU type."""

    pf: str                                # '0000:25:00.0'
    vgpu_type: host_gpus.VgpuType
    vfs: tuple[host_gpus.Device, ...]      # in virtfnN order

    @property
    def resource_class(self) -> str:
        """``CUSTOM_`` and the type's name, normalised as
        os-resource-classes normalises names (``NVIDIA L4-8Q`` ->
        ``CUSTOM_NVIDIA_L4_8Q``).
        """
        return resource_class_of(self.vgpu_type)

    @property
    def alias(self) -> str:
        """The controller's ``[pci] alias`` name of the type."""
        return alias_of(self.vgpu_type)


def resource_class_of(vgpu_type: host_gpus.VgpuType) -> str:
    """The resource class of a vGPU type's VFs in Placement."""
    return str(os_resource_classes.normalize_name(vgpu_type.name))


def alias_of(vgpu_type: host_gpus.VgpuType) -> str:
    """The alias a flavor asks for a vGPU type with: its name in lower
    case, every run of other characters than letters and digits one
    ``-`` (``NVIDIA L4-8Q`` -> ``nvidia-l4-8q``).
    """
    return re.sub(r'[^a-z0-9]+', '-', vgpu_type.name.lower()).strip('-')


@dataclasses.dataclass(frozen=True)
class MdevTypeDevices:
    """One mdev type and the devices that take it."""

    mdev_type: str                         # 'nvidia-35'
    addresses: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Plan:
    """The GPUs of the host and their types, as the files say them."""

    vf_gpus: tuple[VfGpu, ...] = ()
    mdev_types: tuple[MdevTypeDevices, ...] = ()
    choices: tuple[str, ...] = ()          # the choices as written

    @property
    def vf_count(self) -> int:
        return sum(len(g.vfs) for g in self.vf_gpus)

    def resource_classes(self) -> list[str]:
        """The classes of the VFs, each once, sorted."""
        return sorted({g.resource_class for g in self.vf_gpus})

    def aliases(self) -> dict[str, str]:
        """``{alias: resource class}``, sorted by alias."""
        return dict(sorted((g.alias, g.resource_class)
                           for g in self.vf_gpus))


# -- Matching a type as written ---------------------------------------------

def _spellings(name: str) -> set[str]:
    """The ways a type's name may be written, upper-cased: whole, without
    its vendor word, and its last word (NVIDIA's vgpu-device-manager
    names types so).
    """
    words = name.upper().split()
    found = {' '.join(words)}
    if len(words) > 1 and words[0] in VENDOR_WORDS:
        found.add(' '.join(words[1:]))
    if words:
        found.add(words[-1])
    return found


def _only(found: Sequence[str], written: str, where: str) -> str | None:
    if len(found) > 1:
        raise GenerateError(
            '%s names several types of %s (%s): give the type by its '
            'number or its full name' % (written, where, ', '.join(found)))
    return found[0] if found else None


def match_vgpu_type(written: str, types: Iterable[host_gpus.VgpuType],
                    where: str) -> host_gpus.VgpuType | None:
    """The type of ``types`` that ``written`` names: its number, or one
    of its names (``_spellings``); None when none does.
    """
    by_number = {t.number: t for t in types}
    if written.isdigit():
        return by_number.get(int(written))
    wanted = ' '.join(written.upper().split())
    found = [t.name for t in by_number.values()
             if wanted in _spellings(t.name)]
    name = _only(found, written, where)
    return next((t for t in by_number.values() if t.name == name), None)


def match_mdev_type(written: str, device: host_gpus.Device) -> str | None:
    """The mdev type of ``device`` that ``written`` names: the type's
    directory (``nvidia-35``), its number (``35``) or its ``name`` file
    (``GRID M60-2Q``, ``M60-2Q``), in any case; None when none does.
    """
    wanted = ' '.join(written.upper().split())
    found = []
    for name, mdev_type in sorted(device.types.items()):
        number = name.rsplit('-', 1)[-1]
        if (wanted == name.upper() or (wanted.isdigit() and number == wanted)
                or (mdev_type.readable_name and wanted in _spellings(
                    mdev_type.readable_name))):
            found.append(name)
    return _only(found, written, device.address)


# -- The names read from sysfs that the files hold --------------------------

def _device_path(host: host_gpus.Host, address: str,
                 pci_function: bool = True) -> str:
    """Where the device is in the host's sysfs."""
    where = 'bus/pci/devices' if pci_function else 'class/mdev_bus'
    return '%s/%s/%s' % (host.root.rstrip('/'), where, address)


def _printable(path: str, name: str, what: str,
               choice: Choice | None) -> None:
    bad = words.control_character(name)
    if bad is not None:
        raise SysfsNameError(path, name, "%s '%s' holds the control "
                             'character %s' % (what, words.escaped(name),
                                               words.escaped(bad)), choice)


def _check_names(host: host_gpus.Host, devices: Iterable[host_gpus.Device],
                 choice: Choice) -> None:
    """SysfsNameError unless each device's name is a PCI address as the
    kernel names a PCI function (or, for a virtual mdev parent, a name
    as libvirt names one), and the names of its mdev types are
    printable.
    """
    for device in devices:
        path = _device_path(host, device.address, device.pci_function)
        if not is_pci_address(device.address) and (
                device.pci_function or not device.mdev_parent
                or not libvirt_driver.looks_like_virtual_parent(
                    device.address)):
            raise SysfsNameError(
                path, device.address,
                'the name is not a PCI address (DDDD:BB:DD.F in lower-case '
                'hexadecimal)' if device.pci_function else
                "the name is neither a PCI address nor a virtual mdev "
                "parent's name (letters, digits, _ . -)", choice)
        for name, mdev_type in sorted(device.types.items()):
            type_path = '%s/mdev_supported_types/%s' % (path, name)
            _printable(type_path, name, 'the mdev type', choice)
            _printable(type_path + '/name',
                       mdev_type.readable_name or '', 'the name', choice)


def _check_type_names(host: host_gpus.Host,
                      types: Iterable[host_gpus.VgpuType],
                      choice: Choice) -> None:
    """SysfsNameError for a vGPU type whose name is not printable,
    naming a ``creatable_vgpu_types`` file that lists it.
    """
    for vgpu_type in types:
        if words.control_character(vgpu_type.name) is None:
            continue
        lister = next(d.address for _, d in sorted(host.devices.items())
                      if d.vgpu is not None and vgpu_type in d.vgpu.creatable)
        _printable(_device_path(host, lister) +
                   '/nvidia/creatable_vgpu_types',
                   vgpu_type.name, 'the vGPU type', choice)


# -- Each choice against the host -------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Target:
    """The devices one choice gives a type to: VFs of ``pf`` and their
    ``vgpu_type``, or mdev parents and their ``mdev_type``.
    """

    choice: Choice
    devices: tuple[host_gpus.Device, ...]
    pf: str | None = None
    vgpu_type: host_gpus.VgpuType | None = None
    mdev_type: str | None = None

    @property
    def type_key(self) -> str:
        """The type in words, as messages name it."""
        if self.vgpu_type is not None:
            return type_words(self.vgpu_type)
        return str(self.mdev_type)


def type_words(vgpu_type: host_gpus.VgpuType) -> str:
    """``NVIDIA L4-8Q (1162)``."""
    return '%s (%d)' % (vgpu_type.name, vgpu_type.number)


def _listed(types: Iterable[host_gpus.VgpuType]) -> str:
    found = [type_words(t) for t in types]
    return ', '.join(found) if found else 'none'


def _no_vfs(pf: host_gpus.Device) -> GenerateError:
    return GenerateError(
        'The GPU at %s has no virtual functions enabled (sriov_numvfs is '
        "0, as after a reboot): enable them with NVIDIA's "
        '/usr/lib/nvidia/sriov-manage -e %s, then generate the files'
        % (pf.address, pf.address))


def _check_vf(vf: host_gpus.Device, vgpu_type: host_gpus.VgpuType,
              choice: Choice) -> None:
    """The VF can take the type: it has it, or lists it as creatable."""
    vgpu = vf.vgpu
    path = '/sys/bus/pci/devices/%s/nvidia/current_vgpu_type' % vf.address
    if vgpu is None or vgpu.current is None:
        raise GenerateError(
            'virtual function %s has no readable %s: load NVIDIA\'s vGPU '
            'manager (nvidia-vgpu-mgr) and generate the files again'
            % (vf.address, path), choice)
    if vgpu.current == vgpu_type.number:
        return
    if vgpu.current:
        raise GenerateError(
            'virtual function %s has vGPU type %d, not %s: write 0 to %s '
            'first (when no server uses it) or choose its type'
            % (vf.address, vgpu.current, type_words(vgpu_type), path),
            choice)
    if vgpu_type.number not in {t.number for t in vgpu.creatable}:
        raise GenerateError(
            'virtual function %s cannot take %s now (it lists %s): the GPU '
            'has no room left for it, or holds vGPUs of another size; give '
            'a smaller COUNT or another type'
            % (vf.address, type_words(vgpu_type), _listed(vgpu.creatable)),
            choice)


def _vgpu_type(host: host_gpus.Host, pf: host_gpus.Device,
               choice: Choice) -> host_gpus.VgpuType:
    types = host.vgpu_types_of(pf)
    _check_type_names(host, types.values(), choice)
    found = match_vgpu_type(choice.type_name, types.values(), pf.address)
    if found is None:
        raise GenerateError(
            'the GPU at %s cannot create vGPU type %s; its VFs list %s'
            % (pf.address, choice.type_name, _listed(types.values())),
            choice)
    return found


def _select_vfs(vfs: Sequence[host_gpus.Device],
                vgpu_type: host_gpus.VgpuType,
                choice: Choice) -> tuple[host_gpus.Device, ...]:
    """All the VFs, or COUNT of them: those with the type first, then
    the others in ``virtfnN`` order; answered in ``virtfnN`` order.
    """
    if choice.count is None:
        return tuple(vfs)
    if choice.count > len(vfs):
        raise GenerateError(
            'the GPU at %s has %d virtual functions enabled, fewer than %d'
            % (choice.device, len(vfs), choice.count), choice)
    ranked = sorted(vfs, key=lambda vf: vf.vgpu is None or (
        vf.vgpu.current != vgpu_type.number))
    chosen = {vf.address for vf in ranked[:choice.count]}
    return tuple(vf for vf in vfs if vf.address in chosen)


def _vf_gpu_target(host: host_gpus.Host, pf: host_gpus.Device,
                   choice: Choice) -> _Target:
    vfs = host.vfs_of(pf)
    _check_names(host, [pf] + vfs, choice)
    if not vfs:
        raise _no_vfs(pf)
    vgpu_type = _vgpu_type(host, pf, choice)
    selected = _select_vfs(vfs, vgpu_type, choice)
    for vf in selected:
        _check_vf(vf, vgpu_type, choice)
    return _Target(choice, selected, pf.address, vgpu_type)


def _one_vf_target(host: host_gpus.Host, pf: host_gpus.Device,
                   vf: host_gpus.Device, choice: Choice) -> _Target:
    _check_names(host, (pf, vf), choice)
    if choice.count is not None:
        raise GenerateError(
            '%s is one virtual function; COUNT is for the VFs of a GPU '
            '(%s=%s:%d)' % (vf.address, pf.address, choice.type_name,
                            choice.count), choice)
    vgpu_type = _vgpu_type(host, pf, choice)
    _check_vf(vf, vgpu_type, choice)
    return _Target(choice, (vf,), pf.address, vgpu_type)


def _mdev_target(host: host_gpus.Host,
                 devices: Sequence[host_gpus.Device],
                 choice: Choice) -> _Target:
    _check_names(host, devices, choice)
    if choice.count is not None:
        raise GenerateError(
            'COUNT is for GPUs whose vGPUs are virtual functions; an mdev '
            'GPU makes its mdevs as servers need them', choice)
    found = set()
    for device in devices:
        mdev_type = match_mdev_type(choice.type_name, device)
        if mdev_type is None:
            offered = ', '.join(
                '%s (%s)' % (n, t.readable_name) if t.readable_name else n
                for n, t in sorted(device.types.items())) or 'none'
            raise GenerateError(
                '%s offers no mdev type %s; it offers %s'
                % (device.address, choice.type_name, offered), choice)
        found.add(mdev_type)
    if len(found) > 1:
        raise GenerateError(
            'it names different types on the VFs of %s (%s): give the type '
            'by its directory name' % (choice.device,
                                       ', '.join(sorted(found))), choice)
    return _Target(choice, tuple(devices), mdev_type=found.pop())


def target(host: host_gpus.Host, choice: Choice) -> _Target:
    """The devices a choice names and the type it gives them."""
    device = host.devices.get(choice.device)
    vgpu_pfs = {g.address: g for g in host.vgpu_gpus()}
    if device is None:
        raise GenerateError(
            'there is no device %s on the host' % choice.device, choice)
    if device.address in vgpu_pfs:
        return _vf_gpu_target(host, device, choice)
    if device.physfn in vgpu_pfs:
        return _one_vf_target(host, vgpu_pfs[device.physfn], device, choice)
    if device.mdev_parent:
        return _mdev_target(host, [device], choice)
    vf_parents = [vf for vf in host.vfs_of(device) if vf.mdev_parent]
    if vf_parents:
        return _mdev_target(host, vf_parents, choice)
    raise GenerateError(
        '%s is no GPU that gives vGPUs: neither an NVIDIA GPU whose '
        'virtual functions are typed through sysfs, nor an mdev parent '
        '(class/mdev_bus)' % choice.device, choice)


# -- The plan ---------------------------------------------------------------

def _one_owner(targets: Sequence[_Target]) -> None:
    """Each device is given a type once."""
    owner: dict[str, _Target] = {}
    for one in targets:
        for device in one.devices:
            seen = owner.setdefault(device.address, one)
            if seen is one:
                continue
            if seen.type_key != one.type_key:
                raise GenerateError(
                    '%s is given two types, %s (%s) and %s (%s): give each '
                    'GPU one type' % (
                        device.address, seen.type_key, seen.choice.text,
                        one.type_key, one.choice.text))
            raise GenerateError(
                '%s is given its type twice (%s and %s): give each GPU '
                'once' % (device.address, seen.choice.text,
                          one.choice.text))


def _vf_gpus(host: host_gpus.Host,
             targets: Sequence[_Target]) -> tuple[VfGpu, ...]:
    """One VfGpu per physical function: its VFs of every choice, which
    must have one type.
    """
    by_pf: dict[str, list[_Target]] = {}
    for one in targets:
        if one.pf is not None:
            by_pf.setdefault(one.pf, []).append(one)
    gpus = []
    for pf, parts in sorted(by_pf.items()):
        first = parts[0]
        for other in parts[1:]:
            if other.vgpu_type != first.vgpu_type:
                raise GenerateError(
                    'Virtual functions of %s would have two types, %s '
                    '(%s) and %s (%s): nova-compute gives '
                    'the VFs of one physical function one resource class '
                    'and refuses to start otherwise (PlacementPciMixed'
                    'ResourceClassException); give them one type' % (
                        pf, first.type_key, first.choice.text,
                        other.type_key, other.choice.text))
        assert first.vgpu_type is not None
        chosen = {d.address for one in parts for d in one.devices}
        vfs = tuple(vf for vf in host.vfs_of(host.devices[pf])
                    if vf.address in chosen)
        gpus.append(VfGpu(pf, first.vgpu_type, vfs))
    return tuple(gpus)


def _mdev_types(targets: Sequence[_Target]) -> tuple[MdevTypeDevices, ...]:
    """Each mdev type, in the order first chosen, with its devices."""
    by_type: dict[str, set[str]] = {}
    for one in targets:
        if one.mdev_type is not None:
            by_type.setdefault(one.mdev_type, set()).update(
                d.address for d in one.devices)
    return tuple(MdevTypeDevices(t, tuple(sorted(a)))
                 for t, a in by_type.items())


def plan(host: host_gpus.Host, choices: Sequence[Choice]) -> Plan:
    """The plan of the files for the host and the choices; GenerateError
    for anything the host or Nova would refuse.
    """
    if not choices:
        raise GenerateError('Give the type of each GPU, as GPU=TYPE')
    targets = [target(host, c) for c in choices]
    _one_owner(targets)
    return Plan(_vf_gpus(host, targets), _mdev_types(targets),
                tuple(c.text for c in choices))
