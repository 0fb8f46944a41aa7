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

"""What ``mdev migration check`` and ``mdev migration plan`` read.

Requests, whatever the size of the cloud:

1. At once: the server (its own copy of its flavor, microversion 2.47)
   or, for a plan, the servers of the node (one listing per 1,000), the
   provider listing, ``os-hypervisors`` (one listing per 1,000 nodes:
   service host, status, state, QEMU's version) and, for a check, the
   server's allocations.
2. For a plan: the allocations of each device of the drained node (who
   holds mdevs there).
3. The compute node trees as ``mdev capacity`` reads them: one
   allocation candidates request whose summaries cover every tree, one
   ``?resources=`` listing per distinct amount asked of a device.
4. Per candidate target (a target the fit engine says the request fits,
   with its compute service enabled and up), and per distinct flavor
   request: Placement's allocation candidates for the request in that
   tree (``in_tree=``), as the scheduler asks it for a named host. The
   first is the one the scheduler claims.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
import dataclasses
import logging
import typing

from osc_mdev.api import compute as compute_client
from osc_mdev.api import placement as placement_client
from osc_mdev.api import pool
from osc_mdev.base import errors
from osc_mdev.cloud import allocation_candidates
from osc_mdev.cloud import allocations as alloc_logic
from osc_mdev.cloud import fit as capacity_logic
from osc_mdev.cloud import lookup as naming
from osc_mdev.cloud import payloads as nova_payloads
from osc_mdev.cloud import providers
from osc_mdev.cloud import reads as device_reads
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.features.capacity import reads as capacity_reads
from osc_mdev.features.migration import model as migration_model
from osc_mdev.features.migration import plan as migration_plan
from osc_mdev.features.migration import verdict as migration_verdict
from osc_mdev.features import nova_conf
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova import migration as migration_rules
from osc_mdev.nova import objects as nova_servers
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.pci import request as pci_request
from osc_mdev.nova.scheduler import request_filter
from osc_mdev.nova.scheduler import utils as rr

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Inputs:
    """What the nova.conf files given say: each compute's (``confs``:
    host -> migration_model.Conf, from ``compute_confs``) and the
    controller's (``pci_config``: its ``[pci]``, None without
    ``controller_conf``; ``skip_version_check``: nova-conductor's
    ``[workarounds] skip_hypervisor_version_check_on_lm``).
    ``conductor_only``: ``{host: where}`` of each compute's file that
    turns that option on while the controller's does not: nova-compute
    does not read it.
    """

    confs: dict
    pci_config: pci_rules.PciConfig | None = None
    skip_version_check: bool = False
    conductor_only: dict[str, str] = dataclasses.field(default_factory=dict)


def read_inputs(compute_confs: list[tuple[str, str]],
                controller_conf: list[str],
                prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX) -> Inputs:
    """The Inputs of the ``compute_confs`` (``(HOST, FILE)``) and
    ``controller_conf`` files, read and judged before any request.
    """
    computes = nova_conf.compute_confs(compute_confs)
    pci_config, skip = None, False
    if controller_conf:
        settings = nova_conf.controller_settings(controller_conf)
        pci_config = nova_conf.pci_of(settings)
        try:
            skip = migration_rules.skips_hypervisor_version_check(settings)
        except novaconf.NovaConfError as exc:
            raise errors.Invalid(
                '%s: %s.' % (errors.given('controller_conf'), exc),
                parameter='controller_conf') from exc
    conductor_only = {}
    for host, conf in sorted(computes.items()):
        assert conf.settings is not None    # parsed from the host's file
        value = conf.settings.workarounds[
            novaconf.SKIP_HYPERVISOR_VERSION_CHECK]
        if value.value and not skip:
            conductor_only[host] = value.where
    return Inputs({host: migration_model.conf_from(conf, prefix)
                   for host, conf in computes.items()}, pci_config, skip,
                  conductor_only)


# -- reading ---------------------------------------------------------------

def _nodes(listing: list[dict], trees: list[capacity_logic.Host],
           hypervisors: list[nova_servers.Hypervisor],
           confs: dict[str, migration_model.Conf], prefix: str,
           names_wanted: Iterable[str]) -> dict[str, migration_model.Node]:
    """``{node name: features.migration.model.Node}`` of the trees (and
    of wanted names Placement has no tree for), with their device types.
    """
    by_node = {h.node: h for h in hypervisors}
    nodedevs = {c.uuid: c.nodedev for c in providers.find_candidates(
        listing, (providers.MDEV,))}
    nodes = {}
    for tree in trees:
        conf = confs.get(tree.name)
        types, devs = {}, {}
        for device in tree.children:
            nodedev = nodedevs.get(device.uuid)
            if nodedev is None:
                continue  # a PCI device: no mdev type
            devs[device.uuid] = nodedev
            if conf is not None:
                types[device.uuid] = conf.type_of(nodedev)
            else:
                types[device.uuid] = trait_logic.mdev_type_of_traits(
                    device.traits, prefix)
        nodes[tree.name] = migration_model.Node(
            tree.name, tree, by_node.get(tree.name), types, devs, conf)
    for name in names_wanted:
        if name not in nodes:
            nodes[name] = migration_model.Node(
                name, None, by_node.get(name), {}, {}, confs.get(name))
    return nodes


def _held(server_id: str, allocations: dict, listing: list[dict],
          node: migration_model.Node) -> tuple[migration_model.Held, ...]:
    """The server's device allocations (Held) on its source ``node``."""
    candidates = {c.uuid: c for c in providers.find_candidates(
        listing, providers.KINDS)}
    devices = {d.uuid: d for d in node.tree.children} if node.tree else {}
    held = []
    for found in alloc_logic.of_consumer(server_id, allocations, candidates):
        device = devices.get(found.candidate.uuid)
        if found.kind == providers.PCI and (
                device is None or not providers.is_pci_device(
                    device.traits)):
            continue
        held.append(migration_model.Held(
            '%s:%s' % (found.host, found.device), found.candidate.uuid,
            found.resource_class, found.amount,
            node.types.get(found.candidate.uuid), found.kind))
    return tuple(held)


def _server(server: nova_servers.Server,
            held: tuple[migration_model.Held, ...],
            pci_config: pci_rules.PciConfig | None
            ) -> migration_model.Server:
    """A migration_model.Server of a server (a servers.Server, with its
    embedded flavor and whether it was booted from volume).
    """
    request, problem = None, None
    pci: tuple[pci_request.Alias, ...] = ()
    try:
        request = capacity_reads.request_of(
            server.flavor, pci_config, server.booted_from_volume)
        rr.check_request(request)
        pci = tuple({r.alias.name: r.alias
                     for r in request.pci_requests}.values())
    except (errors.Error, rr.RequestError) as exc:
        problem = str(exc).rstrip('.')
    return migration_model.Server(
        server.id, server.name, server.vm_state, server.task_state,
        server.node, server.flavor.name, request, problem, held, pci)


def _firsts(placement: placement_client.PlacementClient,
            pairs: list[tuple[rr.Request, str]]
            ) -> dict[tuple[rr.Request, str], dict | None]:
    """Placement's first allocation request (``{provider: resources}``,
    or None when it gives none) for each ``(request, root uuid)``, all at
    once.
    """
    pairs = list(dict.fromkeys(pairs))

    def ask(pair: tuple[rr.Request, str]) -> dict | None:
        request, root = pair
        answer = allocation_candidates.parse(placement.allocation_candidates(
            rr.to_querystring(request, in_tree=root)))
        first = capacity_logic.claimed(answer.requests)
        return None if first is None else first.allocations
    return dict(zip(pairs, placement.map(ask, pairs)))


def _worth_asking(request: rr.Request, node: migration_model.Node) -> bool:
    """Whether Placement's in_tree answer can change the verdict: the
    compute service is usable and the fit engine says the request fits.
    """
    hyp = node.hypervisor
    return (node.tree is not None and hyp is not None
            and hyp.status == nova_servers.ENABLED
            and hyp.state == nova_servers.UP
            and capacity_logic.place(request, node.tree) is not None)


def _root_uuid(node: migration_model.Node) -> str:
    """The root provider of a node Placement has a tree for."""
    assert node.tree is not None        # asked only of nodes with a tree
    return node.tree.root.uuid


# -- check -----------------------------------------------------------------

def check(placement: placement_client.PlacementClient,
          compute: compute_client.ComputeClient, reference: str,
          targets: tuple[str, ...] = (), inputs: Inputs | None = None,
          prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX
          ) -> tuple[migration_model.Server, list[migration_verdict.Verdict]]:
    """``(server, [features.migration.verdict.Verdict])``: where the server
    ``reference`` names can move (``targets``: only there), best targets
    first, with the nova.conf files' ``inputs``.
    """
    inputs = inputs or Inputs({})
    confs, pci_config = inputs.confs, inputs.pci_config
    server_id, _ = naming.find_server_id(compute, reference)
    calls: list[Callable[[], typing.Any]] = [
        lambda: compute.get_server(server_id, embedded_flavor=True),
        lambda: placement.get_consumer_allocations(server_id),
        placement.list_providers,
        compute.list_hypervisors]
    server, allocations, listing, hypervisors = pool.call_all(
        calls, placement.max_workers)
    if server is None:
        raise errors.NotFound(
            "No server with ID %s; give its name or ID as 'openstack "
            "server list --all-projects' shows it." % server_id,
            kind='server', name=server_id)
    server = nova_payloads.server(server)
    source_name = server.node
    if not source_name:
        raise errors.Refused(
            'Server %s is on no compute node (status %s): there is nothing '
            'to migrate.' % (server_id, server.status),
            server=server_id, status=server.status)
    hosts = list(dict.fromkeys(targets))
    device_reads.check_hosts(listing, hosts, 'target')
    device_reads.check_hosts(listing, list(confs), 'compute_conf')
    if source_name in hosts:
        raise errors.Invalid(
            '%s %s is the compute node the server is on; name another.'
            % (errors.given('target'), source_name),
            parameter='target', host=source_name)
    hypervisors = [nova_payloads.hypervisor(h) for h in hypervisors]
    found = _server(server, (), pci_config)
    plain = found.request
    if plain is None:
        raise errors.Refused('Server %s: %s.' % (server_id, found.problem),
                             server=server_id)
    trees = capacity_reads.read_hosts(
        placement, plain, listing,
        hosts=tuple(hosts + [source_name]) if hosts else ())
    owner_nova = capacity_logic.owner_nova_in_effect(trees)
    nodes = _nodes(listing, trees, hypervisors, confs, prefix,
                   hosts + [source_name])
    source = nodes[source_name]
    found = dataclasses.replace(found, held=_held(
        server_id, allocations, listing, source))
    request = request_filter.process_reqspec(plain, owner_nova=owner_nova)
    judged = [n for name, n in sorted(nodes.items())
              if name != source_name and (
                  name in hosts or not hosts and migration_model.offers(
                      request, n))]
    asked = [t for t in judged if _worth_asking(request, t)]
    firsts = _firsts(placement, [(request, _root_uuid(t)) for t in asked])
    verdicts = []
    for target in judged:
        first: migration_verdict.First = migration_verdict.NOT_ASKED
        if target in asked:
            first = firsts[(request, _root_uuid(target))]
        verdicts.append(migration_verdict.judge(
            found, source, target, first, owner_nova=owner_nova,
            skip_version_check=inputs.skip_version_check))
    verdicts.sort(key=lambda v: (v.live != migration_verdict.YES,
                                 v.cold != migration_verdict.YES, v.node))
    return found, verdicts


# -- plan ------------------------------------------------------------------

def _holders(placement: placement_client.PlacementClient,
             listing: list[dict], host: str,
             on_node: list[nova_servers.Server],
             only: Iterable[str] = ()
             ) -> tuple[list[nova_servers.Server], dict[str, dict]]:
    """``(servers, {consumer: {device uuid: allocation}})``: the servers
    of ``on_node`` that hold devices of ``host`` (its devices'
    consumers), and their allocations there. Consumers that are no
    server Nova has there are named in a warning.
    """
    devices = [c for c in providers.find_candidates(listing,
                                                    providers.KINDS)
               if c.host == host and (not only or c.uuid in set(only))]
    uuids = [d.uuid for d in devices]
    per_device = dict(zip(uuids, placement.map(
        device_reads.allocations_or_empty(placement), uuids)))
    holders = {c for allocs in per_device.values() for c, a in
               allocs.items() if any(a['resources'].values())}
    servers = [s for s in on_node if s.id in holders]
    unknown = holders - {s.id for s in servers}
    if unknown:
        LOG.warning('Warning: %d consumer(s) hold devices of %s but are no '
                    'server Nova has there (a migration in progress, or '
                    "orphaned: see 'openstack mdev audit --host %s'): %s",
                    len(unknown), host, host, ', '.join(sorted(unknown)))
    allocations: dict[str, dict] = {}
    for uuid, allocs in per_device.items():
        for consumer, alloc in allocs.items():
            allocations.setdefault(consumer, {})[uuid] = alloc
    return servers, allocations


def plan(placement: placement_client.PlacementClient,
         compute: compute_client.ComputeClient, host: str,
         kinds: tuple = (migration_rules.LIVE, migration_rules.COLD),
         targets: tuple = (),
         inputs: Inputs | None = None,
         prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX,
         devices: tuple[str, ...] = ()
         ) -> list[migration_plan.Move]:
    """``[features.migration.plan.Move]``: where each server with devices on
    compute node ``host`` (``devices``: on those device UUIDs) goes
    (``targets``: only there), jointly, with the nova.conf files'
    ``inputs``.
    """
    inputs = inputs or Inputs({})
    confs, pci_config = inputs.confs, inputs.pci_config
    listing, hypervisors, on_node = pool.call_all([
        placement.list_providers, compute.list_hypervisors,
        lambda: compute.servers_on_node(host, embedded_flavor=True)],
        placement.max_workers)
    device_reads.check_hosts(listing, [host], 'host')
    device_reads.check_hosts(listing, list(targets), 'target')
    device_reads.check_hosts(listing, list(confs), 'compute_conf')
    if host in targets:
        raise errors.Invalid(
            '%s %s is the host to drain; name other hosts.'
            % (errors.given('target'), host), parameter='target', host=host)
    hypervisors = [nova_payloads.hypervisor(h) for h in hypervisors]
    servers, allocations = _holders(
        placement, listing, host, [nova_payloads.server(s) for s in on_node],
        devices)
    if not servers:
        return []
    bare = [_server(s, (), pci_config) for s in servers]
    requests = [s.request for s in bare if s.request is not None]
    wanted = tuple(targets) + (host,) if targets else ()
    trees = capacity_reads.read_hosts(placement, requests, listing,
                                      hosts=wanted)
    owner_nova = capacity_logic.owner_nova_in_effect(trees)
    nodes = _nodes(listing, trees, hypervisors, confs, prefix,
                   list(wanted) or [host])
    source = nodes[host]
    found = sorted((_server(s, _held(s.id, allocations.get(s.id, {}),
                                     listing, source), pci_config)
                    for s in servers), key=lambda s: (s.name, s.id))
    target_nodes = [n for name, n in sorted(nodes.items()) if name != host]

    pairs, keys = [], {}
    for server in found:
        if server.request is None:
            continue
        request = request_filter.process_reqspec(server.request,
                                                 owner_nova=owner_nova)
        for target in target_nodes:
            if _worth_asking(request, target):
                pair = (request, _root_uuid(target))
                pairs.append(pair)
                keys[(server.id, target.name)] = pair
    answers = _firsts(placement, pairs)
    firsts = {key: answers[pair] for key, pair in keys.items()}
    return migration_plan.plan(
        found, source, target_nodes, kinds, firsts, owner_nova,
        fix=lambda s, ns: migration_plan.smallest_fix(s, ns, owner_nova),
        skip_version_check=inputs.skip_version_check)
