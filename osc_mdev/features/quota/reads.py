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

"""What ``quota list`` reads: Nova's unified limits in Keystone, the GPU
devices and each project's usage in Placement.

Requests, all in the client's bounded pool:

1. At once: the registered limits and the limits of Nova's service in
   its region (two Keystone requests; the service comes from the
   token's catalog, or one ``GET /v3/services?type=compute`` without
   one), the GPU devices with what they hold (the provider listing and
   one allocation candidates request, as ``provider list`` reads them),
   and the projects (one Keystone request) when names are shown or
   asked for.
2. ``GET /usages?project_id=`` (microversion 1.9, as Nova reads it)
   once for each project with a GPU limit of its own, or named.
3. Only when those projects together use less of a GPU class than the
   devices hold, so that another project holds the rest. Placement
   cannot list the projects that use something: ``GET /usages`` needs a
   project, and a provider's allocations name consumers, not projects.
   So Nova's server list (all projects with their flavors, one request
   per 1,000 servers) names the projects whose servers' flavors ask for
   a class short, and each gets its one ``GET /usages``.
4. Only if a class is still short (a consumer that is no server of such
   a flavor: a migration's, another service's, or any when Nova cannot
   be reached): each device of that class in use is asked for its
   allocations (one request each), the project of each consumer comes
   from the server list or ``GET /allocations/{consumer}``, and each
   project found gets its one ``GET /usages``.

With flavors (``flavor_fits``): what ``capacity --flavor`` reads for each
flavor, and, for each project whose ``servers`` limit Nova enforces, the
servers Nova counts against it (``GET /os-quota-sets/{project}/detail``,
one request each; for every project under DbQuotaDriver, whose quotas
that request gives).

Under another ``[quota] driver`` than the unified limits driver, Nova
reads no limit of Keystone: step 1 then reads no limit. A user without
the admin role (``own_quota``) reads only their project's usages and the
limits Keystone lists them.
"""

from collections.abc import Iterable
import dataclasses
import logging
import typing


from osc_mdev.api import compute as compute_api
from osc_mdev.api import identity as identity_api
from osc_mdev.api import placement as placement_api
from osc_mdev.api import pool
from osc_mdev.base import errors
from osc_mdev.cloud import lookup as naming
from osc_mdev.cloud import payloads as nova_payloads
from osc_mdev.cloud import providers
from osc_mdev.cloud import reads as device_reads
from osc_mdev.features.capacity import reads as capacity
from osc_mdev.features.quota import limits as quota_rules
from osc_mdev.features.quota import metrics as quota_metrics
from osc_mdev.nova.compute import utils as compute_utils
from osc_mdev.nova.limit import placement as limit_placement
from osc_mdev.nova.limit import utils as limit_utils
from osc_mdev.nova import objects as nova_servers
from osc_mdev.nova.pci import config as pci_rules

if typing.TYPE_CHECKING:
    from prometheus_client import core

LOG = logging.getLogger(__name__)

COMPUTE = 'compute'


@dataclasses.dataclass
class QuotaReport:
    """The rows of ``quota list`` and what they were read with."""

    rows: list[quota_rules.QuotaRow]
    usages: dict[str, dict[str, int]]   # project ID -> {class: used}
    names: dict[str, str]               # project ID -> name (when read)
    limits: limit_utils.Limits
    strategy: limit_utils.Strategy
    classes: list[str]                  # the GPU classes
    held: dict[str, int]                # class -> used on the devices
    every_project: bool = True          # False: the token's project only
    region: str | None = None           # of Nova's endpoint
    unread: list[quota_rules.Unread] = dataclasses.field(default_factory=list)
    #                                     limits outside that region


def viewer(identity: identity_api.IdentityClient) -> identity_api.Token:
    """The command's token; ``errors.Refused`` for an authentication
    without a token of Keystone's (an admin token).
    """
    token = identity.token()
    if token is None:
        raise errors.Refused(
            'Keystone lists limits only to a token of its own, and an '
            'admin token has none; authenticate with a password or a '
            'token of a user with the admin role.')
    return token


def sees_every_project(token: identity_api.Token) -> bool:
    """Whether Keystone lists ``token`` every project's limits (and
    Placement every project's usages): the admin role or a system scope.
    """
    return quota_rules.sees_every_limit(token.roles, token.system_scoped)


def admin_needed(token: identity_api.Token, what: str) -> str:
    """The one line saying that ``what`` needs the admin role, which
    ``token`` lacks.
    """
    return ('%s needs the admin role (or a system-scoped token); this '
            "user has %s on project %s, whose own quota 'openstack mdev "
            "quota list' shows." % (
                what, ', '.join(sorted(token.roles)) or 'no role',
                token.project_name or token.project_id))


def admin_refusal(token: identity_api.Token, what: str,
                  **data: typing.Any) -> errors.Refused:
    """The error saying that ``what`` needs the admin role, which
    ``token`` lacks (``admin_needed``).
    """
    return errors.Refused(admin_needed(token, what),
                          roles=sorted(token.roles),
                          project=token.project_id, **data)


def nova_service(identity: identity_api.IdentityClient
                 ) -> identity_api.ServiceRef:
    """Nova's service as its limits name it: the compute service of the
    token's catalog (in the command's region), else the only compute
    service Keystone has; ``errors.NotFound`` for none,
    ``errors.Ambiguous`` for several.
    """
    found = identity.catalog_service(COMPUTE)
    if found is not None:
        return found
    services = identity.services(COMPUTE)
    if not services:
        raise errors.NotFound(
            "Keystone has no compute service: Nova's unified limits are "
            "those of its compute service, so register Nova's service "
            '(openstack service create compute) and its limits.',
            kind='service', name=COMPUTE)
    if len(services) > 1:
        raise errors.Ambiguous(
            'Keystone has %d compute services (%s) and the catalog of the '
            "token names no endpoint of them, so Nova's cannot be told; "
            "authenticate in the region of Nova's endpoint." % (
                len(services), ', '.join(sorted(s.service_id
                                                for s in services))),
            kind='service', name=COMPUTE,
            matches=sorted(s.service_id for s in services))
    return services[0]


def warn_outside_region(report: 'QuotaReport') -> None:
    """One warning naming the limits of Nova's service outside its
    endpoint's region (``quota_rules.outside_region``), if any.
    """
    if report.unread:
        LOG.warning(
            "Warning: Keystone holds limits of Nova's service that Nova "
            'does not read (oslo.limit reads those of region %s, its '
            "endpoint's): %s.", report.region,
            '; '.join(u.words for u in report.unread))


def project_ids(references: list[str], projects: list[dict]) -> list[str]:
    """The project IDs ``references`` (names or IDs) stand for, in
    order; ``errors.NotFound`` for one Keystone does not have.
    """
    by_id = {p['id']: p for p in projects}
    found = []
    for reference in references:
        if reference in by_id:
            found.append(reference)
            continue
        match = naming.one_named(
            [p for p in projects if p['name'] == reference], reference,
            'project', "No project named or with ID '%s' in Keystone; see "
            "'openstack project list'." % reference)
        found.append(match['id'])
    return list(dict.fromkeys(found))


def read_usages(placement: placement_api.PlacementClient,
                projects: Iterable[str]) -> dict[str, dict[str, int]]:
    """``{project: {class: used}}``: one request per project, at once."""
    ordered = sorted(set(projects))
    return dict(zip(ordered, placement.map(placement.get_project_usages,
                                           ordered)))


def _servers(compute: compute_api.ComputeClient
             ) -> list[nova_servers.Server] | None:
    """Nova's servers of every project, or None (with a warning) when
    Nova cannot list them.
    """
    try:
        listed = compute.list_servers()
    except errors.Error as exc:
        LOG.warning('Warning: Nova could not list the servers (%s); the '
                    'project of each consumer of the GPUs is read from '
                    'Placement.', str(exc).rstrip('.'))
        return None
    return [nova_payloads.server(s) for s in listed]


def consumers_projects(placement: placement_api.PlacementClient,
                       devices: list[providers.Device],
                       listed: list[nova_servers.Server] | None) -> set[str]:
    """The projects of the consumers holding the GPU classes of
    ``devices`` (devices in use): Placement's allocations of each
    device, the project of each consumer from Nova's servers
    (``listed``) or,
    for one that is no server, from ``GET /allocations/{consumer}``.
    """
    classes: dict[str, set[str]] = {}
    for device in devices:
        classes.setdefault(device.uuid, set()).add(device.resource_class)
    uuids = sorted(classes)
    consumers: set[str] = set()
    for uuid, held in zip(uuids, placement.map(
            device_reads.allocations_or_empty(placement), uuids)):
        consumers.update(c for c, alloc in held.items()
                         if set(alloc['resources']) & classes[uuid])
    owners = {s.id: s.project for s in listed or ()}
    found = {owners[c] for c in consumers if c in owners}
    rest = sorted(consumers - set(owners))
    found.update(body.get('project_id') for body in placement.map(
        placement.get_consumer, rest) if body.get('allocations'))
    return {p for p in found if p}


def find_holders(placement: placement_api.PlacementClient,
                 compute: compute_api.ComputeClient,
                 devices: list[providers.Device],
                 held: dict[str, int],
                 usages: dict[str, dict[str, int]]) -> None:
    """Add to ``usages`` the projects that hold the GPUs ``usages`` does
    not account for (``held``: used per class on the devices): first
    those whose servers' flavors ask for a class short (Nova's server
    list, one request per 1,000 servers), then, if some is still short,
    the owners of the consumers on its devices.
    """
    short = quota_rules.unaccounted(held, usages)
    if not short:
        return
    listed = _servers(compute)
    pci = any(d.kind == providers.PCI for d in devices
              if d.resource_class in short)
    usages.update(read_usages(placement, quota_rules.flavor_holders(
        listed or [], set(short), pci) - set(usages)))
    short = quota_rules.unaccounted(held, usages)
    if short:
        found = consumers_projects(placement, [
            d for d in devices if d.resource_class in short and d.used],
            listed)
        usages.update(read_usages(placement, found - set(usages)))


@dataclasses.dataclass(frozen=True)
class LimitsRead:
    """Nova's limits in Keystone as oslo.limit reads them (``limits``),
    and those outside the region of Nova's endpoint (``unread``).
    """

    limits: limit_utils.Limits
    unread: list[quota_rules.Unread]


@dataclasses.dataclass(frozen=True)
class FirstRound:
    """What ``quota_list`` reads at once: Nova's limits, the GPU devices
    with what they hold, and the projects (None when not read).
    """

    limits: LimitsRead
    devices: list[providers.Device]
    projects: list[dict] | None


def _limit_reads(identity: identity_api.IdentityClient,
                 service: identity_api.ServiceRef | None
                 ) -> dict[str, typing.Callable[[], typing.Any]]:
    """The two reads of Nova's limits (none without ``service``: Nova
    reads no limit of Keystone).
    """
    if service is None:
        return {}
    return {'registered': lambda: identity.registered_limits(service),
            'limits': lambda: identity.limits(service)}


def _as_read(read: dict[str, typing.Any],
             service: identity_api.ServiceRef | None) -> LimitsRead:
    """The Limits oslo.limit reads of Keystone's answers (``read``, by
    ``_limit_reads``), and those outside the region of Nova's endpoint.
    """
    if service is None:
        return LimitsRead(limit_utils.Limits({}, {}), [])
    registered, limits = read['registered'], read['limits']
    return LimitsRead(
        limit_utils.Limits.from_keystone(registered, limits,
                                         service.region_id),
        quota_rules.outside_region(registered, limits, service.region_id))


def _first_round(placement: placement_api.PlacementClient,
                 identity: identity_api.IdentityClient,
                 service: identity_api.ServiceRef | None, names: bool
                 ) -> FirstRound:
    calls = _limit_reads(identity, service)
    calls['devices'] = lambda: device_reads.scope_devices(
        placement, kinds=providers.KINDS)
    if names:
        calls['projects'] = identity.projects
    read = pool.call_named(calls, placement.max_workers)
    return FirstRound(_as_read(read, service), read['devices'],
                      read.get('projects'))


def quota_list(placement: placement_api.PlacementClient,
               identity: identity_api.IdentityClient,
               compute: compute_api.ComputeClient,
               projects: tuple[str, ...] = (),
               resource_class: str | None = None,
               strategy: limit_utils.Strategy | None = None,
               names: bool = False,
               token: identity_api.Token | None = None) -> QuotaReport:
    """Every project with GPU usage or a GPU limit of its own (or the
    ``projects`` named), one row per GPU class (only ``resource_class``
    when given), with the limit Nova enforces by ``strategy`` (Nova's
    unified limits with their defaults when None); ``names``: read the
    projects' names. ``token`` (``viewer``, read when None): without the
    admin role, the rows of its own project only (``own_quota``).
    """
    strategy = strategy or limit_utils.Strategy()
    token = token or viewer(identity)
    if not sees_every_project(token):
        return own_quota(placement, identity, token, projects,
                         resource_class, strategy)
    service = nova_service(identity) if strategy.unified else None
    first = _first_round(placement, identity, service,
                         names or bool(projects))
    limits, devices, listed = first.limits.limits, first.devices, \
        first.projects
    classes = sorted({d.resource_class for d in devices})
    if resource_class is not None:
        classes = [resource_class]
    held = {rc: sum(d.used for d in devices if d.resource_class == rc)
            for rc in classes}
    if projects:
        assert listed is not None   # named projects are always listed
        wanted = project_ids(list(projects), listed)
        usages = read_usages(placement, wanted)
    else:
        usages = read_usages(placement, limits.projects_limiting(
            {limit_placement.resource_name(rc) for rc in classes}))
        find_holders(placement, compute, devices, held, usages)
    rows = quota_rules.quota_rows(usages, classes, limits, strategy,
                                  every_class=frozenset(usages if projects
                                                        else ()))
    report = QuotaReport(rows, usages,
                         {p['id']: p['name'] for p in listed or ()},
                         limits, strategy, classes, held,
                         region=service.region_id if service else None,
                         unread=first.limits.unread)
    warn_outside_region(report)
    return report


def own_quota(placement: placement_api.PlacementClient,
              identity: identity_api.IdentityClient,
              token: identity_api.Token, projects: tuple[str, ...],
              resource_class: str | None,
              strategy: limit_utils.Strategy) -> QuotaReport:
    """The rows of the token's own project, as a project reader or member
    may read them: Placement's ``GET /usages?project_id=`` of its project
    and Keystone's limits of Nova's service (Keystone lists such a token
    the registered limits and its project's limits only), at once. The
    GPU devices are the admin's to list, so the classes are the GPU
    classes (``quota_rules.gpu_class``) the project uses or that have a
    limit Nova reads; ``resource_class`` only when given. ``errors.Refused``
    for ``projects`` naming another project.
    """
    own = token.project_id
    if own is None:
        raise admin_refusal(token, "Reading every project's quota")
    for reference in projects:
        if reference not in (own, token.project_name):
            raise admin_refusal(
                token, 'Reading the quota of project %s' % reference,
                parameter='project', name=reference)
    service = nova_service(identity) if strategy.unified else None
    calls = _limit_reads(identity, service)
    calls['usages'] = lambda: placement.get_project_usages(own)
    read = pool.call_named(calls, placement.max_workers)
    usages, found = read['usages'], _as_read(read, service)
    limits = found.limits
    classes = [resource_class] if resource_class is not None else \
        quota_rules.known_classes(usages, limits)
    rows = quota_rules.quota_rows({own: usages}, classes, limits, strategy,
                                  every_class=frozenset({own}))
    held = {rc: int(usages.get(rc, 0)) for rc in classes}
    report = QuotaReport(rows, {own: usages},
                         {own: token.project_name or ''}, limits, strategy,
                         classes, held, every_project=False,
                         region=service.region_id if service else None,
                         unread=found.unread)
    warn_outside_region(report)
    return report


def flavor_fits(placement: placement_api.PlacementClient,
                compute: compute_api.ComputeClient, report: QuotaReport,
                flavors: list[str],
                pci_config: pci_rules.PciConfig | None = None
                ) -> list[quota_rules.FlavorFit]:
    """How many more servers of each flavor (name or ID) each project of
    ``report`` can boot: the servers its limits allow (as Nova's quota
    driver enforces them, ``quota_allows``) and those the cloud's
    capacity fits (``capacity --flavor``, with the explainer's reason
    when none does), fewest first. ``pci_config``: the controller's
    ``[pci]``, as ``capacity`` takes it.
    """
    counted = [capacity.count(placement, compute, flavor=f,
                              pci_config=pci_config, explain=True)
               for f in flavors]
    deltas = [limit_placement.flavor_deltas(c.request) for c in counted]
    allows = quota_allows(compute, report, deltas)
    fits = []
    for flavor, count, delta in zip(flavors, counted, deltas):
        reason = None
        if not count.total and count.steps:
            reason = quota_rules.capacity_reason(count.steps, count.fix)
        for project in sorted(report.usages):
            fits.append(quota_rules.FlavorFit(project, flavor,
                                              allows(project, delta),
                                              count.total, reason))
    return sorted(fits, key=quota_rules.fit_key)


def quota_allows(compute: compute_api.ComputeClient, report: QuotaReport,
                 deltas: list[dict[str, int]]
                 ) -> typing.Callable[[str, dict[str, int]],
                                      limit_placement.QuotaFit]:
    """``allows(project, delta)``: how many servers of ``delta``
    (``flavor_deltas``) the project's limits let in, as Nova's quota
    driver checks a request. Under the unified limits driver: Keystone's
    limits (``report``) on every resource of the flavor and ``servers``,
    whose usage is Nova's count of the project's servers (``GET
    /os-quota-sets/{project}/detail``, one request for each project whose
    ``servers`` limit Nova enforces). Under DbQuotaDriver: each project's
    quota set (``instances``, ``cores``, ``ram``: the same request, for
    every project). Under any other driver: no limit.
    """
    projects = sorted(report.usages)
    strategy = report.strategy
    if strategy.driver == limit_utils.DB_QUOTA_DRIVER:
        sets = dict(zip(projects, compute.map(compute.quota_set, projects)))

        def legacy(project: str, delta: dict[str, int]
                   ) -> limit_placement.QuotaFit:
            effective, used = compute_utils.legacy_limits(sets[project])
            return limit_placement.servers_allowed(
                compute_utils.legacy_deltas(delta), used, effective)
        return legacy
    if not strategy.unified:
        return lambda project, delta: limit_placement.QuotaFit(None)
    names = set().union(*deltas) if deltas else set()
    effective = {p: {n: limit_utils.effective_limit(p, n, report.limits,
                                                    strategy)
                     for n in names} for p in projects}
    counting = [p for p in projects if limit_utils.SERVERS in names
                and not effective[p][limit_utils.SERVERS].unlimited]
    servers = dict(zip(counting, compute.map(compute.servers_in_use,
                                             counting)))

    def unified(project: str, delta: dict[str, int]
                ) -> limit_placement.QuotaFit:
        used = {limit_placement.resource_name(rc): n
                for rc, n in report.usages[project].items()}
        used[limit_utils.SERVERS] = servers.get(project, 0)
        return limit_placement.servers_allowed(delta, used,
                                               effective[project])
    return unified


def metric_families(placement: placement_api.PlacementClient,
                    identity: identity_api.IdentityClient,
                    compute: compute_api.ComputeClient,
                    strategy: limit_utils.Strategy | None = None
                    ) -> list['core.GaugeMetricFamily']:
    """The Prometheus families of every project's GPU usage and limit
    (what ``quota list --long`` reads, with ``strategy``: the
    controller's ``[quota]``, Nova's unified limits with their defaults
    when None); ``errors.Refused`` for a token that sees its own project
    only.
    """
    token = viewer(identity)
    if not sees_every_project(token):
        raise admin_refusal(token, "Reading every project's quota")
    report = quota_list(placement, identity, compute, strategy=strategy,
                        names=True, token=token)
    return quota_metrics.families(report.rows, report.names)
