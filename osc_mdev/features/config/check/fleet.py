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

"""``config check --snapshot``: many compute nodes, each judged
(``features.config.check.judge``) against its share of one read of
Placement.

``Cloud`` holds the whole cloud's mdev and PCI devices by compute node,
read once (``cloud.reads.cloud_devices``); ``FleetPlacement`` is one
node's ``judge.NodePlacement`` out of it. The servers on a device
(allocations, then names from Nova) are read only for the nodes whose
findings name them: each node is judged first with the servers of its
devices in use ``Pending``, which notes that they were asked for; the
nodes that asked are judged again once their servers are read.

A node that cannot be checked (its snapshot unreadable or of an unknown
version, a node Placement does not know, nova.conf files nova-compute
cannot read, a node the snapshots could not reach) is one error finding
of that node; the other nodes are checked all the same.
"""

from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import typing

from osc_mdev.base import findings as finding_model
from osc_mdev.base import words
from osc_mdev.cloud import providers as provider_model
from osc_mdev.features.config.check import judge
from osc_mdev.features.config.check import mdev as configcheck
from osc_mdev.features.config.check import pci as configcheck_pci
from osc_mdev.features.config.check import report as configreport
from osc_mdev.nova import names

ERROR = finding_model.ERROR
NODE_COLUMN = 'Node'


@dataclasses.dataclass
class Cloud:
    """The devices of every compute node, read once: ``hosts`` (every
    compute node's name), ``devices`` by host.
    """

    hosts: frozenset[str]
    devices: Mapping[str, Sequence[provider_model.Device]]

    @classmethod
    def of(cls, devices: Iterable[provider_model.Device],
           providers: Iterable[Mapping[str, typing.Any]]) -> 'Cloud':
        by_host: dict[str, list[provider_model.Device]] = {}
        for device in devices:
            by_host.setdefault(device.host, []).append(device)
        return cls(frozenset(provider_model.hosts_of(providers)), by_host)

    def in_use(self, hosts: Collection[str]) -> dict[str, str]:
        """``{provider UUID: resource class}`` of the devices in use on
        ``hosts``, as the servers on them are read.
        """
        return {d.uuid: d.resource_class for h in sorted(hosts)
                for d in self.devices.get(h, ()) if d.used}


class Pending(Sequence[str]):
    """The servers of a device not read yet: empty, and asking for them
    notes that the node needs them (``asked``).
    """

    def __init__(self, asked: set[str], host: str) -> None:
        self._asked = asked
        self._host = host

    def __len__(self) -> int:
        self._asked.add(self._host)
        return 0

    @typing.overload
    def __getitem__(self, index: int) -> str: ...

    @typing.overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        self._asked.add(self._host)
        return ()[index]


def _total(device: provider_model.Device) -> int:
    """A device's total: its inventory's when read, else the summary's
    capacity (the same for what Nova makes: reserved 0, ratio 1).
    """
    if device.inventory is not None:
        return device.inventory.total
    return device.capacity


class FleetPlacement:
    """One node's share of ``Cloud`` (``judge.NodePlacement``);
    ``servers``: ``{provider UUID: servers}`` once read, else None (the
    servers are ``Pending``, noted in ``asked``).
    """

    def __init__(self, cloud: Cloud, host: str,
                 servers: Mapping[str, Sequence[str]] | None,
                 asked: set[str]) -> None:
        self._host = host
        self._devices = cloud.devices.get(host, ())
        self._servers = servers
        self._asked = asked

    @property
    def host(self) -> str:
        return self._host

    def _on(self, device: provider_model.Device) -> Sequence[str]:
        if not device.used:
            return ()
        if self._servers is None:
            return Pending(self._asked, self._host)
        return tuple(self._servers.get(device.uuid, ()))

    def devices(self) -> list[configcheck.PlacementDevice]:
        return [configcheck.PlacementDevice(
            d.candidate.nodedev, d.device, d.resource_class, _total(d),
            tuple(d.traits or ()), self._on(d), d.used)
            for d in self._devices if d.kind == provider_model.MDEV]

    def pci_providers(self, servers: bool = False
                      ) -> list[configcheck_pci.PlacementPciProvider]:
        return [configcheck_pci.PlacementPciProvider(
            d.candidate.name, d.resource_class, _total(d), d.used,
            tuple(sorted(d.traits or ())), d.uuid,
            self._on(d) if servers else ())
            for d in self._devices if d.kind == provider_model.PCI
            and names.PCI_DEVICE_TRAIT in (d.traits or ())]


@dataclasses.dataclass
class NodeChecked:
    """One node's check: ``complete`` False when it could not be checked
    (``checked`` then holds the one error finding saying why).
    """

    node: str
    checked: judge.Checked
    complete: bool = True


def not_checked(node: str, where: str, message: str,
                check: str = '') -> NodeChecked:
    """A node that could not be checked: one error finding, of the kind
    ``check`` (``unreachable``, ``unknown-host``, ``nova-conf``,
    ``snapshot-<reason>``).
    """
    return NodeChecked(node, judge.Checked(
        [finding_model.Finding(ERROR, where, message, check=check,
                               host=node)],
        [], (where,), []), complete=False)


def unknown_host(node: str, source: str) -> NodeChecked:
    """A node whose snapshot names a compute node Placement does not
    have.
    """
    return not_checked(
        node, 'Placement', "No compute host named '%s' in Placement (from "
        "%s); hosts are named as in 'openstack hypervisor list'."
        % (node, source), check='unknown-host')


def unreachable(node: str, where: str, reason: str) -> NodeChecked:
    """A node the snapshots could not reach."""
    reason = ' '.join(reason.split())
    return not_checked(node, where, 'Node unreachable%s.' % (
        ': %s' % reason.rstrip('.') if reason else ''), check='unreachable')


def report(nodes: Sequence[NodeChecked], long: bool = False
           ) -> tuple[tuple[str, ...], list[configreport.Row]]:
    """``(columns, rows)``: each node's rows (``report.report``) with the
    node first; a node not checked has only its error row.
    """
    columns = (NODE_COLUMN,) + configreport.COLUMNS + (
        configreport.LONG_COLUMNS if long else ())
    rows: list[configreport.Row] = []
    for node in nodes:
        checked = node.checked
        _, own = configreport.report(checked.findings, checked.effects,
                                     checked.files, checked.scope, long)
        if not node.complete:
            own = own[:-1]      # no verdict: nothing was checked
        rows += [(node.node,) + row for row in own]
    return columns, rows


def failure(nodes: Sequence[NodeChecked]) -> str | None:
    """The one line of a fleet check with errors (exit status 1), or
    None.
    """
    failing = [n.node for n in nodes if n.checked.errors]
    if not failing:
        return None
    count = sum(len(n.checked.errors) for n in nodes)
    return '%d error(s) on %s of %d: %s.' % (
        count, words.count(len(failing), 'node'), len(nodes),
        words.first_few(failing))
