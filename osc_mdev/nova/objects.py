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

"""A server, a flavor and a compute node as Nova's rules read them.

What Nova says of a server (its state, its service host and compute
node, its project, the flavor it was booted with) and of a flavor (its
sizes, extra specs, whether it is disabled), as attributes: the Compute
API's payload keys (``OS-EXT-SRV-ATTR:*``, ``OS-EXT-STS:*``,
``OS-FLV-*``) are read in one place only, where the reads turn Nova's
answers into these (``cloud.payloads``). Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping
import dataclasses

from osc_mdev.nova import migration


@dataclasses.dataclass(frozen=True)
class Flavor:
    """A flavor: one of Nova's flavor list (``id``, ``disabled``), or the
    copy Nova keeps with a server (microversion 2.47: no ID, its name as
    it was booted).
    """

    name: str = ''
    extra_specs: Mapping[str, str] = dataclasses.field(default_factory=dict)
    vcpus: int = 0
    ram: int = 0                  # MiB
    disk: int = 0                 # GiB, the root disk
    ephemeral: int = 0            # GiB
    swap: int = 0                 # MiB
    id: str = ''
    disabled: bool = False


@dataclasses.dataclass(frozen=True)
class Server:
    """A server as Nova shows it to an admin."""

    id: str
    name: str = ''
    status: str = ''
    vm_state: str | None = None
    task_state: str | None = None  # None when no task is in progress
    host: str | None = None       # the service host (``server migrate``)
    node: str | None = None       # the compute node: its root provider
    project: str | None = None
    # The copy of its flavor Nova keeps with the server.
    flavor: Flavor = dataclasses.field(default_factory=Flavor)
    booted_from_volume: bool = False

    @property
    def label(self) -> str:
        """``ID (name)``, or the ID of a server with no name."""
        return '%s (%s)' % (self.id, self.name) if self.name else self.id


# A compute service's state and status, as the Compute API says them.
UP, DOWN = 'up', 'down'
ENABLED, DISABLED = 'enabled', 'disabled'


@dataclasses.dataclass(frozen=True)
class Hypervisor:
    """A compute node as ``os-hypervisors`` shows it."""

    node: str                    # hypervisor_hostname: the root provider
    service_host: str            # service.host, for the migrate commands
    status: str = ENABLED        # enabled / disabled (the service)
    state: str = UP              # up / down (the service)
    hypervisor_type: str = migration.HV_DRIVER_QEMU
    version: migration.Version | None = None  # QEMU's: hypervisor_version
    disabled_reason: str | None = None
