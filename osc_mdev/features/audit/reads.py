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

"""Reads and repairs of ``openstack mdev audit``: Placement and Nova.

Bulk reads first, all at once in the bounded pool: the provider list,
then the devices as ``provider list`` reads them (allocation candidate
summaries: capacity, used and traits of every device in a few requests),
Nova's server list (all projects, with embedded flavors), flavor list and
nova-compute services; then the allocations of each device with some in
use (and the inventory of a device used beyond its capacity). Only the
consumers Nova's list lacks are then read one by one (``GET
/servers/{id}``, their allocations with the consumer generation) and,
when some exist, Nova's migration list. For the flavors, the compute
node trees are read as ``mdev capacity`` reads them (one allocation
candidates request and one ``?resources=`` listing per distinct amount
the flavors ask). The checks themselves are the pure functions of
``features.audit.checks``.
"""

from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Hashable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import functools
import typing

from osc_mdev.api import compute as compute_client
from osc_mdev.api import placement as placement_client
from osc_mdev.api import pool
from osc_mdev.base import errors
from osc_mdev.cloud import allocations as alloc_logic
from osc_mdev.cloud import fit as capacity_logic
from osc_mdev.cloud import payloads as nova_payloads
from osc_mdev.cloud import providers
from osc_mdev.cloud import reads as device_reads
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.features.audit import checks as checks
from osc_mdev.features.capacity import reads as capacity_reads
from osc_mdev.features.trait import provider_files
from osc_mdev.features.trait import writes as trait_writes
from osc_mdev.nova.compute import provider_config
from osc_mdev.nova import names
from osc_mdev.nova import objects as nova_servers
from osc_mdev.nova.pci import config as pci
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver


R = typing.TypeVar('R')
K = typing.TypeVar('K', bound=Hashable)

#: What a failed read of a service raises (a 404 from Nova included).
FAILURES: tuple[type[Exception], ...] = (errors.Error,)


@dataclasses.dataclass
class Snapshot:
    devices: list[providers.Device]
    allocations: list[alloc_logic.MdevAllocation]
    servers: list[nova_servers.Server] | None  # None: Nova's list failed
    nova_error: str | None
    facts: dict[str, checks.ConsumerFacts]
    flavors: list[nova_servers.Flavor] | None
    missing_classes: tuple[str, ...]
    hosts: frozenset[str]         # the compute nodes audited
    elsewhere: list[alloc_logic.MdevAllocation] = dataclasses.field(
        default_factory=list)
    # (with --host: the mdev allocations of the hosts' servers on devices
    # of other hosts)
    trees: list[capacity_logic.Host] = dataclasses.field(
        default_factory=list)
    # (the compute node trees the flavors are judged on, as capacity
    # reads them)


@dataclasses.dataclass(frozen=True)
class _Failed:
    error: str


@dataclasses.dataclass(frozen=True)
class _Listed:
    """The bulk reads, made at once: the devices, and Nova's lists (each
    a ``_Failed`` when Nova could not be read); the flavors (None: not
    asked) and nova-compute services only for the flavor check.
    """

    devices: list[providers.Device]
    servers: list[dict[str, typing.Any]] | _Failed
    flavors: list[dict[str, typing.Any]] | _Failed | None = None
    services: list[dict[str, typing.Any]] | _Failed = dataclasses.field(
        default_factory=list)

    def nova_error(self) -> str | None:
        """Why Nova could not be read (its first failed list), if so."""
        return next((f.error for f in (self.servers, self.flavors,
                                       self.services)
                     if isinstance(f, _Failed)), None)

    def server_list(self) -> list[nova_servers.Server] | None:
        """Nova's servers; None when they could not be read."""
        if isinstance(self.servers, _Failed):
            return None
        return [nova_payloads.server(s) for s in self.servers]

    def flavor_list(self) -> list[nova_servers.Flavor] | None:
        """Nova's flavors; None when not asked, or when they or the
        nova-compute services they are judged with could not be read.
        """
        if self.flavors is None or isinstance(self.flavors, _Failed) or \
                isinstance(self.services, _Failed):
            return None
        return [nova_payloads.flavor(f) for f in self.flavors]


def _nova(call: Callable[[], R]) -> Callable[[], 'R | _Failed']:
    """Run a Nova read; its failure becomes text (a finding), not an
    exception.
    """
    def run() -> 'R | _Failed':
        try:
            return call()
        except FAILURES as exc:
            return _Failed(str(exc) or 'HTTP 404 from the Compute API')
    return run


def _lookup(compute: compute_client.ComputeClient,
            consumer: str) -> nova_servers.Server | str | None:
    try:
        found = compute.get_server(consumer)
    except FAILURES as exc:
        return str(exc)
    return None if found is None else nova_payloads.server(found)


def _record(placement: placement_client.PlacementClient,
            consumer: str) -> dict[str, typing.Any]:
    try:
        return placement.get_consumer(consumer)
    except placement_client.NotFound:
        return {'allocations': {}}


def read(placement: placement_client.PlacementClient,
         compute: compute_client.ComputeClient,
         hosts: Collection[str] = (), flavors: bool = True,
         conf_hosts: Iterable[str] = (),
         pci_config: pci.PciConfig | None = None) -> Snapshot:
    """Everything the checks need, in few requests.

    ``hosts`` (and ``conf_hosts``, the hosts of --compute-conf files) must
    be compute nodes in Placement. ``pci_config``: the controller's
    ``[pci]`` (``nova.pci.config.PciConfig``), with which flavors asking
    for PCI devices are judged too; None when not given.
    """
    provider_list = placement.list_providers()
    device_reads.check_hosts(provider_list, set(hosts) | set(conf_hosts))
    # PCI-in-Placement devices too: their allocations can be orphaned
    # and their usage above capacity like an mdev device's.
    candidates = [c for c in providers.find_candidates(
                      provider_list, providers.KINDS)
                  if not hosts or c.host in hosts]
    by_uuid = {c.uuid: c for c in candidates}

    calls: dict[str, Callable[[], typing.Any]] = {
        'devices': lambda: device_reads.rows_of(placement, candidates,
                                                state=True),
        'servers': _nova(compute.list_servers)}
    if flavors:
        calls['flavors'] = _nova(compute.list_flavors)
        calls['services'] = _nova(compute.compute_services)
    listed = _Listed(**pool.call_named(calls, placement.max_workers))
    devices, per_provider = _allocations_and_excess(placement,
                                                    listed.devices)
    devices.sort(key=providers.sort_key)
    found = alloc_logic.of_providers(
        per_provider, {u: by_uuid[u] for u in per_provider})
    servers, flavor_list = listed.server_list(), listed.flavor_list()
    services = [] if isinstance(listed.services, _Failed) \
        else listed.services

    facts: dict[str, checks.ConsumerFacts] = {}
    elsewhere: list[alloc_logic.MdevAllocation] = []
    if servers is not None:
        known = {s.id for s in servers}
        unknown = sorted({a.consumer for a in found} - known)
        facts = _consumer_facts(placement, compute, unknown)
        if hosts:
            elsewhere = _allocations_elsewhere(
                placement, servers,
                [a for a in found if a.kind == providers.MDEV], set(hosts),
                {c.uuid: c for c in providers.find_candidates(
                    provider_list)})

    missing: tuple[str, ...] = ()
    trees: list[capacity_logic.Host] = []
    if flavor_list:
        known = {names.VGPU} | {d.resource_class for d in devices}
        asked = checks.unknown_classes(flavor_list, known)
        requests = list(checks.flavor_requests(
            flavor_list, known, pci_config).values())
        reads: dict[tuple[str, ...], Callable[[], typing.Any]] = {
            ('class', rc): functools.partial(
                placement.resource_class_exists, rc) for rc in asked}
        if requests:
            reads['trees', ] = lambda: capacity_reads.read_hosts(
                placement, requests, provider_list, services)
        answers = pool.call_named(reads, placement.max_workers)
        missing = tuple(rc for rc in asked if not answers['class', rc])
        trees = answers.get(('trees', ), [])
    return Snapshot(
        devices=devices, allocations=found, servers=servers,
        nova_error=listed.nova_error(), facts=facts, flavors=flavor_list,
        missing_classes=missing,
        hosts=frozenset(hosts) or frozenset(
            providers.hosts_of(provider_list)),
        elsewhere=elsewhere, trees=trees)


def _allocations_and_excess(placement: placement_client.PlacementClient,
                            devices: list[providers.Device]
                            ) -> tuple[list[providers.Device],
                                       dict[str, dict[str, typing.Any]]]:
    """``(devices, {uuid: allocations})``: the allocations of each device
    with some in use, and the inventory of each device used beyond its
    capacity (what the over-capacity finding shows), read at once.

    A device deleted since it was listed is left out.
    """
    in_use = sorted({d.uuid for d in devices if d.used > 0})
    over = sorted({d.uuid for d in devices
                   if d.inventory is None and d.used > d.capacity})

    def read(getter: Callable[[str], typing.Any],
             uuid: str) -> Callable[[], typing.Any]:
        def run() -> typing.Any:
            try:
                return getter(uuid)
            except placement_client.NotFound:
                return placement_client.NotFound
        return run

    calls = {('allocations', u): read(placement.get_provider_allocations, u)
             for u in in_use}
    calls.update({('inventories', u): read(placement.get_inventories, u)
                  for u in over})
    answers = pool.call_named(calls, placement.max_workers)
    gone = {u for (_, u), answer in answers.items()
            if answer is placement_client.NotFound}
    per_provider: dict[str, dict[str, typing.Any]] = {
        u: {} for u in {d.uuid for d in devices}}
    per_provider.update((u, answers['allocations', u]) for u in in_use)
    inventories = {u: answers['inventories', u] for u in over}
    kept = []
    for device in devices:
        if device.uuid in gone:
            continue
        if device.uuid in inventories:
            _, found = inventories[device.uuid]
            if device.resource_class in found:
                device = dataclasses.replace(
                    device, inventory=providers.Inventory.from_api(
                        found[device.resource_class]))
        kept.append(device)
    return kept, {u: a for u, a in per_provider.items() if u not in gone}


def _allocations_elsewhere(placement: placement_client.PlacementClient,
                           servers: Iterable[nova_servers.Server],
                           found: Iterable[alloc_logic.MdevAllocation],
                           hosts: Collection[str],
                           candidates: Mapping[str, providers.Candidate]
                           ) -> list[alloc_logic.MdevAllocation]:
    """With --host, the mdev allocations on other hosts' devices of the
    servers on ``hosts`` whose flavor asks for more mdevs than they hold
    on the devices read: one ``GET /allocations/{server}`` each.
    """
    held: dict[str, int] = {}
    for alloc in found:
        held[alloc.consumer] = held.get(alloc.consumer, 0) + alloc.amount

    def asks(server: nova_servers.Server) -> int:
        request = checks.server_request(server)
        return sum(request.device_amounts().values()) if request else 0

    suspects = [s.id for s in servers
                if s.node in hosts and checks.settled(s)
                and asks(s) > held.get(s.id, 0)]
    extra: list[alloc_logic.MdevAllocation] = []
    for server_id, allocations in zip(suspects, placement.map(
            placement.get_consumer_allocations, suspects)):
        extra.extend(a for a in alloc_logic.of_consumer(
            server_id, allocations, candidates) if a.host not in hosts)
    return extra


def _consumer_facts(placement: placement_client.PlacementClient,
                    compute: compute_client.ComputeClient,
                    consumers: Sequence[str]
                    ) -> dict[str, checks.ConsumerFacts]:
    """Ask Nova and Placement about consumers Nova's server list lacks."""
    if not consumers:
        return {}
    calls: dict[tuple[str, ...], Callable[[], typing.Any]] = {}
    for consumer in consumers:
        calls['server', consumer] = functools.partial(_lookup, compute,
                                                      consumer)
        calls['record', consumer] = functools.partial(_record, placement,
                                                      consumer)
    calls['migrations', ] = _nova(compute.list_migrations)
    answers = pool.call_named(calls, placement.max_workers)
    migrations = answers['migrations', ]
    facts: dict[str, checks.ConsumerFacts] = {}
    for consumer in consumers:
        lookup, record = answers['server', consumer], answers[
            'record', consumer]
        migration: dict[str, typing.Any] | str | None
        if isinstance(migrations, _Failed):
            migration = migrations.error
        else:
            migration = next((m for m in migrations
                              if m.get('uuid') == consumer), None)
        facts[consumer] = checks.ConsumerFacts(lookup, migration, record)
    return facts


def audit(snapshot: Snapshot,
          confs: Mapping[str, libvirt_driver.MdevConfig] | None = None,
          flavors: bool = True, pci_config: pci.PciConfig | None = None,
          prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX,
          provider_configs: Mapping[str, list[provider_config.Entry]]
          | None = None) -> list[checks.Finding]:
    """Every finding of the snapshot, sorted.

    ``prefix``: of the type traits (``--trait-prefix``), for lost-trait
    and wrong-trait.

    orphaned-allocation and over-capacity cover PCI-in-Placement devices
    too. With ``pci_config`` (the controller's ``[pci]``, as ``read``
    took it), missing-allocation and unschedulable-flavor cover the PCI
    devices flavors ask for with ``pci_passthrough:alias``; without, one
    info finding says how many servers and flavors were not judged. The
    trait checks see mdev devices only (Nova sets a PCI device's traits
    from ``[pci] device_spec``). ``provider_configs`` (``{host:
    [provider_config.Entry]}``) adds the provider-config check and says
    in each lost-trait finding of those hosts what the file does.
    """
    mdev_devices = [d for d in snapshot.devices
                    if d.kind == providers.MDEV]
    mdev_allocations = [a for a in snapshot.allocations
                        if a.kind == providers.MDEV]
    pci_allocations = [a for a in snapshot.allocations
                       if a.kind == providers.PCI] if pci_config is not None \
        else []
    found: list[checks.Finding] = []
    if snapshot.nova_error:
        skipped = [checks.UNSCHEDULABLE_FLAVOR] if flavors else []
        if snapshot.servers is None:
            skipped[:0] = [checks.ORPHANED_ALLOCATION,
                           checks.MISSING_ALLOCATION, checks.NODE_MISMATCH]
        found.append(checks.Finding(
            checks.ERROR, check=checks.NOVA_UNREACHABLE,
            message='Nova could not be read (%s), so %s %s not checked; '
                    'run the audit again when Nova answers.'
                    % (snapshot.nova_error.rstrip('.'), ', '.join(skipped),
                       'was' if len(skipped) == 1 else 'were')))
    if snapshot.servers is not None:
        servers = {s.id: s for s in snapshot.servers}
        found += checks.orphaned_allocations(
            snapshot.allocations, servers, snapshot.facts)
        hosts = snapshot.hosts
        consumers = {a.consumer for a in mdev_allocations}
        mine = [s for s in snapshot.servers
                if s.node in hosts or s.id in consumers]
        classes = {names.VGPU} | {d.resource_class for d in mdev_devices}
        theirs = mdev_allocations + snapshot.elsewhere
        found += checks.missing_allocations(
            mine, theirs + pci_allocations, classes, pci_config)
        found += checks.node_mismatches(mine, theirs)
    found += checks.over_capacity(snapshot.devices, snapshot.allocations)
    found += checks.waiting_to_clean(snapshot.devices)
    traits = checks.trait_findings(mdev_devices, confs, prefix)
    if provider_configs:
        traits = checks.note_provider_configs(traits, provider_configs)
        traits += checks.provider_config_findings(
            mdev_devices, provider_configs, traits, prefix)
    found += traits
    if flavors and snapshot.flavors is not None:
        found += checks.unschedulable_flavors(
            snapshot.flavors, snapshot.trees, snapshot.missing_classes,
            pci_config)
    if pci_config is None:
        hosts = snapshot.hosts
        note = checks.pci_alias_unchecked(
            [s for s in snapshot.servers or ()
             if s.node in hosts and checks.settled(s)],
            snapshot.flavors if flavors else None)
        if note is not None:
            found.append(note)
    return sorted(found, key=checks.sort_key)


def provider_config_files(values: Iterable[tuple[str | None, str]],
                          hosts: Collection[str] = ()
                          ) -> dict[str, list[provider_config.Entry]]:
    """``{host: [Entry]}`` of the ``(host, path)`` pairs of
    ``provider_config`` (each path a file or a directory nova-compute
    reads), the files of each host read together. Invalid for a pair with
    no host, or a host that ``hosts`` (when given) leaves out; files
    nova-compute would refuse are Invalid too (``config check`` of the
    files says why).
    """
    by_host: dict[str, list[str]] = {}
    for host, path in values:
        if host is None:
            raise errors.Invalid(
                "%s takes HOST=PATH here, not '%s': the compute node (as %s "
                'names it) and its file or directory.'
                % (errors.given('provider_config'), path,
                   errors.given('host')),
                parameter='provider_config', path=path)
        by_host.setdefault(host, []).append(path)
    outside = sorted(set(by_host) - set(hosts)) if hosts else []
    if outside:
        raise errors.Invalid(
            '%s names %s, which %s leaves out; add %s %s or drop the file.'
            % (errors.given('provider_config'), ', '.join(outside),
               errors.given('host'), errors.given('host'), outside[0]),
            parameter='provider_config', hosts=outside)
    result: dict[str, list[provider_config.Entry]] = {}
    for host, paths in by_host.items():
        configs, findings = provider_files.read(paths)
        refused = provider_config.refused_by_nova(findings)
        if refused:
            raise errors.Invalid(
                "%s: %s Check the files with 'openstack mdev config check "
                "--provider-config %s'." % (
                    refused[0].where, refused[0].message, ' '.join(paths)),
                parameter='provider_config', host=host, paths=paths)
        result[host] = provider_files.entries(configs)
    return result


@dataclasses.dataclass(frozen=True)
class Outcome:
    repair: checks.RemoveAllocations | checks.AddTrait
    result: str
    failed: bool = False


def _remove(placement: placement_client.PlacementClient,
            repair: checks.RemoveAllocations, dry_run: bool) -> Outcome:
    if dry_run:
        return Outcome(repair, 'would remove its allocations (consumer '
                       'generation %s)' % repair.generation)
    try:
        placement.remove_consumer_allocations(
            repair.consumer, repair.generation, repair.project_id,
            repair.user_id)
    except placement_client.GenerationConflict:
        # A removal whose answer was lost is retried and meets the new
        # generation: the re-read tells that apart from a real change.
        try:
            now = placement.get_consumer(repair.consumer)
        except FAILURES as exc:
            return Outcome(repair, 'failed: %s' % exc, True)
        if not now.get('allocations'):
            return Outcome(repair, 'removed its allocations (seen on '
                           're-reading the consumer)')
        return Outcome(repair, 'left alone: its allocations changed since '
                       'they were read (consumer generation %s); run the '
                       'audit again' % repair.generation, True)
    except FAILURES as exc:
        return Outcome(repair, 'failed: %s' % exc, True)
    return Outcome(repair, 'removed its allocations (consumer generation '
                   '%s)' % repair.generation)


def fix(placement: placement_client.PlacementClient,
        repairs: Sequence[checks.RemoveAllocations | checks.AddTrait],
        dry_run: bool = False) -> dict[tuple[str, ...], Outcome]:
    """Apply ``repairs``; ``{checks.repair_key(r): Outcome}``.

    Orphaned allocations: one generation-guarded PUT per consumer. Lost
    traits: the safe trait writer (read-modify-write with the provider
    generation, other traits kept), custom traits created first.
    """
    removals = [r for r in repairs if isinstance(r, checks.RemoveAllocations)]
    additions = [r for r in repairs if isinstance(r, checks.AddTrait)]
    if additions and not dry_run:
        trait_writes.create_custom(placement, {r.trait for r in additions})
    plans = [trait_logic.DevicePlan(r.device, add=(r.trait,))
             for r in additions]
    calls: dict[tuple[str, ...], Callable[[], typing.Any]] = {
        checks.repair_key(r): functools.partial(_remove, placement, r,
                                                dry_run)
        for r in removals}
    calls['traits', ] = lambda: trait_writes.apply(placement, plans,
                                                   dry_run)
    answers = pool.call_named(calls, placement.max_workers)
    written_traits = answers.pop(('traits', ))
    outcomes: dict[tuple[str, ...], Outcome] = answers
    for repair, written in zip(additions, written_traits):
        outcomes[checks.repair_key(repair)] = Outcome(
            repair, written.result, written.failed)
    return outcomes
