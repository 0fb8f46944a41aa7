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

"""Which consumers hold mdev (or PCI-in-Placement) resources on which
devices.

Pure logic over Placement's allocation JSON and Nova's server JSON.
"""

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses
import typing

from osc_mdev.cloud import providers
from osc_mdev.nova import names
from osc_mdev.nova import objects

ORPHANED = 'ORPHANED'
MIGRATION = 'MIGRATION'
UNKNOWN = 'UNKNOWN'
# Placement's consumer types (microversion 1.38) for Nova's consumers.
INSTANCE = 'INSTANCE'


@dataclasses.dataclass(frozen=True)
class MdevAllocation(providers.OnCandidate):
    consumer: str
    candidate: providers.Candidate
    resource_class: str
    amount: int


def _mdev_parts(consumer: str, candidate: providers.Candidate,
                resources: Mapping[str, int]) -> list[MdevAllocation]:
    """The device allocations of a consumer on one candidate: its mdev
    classes on an mdev device, every class on a PCI device.
    """
    pci = candidate.kind == providers.PCI
    return [MdevAllocation(consumer, candidate, rc, amount)
            for rc, amount in sorted(resources.items())
            if amount and (pci or names.is_mdev_resource_class(rc))]


def of_consumer(consumer: str,
                allocations: Mapping[str, Mapping[str, typing.Any]],
                candidates: Mapping[str, providers.Candidate]
                ) -> list[MdevAllocation]:
    """A consumer's mdev allocations (``GET /allocations/{consumer}``).

    ``candidates`` maps provider UUID to Candidate; allocations on other
    providers (the compute node's VCPU, MEMORY_MB...) are not mdev ones.
    """
    found = []
    for rp_uuid, alloc in allocations.items():
        candidate = candidates.get(rp_uuid)
        if candidate is not None:
            found.extend(_mdev_parts(consumer, candidate,
                                     alloc['resources']))
    return sorted(found, key=sort_key)


def of_providers(
        per_provider: Mapping[str, Mapping[str, Mapping[str, typing.Any]]],
        candidates: Mapping[str, providers.Candidate]
) -> list[MdevAllocation]:
    """Every mdev allocation of the providers' consumers.

    ``per_provider`` maps provider UUID to the ``allocations`` of ``GET
    /resource_providers/{uuid}/allocations``.
    """
    found = []
    for rp_uuid, consumers in per_provider.items():
        candidate = candidates[rp_uuid]
        for consumer, alloc in consumers.items():
            found.extend(_mdev_parts(consumer, candidate,
                                     alloc['resources']))
    return sorted(found, key=sort_key)


def sort_key(allocation: MdevAllocation) -> tuple[str, str, str, str]:
    return (allocation.host, allocation.device, allocation.consumer,
            allocation.resource_class)


@dataclasses.dataclass(frozen=True)
class ServerView:
    """What Nova says of a consumer, for the allocation rows.

    ``nova_host`` is the server's service host, ``nova_node`` its
    compute node, which names the root provider in Placement; both None
    when Nova has no such server.
    ``project`` is the server's project ID, ``flavor`` the name of its
    flavor as it was booted (Nova embeds it from microversion 2.47); None
    when unknown.
    """

    name: str
    status: str
    nova_host: str | None
    nova_node: str | None = None
    project: str | None = None
    flavor: str | None = None

    @classmethod
    def from_server(cls, server: objects.Server) -> 'ServerView':
        return cls(name=server.name, status=server.status,
                   nova_host=server.host, nova_node=server.node,
                   project=server.project, flavor=server.flavor.name or None)

    @classmethod
    def unknown(cls, consumer_type: str | None = None,
                migration: Mapping[str, typing.Any] | None = None
                ) -> 'ServerView':
        """A consumer Nova has no server for.

        ``migration`` is Nova's migration whose UUID is the consumer's, if
        Nova lists one: a move's source allocation (Nova 34 writes no
        consumer type, so Nova's migration list is what tells). Otherwise
        ``consumer_type`` is Placement's (microversion 1.38): an
        ``INSTANCE`` is orphaned, a ``MIGRATION`` a move's. Anything else,
        including None (a Placement older than 1.38 cannot say) and
        Placement's ``unknown``, is ``UNKNOWN``: it is never called
        orphaned.
        """
        if migration is not None:
            return cls(name='(%s of server %s, %s)' % (
                migration.get('migration_type') or 'migration',
                migration.get('instance_uuid', '?'),
                migration.get('status', '?')), status=MIGRATION,
                nova_host=None)
        if consumer_type == MIGRATION:
            return cls(name='(migration in progress)', status=MIGRATION,
                       nova_host=None)
        if consumer_type == INSTANCE:
            return cls(name='(orphaned: no such server in Nova)',
                       status=ORPHANED, nova_host=None)
        return cls(name='(no such server in Nova; consumer type unknown)',
                   status=UNKNOWN, nova_host=None)


@dataclasses.dataclass(frozen=True)
class NodeMismatch:
    consumer: str
    placement_node: str     # root provider holding the mdev allocation
    nova_node: str
    nova_host: str | None


def node_mismatches(allocations: Iterable[MdevAllocation],
                    views: Mapping[str, ServerView]) -> list[NodeMismatch]:
    """Consumers that Nova has on another compute node than the one
    Placement holds their mdev allocation on, once per consumer and node.

    Only the node is compared: the root provider is named after the
    node (``hypervisor_hostname``, often an FQDN), and the service host
    (``gpu3`` for ``gpu3.dc2.example.net``) is another name of the same
    compute. ``views`` maps consumer to ServerView; a consumer Nova does
    not know has no node and is never a mismatch.
    """
    found = []
    for allocation in allocations:
        view = views[allocation.consumer]
        if view.nova_node is None or view.nova_node == allocation.host:
            continue
        mismatch = NodeMismatch(allocation.consumer, allocation.host,
                                view.nova_node, view.nova_host)
        if mismatch not in found:
            found.append(mismatch)
    return found
