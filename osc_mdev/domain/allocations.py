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

"""Which consumers hold mdev resources on which devices.

Pure logic over Placement's allocation JSON and Nova's server JSON.
"""

import dataclasses

from osc_mdev.domain import names

ORPHANED = 'ORPHANED'
MIGRATION = 'MIGRATION'


@dataclasses.dataclass(frozen=True)
class MdevAllocation:
    consumer: str
    candidate: object        # providers.Candidate
    resource_class: str
    amount: int

    @property
    def host(self):
        return self.candidate.host

    @property
    def device(self):
        return self.candidate.device


def _mdev_parts(consumer, candidate, resources):
    return [MdevAllocation(consumer, candidate, rc, amount)
            for rc, amount in sorted(resources.items())
            if amount and names.is_mdev_resource_class(rc)]


def of_consumer(consumer, allocations, candidates):
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


def of_providers(per_provider, candidates):
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


def sort_key(allocation):
    return (allocation.host, allocation.device, allocation.consumer,
            allocation.resource_class)


@dataclasses.dataclass(frozen=True)
class ServerView:
    """What Nova says of a consumer, for the allocation rows."""

    name: str
    status: str
    nova_host: str | None

    @classmethod
    def from_server(cls, server):
        return cls(name=server.get('name', ''),
                   status=server.get('status', ''),
                   nova_host=server.get('OS-EXT-SRV-ATTR:host'))

    @classmethod
    def unknown(cls, consumer_type=None):
        """A consumer Nova has no server for.

        A ``MIGRATION`` consumer holds a moving server's source allocation
        until the move is confirmed; anything else is orphaned.
        """
        if consumer_type == MIGRATION:
            return cls(name='(migration in progress)', status=MIGRATION,
                       nova_host=None)
        return cls(name='(orphaned: no such server in Nova)',
                   status=ORPHANED, nova_host=None)
