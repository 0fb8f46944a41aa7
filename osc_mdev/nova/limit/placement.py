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

"""Mirrors nova/limit/placement.py: what a server counts against
Nova's unified limits (``_get_deltas``) and how many servers of a
request the limits let in (``enforce_num_instances_and_resources``).

Pure logic over a request (``nova.scheduler.utils``), the usage of a
project and the limits Nova enforces (``utils.effective_limit``).
"""

import dataclasses

from osc_mdev.nova.limit import utils
from osc_mdev.nova.scheduler import utils as rr

CLASS_PREFIX = 'class:'


def resource_name(resource_class: str) -> str:
    """Keystone's name of a resource class: ``class:VGPU``, as
    ``_get_deltas`` names it.
    """
    return CLASS_PREFIX + resource_class


def class_of(name: str) -> str | None:
    """The resource class a limit's resource name stands for, or None
    (``servers`` and the other non-class resources).
    """
    return name[len(CLASS_PREFIX):] if name.startswith(CLASS_PREFIX) \
        else None


def flavor_deltas(request: rr.Request) -> dict[str, int]:
    """What one server of ``request`` counts against the limits.

    Mirrors ``_get_deltas`` for a count of 1:
    ``servers`` 1 and each resource class the request's groups ask for,
    summed over the groups (``ResourceRequest.merged_resources``), as
    ``class:<RC>``; zero amounts are left out.
    """
    deltas = {utils.SERVERS: 1}
    for group in request.groups:
        for rclass, amount in group.resources:
            if amount:
                name = resource_name(rclass)
                deltas[name] = deltas.get(name, 0) + amount
    return deltas


@dataclasses.dataclass(frozen=True)
class QuotaFit:
    """How many more servers a project's limits allow, and which limit
    stops the next one (None when no limit binds).
    """

    servers: int | None          # None: no limit on what the flavor asks
    resource: str | None = None  # the binding limit's resource
    used: int = 0
    limit: int = 0
    per_server: int = 0


def servers_allowed(deltas: dict[str, int], used: dict[str, int],
                    effective: dict[str, utils.Effective]) -> QuotaFit:
    """The most servers whose deltas fit every limit Nova enforces.

    Mirrors ``enforce_num_instances_and_resources`` and oslo.limit's
    ``Enforcer.enforce`` (``_EnforcerUtils.enforce_limits``): a
    count is refused when used + count x delta is above the limit of a
    resource Nova enforces (``effective``: each resource's Effective;
    ``used``: its usage, ``servers`` included); Nova lowers the count
    until none is. The first resource by name binds on a tie.
    """
    best = QuotaFit(None)
    for name in sorted(deltas):
        per_server = deltas[name]
        limit = effective[name]
        if limit.unlimited or per_server <= 0:
            continue
        have = used.get(name, 0)
        fits = max(0, (limit.limit - have) // per_server)
        if best.servers is None or fits < best.servers:
            best = QuotaFit(fits, name, have, limit.limit, per_server)
    return best
