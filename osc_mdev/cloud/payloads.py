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

"""Nova's answers made typed objects: the one place that reads the
Compute API's payload keys of servers, flavors and hypervisors.

A server's ``OS-EXT-SRV-ATTR:host`` (its service host) and
``OS-EXT-SRV-ATTR:hypervisor_hostname`` (its compute node, the root
provider's name), ``OS-EXT-STS:vm_state`` and ``task_state``, its
project and its embedded flavor (microversion 2.47); a flavor's
``OS-FLV-DISABLED:disabled`` and ``OS-FLV-EXT-DATA:ephemeral``; a
hypervisor's service, state and QEMU version (``os-hypervisors``).
"""

from __future__ import annotations

from collections.abc import Mapping
import typing

from osc_mdev.nova import migration as migration_rules
from osc_mdev.nova import objects

HOST = 'OS-EXT-SRV-ATTR:host'
NODE = 'OS-EXT-SRV-ATTR:hypervisor_hostname'
VM_STATE = 'OS-EXT-STS:vm_state'
TASK_STATE = 'OS-EXT-STS:task_state'
DISABLED = 'OS-FLV-DISABLED:disabled'
EPHEMERAL = 'OS-FLV-EXT-DATA:ephemeral'


def _int(value: typing.Any) -> int:
    """A size as Nova gives it (``''`` for no swap) as an integer."""
    return int(value or 0)


def flavor(payload: Mapping[str, typing.Any]) -> objects.Flavor:
    """A flavor of Nova's flavor list, or a server's embedded flavor
    (named ``original_name`` there, with no ID).
    """
    return objects.Flavor(
        name=payload.get('name') or payload.get('original_name') or '',
        extra_specs=dict(payload.get('extra_specs') or {}),
        vcpus=_int(payload.get('vcpus')), ram=_int(payload.get('ram')),
        disk=_int(payload.get('disk')),
        ephemeral=_int(payload.get(EPHEMERAL) or payload.get('ephemeral')),
        swap=_int(payload.get('swap')), id=payload.get('id') or '',
        disabled=bool(payload.get(DISABLED)))


def server(payload: Mapping[str, typing.Any]) -> objects.Server:
    """A server of Nova's server list or ``GET /servers/{id}``."""
    return objects.Server(
        id=payload['id'], name=payload.get('name') or '',
        status=payload.get('status') or '',
        vm_state=payload.get(VM_STATE), task_state=payload.get(TASK_STATE),
        host=payload.get(HOST), node=payload.get(NODE),
        project=payload.get('tenant_id'),
        flavor=flavor(payload.get('flavor') or {}),
        booted_from_volume=not payload.get('image'))


def hypervisor(payload: Mapping[str, typing.Any]
               ) -> objects.Hypervisor:
    """A compute node of ``os-hypervisors/detail``."""
    service = payload.get('service') or {}
    return objects.Hypervisor(
        node=payload['hypervisor_hostname'],
        service_host=service.get('host') or payload['hypervisor_hostname'],
        status=payload.get('status') or objects.ENABLED,
        state=payload.get('state') or objects.UP,
        hypervisor_type=(payload.get('hypervisor_type')
                         or migration_rules.HV_DRIVER_QEMU),
        version=migration_rules.version_tuple(
            payload.get('hypervisor_version')),
        disabled_reason=service.get('disabled_reason'))
