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
``domain.audit``.
"""

from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import typing

from osc_lib import exceptions

from osc_mdev.api import compute as compute_client
from osc_mdev.api import placement as placement_client
from osc_mdev.api import pool
from osc_mdev.base import errors as library_errors
from osc_mdev.cloud import allocations as alloc_logic
from osc_mdev.cloud import fit as capacity_logic
from osc_mdev.cloud import payloads as nova_payloads
from osc_mdev.cloud import providers
from osc_mdev.cloud import reads as device_reads
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.features.audit import checks as domain
from osc_mdev.features.capacity import reads as capacity_reads
from osc_mdev.features.trait import writes as trait_writes
from osc_mdev.nova.compute import provider_config
from osc_mdev.nova import names
from osc_mdev.nova import objects as nova_servers
from osc_mdev.nova.pci import config as pci
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver


R = typing.TypeVar('R')


@dataclasses.dataclass
class Snapshot:
    devices: list[providers.Device]
    allocations: list[alloc_logic.MdevAllocation]
    servers: list[nova_servers.Server] | None  # None: Nova's list failed
    nova_error: str | None
    facts: dict[str, domain.ConsumerFacts]
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


def _nova(call: Callable[[], R]) -> Callable[[], 'R | _Failed']:
    """Run a Nova read; its failure becomes text (a finding), not an
    exception.
    """
    def run() -> 'R | _Failed':
        try:
            return call()
        except (exceptions.CommandError, library_errors.ServiceError,
                compute_client.NotFound) as exc:
            return _Failed(str(exc) or 'HTTP 404 from the Compute API')
    return run


@dataclasses.dataclass(frozen=True)
class _Failed:
    error: str


def _lookup(compute: compute_client.ComputeClient,
            consumer: str) -> nova_servers.Server | str | None:
    try:
        found = compute.get_server(consumer)
    except (exceptions.CommandError, library_errors.ServiceError) as exc:
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
    ``[pci]`` (``pci.PciConfig``), with which flavors asking for PCI
    devices are judged too; None when not given.
    """
    provider_list = placement.list_providers()
    device_reads.check_hosts(provider_list, set(hosts) | set(conf_hosts))
    # PCI-in-Placement devices too: their allocations can be orphaned
    # and their usage above capacity like an mdev device's.
    candidates = [c for c in providers.find_candidates(
                      provider_list, providers.KINDS)
                  if not hosts or c.host in hosts]
    by_uuid = {c.uuid: c for c in candidates}

    calls: list[Callable[..., typing.Any]] = [
        lambda: device_reads.rows_of(placement, candidates),
        _nova(compute.list_servers)]
    if flavors:
        calls.append(_nova(compute.list_flavors))
        calls.append(_nova(compute.compute_services))
    results = pool.call_all(calls, placement.max_workers)
    devices, servers = results[0], results[1]
    flavor_list = results[2] if flavors else None
    services = results[3] if flavors else []
    devices, per_provider = _allocations_and_excess(placement, devices)
    devices.sort(key=providers.sort_key)
    found = alloc_logic.of_providers(
        per_provider, {u: by_uuid[u] for u in per_provider})

    nova_error = None
    if isinstance(servers, _Failed):
        nova_error, servers = servers.error, None
    if isinstance(flavor_list, _Failed):
        nova_error, flavor_list = nova_error or flavor_list.error, None
    if isinstance(services, _Failed):
        nova_error, flavor_list = nova_error or services.error, None
    if servers is not None:
        servers = [nova_payloads.server(s) for s in servers]
    if flavor_list is not None:
        flavor_list = [nova_payloads.flavor(f) for f in flavor_list]

    facts: dict[str, domain.ConsumerFacts] = {}
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
        asked = domain.unknown_classes(flavor_list, known)
        requests = list(domain.flavor_requests(
            flavor_list, known, pci_config).values())
        calls = [lambda rc=rc: placement.resource_class_exists(rc)
                 for rc in asked]
        if requests:
            calls.append(lambda: capacity_reads.read_hosts(
                placement, requests, provider_list, services))
        results = pool.call_all(calls, placement.max_workers)
        missing = tuple(rc for rc, ok in zip(asked, results) if not ok)
        trees = results[-1] if requests else []
    return Snapshot(devices, found, servers, nova_error, facts, flavor_list,
                    missing, frozenset(hosts) or frozenset(
                        providers.hosts_of(provider_list)), elsewhere,
                    trees)


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
    jobs: list[tuple[str, Callable[[str], typing.Any]]] = [
        (u, placement.get_provider_allocations) for u in in_use] + [
        (u, placement.get_inventories) for u in over]

    def read(job: tuple[str, Callable[[str], typing.Any]]) -> typing.Any:
        uuid, getter = job
        try:
            return getter(uuid)
        except placement_client.NotFound:
            return placement_client.NotFound

    results = placement.map(read, jobs)
    gone = {u for (u, _), r in zip(jobs, results)
            if r is placement_client.NotFound}
    per_provider: dict[str, dict[str, typing.Any]] = {
        u: {} for u in {d.uuid for d in devices}}
    per_provider.update(zip(in_use, results[:len(in_use)]))
    inventories = dict(zip(over, results[len(in_use):]))
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
        request = domain.server_request(server)
        return sum(request.device_amounts().values()) if request else 0

    suspects = [s.id for s in servers
                if s.node in hosts and domain.settled(s)
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
                    ) -> dict[str, domain.ConsumerFacts]:
    """Ask Nova and Placement about consumers Nova's server list lacks."""
    if not consumers:
        return {}
    calls: list[Callable[..., typing.Any]] = [
        lambda c=c: _lookup(compute, c) for c in consumers]
    calls += [lambda c=c: _record(placement, c) for c in consumers]
    calls.append(_nova(compute.list_migrations))
    results = pool.call_all(calls, placement.max_workers)
    count = len(consumers)
    lookups, records = results[:count], results[count:2 * count]
    migrations = results[-1]
    facts: dict[str, domain.ConsumerFacts] = {}
    for consumer, lookup, record in zip(consumers, lookups, records):
        migration: dict[str, typing.Any] | str | None
        if isinstance(migrations, _Failed):
            migration = migrations.error
        else:
            migration = next((m for m in migrations
                              if m.get('uuid') == consumer), None)
        facts[consumer] = domain.ConsumerFacts(lookup, migration, record)
    return facts


def audit(snapshot: Snapshot,
          confs: Mapping[str, libvirt_driver.MdevConfig] | None = None,
          flavors: bool = True, pci_config: pci.PciConfig | None = None,
          prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX,
          provider_configs: Mapping[str, list[provider_config.Entry]]
          | None = None) -> list[domain.Finding]:
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
    found: list[domain.Finding] = []
    if snapshot.nova_error:
        skipped = [domain.UNSCHEDULABLE_FLAVOR] if flavors else []
        if snapshot.servers is None:
            skipped[:0] = [domain.ORPHANED_ALLOCATION,
                           domain.MISSING_ALLOCATION, domain.NODE_MISMATCH]
        found.append(domain.Finding(
            domain.ERROR, check=domain.NOVA_UNREACHABLE,
            message='Nova could not be read (%s), so %s %s not checked; '
                    'run the audit again when Nova answers.'
                    % (snapshot.nova_error.rstrip('.'), ', '.join(skipped),
                       'was' if len(skipped) == 1 else 'were')))
    if snapshot.servers is not None:
        servers = {s.id: s for s in snapshot.servers}
        found += domain.orphaned_allocations(
            snapshot.allocations, servers, snapshot.facts)
        hosts = snapshot.hosts
        consumers = {a.consumer for a in mdev_allocations}
        mine = [s for s in snapshot.servers
                if s.node in hosts or s.id in consumers]
        classes = {names.VGPU} | {d.resource_class for d in mdev_devices}
        theirs = mdev_allocations + snapshot.elsewhere
        found += domain.missing_allocations(
            mine, theirs + pci_allocations, classes, pci_config)
        found += domain.node_mismatches(mine, theirs)
    found += domain.over_capacity(snapshot.devices, snapshot.allocations)
    traits = domain.trait_findings(mdev_devices, confs, prefix)
    if provider_configs:
        traits = domain.note_provider_configs(traits, provider_configs)
        traits += domain.provider_config_findings(
            mdev_devices, provider_configs, traits, prefix)
    found += traits
    if flavors and snapshot.flavors is not None:
        found += domain.unschedulable_flavors(
            snapshot.flavors, snapshot.trees, snapshot.missing_classes,
            pci_config)
    if pci_config is None:
        hosts = snapshot.hosts
        note = domain.pci_alias_unchecked(
            [s for s in snapshot.servers or ()
             if s.node in hosts and domain.settled(s)],
            snapshot.flavors if flavors else None)
        if note is not None:
            found.append(note)
    return sorted(found, key=domain.sort_key)


@dataclasses.dataclass(frozen=True)
class Outcome:
    repair: domain.RemoveAllocations | domain.AddTrait
    result: str
    failed: bool = False


def _remove(placement: placement_client.PlacementClient,
            repair: domain.RemoveAllocations, dry_run: bool) -> Outcome:
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
        except (exceptions.CommandError, library_errors.ServiceError) as exc:
            return Outcome(repair, 'failed: %s' % exc, True)
        if not now.get('allocations'):
            return Outcome(repair, 'removed its allocations (seen on '
                           're-reading the consumer)')
        return Outcome(repair, 'left alone: its allocations changed since '
                       'they were read (consumer generation %s); run the '
                       'audit again' % repair.generation, True)
    except (exceptions.CommandError, library_errors.ServiceError) as exc:
        return Outcome(repair, 'failed: %s' % exc, True)
    return Outcome(repair, 'removed its allocations (consumer generation '
                   '%s)' % repair.generation)


def fix(placement: placement_client.PlacementClient,
        repairs: Sequence[domain.RemoveAllocations | domain.AddTrait],
        dry_run: bool = False) -> dict[tuple[str, ...], Outcome]:
    """Apply ``repairs``; ``{domain.repair_key(r): Outcome}``.

    Orphaned allocations: one generation-guarded PUT per consumer. Lost
    traits: the safe trait writer (read-modify-write with the provider
    generation, other traits kept), custom traits created first.
    """
    removals = [r for r in repairs if isinstance(r, domain.RemoveAllocations)]
    additions = [r for r in repairs if isinstance(r, domain.AddTrait)]
    if additions and not dry_run:
        trait_writes.create_custom(placement, {r.trait for r in additions})
    plans = [trait_logic.DevicePlan(r.device, add=(r.trait,))
             for r in additions]
    calls: list[Callable[..., typing.Any]] = [
        lambda r=r: _remove(placement, r, dry_run) for r in removals]
    calls.append(lambda: trait_writes.apply(placement, plans, dry_run))
    results = pool.call_all(calls, placement.max_workers)
    outcomes = {domain.repair_key(o.repair): o for o in results[:-1]}
    for repair, written in zip(additions, results[-1]):
        outcomes[domain.repair_key(repair)] = Outcome(
            repair, written.result, written.failed)
    return outcomes
