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

"""The scheduler's prefilters the tool applies to a request, as
nova/scheduler/request_filter.py adds them before it asks Placement.

Pure logic, one function per Nova prefilter, each naming it. The
aggregate, availability zone, image and network prefilters depend on the
project, zone, image and ports of a boot and are not applied.
"""

from __future__ import annotations

import dataclasses

from osc_mdev.nova.scheduler import utils as rr


def compute_status_filter(request: rr.Request) -> rr.Request:
    """Mirrors ``compute_status_filter``: the root must not carry
    COMPUTE_STATUS_DISABLED (a disabled nova-compute service).
    """
    return dataclasses.replace(
        request,
        root_forbidden=request.root_forbidden | {rr.COMPUTE_STATUS_DISABLED})


def owner_nova_filter(request: rr.Request, owner_nova: bool) -> rr.Request:
    """Mirrors ``owner_nova_filter``: once every nova-compute reports it
    (``owner_nova``), the root and each PCI device's group
    (``Group.is_pci``) require OWNER_NOVA; mdev groups never do.
    """
    if not owner_nova:
        return request
    return dataclasses.replace(
        request, root_required=request.root_required | {rr.OWNER_NOVA},
        groups=tuple(dataclasses.replace(
            g, required=g.required | {rr.OWNER_NOVA}) if g.is_pci else g
            for g in request.groups))


def process_reqspec(request: rr.Request,
                    owner_nova: bool = True) -> rr.Request:
    """Mirrors ``process_reqspec``: the prefilters above, in Nova's order
    (``ALL_REQUEST_FILTERS``).
    """
    return owner_nova_filter(compute_status_filter(request), owner_nova)
