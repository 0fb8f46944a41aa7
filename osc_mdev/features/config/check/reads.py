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

"""``config check``: a compute node's nova.conf files, checked by Nova's
rules against the node's sysfs and what Placement has for the node.

The files and sysfs are read through ``osc_mdev.local``; Placement and
Nova are asked (through ``osc_mdev.api``) only for ``host``, the one
input that compares the files with the cloud.
"""

from collections.abc import Callable
from collections.abc import Sequence
import dataclasses
import os
import typing

from osc_mdev.api import compute as compute_client
from osc_mdev.api import placement as placement_client
from osc_mdev.base import errors
from osc_mdev.cloud import providers
from osc_mdev.cloud import reads as cloud_reads
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.features.allocation import reads as allocation_reads
from osc_mdev.features.config.check import fleet
from osc_mdev.features.config.check import judge
from osc_mdev.features.config.check import mdev as configcheck
from osc_mdev.features.config.check import pci as configcheck_pci
from osc_mdev.features.config.check import report as configreport
from osc_mdev.features.host import reads as lost_reads
from osc_mdev.features.trait import provider_files
from osc_mdev.local import conf_files as local_novaconf
from osc_mdev.local import node as local_node
from osc_mdev.local import snapshot
from osc_mdev.local import sysfs
from osc_mdev.local import textfile as local_textfile
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.pci import placement_translator as translator
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

#: What gives the Placement and Compute clients when they are first needed.
Clients = Callable[[], tuple[placement_client.PlacementClient,
                             compute_client.ComputeClient]]


#: The findings of one node's files (``judge.Checked``).
Checked = judge.Checked


def check(files: Sequence[str], sysfs_root: str | None = None,
          host: str | None = None,
          trait_prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX,
          clients: Clients | None = None,
          provider_configs: Sequence[tuple[str | None, str]] = (),
          libvirt_dir: str | None = None) -> Checked:
    """Check the nova.conf ``files`` (read in order, as nova-compute
    reads them), with the node's sysfs under ``sysfs_root`` and, for
    ``host``, against what Placement has for that compute node;
    ``clients`` gives ``(placement, compute)`` when they are first
    needed (the files alone need no credentials). NovaConfError for
    files nova-compute cannot read. ``provider_configs``: the ``(host or
    None, path)`` pairs of ``provider_config``, checked by
    ``check_provider_configs``. ``libvirt_dir``: the node's libvirt
    domain definitions, whose mdevs sysfs lacks are named (with
    ``sysfs_root`` and ``host``).
    """
    extra = check_provider_configs(provider_configs, host, clients)
    config_paths = tuple(p for _, p in provider_configs or ())
    if not files:
        return Checked(extra, [], config_paths, configreport.scope(
            None, host=host, provider_configs=True))
    virtual = (sysfs.sysfs_virtual_parent(sysfs_root)
               if sysfs_root else None)
    conf = local_novaconf.parse_files(files, virtual)
    node = sysfs.read_host(sysfs_root) if sysfs_root else None
    placed = HostPlacement(clients, host) if host else None
    checked = judge.judge(conf, node, placed, trait_prefix, sysfs_root,
                          provider_configs=bool(config_paths))
    lost = (lost_reads.lost_findings(
        lost_reads.domains_in(libvirt_dir), node, host, conf,
        _clients(clients), trait_prefix)
        if node is not None and host and libvirt_dir else [])
    return Checked(checked.findings + lost + extra, checked.effects,
                   checked.files + config_paths, checked.scope)


class HostPlacement:
    """What Placement has for compute node ``host``, read for it alone
    when first asked (``judge.NodePlacement``).
    """

    def __init__(self, clients: Clients | None, host: str) -> None:
        self._clients = clients
        self._host = host
        self._devices: list[configcheck.PlacementDevice] | None = None
        self._pci: list[configcheck_pci.PlacementPciProvider] | None = None
        self._pci_servers: (list[configcheck_pci.PlacementPciProvider]
                            | None) = None

    @property
    def host(self) -> str:
        return self._host

    def devices(self) -> list[configcheck.PlacementDevice]:
        if self._devices is None:
            placement, compute = _asked(self._clients)
            self._devices = placement_devices(placement, compute,
                                              self._host)
        return self._devices

    def pci_providers(self, servers: bool = False
                      ) -> list[configcheck_pci.PlacementPciProvider]:
        if self._pci is None:
            self._pci = node_pci_providers(_asked(self._clients)[0],
                                           self._host)
        if not servers:
            return self._pci
        if self._pci_servers is None:
            self._pci_servers = with_servers(self._clients, self._host,
                                             self._pci)
        return self._pci_servers


def _clients(clients: Clients | None) -> Clients:
    """The clients, which a check of a host is always given."""
    assert clients is not None
    return clients


def _asked(clients: Clients | None
           ) -> tuple[placement_client.PlacementClient,
                      compute_client.ComputeClient]:
    """The clients, which a check of a host is always given."""
    assert clients is not None
    return clients()


def placement_devices(placement: placement_client.PlacementClient,
                      compute: compute_client.ComputeClient,
                      host: str) -> list[configcheck.PlacementDevice]:
    """The node's mdev devices in Placement, with the servers on each."""
    found = allocation_reads.node_devices_with_servers(placement, compute,
                                                       host)
    return [configcheck.PlacementDevice(
        d.candidate.nodedev, d.device, d.resource_class,
        # The devices are read with their inventories.
        typing.cast(providers.Inventory, d.inventory).total,
        tuple(d.traits or ()), tuple(servers), d.used)
        for d, servers in found]


def node_pci_providers(placement: placement_client.PlacementClient,
                       host: str
                       ) -> list[configcheck_pci.PlacementPciProvider]:
    """The PCI providers nova-compute made for node ``host`` (trait
    COMPUTE_MANAGED_PCI_DEVICE, in the node's tree): one listing, then
    inventories, usages and traits of each in the bounded pool. Empty when
    Placement has no such node.
    """
    roots: list[dict | None] = list(placement.find_providers(name=host))
    [root] = roots or [None]
    if root is None:
        return []
    found = placement.find_providers(
        in_tree=root['uuid'],
        required_traits=[translator.COMPUTE_MANAGED_PCI_DEVICE])
    details = placement.get_provider_details([p['uuid'] for p in found])
    result: list[configcheck_pci.PlacementPciProvider] = []
    for provider in found:
        detail = details.get(provider['uuid'])
        if detail is None:
            continue
        inventories = detail['inventories'][1]
        usages = detail.get('usages') or {}
        traits = tuple(sorted(detail.get('traits') or ()))
        for rc, inventory in sorted(inventories.items()):
            result.append(configcheck_pci.PlacementPciProvider(
                provider['name'], rc, inventory['total'],
                usages.get(rc, 0), traits, provider['uuid']))
        if not inventories:
            result.append(configcheck_pci.PlacementPciProvider(
                provider['name'], None, 0, 0, traits, provider['uuid']))
    return result


def with_servers(clients: Clients | None, host: str,
                 placed: Sequence[configcheck_pci.PlacementPciProvider]
                 ) -> list[configcheck_pci.PlacementPciProvider]:
    """The PCI providers, each in use with the servers holding its class
    there (by name): one allocations read per provider in use, the names
    from Nova in bulk.
    """
    in_use = {p.uuid: p.resource_class for p in placed
              if p.used and p.resource_class is not None}
    if not in_use:
        return list(placed)
    placement, compute = _asked(clients)
    consumers = allocation_reads.consumers_of(placement, in_use)
    labels = allocation_reads.server_labels(
        compute, host, {c for cs in consumers.values() for c in cs})
    return [dataclasses.replace(p, servers=tuple(sorted(
        labels[c] for c in consumers.get(p.uuid, ())))) for p in placed]


def check_provider_configs(values: Sequence[tuple[str | None, str]],
                           host: str | None = None,
                           clients: Clients | None = None
                           ) -> list[novaconf.Finding]:
    """Findings of nova-compute's provider config files (``(host or
    None, path)`` pairs, read together as one nova-compute reads its
    directory) by Nova's rules and, for ``host``, against the compute
    node's providers in Placement. A pair's host names the node the
    files are for: it must be ``host``, which alone reads the cloud.
    """
    if not values:
        return []
    split = list(values)
    named = {h for h, _ in split if h}
    if len(named | ({host} if host else set())) > 1:
        raise errors.Invalid(
            'The provider config files are for one compute node, not %s; '
            'check each node on its own.'
            % ', '.join(sorted(named | ({host} if host else set()))),
            parameter='provider_config', hosts=sorted(named))
    if named and not host:
        [node] = named
        raise errors.Invalid(
            '%s gives the files of compute node %s; to compare them with '
            'its providers in Placement (which needs cloud credentials) '
            'give %s %s too, or give the path alone to check the files '
            'only.' % (errors.given('provider_config'), node,
                       errors.given('host'), node),
            parameter='provider_config', host=node)
    configs, findings = provider_files.read([p for _, p in split])
    if host:
        placement, _ = _asked(clients)
        findings += provider_files.placement_findings(
            placement, host, configs)
    return findings


#: What a snapshot directory holds: node snapshots, and a marker per node
#: that could not be reached (its text: why).
SNAPSHOT_SUFFIX = '.json'
UNREACHABLE_SUFFIX = '.unreachable'


def snapshot_sources(snapshots: Sequence[str] = (),
                     directory: str | None = None) -> list[str]:
    """The snapshot files to check: ``snapshots`` as given, or the
    ``*.json`` and ``*.unreachable`` files of ``directory`` in sorted
    order. errors.Invalid for a directory that is none or holds neither.
    """
    if directory is None:
        return list(snapshots)
    if not os.path.isdir(directory):
        raise errors.Invalid(
            '%s: %s is not a directory; give the directory the node '
            'snapshots were collected in.' % (
                errors.given('snapshot_dir'), directory),
            parameter='snapshot_dir', path=directory)
    found = sorted(
        os.path.join(directory, name) for name in os.listdir(directory)
        if name.endswith((SNAPSHOT_SUFFIX, UNREACHABLE_SUFFIX))
        and os.path.isfile(os.path.join(directory, name)))
    if not found:
        raise errors.Invalid(
            '%s: %s holds no node snapshot (*%s); take them with '
            "'openstack mdev host snapshot' on each node." % (
                errors.given('snapshot_dir'), directory, SNAPSHOT_SUFFIX),
            parameter='snapshot_dir', path=directory)
    return found


def _stem(path: str) -> str:
    name = os.path.basename(path)
    for suffix in (SNAPSHOT_SUFFIX, UNREACHABLE_SUFFIX):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[:-len(suffix)]
    return name


def _unreachable(path: str) -> fleet.NodeChecked:
    try:
        reason = local_textfile.read_text(path) or ''
    except OSError as exc:
        reason = exc.strerror or str(exc)
    return fleet.unreachable(_stem(path), path, reason)


def _load(path: str) -> local_node.Node | fleet.NodeChecked:
    """The node of a snapshot file, or the one finding saying why it
    cannot be checked.
    """
    if path.endswith(UNREACHABLE_SUFFIX):
        return _unreachable(path)
    try:
        return local_node.from_snapshot(path)
    except snapshot.SnapshotError as exc:
        return fleet.not_checked(
            _stem(path), path, 'Cannot check this node: %s; take its '
            "snapshot again with 'openstack mdev host snapshot'."
            % exc.detail, check='snapshot-%s' % exc.reason)
    except (KeyError, TypeError, ValueError) as exc:
        return fleet.not_checked(
            _stem(path), path, 'Cannot check this node: the snapshot is '
            'incomplete (%s); take it again.' % exc, check='snapshot')


def _parsed(node: local_node.Node
            ) -> libvirt_driver.MdevConfig | fleet.NodeChecked:
    """The node's nova.conf files parsed, or the one finding saying why
    nova-compute cannot read them.
    """
    try:
        return libvirt_driver.supported_vgpu_types(
            novaconf.parse_texts(node.conf_texts()),
            node.virtual_parent_exists)
    except novaconf.NovaConfError as exc:
        return fleet.not_checked(node.name, node.source, '%s.' % exc,
                                 check='nova-conf')


def check_fleet(sources: Sequence[str],
                trait_prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX,
                clients: Clients | None = None) -> list[fleet.NodeChecked]:
    """Check every node of the snapshot files ``sources``
    (``snapshot_sources``) against one read of Placement for all
    (``cloud.reads.cloud_devices``; the inventories of the PCI devices
    whose summary is unlike the node's files, ``fleet.unsure_totals``),
    and the servers on the devices of the nodes whose findings name them
    (``fleet.Pending``). Each node's findings are those ``check`` gives
    on the node with ``host``; a node that cannot be checked is one
    error finding.
    """
    done: list[fleet.NodeChecked | None] = []
    todo: dict[int, tuple[local_node.Node, libvirt_driver.MdevConfig]] = {}
    for path in sources:
        loaded = _load(path)
        conf = (_parsed(loaded) if isinstance(loaded, local_node.Node)
                else loaded)
        if isinstance(conf, fleet.NodeChecked):
            done.append(conf)
        else:
            assert isinstance(loaded, local_node.Node)
            todo[len(done)] = loaded, conf
            done.append(None)
    if todo:
        placement, compute = _asked(clients)
        cloud = fleet.Cloud.of(*cloud_reads.cloud_devices(placement))
        cloud = cloud.with_devices(cloud_reads.with_inventories(
            placement, [d for node, conf in todo.values()
                        for d in fleet.unsure_totals(
                            cloud, node.name, node.host, conf)]))
        asked: set[str] = set()
        for i, (node, conf) in todo.items():
            done[i] = _judged(cloud, node, conf, trait_prefix, None, asked)
        if asked:
            servers = _servers_of(placement, compute, cloud, asked)
            for i, (node, conf) in todo.items():
                if node.name in asked:
                    done[i] = _judged(cloud, node, conf, trait_prefix,
                                      servers, set())
        for i, (node, conf) in todo.items():
            _add_lost(done[i], node, conf, trait_prefix,
                      lambda: (placement, compute))
    return [d for d in done if d is not None]


def _add_lost(done: fleet.NodeChecked | None, node: local_node.Node,
              conf: libvirt_driver.MdevConfig, trait_prefix: str,
              clients: Clients) -> None:
    """Add the lost mdevs of a node checked (its snapshot's domain
    definitions against its sysfs) to its findings.
    """
    if done is not None and done.complete and node.domains:
        done.checked.findings += lost_reads.lost_findings(
            node.domains, node.host, node.name, conf, clients, trait_prefix)


def _judged(cloud: fleet.Cloud, node: local_node.Node,
            conf: libvirt_driver.MdevConfig, trait_prefix: str,
            servers: dict[str, tuple[str, ...]] | None,
            asked: set[str]) -> fleet.NodeChecked:
    if node.name not in cloud.hosts:
        return fleet.unknown_host(node.name, node.source)
    placed = fleet.FleetPlacement(cloud, node.name, servers, asked)
    return fleet.NodeChecked(node.name, judge.judge(
        conf, node.host, placed, trait_prefix, node.source))


def _servers_of(placement: placement_client.PlacementClient,
                compute: compute_client.ComputeClient, cloud: fleet.Cloud,
                hosts: set[str]) -> dict[str, tuple[str, ...]]:
    """``{provider UUID: servers}`` of the devices in use on ``hosts``:
    one allocations read per device, the names from Nova in bulk.
    """
    consumers = allocation_reads.consumers_of(placement,
                                              cloud.in_use(hosts))
    labels = allocation_reads.server_labels(
        compute, sorted(hosts), {c for cs in consumers.values() for c in cs})
    return {uuid: tuple(sorted(labels[c] for c in cs))
            for uuid, cs in consumers.items()}
