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

"""Servers and the mdev devices they use: Placement and Nova together.

Independent requests (Nova's server, Placement's providers and the
consumer's allocations; every device's allocations) run at once in the
bounded pool; server names come from Nova in bulk.
"""

from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Sequence
import dataclasses
import typing

from osc_mdev.api import compute as compute_client
from osc_mdev.api import placement as placement_client
from osc_mdev.api import pool
from osc_mdev.base import errors
from osc_mdev.cloud import allocations as domain
from osc_mdev.cloud import lookup as naming
from osc_mdev.cloud import payloads as nova_payloads
from osc_mdev.cloud import providers
from osc_mdev.cloud import reads as devices


@dataclasses.dataclass
class ServerAllocations:
    server: domain.ServerView
    allocations: list[domain.MdevAllocation]
    traits: dict[str, list[str]]    # provider UUID -> traits
    hidden: int = 0       # allocations on devices of kinds not asked for


def _providers_of(placement: placement_client.PlacementClient,
                  uuids: Sequence[str]) -> list[dict[str, typing.Any]]:
    """The providers ``uuids`` and their roots (for the host names), read
    one by one: a consumer sits on a few providers, not the cloud's.
    """
    def get(uuid: str) -> dict[str, typing.Any] | None:
        try:
            return placement.get_provider(uuid)
        except placement_client.NotFound:
            return None  # deleted meanwhile
    found = [p for p in placement.map(get, uuids) if p]
    roots = sorted({p.get('root_provider_uuid') or p['uuid']
                    for p in found} - set(uuids))
    return found + [p for p in placement.map(get, roots) if p]


def server_allocations(placement: placement_client.PlacementClient,
                       compute: compute_client.ComputeClient,
                       reference: str,
                       kinds: Collection[str] = (providers.MDEV,)
                       ) -> ServerAllocations:
    """A server's device allocations of ``kinds``, with the devices'
    traits; ``hidden`` counts its allocations on devices of other kinds.
    """
    server_id, server = naming.find_server_id(compute, reference)
    calls: list[Callable[[], typing.Any]] = [
        lambda: placement.get_consumer_allocations(server_id)]
    if server is None:
        calls.append(lambda: compute.get_server(server_id))
    consumer_allocs, *nova = pool.call_all(calls, placement.max_workers)
    if server is None:
        [server] = nova
    if server is None and not consumer_allocs:
        raise errors.NotFound(
            'No server with ID %s in Nova and no allocations for it in '
            'Placement.' % server_id, kind='server', name=server_id)
    provider_list = _providers_of(placement, sorted(consumer_allocs))
    candidates = {c.uuid: c for c in providers.find_candidates(
        provider_list, providers.KINDS)}
    found = domain.of_consumer(server_id, consumer_allocs, candidates)
    uuids = sorted({a.candidate.uuid for a in found})
    traits = dict(zip(uuids, placement.map(placement.get_traits, uuids)))
    # A provider named like a PCI device is one only with Nova's trait.
    found = [a for a in found if a.kind != providers.PCI
             or providers.is_pci_device(traits[a.candidate.uuid])]
    hidden = len([a for a in found if a.kind not in kinds])
    found = [a for a in found if a.kind in kinds]
    view = (domain.ServerView.from_server(nova_payloads.server(server))
            if server is not None
            else _unknown_views(placement, compute, [server_id])[server_id])
    return ServerAllocations(view, found, traits, hidden)


def _unknown_views(placement: placement_client.PlacementClient,
                   compute: compute_client.ComputeClient,
                   consumers: Sequence[str]
                   ) -> dict[str, domain.ServerView]:
    """A ServerView for each consumer Nova has no server for: Placement's
    consumer type and Nova's migrations (one listing) say what it is.
    """
    if not consumers:
        return {}
    calls: list[Callable[..., typing.Any]] = [
        lambda c=c: placement.get_consumer_type(c) for c in consumers]
    calls.append(compute.list_migrations)
    *types, listed = pool.call_all(calls, placement.max_workers)
    migrations = {m.get('uuid'): m for m in listed}
    return {c: domain.ServerView.unknown(t, migrations.get(c))
            for c, t in zip(consumers, types)}


def list_allocations(placement: placement_client.PlacementClient,
                     compute: compute_client.ComputeClient,
                     hosts: tuple = (), references: tuple = (),
                     resource_class: str | None = None,
                     kinds: tuple = (providers.MDEV,)
                     ) -> tuple[list[domain.MdevAllocation],
                                dict[str, domain.ServerView]]:
    """Every allocation on the selected devices (of ``kinds``, or named),
    and a ServerView per consumer: ``(allocations, {consumer:
    ServerView})``.

    Allocations are read only for devices the summaries show in use.
    """
    rows = devices.scope_devices(placement, references, hosts, kinds)
    return allocations_on(placement, compute, rows, resource_class)


def allocations_on(placement: placement_client.PlacementClient,
                   compute: compute_client.ComputeClient,
                   rows: list[providers.Device],
                   resource_class: str | None = None
                   ) -> tuple[list[domain.MdevAllocation],
                              dict[str, domain.ServerView]]:
    """``list_allocations`` of device rows (``providers.Device``) read
    before: one allocations read per device in use, and Nova's servers
    of the nodes holding them (one listing per node; each server with
    its flavor).
    """
    in_use = {d.uuid: d.candidate for d in rows if d.used > 0 and (
        not resource_class or d.resource_class == resource_class)}
    uuids = sorted(in_use)
    per_provider = dict(zip(
        uuids, placement.map(devices.allocations_or_empty(placement), uuids)))
    found = domain.of_providers(per_provider, in_use)
    if resource_class:
        found = [a for a in found if a.resource_class == resource_class]

    consumers = sorted({a.consumer for a in found})
    known = compute.servers_by_id(
        consumers, nodes={a.host for a in found},
        embedded_flavor=True) if consumers else {}
    unknown = [c for c in consumers if c not in known]
    views = {c: domain.ServerView.from_server(nova_payloads.server(s))
             for c, s in known.items()}
    views.update(_unknown_views(placement, compute, unknown))
    return found, views


def node_devices_with_servers(placement: placement_client.PlacementClient,
                              compute: compute_client.ComputeClient,
                              host: str
                              ) -> list[tuple[providers.Device, list[str]]]:
    """The mdev devices Placement has for compute node ``host``, each with
    the servers (``name (ID)``, or the consumer ID when Nova cannot say)
    holding its resource class, by name: ``[(Device, [server, ...])]``.
    Allocations are read only for the devices in use.
    """
    found = devices.list_devices(
        placement, providers.DeviceFilter(hosts=(host,)))
    consumers = consumers_of(
        placement, {d.uuid: d.resource_class for d in found if d.used})
    labels = server_labels(compute, host,
                           {c for cs in consumers.values() for c in cs})
    return [(d, sorted(labels[c] for c in consumers.get(d.uuid, ())))
            for d in found]


def consumers_of(placement: placement_client.PlacementClient,
                 classes: dict[str, str]) -> dict[str, list[str]]:
    """``{provider UUID: [consumer, ...]}``: the consumers holding the
    resource class ``classes[uuid]`` on each provider, sorted; one
    allocations read per provider, in the bounded pool.
    """
    uuids = sorted(classes)
    per_provider = dict(zip(uuids, placement.map(
        devices.allocations_or_empty(placement), uuids)))
    return {uuid: sorted(c for c, alloc in per_provider[uuid].items()
                         if alloc['resources'].get(classes[uuid]))
            for uuid in uuids}


def server_labels(compute: compute_client.ComputeClient,
                  node: str | Collection[str],
                  consumers: set[str]) -> dict[str, str]:
    """``{consumer: 'name (ID)'}`` of servers on compute node ``node``
    (or on the nodes of a collection), from Nova in bulk; the consumer
    ID alone where Nova cannot say (no such server, or Nova
    unreachable).
    """
    known = {}
    nodes = (node,) if isinstance(node, str) else tuple(node)
    if consumers:
        try:
            known = compute.servers_by_id(sorted(consumers), nodes=nodes)
        except errors.Error:
            known = {}   # Nova unreachable: the consumer IDs name them
    return {c: '%s (%s)' % (known[c].get('name'), c) if c in known else c
            for c in consumers}
