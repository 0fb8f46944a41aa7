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

"""``mdev config check --sysfs``, its SR-IOV vGPU part: the virtual
functions of NVIDIA GPUs typed through sysfs (vGPU 17 and later) against
the ``[pci] device_spec`` that offers them.

Nova offers such a VF through PCI (in Placement with ``[pci]
report_in_placement``, as the class of its device spec) whatever vGPU
type it has: nothing in Nova reads ``nvidia/current_vgpu_type``. So
nova-compute starts, and the findings are warnings: a VF offered with no
type (0, as after a reboot: the server given it does not start), VFs of
one resource class (without PCI in Placement: of one GPU) with different
types, a class named after one type (``CUSTOM_NVIDIA_L4_8Q``) over VFs
of another, a device spec naming VFs that are not enabled, a typed VF no
device spec offers. Which spec offers a VF, and its class, are
``nova.pci.devspec``'s and ``nova.pci.placement_translator``'s, as Nova matches
them; the host is ``host.gpus``'.
"""

from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import typing

from osc_mdev.base import findings
from osc_mdev.base import words
from osc_mdev.host import gpus as host_gpus
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.pci import devspec
from osc_mdev.nova.pci import placement_translator as translator

WARNING = findings.WARNING
Finding = findings.Finding
Names = Mapping[int, host_gpus.VgpuType]


@dataclasses.dataclass(frozen=True)
class Vf:
    """A VF of an SR-IOV vGPU GPU and what the files make of it: the
    device spec that offers it (None: not offered) and the resource class
    Nova reports it as.
    """

    device: host_gpus.Device
    pf: str
    spec: devspec.DeviceSpec | None = None
    resource_class: str | None = None

    @property
    def address(self) -> str:
        return self.device.address

    @property
    def current(self) -> int | None:
        """Its vGPU type's number, 0 for none, None when unreadable."""
        return self.device.vgpu.current if self.device.vgpu else None


@dataclasses.dataclass(frozen=True)
class VfCheck:
    """The findings about the SR-IOV vGPU VFs of a host and what was
    checked: the GPUs, their VFs, those offered; ``explained``: the specs
    whose missing devices are VFs not enabled (said here, not as a spec
    matching nothing).
    """

    findings: list[Finding]
    gpus: tuple[str, ...] = ()
    vfs: tuple[Vf, ...] = ()
    names: Names = dataclasses.field(default_factory=dict)
    explained: tuple[devspec.DeviceSpec, ...] = ()

    @property
    def offered(self) -> list[Vf]:
        return [v for v in self.vfs if v.spec is not None]

    @property
    def unnamed(self) -> list[int]:
        """The types of offered VFs that no VF lists by name any more."""
        return sorted({v.current for v in self.offered
                       if v.current and v.current not in self.names})

    def scope(self) -> str | None:
        """What was checked, in words, for the result row: a host whose
        VFs all match says so.
        """
        if not self.gpus:
            return None
        offered = len(self.offered)
        text = 'the vGPU types of the %s of %s %s' % (
            words.count(len(self.vfs), 'VF'),
            'GPU' if len(self.gpus) == 1 else 'GPUs',
            words.and_list(list(self.gpus)))
        said = []
        if not self.findings and offered:
            said.append('%s, each %s' % (
                'the one offered' if offered == 1 else
                'all %d offered' % offered,
                'with a vGPU type' if self.unnamed else
                'typed as its class says'))
        if self.unnamed:
            one = len(self.unnamed) == 1
            said.append(
                'no VF can take %s %s any more, so sysfs does not name %s: '
                'the class names are not checked against %s' % (
                    'type' if one else 'types',
                    words.and_list([str(n) for n in self.unnamed]),
                    'it' if one else 'them', 'it' if one else 'them'))
        if said:
            text += ' (%s)' % '; '.join(said)
        return text


def type_label(number: int, names: Names) -> str:
    """A vGPU type by its name and number (``NVIDIA L4-8Q (1162)``), or by
    its number alone when no VF lists it any more.
    """
    known = names.get(number)
    return '%s (%d)' % (known.name, number) if known else 'type %d' % number


def named_type(resource_class: str | None,
               names: Names) -> host_gpus.VgpuType | None:
    """The vGPU type a resource class is named after, if any."""
    if not resource_class:
        return None
    return next((t for t in names.values() if t.named_by(resource_class)),
                None)


def _vfs(pci: pci_rules.PciConfig, host: host_gpus.Host) -> list[Vf]:
    """Every VF of the host's SR-IOV vGPU GPUs, with the spec Nova
    matches it with (``Whitelist.get_devspec``) and its class.
    """
    devices = {d.address: d for d in host.pci_devices()}
    pfs = devspec.physical_functions(devices.values())
    found = []
    for pf in host.vgpu_gpus():
        for vf in host.vfs_of(pf):
            device = devices.get(vf.address)
            spec = (devspec.device_spec_for(pci.specs, device, pfs)
                    if device is not None else None)
            found.append(Vf(vf, pf.address, spec, (
                translator.device_resource_class(spec, device)
                if spec is not None and device is not None else None)))
    return found


def _vf_list(vfs: Sequence[Vf], pf: str) -> str:
    """``VF a of GPU p``, ``VFs a, b and c of GPU p``."""
    return '%s %s of GPU %s' % ('VF' if len(vfs) == 1 else 'VFs',
                                words.first_few([v.address for v in vfs]),
                                pf)


def _verb(vfs: Sequence[object], one: str, many: str) -> str:
    return one if len(vfs) == 1 else many


def _offered_as(vf: Vf, pci: pci_rules.PciConfig) -> str:
    """How the files offer a VF: its class, or the device spec."""
    assert vf.spec is not None
    if pci.report_in_placement and translator.in_placement(vf.spec):
        return 'as %s' % vf.resource_class
    return 'by the device spec %s' % vf.spec.describe()


def _group_by(vfs: Iterable[Vf], *keys: str
              ) -> dict[tuple[typing.Any, ...], list[Vf]]:
    """The VFs by the values of their attributes ``keys``."""
    grouped: dict[tuple[typing.Any, ...], list[Vf]] = {}
    for vf in vfs:
        grouped.setdefault(tuple(getattr(vf, k) or '' for k in keys),
                           []).append(vf)
    return grouped


def _class_key(pci: pci_rules.PciConfig) -> str:
    """What VFs of one offer share: the resource class with PCI in
    Placement, else the GPU (an alias asks for vendor and product ids).
    """
    return 'resource_class' if pci.report_in_placement else 'pf'


def _expected_type(vfs: Sequence[Vf], siblings: Sequence[Vf],
                   names: Names, by_class: bool) -> str:
    """The type the VFs should have: the one their class is named after,
    or the one the typed VFs of their offer (class or GPU) all have.
    """
    named = (named_type(vfs[0].resource_class, names) if by_class
             else None)
    if named is not None:
        return ' (%s)' % type_label(named.number, names)
    typed = {v.current for v in siblings if v.current}
    if len(typed) == 1:
        return ' (%s, as the other VFs of %s)' % (
            type_label(typed.pop() or 0, names),
            vfs[0].resource_class if by_class else 'GPU %s' % vfs[0].pf)
    return ''


def untyped_findings(vfs: Sequence[Vf], pci: pci_rules.PciConfig,
                     names: Names) -> list[Finding]:
    """VFs Nova offers that have no vGPU type (0): a server given one
    does not start. One finding per GPU and offer.
    """
    found = []
    key = _class_key(pci)
    offered = [v for v in vfs if v.spec is not None]
    for (pf, offer), group in sorted(_group_by(offered, 'pf', key).items()):
        untyped = [v for v in group if v.current == 0]
        if not untyped:
            continue
        siblings = _group_by(offered, key)[(offer,)]
        assert untyped[0].spec is not None
        found.append(Finding(
            WARNING, untyped[0].spec.where,
            '%s %s offered %s but %s no vGPU type (current_vgpu_type 0), '
            'as after a reboot: a server given %s does not start. Re-apply '
            'the types%s before nova-compute starts.' % (
                _vf_list(untyped, pf), _verb(untyped, 'is', 'are'),
                _offered_as(untyped[0], pci), _verb(untyped, 'has', 'have'),
                _verb(untyped, 'it', 'one of them'),
                _expected_type(untyped, siblings, names,
                               key == 'resource_class')),
            device=untyped[0].address,
            resource_class=untyped[0].resource_class or ''))
    return found


def _by_type(vfs: Iterable[Vf], names: Names) -> str:
    """``NVIDIA L4-8Q (1162) on a, b; NVIDIA L4-4Q (1161) on c``."""
    by_type = _group_by(vfs, 'current')
    return '; '.join(
        '%s on %s' % (type_label(group[0].current or 0, names),
                      words.first_few([v.address for v in group]))
        for _, group in sorted(by_type.items()))


def _other_type(offer: str, group: Sequence[Vf], names: Names
                ) -> tuple[str, list[Vf]]:
    """The type a class is named after, in words, and its VFs of another
    type: by the named type's number when sysfs names it, else by the
    names of the VFs' own types (``NVIDIA L4-4Q`` under a class named
    after another L4 type).
    """
    named = named_type(offer, names)
    if named is not None:
        other = [v for v in group if v.current != named.number]
        return ('Class %s is named after %s, but %s offered as it %s '
                'another type' % (offer, type_label(named.number, names),
                                  _verb(other, 'a VF', 'VFs'),
                                  _verb(other, 'has', 'have')), other)
    other = [v for v in group if v.current in names
             and names[v.current or 0].names_another(offer)]
    return ('Class %s is named after another type than %s %s' % (
        offer, _verb(other, 'its VF', 'its VFs'),
        _verb(other, 'has', 'have')), other)


def _named_finding(offer: str, group: Sequence[Vf],
                   names: Names) -> Finding | None:
    """A class named after one type over VFs of another, or None."""
    head, other = _other_type(offer, group, names)
    if not other:
        return None
    assert group[0].spec is not None
    return Finding(
        WARNING, group[0].spec.where,
        '%s: %s. A server asking for %s gets that type there; type %s as '
        'the class says, or give %s a class of %s own.' % (
            head, _by_type(other, names), offer, _verb(other, 'it', 'them'),
            _verb(other, 'it', 'them'), _verb(other, 'its', 'their')),
        device=other[0].address, resource_class=offer)


def mixed_type_findings(vfs: Sequence[Vf], pci: pci_rules.PciConfig,
                        names: Names) -> list[Finding]:
    """Typed VFs of one offer (resource class, or GPU without PCI in
    Placement) with different types; with a class named after one type,
    the VFs of another.
    """
    found = []
    key = _class_key(pci)
    typed = [v for v in vfs if v.spec is not None and v.current]
    for (offer,), group in sorted(_group_by(typed, key).items()):
        assert group[0].spec is not None
        named = (_named_finding(offer, group, names)
                 if key == 'resource_class' else None)
        if named is not None:
            found.append(named)
        elif len({v.current for v in group}) > 1:
            found.append(Finding(
                WARNING, group[0].spec.where,
                'VFs %s have different vGPU types: %s. A server asking for '
                'them gets either; give each type a resource_class of its '
                'own.' % ('offered as %s' % offer if key == 'resource_class'
                          else 'of GPU %s' % offer, _by_type(group, names)),
                device=group[0].address,
                resource_class=offer if key == 'resource_class' else ''))
    return found


def not_enabled_findings(pci: pci_rules.PciConfig, host: host_gpus.Host
                         ) -> tuple[list[Finding],
                                    tuple[devspec.DeviceSpec, ...]]:
    """Device specs naming a VF that is not enabled (``sriov_numvfs`` 0,
    or fewer VFs than the specs name): Nova offers nothing from them.
    One finding per GPU; answers the specs too.
    """
    missing: dict[str, list[tuple[str, devspec.DeviceSpec]]] = {}
    for spec in pci.specs:
        if spec.address is None or not spec.address.single:
            continue
        address = str(spec.address)
        pf = host.pf_for_vf_address(address)
        if pf is not None and address not in host.devices:
            missing.setdefault(pf.address, []).append((address, spec))
    found = []
    for pf_address, listed in sorted(missing.items()):
        pf = host.devices[pf_address]
        found.append(Finding(
            WARNING, listed[0][1].where,
            'The device specs name %s %s of GPU %s that %s not enabled '
            '(sriov_numvfs %s of %s), as after a reboot: Nova offers '
            'nothing from %s. Enable the VFs (sriov-manage -e %s) before '
            'nova-compute starts.' % (
                _verb(listed, 'VF', 'VFs'),
                words.first_few([a for a, _ in listed]), pf_address,
                _verb(listed, 'is', 'are'), _count(pf.sriov_numvfs),
                _count(pf.sriov_totalvfs), _verb(listed, 'it', 'them'),
                pf_address),
            device=listed[0][0]))
    return found, tuple(s for listed in missing.values() for _, s in listed)


def _count(number: int | None) -> str:
    return '?' if number is None else str(number)


def not_offered_findings(vfs: Sequence[Vf], names: Names) -> list[Finding]:
    """Typed VFs no device spec offers: Nova never gives them to a
    server. One finding per GPU and type.
    """
    found = []
    unused = [v for v in vfs if v.spec is None and v.current]
    for (pf, _), group in sorted(_group_by(unused, 'pf', 'current').items()):
        found.append(Finding(
            WARNING, novaconf.where('pci', 'device_spec'),
            '%s %s %s but no [pci] device_spec matches %s: Nova never '
            'gives %s to a server.' % (
                _vf_list(group, pf), _verb(group, 'has', 'have'),
                type_label(group[0].current or 0, names),
                _verb(group, 'it', 'them'), _verb(group, 'it', 'them')),
            device=group[0].address))
    return found


def vf_check(pci: pci_rules.PciConfig, host: host_gpus.Host) -> VfCheck:
    """The host's SR-IOV vGPU VFs against the files' device specs."""
    gpus = tuple(g.address for g in host.vgpu_gpus())
    if not gpus:
        return VfCheck([])
    names = host.vgpu_type_names()
    vfs = _vfs(pci, host)
    found, explained = not_enabled_findings(pci, host)
    found += untyped_findings(vfs, pci, names)
    found += mixed_type_findings(vfs, pci, names)
    found += not_offered_findings(vfs, names)
    return VfCheck(found, gpus, tuple(vfs), names, explained)
