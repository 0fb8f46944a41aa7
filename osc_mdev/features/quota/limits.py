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

"""GPU quotas under Nova's unified limits: which limit Nova enforces on
a project's resource class, the rows of ``quota list``, and how many
servers of a flavor a project's limits let it boot.

Pure logic over Keystone's limits, Placement's usages and the
controller's ``[quota]`` options. The limits are Keystone's for Nova's
service (``class:<RESOURCE CLASS>``, ``servers``); the usage of a class
is Placement's ``GET /usages?project_id=``, as Nova counts it.
"""

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses

from osc_mdev.base import words
from osc_mdev.cloud import explanation
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova import objects as nova_servers
from osc_mdev.nova.scheduler import utils as rr

SERVERS = 'servers'
CLASS_PREFIX = 'class:'
UNLIMITED = -1

UNIFIED_LIMITS_DRIVER = 'nova.quota.UnifiedLimitsDriver'
# Nova's default [quota] driver (nova/conf/quota.py).
DB_QUOTA_DRIVER = 'nova.quota.DbQuotaDriver'
REQUIRE = 'require'
IGNORE = 'ignore'

# Where the value oslo.limit finds comes from.
PROJECT_LIMIT = 'project limit'
REGISTERED_LIMIT = 'registered limit'
NO_LIMIT = 'no limit'
# The controller's [quota] driver is not the unified limits driver.
NOT_UNIFIED = 'not unified'

# Roles Keystone lists every project's limits to (besides a system
# scope): keystone/api/limits.py LimitsResource.get.
LIMIT_READER_ROLES = frozenset({'admin', 'service'})


def resource_name(resource_class: str) -> str:
    """Keystone's name of a resource class: ``class:VGPU``."""
    return CLASS_PREFIX + resource_class


def class_of(name: str) -> str | None:
    """The resource class a limit's resource name stands for, or None
    (``servers`` and the other non-class resources).
    """
    return name[len(CLASS_PREFIX):] if name.startswith(CLASS_PREFIX) \
        else None


# -- the controller's [quota] options ---------------------------------------

@dataclasses.dataclass(frozen=True)
class Strategy:
    """``[quota]`` of the controller's nova.conf: what Nova does with a
    resource that has no registered limit.
    """

    strategy: str = REQUIRE
    resource_list: tuple[str, ...] = (SERVERS,)
    driver: str = UNIFIED_LIMITS_DRIVER
    from_file: bool = False     # False: Nova's defaults (no nova.conf read)

    @property
    def unified(self) -> bool:
        return self.driver == UNIFIED_LIMITS_DRIVER


def strategy_from(settings: novaconf.Settings) -> Strategy:
    """The Strategy of parsed nova.conf files; ValueError naming the
    option oslo.config refuses (nova-api does not start with it).
    """
    values = {}
    for name in novaconf.QUOTA_OPTIONS:
        value = settings.quota[name]
        if value.error is not None:
            raise ValueError('%s: %s (nova-api refuses to start with it)'
                             % (value.where, value.error))
        values[name] = value.value
    return Strategy(values['unified_limits_resource_strategy'],
                    tuple(values['unified_limits_resource_list']),
                    values['driver'], from_file=True)


# -- Keystone's limits ------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Limits:
    """Nova's limits in Keystone: registered (default) limits by resource
    name, and project limits by (project ID, resource name).
    """

    registered: dict[str, int]
    project: dict[tuple[str, str], int]

    @classmethod
    def from_keystone(cls, registered_limits: list[dict],
                      limits: list[dict],
                      region: str | None = None) -> 'Limits':
        """From ``GET /v3/registered_limits`` and ``GET /v3/limits`` of
        Nova's service, as oslo.limit reads them: those of ``region``
        (Nova's endpoint's) only, all of them when it is None. Domain
        limits are left out: oslo.limit's flat model reads a project's
        own limits only.
        """
        return cls(
            {r['resource_name']: int(r['default_limit'])
             for r in in_region(registered_limits, region)},
            {(lim['project_id'], lim['resource_name']):
             int(lim['resource_limit'])
             for lim in in_region(limits, region) if lim.get('project_id')})

    def projects_limiting(self, names: set[str]) -> set[str]:
        """Projects with a limit of their own on one of ``names``."""
        return {p for p, name in self.project if name in names}


def in_region(limits: list[dict], region: str | None) -> list[dict]:
    """The limits (or registered limits) oslo.limit reads for an endpoint
    in ``region``: it asks Keystone for that region's (``region_id``
    filter, ``_EnforcerUtils._get_project_limits`` and
    ``_get_registered_limits``), or for every one when the endpoint has
    no region.
    """
    if region is None:
        return list(limits)
    return [lim for lim in limits if lim.get('region_id') == region]


@dataclasses.dataclass(frozen=True)
class Unread:
    """Limits of Nova's service oslo.limit does not read: ``kind``
    (REGISTERED_LIMIT or PROJECT_LIMIT), the ``region`` they are in
    (None: no region) and their resources.
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


def outside_region(registered_limits: list[dict], limits: list[dict],
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
    none_here = not in_region(registered_limits, region) and \
        not in_region(limits, region)
    found: dict[tuple[str, str | None], set[str]] = {}
    for kind, listed in ((REGISTERED_LIMIT, registered_limits),
                         (PROJECT_LIMIT, limits)):
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


@dataclasses.dataclass(frozen=True)
class Effective:
    """The limit Nova enforces on one resource of one project.

    ``limit``: -1 when unlimited. ``source``: where oslo.limit's value
    came from (PROJECT_LIMIT, REGISTERED_LIMIT, NO_LIMIT). ``strategy``:
    the ``[quota]`` strategy when it decided (a value of 0 without a
    registered limit), with ``listed`` (the resource is in
    ``unified_limits_resource_list``) and ``from_file``. ``driver``: the
    controller's ``[quota] driver`` when it is not the unified limits
    driver (source NOT_UNIFIED: Nova reads no limit of Keystone).
    """

    limit: int
    source: str
    strategy: str | None = None
    listed: bool = False
    from_file: bool = False
    driver: str | None = None

    @property
    def unlimited(self) -> bool:
        return self.limit < 0

    @property
    def rule(self) -> str:
        """Which rule decided, in words."""
        if self.driver is not None:
            return 'no limit; [quota] driver %s limits no resource class' \
                % self.driver
        if self.strategy is None:
            return self.source
        where = 'no limit' if self.source == NO_LIMIT else (
            'project limit 0, no registered limit')
        return '%s; %s strategy %s%s' % (
            where, self.strategy, 'lists it' if self.listed
            else 'does not list it',
            '' if self.from_file else " (Nova's default)")


def effective_limit(project_id: str, resource: str, limits: Limits,
                    strategy: Strategy) -> Effective:
    """The limit Nova enforces on ``resource`` (``class:VGPU``,
    ``servers``) of ``project_id``.

    Mirrors oslo.limit's ``_EnforcerUtils._get_limit`` (the project's
    limit, else the registered limit, else 0; a negative limit is
    unlimited) and ``nova.limit.utils.should_enforce``: Nova enforces a
    limit above 0, never a negative one, and a limit of 0 when the
    resource has a registered limit; otherwise (0 because nothing is
    registered, or a project limit of 0 without a registered limit) the
    ``[quota]`` strategy decides: ``require`` enforces 0 on the resources
    ``unified_limits_resource_list`` lists, ``ignore`` on those it does
    not list, and the others are unlimited. ``should_enforce`` judges the
    over-limit resources of a request together, but it enforces a
    request as soon as one of them would be enforced alone, so the rule
    holds for each resource on its own. Under another ``[quota] driver``
    (Nova's default ``DbQuotaDriver``, ``NoopQuotaDriver``) Nova reads
    none of Keystone's limits and limits no resource class.
    """
    if not strategy.unified:
        return Effective(UNLIMITED, NOT_UNIFIED, driver=strategy.driver)
    if (project_id, resource) in limits.project:
        value, source = limits.project[(project_id, resource)], PROJECT_LIMIT
    elif resource in limits.registered:
        value, source = limits.registered[resource], REGISTERED_LIMIT
    else:
        value, source = 0, NO_LIMIT
    if value < 0:
        return Effective(UNLIMITED, source)
    if value > 0 or resource in limits.registered:
        return Effective(value, source)
    listed = resource in strategy.resource_list
    enforced = listed if strategy.strategy == REQUIRE else not listed
    return Effective(0 if enforced else UNLIMITED, source,
                     strategy.strategy, listed, strategy.from_file)


# -- quota list -------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class QuotaRow:
    """One project's usage of one resource against its limit."""

    project_id: str
    resource: str
    used: int
    effective: Effective

    @property
    def limit(self) -> int:
        return self.effective.limit

    @property
    def free(self) -> int | None:
        """Limit - used (negative when over); None when unlimited."""
        return None if self.effective.unlimited else self.limit - self.used


def pressure_key(row: QuotaRow) -> tuple:
    """Least free first; unlimited rows last."""
    return (row.free is None, row.free if row.free is not None else 0,
            row.project_id, row.resource)


def quota_rows(usages: dict[str, dict[str, int]], classes: list[str],
               limits: Limits, strategy: Strategy,
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
            name = resource_name(rclass)
            if project not in every_class and not used.get(rclass) and (
                    project, name) not in limits.project:
                continue
            rows.append(QuotaRow(
                project, name, int(used.get(rclass, 0)),
                effective_limit(project, name, limits, strategy)))
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


def known_classes(usage: Mapping[str, int], limits: Limits) -> list[str]:
    """The GPU classes (``gpu_class``) a project uses (``usage``: its
    Placement usages) or that ``limits`` limit.
    """
    named = {class_of(name) for name in limits.registered} | {
        class_of(name) for _, name in limits.project}
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
    (``resource_request.spec_key``, Nova's reading of the keys), or, with
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


# -- how many servers of a flavor the limits let a project boot -------------

def flavor_deltas(request: rr.Request) -> dict[str, int]:
    """What one server of ``request`` counts against the limits.

    Mirrors ``_get_deltas`` (nova/limit/placement.py) for a count of 1:
    ``servers`` 1 and each resource class the request's groups ask for,
    summed over the groups (``ResourceRequest.merged_resources``), as
    ``class:<RC>``; zero amounts are left out.
    """
    deltas = {SERVERS: 1}
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
                    effective: dict[str, Effective]) -> QuotaFit:
    """The most servers whose deltas fit every limit Nova enforces.

    Mirrors ``enforce_num_instances_and_resources``
    (nova/limit/placement.py) and oslo.limit's ``enforce_limits``: a
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


# Nova's own quotas (DbQuotaDriver): what a new server counts against
# them (nova/compute/utils.py check_num_instances_quota), by the
# resources of its request.
LEGACY_RESOURCES = {'instances': (SERVERS,),
                    'cores': ('class:VCPU', 'class:PCPU'),
                    'ram': ('class:MEMORY_MB',)}
QUOTA_SET = 'quota set'


def legacy_deltas(deltas: Mapping[str, int]) -> dict[str, int]:
    """What one server of ``deltas`` (``flavor_deltas``) counts against
    DbQuotaDriver's quotas: ``instances`` 1, ``cores`` its vCPUs (shared
    or dedicated), ``ram`` its memory, as
    ``check_num_instances_quota`` asks ``Quotas.check_deltas``.
    """
    return {name: sum(deltas.get(r, 0) for r in resources)
            for name, resources in LEGACY_RESOURCES.items()}


def legacy_limits(quota_set: Mapping[str, Mapping[str, int]]
                  ) -> tuple[dict[str, Effective], dict[str, int]]:
    """The limits and usage of DbQuotaDriver's quotas (``instances``,
    ``cores``, ``ram``) of a project's quota set (``GET
    /os-quota-sets/{project}/detail``): ``({name: Effective}, {name:
    used})``, used being what Nova counts (in use and reserved); a
    negative limit is unlimited.
    """
    effective, used = {}, {}
    for name in LEGACY_RESOURCES:
        value = int(quota_set[name]['limit'])
        effective[name] = Effective(UNLIMITED if value < 0 else value,
                                    QUOTA_SET)
        used[name] = int(quota_set[name].get('in_use', 0)) + int(
            quota_set[name].get('reserved', 0))
    return effective, used


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
    quota: QuotaFit
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


def fit_key(fit: FlavorFit) -> tuple:
    """Fewest servers first."""
    return (fit.fits, fit.flavor, fit.project_id)
