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
node's ``judge.NodePlacement`` out of it. The summaries give a device's
capacity, (total - reserved) x ratio, not its total: the two are the
same where nova-compute made the inventory (reserved 0, ratio 1). A
PCI device whose capacity is not the number of devices the node's
files give it (``unsure_totals``: a one-time-use device Nova reserved,
a reserved count or ratio set by hand, a device no spec matches any
more) has its inventory read, one request per such device.

The servers on a device (allocations, then names from Nova) are read
only for the nodes whose findings name them: each node is judged first
with the servers of its devices in use ``Pending``, which notes that
they were asked for; the nodes that asked are judged again once their
servers are read.

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
from osc_mdev.host import gpus as host_gpus
from osc_mdev.nova import names
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.pci import devspec as pci_devspec
from osc_mdev.nova.pci import placement_translator as translator
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

ERROR = finding_model.ERROR
NODE_COLUMN = 'Node'

#: A PCI provider Nova made that holds no inventory, and its traits.
Bare = tuple[provider_model.Candidate, tuple[str, ...]]


@dataclasses.dataclass
class Cloud:
    """The devices of every compute node, read once: ``hosts`` (every
    compute node's name), ``devices`` by host.
    """

    hosts: frozenset[str]
    devices: Mapping[str, Sequence[provider_model.Device]]
    #: Nova's PCI providers with no inventory, with their traits, by
    #: host; ``order``: each provider's place in the listing.
    bare: Mapping[str, Sequence[Bare]] = dataclasses.field(
        default_factory=dict)
    order: Mapping[str, int] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, devices: Iterable[provider_model.Device],
           providers: Sequence[Mapping[str, typing.Any]],
           bare: Iterable[Bare] = ()) -> 'Cloud':
        by_host: dict[str, list[provider_model.Device]] = {}
        for device in devices:
            by_host.setdefault(device.host, []).append(device)
        bare_by_host: dict[str, list[Bare]] = {}
        for candidate, traits in bare:
            bare_by_host.setdefault(candidate.host, []).append(
                (candidate, traits))
        return cls(frozenset(provider_model.hosts_of(providers)), by_host,
                   bare_by_host,
                   {p['uuid']: i for i, p in enumerate(providers)})

    def with_devices(self, devices: Iterable[provider_model.Device]
                     ) -> 'Cloud':
        """The cloud with ``devices`` (read again) in place of theirs."""
        new = {(d.uuid, d.resource_class): d for d in devices}
        return dataclasses.replace(self, devices={
            host: [new.get((d.uuid, d.resource_class), d) for d in mine]
            for host, mine in self.devices.items()})

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


def unsure_totals(cloud: Cloud, host: str, node: host_gpus.Host,
                  conf: libvirt_driver.MdevConfig
                  ) -> list[provider_model.Device]:
    """The PCI devices of ``host`` whose total the summaries may hide:
    those whose capacity is not the number of PCI functions Nova gives
    their provider from the node's files (``translator.pci_providers``
    of the node's devices), a provider no spec matches included.
    """
    assert conf.settings is not None     # parsed from the files
    pci = pci_rules.pci_config(conf.settings)
    functions = node.pci_devices()
    predicted, _ = translator.pci_providers(
        host, functions, pci.specs,
        pci_devspec.physical_functions(functions))
    counts = {name: len(p.devices) for name, p in predicted.items()}
    return [d for d in cloud.devices.get(host, ())
            if d.kind == provider_model.PCI and d.inventory is None
            and provider_model.is_pci_device(d.traits)
            and d.capacity != counts.get(d.candidate.name)]


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
        self._bare = cloud.bare.get(host, ())
        self._order = cloud.order
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
        """The node's PCI providers, in the listing's order (as
        ``reads.node_pci_providers`` has them): a row per class, and
        one with no class for a provider with no inventory.
        """
        rows = [(self._order.get(d.uuid, 0), configcheck_pci.
                 PlacementPciProvider(
                     d.candidate.name, d.resource_class, _total(d), d.used,
                     tuple(sorted(d.traits or ())), d.uuid,
                     self._on(d) if servers else ()))
                for d in self._devices if d.kind == provider_model.PCI
                and names.PCI_DEVICE_TRAIT in (d.traits or ())]
        rows += [(self._order.get(c.uuid, 0), configcheck_pci.
                  PlacementPciProvider(c.name, None, 0, 0,
                                       tuple(sorted(traits)), c.uuid))
                 for c, traits in self._bare]
        return [row for _, row in sorted(rows, key=lambda r: r[0])]


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
