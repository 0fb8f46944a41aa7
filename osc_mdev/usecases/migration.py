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

import dataclasses
import logging

from osc_lib import exceptions

from osc_mdev.api import placement as placement_client
from osc_mdev.api import pool
from osc_mdev.domain import allocations as alloc_logic
from osc_mdev.domain import capacity as capacity_logic
from osc_mdev.domain import migration as domain
from osc_mdev.domain import novaconf
from osc_mdev.domain import providers
from osc_mdev.domain import resource_request as rr
from osc_mdev.domain import traits as trait_logic
from osc_mdev.usecases import capacity as capacity_reads
from osc_mdev.usecases import naming
from osc_mdev.usecases import nova_conf
from osc_mdev.usecases import provider as device_reads

LOG = logging.getLogger(__name__)

HOST = 'OS-EXT-SRV-ATTR:host'
NODE = 'OS-EXT-SRV-ATTR:hypervisor_hostname'


@dataclasses.dataclass(frozen=True)
class Inputs:
    """What the nova.conf files given say: each compute's (``confs``:
    host -> domain.Conf, from --compute-conf) and the controller's
    (``aliases``: ``nova_conf.controller_aliases``, None without
    --controller-conf; ``skip_version_check``: nova-conductor's
    ``[workarounds] skip_hypervisor_version_check_on_lm``).
    """

    confs: dict
    aliases: tuple | None = None
    skip_version_check: bool = False


def read_inputs(compute_confs: list[tuple[str, str]],
                controller_conf: list[str],
                prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX) -> Inputs:
    """The Inputs of the --compute-conf HOST=FILE and --controller-conf
    options, read and judged before any request. A compute's file that
    turns the conductor's skip_hypervisor_version_check_on_lm on is
    named in a warning: nova-compute does not read it.
    """
    computes = nova_conf.compute_confs(compute_confs)
    aliases, skip = None, False
    if controller_conf:
        settings = nova_conf.controller_settings(controller_conf)
        aliases = nova_conf.aliases_of(settings)
        try:
            skip = domain.skips_hypervisor_version_check(settings)
        except novaconf.NovaConfError as exc:
            raise exceptions.CommandError(
                '--controller-conf: %s.' % exc) from exc
    for host, conf in sorted(computes.items()):
        value = conf.settings.workarounds[
            novaconf.SKIP_HYPERVISOR_VERSION_CHECK]
        if value.value and not skip:
            LOG.warning(
                'Warning: --compute-conf %s: %s turns [workarounds] %s on, '
                'but nova-conductor reads it, not nova-compute: give the '
                "controller's nova.conf with --controller-conf.", host,
                value.where, novaconf.SKIP_HYPERVISOR_VERSION_CHECK)
    return Inputs({host: domain.conf_from(conf, prefix)
                   for host, conf in computes.items()}, aliases, skip)


# -- reading ---------------------------------------------------------------

def _nodes(listing, trees, hypervisors, confs, prefix, names_wanted):
    """``{node name: domain.Node}`` of the trees (and of wanted names
    Placement has no tree for), with their device types.
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
        nodes[tree.name] = domain.Node(tree.name, tree,
                                       by_node.get(tree.name), types, devs,
                                       conf)
    for name in names_wanted:
        if name not in nodes:
            nodes[name] = domain.Node(name, None, by_node.get(name), {}, {},
                                      confs.get(name))
    return nodes


def _held(server_id, allocations, listing, node):
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
        held.append(domain.Held(
            '%s:%s' % (found.host, found.device), found.candidate.uuid,
            found.resource_class, found.amount,
            node.types.get(found.candidate.uuid), found.kind))
    return tuple(held)


def _server(server, held, aliases):
    """A domain.Server of a server Nova shows with its embedded flavor."""
    flavor = dict(server.get('flavor') or {})
    flavor.setdefault('name', flavor.get('original_name') or '')
    request, problem, pci = None, None, ()
    try:
        request = capacity_reads.flavor_request(
            flavor, aliases, is_bfv=not server.get('image'))
        rr.check_request(request)
        wanted = [n for n, _ in rr.flavor_aliases(flavor)]
        if wanted and aliases is not None:
            pci = tuple(aliases[0][n] for n in dict.fromkeys(wanted))
    except (exceptions.CommandError, rr.RequestError) as exc:
        problem = str(exc).rstrip('.')
    return domain.Server(
        server['id'], server.get('name') or '',
        server.get('OS-EXT-STS:vm_state'), server.get('OS-EXT-STS:task_state'),
        server.get(NODE), flavor['name'], request, problem, held, pci)


def _firsts(placement, pairs):
    """Placement's first allocation request (``{provider: resources}``,
    or None when it gives none) for each ``(request, root uuid)``, all at
    once.
    """
    pairs = list(dict.fromkeys(pairs))

    def ask(pair):
        request, root = pair
        answer = placement.allocation_candidates(
            rr.to_querystring(request, in_tree=root))
        found = answer.get('allocation_requests') or []
        if not found:
            return None
        return {uuid: dict(a['resources'])
                for uuid, a in found[0]['allocations'].items()}
    return dict(zip(pairs, placement.map(ask, pairs)))


def _worth_asking(request, node):
    """Whether Placement's in_tree answer can change the verdict: the
    compute service is usable and the fit engine says the request fits.
    """
    hyp = node.hypervisor
    return (node.tree is not None and hyp is not None
            and hyp.status == domain.ENABLED and hyp.state == domain.UP
            and capacity_logic.place(request, node.tree) is not None)


def _check_hosts(listing, hosts, option):
    try:
        device_reads.check_hosts(listing, hosts)
    except exceptions.CommandError as exc:
        raise exceptions.CommandError('%s: %s' % (option, exc)) from exc


# -- check -----------------------------------------------------------------

def check(placement: object, compute: object, reference: str,
          targets: tuple = (), inputs: Inputs | None = None,
          prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX
          ) -> tuple[domain.Server, list[domain.Verdict]]:
    """``(server, [domain.Verdict])``: where the server ``reference``
    names can move (``targets``: only there), best targets first, with
    the nova.conf files' ``inputs``.
    """
    inputs = inputs or Inputs({})
    confs, aliases = inputs.confs, inputs.aliases
    server_id, _ = naming.find_server_id(compute, reference)
    server, allocations, listing, hypervisors = pool.call_all([
        lambda: compute.get_server(server_id, embedded_flavor=True),
        lambda: placement.get_consumer_allocations(server_id),
        placement.list_providers,
        compute.list_hypervisors], placement.max_workers)
    if server is None:
        raise exceptions.CommandError(
            "No server with ID %s; give its name or ID as 'openstack "
            "server list --all-projects' shows it." % server_id)
    source_name = server.get(NODE)
    if not source_name:
        raise exceptions.CommandError(
            'Server %s is on no compute node (status %s): there is nothing '
            'to migrate.' % (server_id, server.get('status')))
    hosts = list(dict.fromkeys(targets))
    _check_hosts(listing, hosts, '--target')
    _check_hosts(listing, list(confs), '--compute-conf')
    if source_name in hosts:
        raise exceptions.CommandError(
            '--target %s is the compute node the server is on; name '
            'another.' % source_name)
    hypervisors = [domain.hypervisor_from_api(h) for h in hypervisors]
    found = _server(server, (), aliases)
    if found.request is None:
        raise exceptions.CommandError('Server %s: %s.' % (
            server_id, found.problem))
    trees = capacity_reads.read_hosts(
        placement, found.request, listing,
        hosts=tuple(hosts + [source_name]) if hosts else ())
    owner_nova = capacity_logic.owner_nova_in_effect(trees)
    nodes = _nodes(listing, trees, hypervisors, confs, prefix,
                   hosts + [source_name])
    source = nodes[source_name]
    found = _server(server, _held(server_id, allocations, listing, source),
                    aliases)
    request = rr.with_prefilters(found.request, owner_nova=owner_nova)
    targets = [n for name, n in sorted(nodes.items())
               if name != source_name and (
                   name in hosts or not hosts and domain.offers(request, n))]
    asked = [t for t in targets if _worth_asking(request, t)]
    firsts = _firsts(placement, [(request, t.tree.root.uuid)
                                 for t in asked])
    verdicts = []
    for target in targets:
        first = domain.NOT_ASKED
        if target in asked:
            first = firsts[(request, target.tree.root.uuid)]
        verdicts.append(domain.judge(
            found, source, target, first, owner_nova=owner_nova,
            skip_version_check=inputs.skip_version_check))
    verdicts.sort(key=lambda v: (v.live != domain.YES,
                                 v.cold != domain.YES, v.node))
    return found, verdicts


# -- plan ------------------------------------------------------------------

def plan(placement: object, compute: object, host: str,
         kinds: tuple = (domain.LIVE, domain.COLD), targets: tuple = (),
         inputs: Inputs | None = None,
         prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX
         ) -> list[domain.Move]:
    """``[domain.Move]``: where each server with devices on compute node
    ``host`` goes (``targets``: only there), jointly, with the nova.conf
    files' ``inputs``.
    """
    inputs = inputs or Inputs({})
    confs, aliases = inputs.confs, inputs.aliases
    listing, hypervisors, on_node = pool.call_all([
        placement.list_providers, compute.list_hypervisors,
        lambda: compute.servers_on_node(host, embedded_flavor=True)],
        placement.max_workers)
    _check_hosts(listing, [host], '--host')
    _check_hosts(listing, list(targets), '--target')
    _check_hosts(listing, list(confs), '--compute-conf')
    if host in targets:
        raise exceptions.CommandError(
            '--target %s is the host to drain; name other hosts.' % host)
    hypervisors = [domain.hypervisor_from_api(h) for h in hypervisors]

    # Who holds devices on the host: its devices' consumers.
    devices = [c for c in providers.find_candidates(listing,
                                                    providers.KINDS)
               if c.host == host]

    def consumers(candidate):
        try:
            return placement.get_provider_allocations(candidate.uuid)
        except placement_client.NotFound:
            return {}
    per_device = dict(zip([d.uuid for d in devices],
                          placement.map(consumers, devices)))
    holders = {c for allocs in per_device.values() for c, a in
               allocs.items() if any(a['resources'].values())}
    servers = [s for s in on_node if s['id'] in holders]
    unknown = holders - {s['id'] for s in servers}
    if unknown:
        LOG.warning('Warning: %d consumer(s) hold devices of %s but are no '
                    'server Nova has there (a migration in progress, or '
                    "orphaned: see 'openstack mdev audit --host %s'): %s",
                    len(unknown), host, host, ', '.join(sorted(unknown)))

    if not servers:
        return []
    bare = [_server(s, (), aliases) for s in servers]
    requests = [s.request for s in bare if s.request is not None]
    wanted = tuple(targets) + (host,) if targets else ()
    trees = capacity_reads.read_hosts(placement, requests, listing,
                                      hosts=wanted)
    owner_nova = capacity_logic.owner_nova_in_effect(trees)
    nodes = _nodes(listing, trees, hypervisors, confs, prefix,
                   list(wanted) or [host])
    source = nodes[host]
    allocations = {}
    for uuid, allocs in per_device.items():
        for consumer, alloc in allocs.items():
            allocations.setdefault(consumer, {})[uuid] = alloc
    found = sorted((_server(s, _held(s['id'], allocations.get(s['id'], {}),
                                     listing, source), aliases)
                    for s in servers), key=lambda s: (s.name, s.id))
    target_nodes = [n for name, n in sorted(nodes.items()) if name != host]

    pairs, keys = [], {}
    for server in found:
        if server.request is None:
            continue
        request = rr.with_prefilters(server.request, owner_nova=owner_nova)
        for target in target_nodes:
            if _worth_asking(request, target):
                pair = (request, target.tree.root.uuid)
                pairs.append(pair)
                keys[(server.id, target.name)] = pair
    answers = _firsts(placement, pairs)
    firsts = {key: answers[pair] for key, pair in keys.items()}
    return domain.plan(
        found, source, target_nodes, kinds, firsts, owner_nova,
        fix=lambda s, ns: domain.smallest_fix(s, ns, owner_nova),
        skip_version_check=inputs.skip_version_check)
