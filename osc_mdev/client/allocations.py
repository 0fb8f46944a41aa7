"""Servers and the mdev devices they use: Placement and Nova together.

Independent requests (Nova's server, Placement's providers and the
consumer's allocations; every device's allocations) run at once in the
bounded pool; server names come from Nova in bulk.
"""

import dataclasses

from osc_lib import exceptions

from osc_mdev.client import devices
from osc_mdev.client import naming
from osc_mdev.client import placement as placement_client
from osc_mdev.client import pool
from osc_mdev.domain import allocations as domain
from osc_mdev.domain import names
from osc_mdev.domain import providers


@dataclasses.dataclass
class ServerAllocations:
    server: domain.ServerView
    allocations: list
    traits: dict          # provider UUID -> traits


def _find_server_id(compute, reference):
    """The server ID ``reference`` names, and the server if Nova knows it.
    """
    if names.is_uuid(reference):
        return reference, None
    server = naming.one_named(
        compute.servers_named(reference), reference, 'server',
        "No server named '%s' in any project; give its name or ID as "
        "'openstack server list --all-projects' shows it." % reference)
    return server['id'], server


def _providers_of(placement, uuids):
    """The providers ``uuids`` and their roots (for the host names), read
    one by one: a consumer sits on a few providers, not the cloud's."""
    def get(uuid):
        try:
            return placement.get_provider(uuid)
        except placement_client.NotFound:
            return None  # deleted meanwhile
    found = [p for p in placement.map(get, uuids) if p]
    roots = sorted({p.get('root_provider_uuid') or p['uuid']
                    for p in found} - set(uuids))
    return found + [p for p in placement.map(get, roots) if p]


def server_allocations(placement, compute, reference):
    """A server's mdev allocations, with the devices' traits."""
    server_id, server = _find_server_id(compute, reference)
    calls = [lambda: placement.get_consumer_allocations(server_id)]
    if server is None:
        calls.append(lambda: compute.get_server(server_id))
        calls.append(lambda: placement.get_consumer_type(server_id))
    results = pool.call_all(calls, placement.max_workers)
    consumer_allocs = results[0]
    if server is None:
        server = results[1]
    if server is None and not consumer_allocs:
        raise exceptions.CommandError(
            'No server with ID %s in Nova and no allocations for it in '
            'Placement.' % server_id)
    provider_list = _providers_of(placement, sorted(consumer_allocs))
    candidates = {c.uuid: c for c in providers.find_candidates(provider_list)}
    found = domain.of_consumer(server_id, consumer_allocs, candidates)
    uuids = sorted({a.candidate.uuid for a in found})
    traits = placement.map(placement.get_traits, uuids)
    view = (domain.ServerView.from_server(server) if server is not None
            else domain.ServerView.unknown(results[2]))
    return ServerAllocations(view, found, dict(zip(uuids, traits)))


def list_allocations(placement, compute, hosts=(), references=(),
                     resource_class=None):
    """Every mdev allocation on the selected devices, and a ServerView per
    consumer: ``(allocations, {consumer: ServerView})``.

    Allocations are read only for devices the summaries show in use.
    """
    rows = devices.scope_devices(placement, references, hosts)
    in_use = {d.uuid: d.candidate for d in rows if d.used > 0 and (
        not resource_class or d.resource_class == resource_class)}
    uuids = sorted(in_use)
    per_provider = dict(zip(
        uuids, placement.map(_allocations_or_empty(placement), uuids)))
    found = domain.of_providers(per_provider, in_use)
    if resource_class:
        found = [a for a in found if a.resource_class == resource_class]

    consumers = sorted({a.consumer for a in found})
    known = compute.servers_by_id(
        consumers, hosts={a.host for a in found}) if consumers else {}
    unknown = [c for c in consumers if c not in known]
    types = dict(zip(unknown, placement.map(placement.get_consumer_type,
                                            unknown)))
    views = {c: domain.ServerView.from_server(s) for c, s in known.items()}
    views.update({c: domain.ServerView.unknown(types[c]) for c in unknown})
    return found, views


def _allocations_or_empty(placement):
    def read(uuid):
        try:
            return placement.get_provider_allocations(uuid)
        except placement_client.NotFound:
            return {}  # deleted since it was listed
    return read
