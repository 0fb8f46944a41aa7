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

"""What ``config check`` and ``host restore`` read for a node's lost
mdevs (``features.config.check.lost``): its libvirt domain definitions
and, only when an mdev is lost, the servers' vGPUs on the node's GPUs in
Placement and their names in Nova.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
import typing

from osc_mdev.api import compute as compute_client
from osc_mdev.api import placement as placement_client
from osc_mdev.base import errors
from osc_mdev.base import findings
from osc_mdev.cloud import providers
from osc_mdev.cloud import reads as devices
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.features.config.check import lost as lost_logic
from osc_mdev.host import gpus as host_gpus
from osc_mdev.local import node as local_node
from osc_mdev.local import snapshot
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

Holding = lost_logic.Holding
LostMdev = lost_logic.LostMdev
Domain = lost_logic.Domain


def holdings(placement: placement_client.PlacementClient, node: str,
             servers: Sequence[str]) -> list[Holding]:
    """The vGPUs ``servers`` hold on the GPUs of compute node ``node``:
    the node's devices, then one allocations read per device in use.
    """
    found = [d for d in devices.list_devices(
        placement, providers.DeviceFilter(hosts=(node,)),
        read_inventory=False) if d.used]
    allocations = placement.map(
        devices.allocations_or_empty(placement),
        [d.uuid for d in found])
    wanted = set(servers)
    return [Holding(server, d.device, d.candidate.nodedev, d.resource_class,
                    held['resources'][d.resource_class],
                    tuple(d.traits or ()))
            for d, per_device in zip(found, allocations)
            for server, held in sorted(per_device.items())
            if server in wanted and held['resources'].get(d.resource_class)]


def server_names(compute: compute_client.ComputeClient, node: str,
                 servers: Sequence[str]) -> dict[str, str]:
    """``{server UUID: name}`` from Nova in bulk; empty where Nova cannot
    say.
    """
    try:
        known = compute.servers_by_id(sorted(set(servers)), nodes=(node,))
    except errors.Error:
        return {}
    return {uuid: str(server.get('name')) for uuid, server in known.items()
            if server.get('name')}


def find(domains: Sequence[Domain], host: host_gpus.Host, node: str,
         conf: libvirt_driver.MdevConfig | None,
         clients: Callable[[], tuple[placement_client.PlacementClient,
                                     compute_client.ComputeClient]],
         prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX
         ) -> tuple[list[LostMdev], list[findings.Finding]]:
    """The lost mdevs of compute node ``node`` (its guests' ``domains``
    against its sysfs, ``host``) and the findings of the definitions that
    do not parse; the cloud (``clients``) is read only when one is lost.
    """
    guests = lost_logic.guests_of(domains, node)
    gone = lost_logic.missing(guests, host)
    if not gone:
        return [], list(guests.findings)
    placement, compute = clients()
    servers = sorted({typing.cast(str, g.uuid) for _, g in gone.values()})
    lost = lost_logic.lost_mdevs(gone, host,
                                 holdings(placement, node, servers),
                                 lost_logic.type_for(conf, host, prefix),
                                 server_names(compute, node, servers))
    return lost, list(guests.findings)


def lost_findings(domains: Sequence[Domain], host: host_gpus.Host,
                  node: str, conf: libvirt_driver.MdevConfig | None,
                  clients: Callable[[], tuple[
                      placement_client.PlacementClient,
                      compute_client.ComputeClient]],
                  prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX
                  ) -> list[findings.Finding]:
    """``find``'s lost mdevs as findings, one each, after the findings
    of the definitions that do not parse.
    """
    lost, found = find(domains, host, node, conf, clients, prefix)
    return found + [lost_logic.finding(node, m) for m in lost]


def domains_in(directory: str) -> list[local_node.Domain]:
    """The libvirt domain definitions of ``directory`` (``*.xml``), as a
    snapshot keeps them.
    """
    return [local_node.Domain(d['path'], d['text'])
            for d in snapshot.take_domains(directory)['domains']]
