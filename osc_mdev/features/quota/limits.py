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

"""GPU quotas as ``quota list`` shows them: the rows of each project's
GPU classes against the limit Nova enforces (``nova.limit``), who holds
the GPUs, the limits of Nova's service oslo.limit does not read, and
how many servers of a flavor a project's limits and the cloud's
capacity let it boot.

Pure logic over Keystone's limits, Placement's usages and the
controller's ``[quota]`` options; the usage of a class is Placement's
``GET /usages?project_id=``, as Nova counts it.
"""

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses
import typing

from osc_mdev.base import words
from osc_mdev.cloud import explanation
from osc_mdev.nova.limit import placement as limit_placement
from osc_mdev.nova.limit import utils as limit_utils
from osc_mdev.nova import objects as nova_servers
from osc_mdev.nova.scheduler import utils as rr

# Roles Keystone lists every project's limits to (besides a system
# scope): keystone/api/limits.py LimitsResource.get.
LIMIT_READER_ROLES = frozenset({'admin', 'service'})


@dataclasses.dataclass(frozen=True)
class Unread:
    """Limits of Nova's service oslo.limit does not read: ``kind``
    (REGISTERED_LIMIT or PROJECT_LIMIT), the ``region`` they are in (None:
    no region) and their resources.
    """

    kind: str
    region: str | None
    resources: tuple[str, ...]

    @property
    def words(self) -> str:
        return '%ss of %s in %s' % (
            self.kind, words.and_list(self.resources),
            'no region' if self.region is None else
            'region %s' % self.region)


def outside_region(registered_limits: list[dict[str, typing.Any]],
                   limits: list[dict[str, typing.Any]],
                   region: str | None) -> list[Unread]:
    """The limits of Nova's service that oslo.limit does not read for an
    endpoint in ``region``, when they look like a slip: limits with no
    region (always invisible to an endpoint with one), or, when Keystone
    holds none in ``region``, those of the other regions. Limits of
    other regions beside some in ``region`` are another region's Nova's
    and not reported. Empty when ``region`` is None (every one is read).
    """
    if region is None:
        return []
    none_here = not limit_utils.in_region(registered_limits, region) and \
        not limit_utils.in_region(limits, region)
    found: dict[tuple[str, str | None], set[str]] = {}
    for kind, listed in (
            (limit_utils.REGISTERED_LIMIT, registered_limits),
            (limit_utils.PROJECT_LIMIT, limits)):
        for lim in listed:
            where = lim.get('region_id')
            if where == region or (where is not None and not none_here):
                continue
            found.setdefault((kind, where), set()).add(lim['resource_name'])
    return [Unread(kind, where, tuple(sorted(names)))
            for (kind, where), names in sorted(
                found.items(), key=lambda i: (i[0][0], i[0][1] or ''))]


def sees_every_limit(roles: frozenset[str], system_scoped: bool) -> bool:
    """Mirrors keystone/api/limits.py ``LimitsResource.get``: Keystone
    lists every project's limits to a system-scoped token or one with
    the admin or service role; to any other it answers its own
    project's (or domain's) limits only, without an error.
    """
    return system_scoped or bool(roles & LIMIT_READER_ROLES)


# -- quota list -------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class QuotaRow:
    """One project's usage of one resource against its limit."""

    project_id: str
    resource: str
    used: int
    effective: limit_utils.Effective

    @property
    def limit(self) -> int:
        return self.effective.limit

    @property
    def free(self) -> int | None:
        """Limit - used (negative when over); None when unlimited."""
        return None if self.effective.unlimited else self.limit - self.used


def pressure_key(row: QuotaRow) -> tuple[bool, int, str, str]:
    """Least free first; unlimited rows last."""
    return (row.free is None, row.free if row.free is not None else 0,
            row.project_id, row.resource)


def quota_rows(usages: dict[str, dict[str, int]], classes: list[str],
               limits: limit_utils.Limits,
               strategy: limit_utils.Strategy,
               every_class: frozenset[str] = frozenset()) -> list[QuotaRow]:
    """The rows of ``quota list``, by pressure.

    ``usages``: Placement's usages of each project read (``{project ID:
    {class: used}}``); ``classes``: the GPU classes. A project gets a row
    for each class it uses or has a limit of its own on; a project of
    ``every_class`` (asked for by name) a row for every class.
    """
    rows = []
    for project, used in usages.items():
        for rclass in classes:
            name = limit_placement.resource_name(rclass)
            if project not in every_class and not used.get(rclass) and (
                    project, name) not in limits.project:
                continue
            rows.append(QuotaRow(
                project, name, int(used.get(rclass, 0)),
                limit_utils.effective_limit(project, name, limits,
                                            strategy)))
    return sorted(rows, key=pressure_key)


# The standard classes of GPUs (os-resource-classes): vGPUs and whole
# GPUs; the classes of mdev types and of PCI-in-Placement GPUs are
# CUSTOM_*.
GPU_STANDARD_CLASSES = frozenset({'VGPU', 'PGPU'})


def gpu_class(resource_class: str) -> bool:
    """Whether a resource class may be a GPU's, judged on its name alone
    (for a user who may not list the devices): ``VGPU``, ``PGPU`` or a
    ``CUSTOM_*`` class.
    """
    return resource_class in GPU_STANDARD_CLASSES or \
        resource_class.startswith('CUSTOM_')


def known_classes(usage: Mapping[str, int],
                  limits: limit_utils.Limits) -> list[str]:
    """The GPU classes (``gpu_class``) a project uses (``usage``: its
    Placement usages) or that ``limits`` limit.
    """
    named = {limit_placement.class_of(name)
             for name in limits.registered} | {
        limit_placement.class_of(name) for _, name in limits.project}
    found = {rc for rc, used in usage.items() if used} | {
        rc for rc in named if rc is not None}
    return sorted(rc for rc in found if gpu_class(rc))


def unaccounted(on_devices: dict[str, int],
                usages: dict[str, dict[str, int]]) -> list[str]:
    """The classes the GPU devices hold more of (``on_devices``: used per
    class, summed over the devices) than the projects read use together:
    some other project holds the rest.
    """
    return sorted(rc for rc, used in on_devices.items()
                  if sum(u.get(rc, 0) for u in usages.values()) < used)


def asks_for(extra_specs: Mapping[str, str], classes: set[str],
             pci: bool) -> bool:
    """Whether a flavor with ``extra_specs`` may hold ``classes``: a
    ``resources[S]:<class>`` key of one of them with an amount above 0
    (``nova.scheduler.utils.spec_key``, Nova's reading of the keys), or, with
    ``pci`` (PCI-in-Placement classes among them), any
    ``pci_passthrough:alias``, whose classes only the controller's
    aliases tell.
    """
    for key, value in extra_specs.items():
        parsed = rr.spec_key(key)
        if parsed is None or not parsed.is_resource or \
                parsed.name not in classes:
            continue
        try:
            if int(value) > 0:
                return True
        except (TypeError, ValueError):
            continue
    return pci and rr.PCI_ALIAS_KEY in extra_specs


def flavor_holders(listed: Iterable[nova_servers.Server], classes: set[str],
                   pci: bool) -> set[str]:
    """The projects of the servers (Nova's listing with embedded flavors)
    whose flavor may hold ``classes`` (``asks_for``).
    """
    return {s.project for s in listed if s.project and asks_for(
        s.flavor.extra_specs, classes, pci)}


# -- quota and capacity together --------------------------------------------

QUOTA = 'quota'
CAPACITY = 'capacity'


def capacity_reason(steps: list[explanation.Step], fix: str | None) -> str:
    """Why no server fits, from capacity's explainer: the constraint that
    rules out the last host, and the smallest change that lets one fit.
    """
    last = next((s for s in steps if not s.hosts_left), steps[-1])
    return '%s rules out %s and %s, leaving none; smallest change: %s' % (
        last.constraint, words.count(last.devices_out, 'device'),
        words.count(last.hosts_out, 'host'),
        fix or 'none found on the devices')


@dataclasses.dataclass(frozen=True)
class FlavorFit:
    """How many more servers of a flavor one project can boot: what its
    limits allow (``quota``) and what the cloud's capacity does (the same
    for every project: Placement knows no project), the smaller binds.
    ``capacity_reason``: why no server fits the cloud, when none does.
    """

    project_id: str
    flavor: str
    quota: limit_placement.QuotaFit
    capacity: int
    capacity_reason: str | None = None

    @property
    def fits(self) -> int:
        if self.quota.servers is None:
            return self.capacity
        return min(self.quota.servers, self.capacity)

    @property
    def binding(self) -> tuple[str, ...]:
        """QUOTA, CAPACITY or both: what stops the next server."""
        found = []
        if self.quota.servers is not None and \
                self.quota.servers <= self.capacity:
            found.append(QUOTA)
        if self.quota.servers is None or \
                self.capacity <= self.quota.servers:
            found.append(CAPACITY)
        return tuple(found)

    @property
    def bound_by(self) -> str:
        """What stops the next server, in words: the limit with its
        usage, and with none left, what Nova answers (403 for a quota
        exceeded, NoValidHost for no capacity, with capacity's reason).
        """
        parts = []
        if QUOTA in self.binding:
            fit = self.quota
            parts.append('%s %s%s: %d of %d used, %d per server' % (
                QUOTA, fit.resource,
                '' if fit.servers else ' (403 quota exceeded)',
                fit.used, fit.limit, fit.per_server))
        if CAPACITY in self.binding:
            parts.append(CAPACITY if self.capacity or not
                         self.capacity_reason else
                         '%s (NoValidHost): %s' % (CAPACITY,
                                                   self.capacity_reason))
        return '; '.join(parts)


def fit_key(fit: FlavorFit) -> tuple[int, str, str]:
    """Fewest servers first."""
    return (fit.fits, fit.flavor, fit.project_id)
