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


def server_allocations(placement, compute, reference):
    """A server's mdev allocations, with the devices' traits."""
    server_id, server = _find_server_id(compute, reference)
    calls = [placement.list_providers,
             lambda: placement.get_consumer_allocations(server_id)]
    if server is None:
        calls.append(lambda: compute.get_server(server_id))
    results = pool.call_all(calls, placement.max_workers)
    provider_list, consumer_allocs = results[0], results[1]
    if server is None:
        server = results[2]
    if server is None and not consumer_allocs:
        raise exceptions.CommandError(
            'No server with ID %s in Nova and no allocations for it in '
            'Placement.' % server_id)
    candidates = {c.uuid: c for c in providers.find_candidates(provider_list)}
    found = domain.of_consumer(server_id, consumer_allocs, candidates)
    uuids = sorted({a.candidate.uuid for a in found})
    extra = [lambda u=u: placement.get_traits(u) for u in uuids]
    if server is None:
        extra.append(lambda: placement.get_consumer_type(server_id))
    results = pool.call_all(extra, placement.max_workers)
    view = (domain.ServerView.from_server(server) if server is not None
            else domain.ServerView.unknown(results[-1]))
    return ServerAllocations(view, found, dict(zip(uuids, results)))


def list_allocations(placement, compute, hosts=(), references=(),
                     resource_class=None):
    """Every mdev allocation on the selected devices, and a ServerView per
    consumer: ``(allocations, {consumer: ServerView})``.
    """
    provider_list = placement.list_providers()
    devices.check_hosts(provider_list, hosts)
    candidates = providers.find_candidates(provider_list)
    chosen = [c for c in candidates if not hosts or c.host in hosts]
    if references:
        named = {devices.resolve(provider_list, candidates, ref).uuid
                 for ref in references}
        chosen = [c for c in chosen if c.uuid in named]
    per_provider = dict(zip(
        [c.uuid for c in chosen],
        placement.map(_allocations_or_empty(placement),
                      [c.uuid for c in chosen])))
    found = domain.of_providers(per_provider, {c.uuid: c for c in chosen})
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
