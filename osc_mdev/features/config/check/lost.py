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

"""Lost mdevs named: each mdev a guest of the node holds that the node's
sysfs does not have, with its server, parent GPU and type.

The guests are the node's libvirt domain definitions, read as Nova's
libvirt driver reads them (``nova.virt.libvirt.config``,
``get_all_assigned_mediated_devices``): the domain UUID is the server's.
The mdev's parent is the GPU of the server's allocation on the node (the
provider's name less ``<node>_``, as Nova picks the parent of a new
mdev); where the server holds vGPUs of several GPUs, the one with fewer
of its mdevs than its allocation. The type is the one nova-compute gives
that GPU with the node's nova.conf, else the type whose trait the
provider has, else the type of the GPU's other mdevs. The cloud is read
by ``features.host.reads``, only when an mdev is lost.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import typing

from osc_mdev.base import findings
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.host import gpus as host_gpus
from osc_mdev.nova.virt.libvirt import config as libvirt_config
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

WARNING = findings.WARNING


class Domain(typing.Protocol):
    """A libvirt domain definition: where it was read, its text."""

    @property
    def path(self) -> str:
        """Where it was read."""

    @property
    def text(self) -> str:
        """Its text."""


@dataclasses.dataclass(frozen=True)
class Holding:
    """A server's vGPUs on one GPU of the node, as Placement holds them."""

    server: str           # the consumer: the server's UUID
    gpu: str              # the GPU: its PCI address, or a virtual parent
    nodedev: str          # libvirt's name, the provider's less <node>_
    resource_class: str
    amount: int
    traits: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class LostMdev:
    """An mdev a server's domain holds and sysfs does not have.

    ``gpu`` is None when Placement gives the server no GPU of the node
    (or several, none of them short of mdevs: ``candidates``), and
    ``mdev_type`` None when no type can be told.
    """

    server: str
    server_name: str | None
    mdev: str
    gpu: str | None
    mdev_type: str | None
    domain: str                           # the definition's path
    candidates: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Guests:
    """The node's guests: ``[(definition path, Guest)]`` and the
    findings of the definitions that do not parse.
    """

    guests: tuple[tuple[str, libvirt_config.Guest], ...]
    findings: tuple[findings.Finding, ...] = ()

    def assigned(self) -> dict[str, tuple[str, libvirt_config.Guest]]:
        """``{mdev UUID: (path, guest)}`` of every mdev a guest holds,
        as Nova's ``_get_all_assigned_mediated_devices`` maps them.
        """
        by_uuid = {g.uuid: (path, g) for path, g in self.guests}
        mapped = libvirt_driver.get_all_assigned_mediated_devices(
            g for _, g in self.guests)
        return {mdev: by_uuid[server] for mdev, server in mapped.items()
                if mdev is not None and server is not None}


def guests_of(domains: Sequence[Domain], node: str) -> Guests:
    """The guests of ``domains``; a definition that is no XML or names
    no UUID is a finding, not an error.
    """
    guests, found = [], []
    for domain in domains:
        try:
            guest = libvirt_config.guest_parse_str(domain.text)
        except libvirt_config.GuestParseError as exc:
            found.append(_unread(node, domain.path, 'is not XML (%s)' % exc))
            continue
        if not guest.uuid:
            found.append(_unread(node, domain.path, 'names no <uuid>'))
            continue
        guests.append((domain.path, guest))
    return Guests(tuple(guests), tuple(found))


def _unread(node: str, path: str, why: str) -> findings.Finding:
    return findings.Finding(
        WARNING, path, 'The libvirt domain definition %s: its mdevs are '
        'not checked; compare it with virsh dumpxml of its domain.' % why,
        host=node)


def missing(guests: Guests, host: host_gpus.Host
            ) -> dict[str, tuple[str, libvirt_config.Guest]]:
    """The assigned mdevs the node's sysfs does not have."""
    present = {m.uuid for m in host.mdevs}
    return {uuid: held for uuid, held in guests.assigned().items()
            if uuid not in present}


def lost_mdevs(lost: Mapping[str, tuple[str, libvirt_config.Guest]],
               host: host_gpus.Host, holdings: Sequence[Holding],
               type_of: Callable[[Holding], str | None],
               names: Mapping[str, str] | None = None) -> list[LostMdev]:
    """Each lost mdev with its server, parent GPU and type; ``names``:
    the servers' names Nova gives (else the domain's Nova metadata).
    """
    assigned_to: dict[str, list[str]] = {}
    for uuid, (_, guest) in lost.items():
        assigned_to.setdefault(typing.cast(str, guest.uuid), []).append(uuid)
    found = []
    for uuid, (path, guest) in sorted(lost.items(),
                                      key=lambda i: (i[1][0], i[0])):
        server = typing.cast(str, guest.uuid)
        held = [h for h in holdings if h.server == server]
        short = [h for h in held if _present_on(host, h, guest) < h.amount]
        parent = short[0] if len(short) == 1 else (
            held[0] if len(held) == 1 else None)
        found.append(LostMdev(
            server, (names or {}).get(server) or guest.display_name, uuid,
            parent.gpu if parent else None,
            type_of(parent) if parent else None, path,
            () if parent else tuple(h.gpu for h in held)))
    return found


def _present_on(host: host_gpus.Host, holding: Holding,
                guest: libvirt_config.Guest) -> int:
    """How many of the guest's mdevs the GPU has in sysfs."""
    mine = {d.uuid for d in guest.mdevs}
    return sum(1 for m in host.mdevs_of(holding.gpu) if m.uuid in mine)


def type_for(conf: libvirt_driver.MdevConfig | None, host: host_gpus.Host,
             prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX
             ) -> Callable[[Holding], str | None]:
    """What gives a GPU's type: nova-compute's with ``conf``, else the
    type whose trait the provider has, else the type of its mdevs.
    """
    def type_of(holding: Holding) -> str | None:
        if conf is not None and conf.supported_types:
            return conf.type_for(holding.nodedev)
        device = host.devices.get(holding.gpu)
        for name in sorted(device.types if device else ()):
            if trait_logic.trait_for_mdev_type(name, prefix) in (
                    holding.traits):
                return name
        kinds = {m.mdev_type for m in host.mdevs_of(holding.gpu)}
        return kinds.pop() if len(kinds) == 1 else None
    return type_of


def finding(node: str, lost: LostMdev) -> findings.Finding:
    """One lost mdev, named, with what gives it back."""
    server = ('%s (%s)' % (lost.server_name, lost.server)
              if lost.server_name else lost.server)
    if lost.gpu is None:
        where = ('Placement holds no vGPU of the server on this node'
                 if not lost.candidates else
                 'the server holds vGPUs of GPUs %s, none of them short of '
                 'its mdevs' % ', '.join(lost.candidates))
        what = '%s, so its parent GPU cannot be told' % where
    else:
        what = 'its parent is GPU %s, type %s' % (
            lost.gpu, lost.mdev_type or 'unknown (no type in nova.conf, '
            'trait or sibling mdev)')
    return findings.Finding(
        WARNING, 'Placement, host %s' % node,
        'Server %s lost mdev %s: its libvirt domain (%s) holds it but the '
        'node has no such mdev, so the server does not start; %s. '
        "'openstack mdev host restore' writes the script that creates it "
        'again with its UUID.' % (server, lost.mdev, lost.domain, what),
        host=node, device=lost.gpu or '', server=lost.server)
