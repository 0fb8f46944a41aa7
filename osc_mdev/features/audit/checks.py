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

"""What Nova, Placement and the flavors disagree on, for mdev devices.

Pure checks over data already read (``features.audit.reads`` reads it): each
check function takes that data and answers a list of ``Finding``; a
finding that ``--fix`` can repair carries the repair (``RemoveAllocations``
or ``AddTrait``). Nothing here touches the network.
"""

from collections.abc import Collection
from collections.abc import Container
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import typing

from osc_mdev.base import findings
from osc_mdev.base import words
from osc_mdev.cloud import allocations as alloc_model
from osc_mdev.cloud import explanation
from osc_mdev.cloud import fit
from osc_mdev.cloud import providers
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.nova.compute import provider_config
from osc_mdev.nova import names
from osc_mdev.nova import objects as nova_servers
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.scheduler import utils as rr
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

ORPHANED_ALLOCATION = 'orphaned-allocation'
MISSING_ALLOCATION = 'missing-allocation'
NODE_MISMATCH = 'node-mismatch'
OVER_CAPACITY = 'over-capacity'
LOST_TRAIT = 'lost-trait'
WRONG_TRAIT = 'wrong-trait'
#: A device whose traits differ from its host's provider config file
#: (``--provider-config HOST=PATH``).
PROVIDER_CONFIG = 'provider-config'
UNSCHEDULABLE_FLAVOR = 'unschedulable-flavor'
#: A one-time-use device Nova reserved after its use: it waits to be
#: cleaned and released.
WAITING_TO_CLEAN = 'waiting-to-clean'
#: Not a check of its own: Nova could not be asked, so what depends on
#: its answer was not judged.
NOVA_UNREACHABLE = 'nova-unreachable'
#: Not a check of its own: flavors ask for PCI devices by alias and the
#: controller's [pci] alias was not given, so they were not judged.
PCI_ALIAS_UNCHECKED = 'pci-alias-unchecked'

CHECKS = (ORPHANED_ALLOCATION, MISSING_ALLOCATION, NODE_MISMATCH,
          OVER_CAPACITY, WAITING_TO_CLEAN, LOST_TRAIT, WRONG_TRAIT,
          PROVIDER_CONFIG, UNSCHEDULABLE_FLAVOR)
#: The checks ``--fix`` repairs; nothing else is changed automatically.
FIXABLE = (ORPHANED_ALLOCATION, LOST_TRAIT)

ERROR, WARNING, INFO = findings.ERROR, findings.WARNING, findings.INFO

#: Nova's migration statuses after which a migration consumer should hold
#: nothing: the move was confirmed, reverted, completed or it failed.
MIGRATION_ENDED = frozenset((
    'confirmed', 'reverted', 'completed', 'done', 'error', 'failed',
    'cancelled'))
#: Server states that hold no allocations on a compute node by design.
_NOT_ON_A_NODE = frozenset(('BUILD', 'SHELVED_OFFLOADED', 'DELETED'))

MOVE_COMMAND = ('openstack server migrate --wait %s && openstack server '
                'migration confirm %s')

# The mdev type traits (one rule: traits.type_key).
TYPE_DRIVERS = trait_logic.TYPE_DRIVERS
type_key = trait_logic.type_key


@dataclasses.dataclass(frozen=True)
class RemoveAllocations:
    """Remove every allocation of an orphaned consumer, guarded by the
    consumer generation the audit read.
    """

    consumer: str
    generation: int
    project_id: str
    user_id: str

    def describe(self) -> str:
        return 'remove every allocation of consumer %s' % self.consumer


@dataclasses.dataclass(frozen=True)
class AddTrait:
    """Add a device's lost type trait back, keeping its other traits."""

    device: providers.Device
    trait: str

    def describe(self) -> str:
        return 'add trait %s to %s:%s' % (self.trait, self.device.host,
                                          self.device.device)


Finding = findings.Finding
#: A device or a device provider: where a finding is.
Located = providers.Candidate | providers.Device


def sort_key(finding: Finding) -> tuple[int, str, str, str, str]:
    """The order of an audit's findings: by check, then host, device,
    server and message.
    """
    order = CHECKS + (NOVA_UNREACHABLE, PCI_ALIAS_UNCHECKED)
    return (order.index(finding.check), finding.host, finding.device,
            finding.server, finding.message)


def _finding(severity: str, check: str, device: Located | None = None,
             server: str = '', message: str = '',
             resource_class: str | None = None,
             repair: findings.Repair | None = None) -> Finding:
    return Finding(
        severity, check=check,
        host=device.host if device is not None else '',
        device=device.device if device is not None else '',
        server=server, message=message,
        resource_class=resource_class or getattr(
            device, 'resource_class', '') or '',
        provider_uuid=getattr(device, 'uuid', '') or '',
        repair=repair)


def _where(device: Located) -> str:
    return '%s:%s' % (device.host, device.device)


def _server_label(server: nova_servers.Server) -> str:
    return server.label


# -- orphaned-allocation --------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ConsumerFacts:
    """What Nova and Placement said of one consumer the server list lacks.

    ``lookup``: the server of ``GET /servers/{id}`` (a servers.Server),
    None for 404, or the error text when Nova could not be asked.
    ``migration``: Nova's migration with this UUID, None when it lists
    none, or an error text.
    ``record``: ``GET /allocations/{consumer}`` (consumer generation,
    project, user, type) read by the audit.
    """

    lookup: nova_servers.Server | str | None = None
    migration: dict[str, typing.Any] | str | None = None
    record: dict[str, typing.Any] | None = None


def orphaned_allocations(allocations: Collection[alloc_model.MdevAllocation],
                         servers: Mapping[str, nova_servers.Server],
                         facts: Mapping[str, ConsumerFacts]
                         ) -> list[Finding]:
    """``orphaned-allocation``: mdev allocations of consumers that are not
    a server Nova knows, or of a migration that has ended.

    ``allocations``: MdevAllocation rows; ``servers``: ``{id:
    servers.Server}`` of Nova's server list; ``facts``: ``{consumer:
    ConsumerFacts}`` for the other consumers. A consumer Nova could not
    be asked about is never an orphan: it gives a ``nova-unreachable``
    finding instead. An ended migration's allocation is not repaired
    automatically while its server exists and holds no mdev of its own
    (it may be the server's only accounting).
    """
    found = []
    holders = {a.consumer for a in allocations}
    for alloc in allocations:
        consumer = alloc.consumer
        if consumer in servers:
            continue
        fact = facts.get(consumer)
        if fact is None or isinstance(fact.lookup, nova_servers.Server):
            # Nova was not asked, or has it (listed too late).
            continue
        if isinstance(fact.lookup, str) or isinstance(fact.migration, str):
            error = fact.lookup if isinstance(fact.lookup, str) else str(
                fact.migration)
            found.append(_finding(
                ERROR, NOVA_UNREACHABLE, alloc.candidate, consumer,
                'Nova could not be asked about consumer %s (%s), so its '
                '%d x %s is not judged; run the audit again when Nova '
                'answers.' % (consumer, error.rstrip('.'), alloc.amount,
                              alloc.resource_class),
                alloc.resource_class))
            continue
        migration = fact.migration
        unaccounted = None
        if isinstance(migration, dict):
            status = migration.get('status', '')
            if status not in MIGRATION_ENDED:
                continue                  # a move in progress holds it
            instance = migration.get('instance_uuid', '?')
            why = ('is migration %s of server %s, which ended (%s)'
                   % (consumer, instance, status))
            if instance in servers and instance not in holders:
                # The server holds no mdev of its own: this may be its
                # only accounting (a move whose revert failed).
                unaccounted = instance
        else:
            why = 'is neither a server nor a migration Nova knows'
        record = fact.record
        if record is not None and not record.get('allocations'):
            continue                      # removed since it was listed
        if unaccounted:
            found.append(_finding(
                ERROR, ORPHANED_ALLOCATION, alloc.candidate, consumer,
                'Consumer %s %s but holds %d x %s here, while server %s '
                'holds no mdev of its own; not removed automatically: '
                'check where the server runs (openstack mdev allocation '
                'show %s) before removing it with openstack resource '
                'provider allocation delete %s'
                % (consumer, why, alloc.amount, alloc.resource_class,
                   unaccounted, unaccounted, consumer),
                alloc.resource_class))
            continue
        # Placement gives them with the allocations (microversion 1.28).
        repair = RemoveAllocations(
            consumer, typing.cast(int, record.get('consumer_generation')),
            typing.cast(str, record.get('project_id')),
            typing.cast(str, record.get('user_id'))) \
            if record is not None else None
        found.append(_finding(
            ERROR, ORPHANED_ALLOCATION, alloc.candidate, consumer,
            'Consumer %s %s but holds %d x %s here; remove its allocations: '
            'openstack mdev audit --fix %s --host %s'
            % (consumer, why, alloc.amount, alloc.resource_class,
               ORPHANED_ALLOCATION, alloc.host),
            alloc.resource_class, repair))
    return found


# -- missing-allocation / node-mismatch ----------------------------------

def server_request(server: nova_servers.Server,
                   pci_config: pci_rules.PciConfig | None = None
                   ) -> rr.Request | None:
    """The request Nova builds for the server (``nova.scheduler.utils
    .request_for`` of its embedded flavor, the copy Nova keeps with the
    server, ``flavor`` from microversion 2.47, and of its boot from
    volume); its PCI alias devices only with ``pci_config`` (the
    controller's ``[pci]``) and its ``pci_in_placement``, as the
    scheduler asks for them. None when Nova would refuse the flavor's
    ``pci_passthrough:alias``.
    """
    try:
        return rr.request_for(server.flavor, pci_config,
                              server.booted_from_volume)
    except rr.RequestError:
        return None


def has_pci_alias(extra_specs: Mapping[str, str] | None) -> bool:
    """Whether flavor extra specs ask for PCI devices by alias."""
    return rr.PCI_ALIAS_KEY in (extra_specs or {})


def settled(server: nova_servers.Server) -> bool:
    """A server on a node and not being moved or built: its allocations
    are what its flavor asks for, on its node.
    """
    return bool(server.node) and not server.task_state and (
        server.status not in _NOT_ON_A_NODE)


def _describe_amounts(amounts: Mapping[str, int]) -> str:
    return ', '.join('%d x %s' % (n, rc) for rc, n in sorted(
        amounts.items())) or 'no mdev'


def missing_allocations(servers: Iterable[nova_servers.Server],
                        allocations: Iterable[alloc_model.MdevAllocation],
                        mdev_classes: Iterable[str],
                        pci_config: pci_rules.PciConfig | None = None
                        ) -> list[Finding]:
    """``missing-allocation``: servers whose embedded flavor (the copy
    Nova keeps with the server, ``flavor.extra_specs`` from microversion
    2.47) asks for mdevs they do not hold in Placement, or holds another
    class or amount.

    With ``pci_config`` (the controller's ``[pci]``) and its
    ``pci_in_placement``, the PCI devices of the flavor's
    ``pci_passthrough:alias`` count too, one of the alias' resource class
    per device (``allocations`` should then hold the PCI-in-Placement
    allocations as well); a server whose alias is not defined there is
    left out. Without, PCI devices are not judged: with
    ``pci_in_placement`` off the scheduler asks Placement for none (its
    PCI filter picks them), and Placement holds them only where
    nova-compute reports them and heals their allocations.
    """
    judged = pci_config is not None and pci_config.pci_in_placement
    allocations = [a for a in allocations
                   if judged or a.kind != providers.PCI]
    held: dict[str, dict[str, int]] = {}
    for alloc in allocations:
        per_rc = held.setdefault(alloc.consumer, {})
        per_rc[alloc.resource_class] = per_rc.get(
            alloc.resource_class, 0) + alloc.amount
    classes = set(mdev_classes) | {a.resource_class for a in allocations}
    found = []
    for server in servers:
        if not settled(server):
            continue
        request = server_request(server, pci_config)
        if request is None:
            continue
        wanted = request.device_amounts(classes)
        has = held.get(server.id, {})
        if wanted == has:
            continue
        label = _server_label(server)
        what = ('holds none' if not has else 'holds %s'
                % _describe_amounts(has))
        found.append(Finding(
            ERROR, check=MISSING_ALLOCATION, host=server.node or '',
            server=server.id,
            resource_class=','.join(sorted(set(wanted) | set(has))),
            message='Server %s: its flavor asks for %s but it %s in '
                    'Placement; cold-migrate it so the scheduler claims '
                    'them: %s' % (label, _describe_amounts(wanted), what,
                                  MOVE_COMMAND % (server.id, server.id))))
    return found


def node_mismatches(servers: Iterable[nova_servers.Server],
                    allocations: Iterable[alloc_model.MdevAllocation]
                    ) -> list[Finding]:
    """``node-mismatch``: a server's mdev allocation is on a device of
    another compute node than the one Nova has the server on
    (its node, not its service host).
    """
    by_id = {s.id: s for s in servers}
    found = []
    for alloc in allocations:
        server = by_id.get(alloc.consumer)
        if server is None or not settled(server):
            continue
        node = server.node
        if alloc.host == node:
            continue
        found.append(_finding(
            ERROR, NODE_MISMATCH, alloc.candidate, server.id,
            'Server %s runs on node %s but its %d x %s is on %s; '
            'cold-migrate it so its allocations are made again: %s'
            % (_server_label(server), node, alloc.amount,
               alloc.resource_class, _where(alloc.candidate),
               MOVE_COMMAND % (server.id, server.id)),
            alloc.resource_class))
    return found


# -- over-capacity --------------------------------------------------------

def over_capacity(devices: Iterable[providers.Device],
                  allocations: Collection[alloc_model.MdevAllocation]
                  ) -> list[Finding]:
    """``over-capacity``: devices whose usage exceeds
    ``(total - reserved) * allocation_ratio``, with their consumers.
    """
    found = []
    for device in devices:
        capacity = device.capacity
        if device.used <= capacity:
            continue
        consumers = sorted({a.consumer for a in allocations
                            if a.candidate.uuid == device.uuid
                            and a.resource_class == device.resource_class})
        inventory = device.inventory
        why = '' if inventory is None else ' (total %d, reserved %d, ' \
            'ratio %s)' % (inventory.total, inventory.reserved,
                           inventory.allocation_ratio)
        found.append(_finding(
            ERROR, OVER_CAPACITY, device, ','.join(consumers),
            'Device %s uses %d %s but its capacity is %d%s; move %d of its '
            'servers away: %s'
            % (_where(device), device.used, device.resource_class, capacity,
               why, device.used - capacity,
               'openstack server migrate --wait <server>'
               if not consumers else MOVE_COMMAND % (consumers[0],
                                                     consumers[0]))))
    return found


def waiting_to_clean(devices: Iterable[providers.Device]) -> list[Finding]:
    """``waiting-to-clean``: one-time-use devices Nova reserved after
    their use (``Device.waiting``), one warning each: nobody gets them
    until they are cleaned and released.
    """
    found = []
    for device in devices:
        if device.waiting:
            where = _where(device)
            found.append(_finding(
                WARNING, WAITING_TO_CLEAN, device, message=(
                    'Device %s was used once and Nova keeps it reserved '
                    'until it is cleaned; clean it, then run: openstack '
                    'mdev provider release %s' % (where, where))))
    return found


# -- lost-trait / wrong-trait ---------------------------------------------

def conf_traits(conf: libvirt_driver.MdevConfig, nodedev: str,
                prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX
                ) -> tuple[str | None, frozenset[str]]:
    """``(own trait, other types' traits)`` for a device under a nova.conf.

    The one place the audit reads a nova.conf (``libvirt_driver.MdevConfig``:
    ``type_for``, Nova's rule on the device's libvirt name, and
    ``types``); own is None when the file gives the device no type.
    """
    by_type = trait_logic.type_traits(conf, prefix)
    mdev_type = conf.type_for(nodedev)
    own = by_type.get(mdev_type) if mdev_type else None
    return own, frozenset(t for t in by_type.values() if t != own)


def trait_findings(devices: Iterable[providers.Device],
                   confs: Mapping[str, libvirt_driver.MdevConfig]
                   | None = None,
                   prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX
                   ) -> list[Finding]:
    """``lost-trait`` and ``wrong-trait``, with the type traits named as
    ``prefix`` says (``--trait-prefix``, as ``trait set --compute-conf``
    names them).

    Hosts with a nova.conf (``confs``: ``{host: MdevConfig}``): a device
    lacking its type's trait has lost it; a device carrying another
    enabled type's trait has a wrong one. Other hosts, by the siblings
    heuristic: among the devices of one host and resource class, a device
    with no type trait (``type_key``) while siblings carry one has lost
    it (re-applied by ``--fix`` only when those siblings agree on one
    trait); a device with traits of two types has a wrong one (Nova gives
    a physical GPU one type).
    """
    confs = confs or {}
    found = []
    groups: dict[tuple[str, str], list[providers.Device]] = {}
    for device in devices:
        if device.traits is None:
            continue
        if device.host in confs:
            found.extend(_conf_findings(device, confs[device.host], prefix))
        else:
            groups.setdefault((device.host, device.resource_class),
                              []).append(device)
    for group in groups.values():
        found.extend(_sibling_findings(group, prefix))
    return found


def _unset_command(trait: str, device: providers.Device) -> str:
    return 'openstack mdev trait unset --trait %s %s' % (trait,
                                                         _where(device))


def _unset_from_files_command(traits: Iterable[str],
                              device: providers.Device) -> str:
    """``trait unset`` of ``traits`` on ``device`` and in the provider
    config files.
    """
    return ('openstack mdev trait unset %s %s --provider-config-dir DIR'
            % (' '.join('--trait %s' % t for t in traits), _where(device)))


def _set_command(trait: str, device: providers.Device) -> str:
    return 'openstack mdev trait set --trait %s %s' % (trait, _where(device))


def _conf_findings(device: providers.Device, conf: libvirt_driver.MdevConfig,
                   prefix: str) -> list[Finding]:
    own, others = conf_traits(conf, device.candidate.nodedev, prefix)
    if own is None:
        return []
    carried = device.traits or ()    # trait_findings: read traits only
    found = []
    if own not in carried:
        found.append(_finding(
            WARNING, LOST_TRAIT, device, message=(
                'Device %s lacks %s, the trait of its type in nova.conf; '
                'add it: %s' % (_where(device), own,
                                _set_command(own, device))),
            repair=AddTrait(device, own)))
    for trait in sorted(others & set(carried)):
        found.append(_finding(
            ERROR, WRONG_TRAIT, device, message=(
                'Device %s carries %s, the trait of another type in '
                'nova.conf (its type has %s); remove it: %s'
                % (_where(device), trait, own,
                   _unset_command(trait, device)))))
    return found


def _sibling_findings(group: Sequence[providers.Device],
                      prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX
                      ) -> list[Finding]:
    keys: dict[str, dict[str, list[str]]] = {d.uuid: {} for d in group}
    for device in group:
        for trait in device.traits or ():  # trait_findings: read only
            key = type_key(trait, prefix=prefix)
            if key is not None:
                keys[device.uuid].setdefault(key, []).append(trait)
    found = []
    # Siblings with one type vote; a device with two is itself wrong.
    carried = sorted({t for d in group if len(keys[d.uuid]) == 1
                      for ts in keys[d.uuid].values() for t in ts})
    for device in group:
        mine = keys[device.uuid]
        if len(mine) > 1:
            traits = sorted(t for ts in mine.values() for t in ts)
            found.append(_finding(
                ERROR, WRONG_TRAIT, device, message=(
                    'Device %s carries the traits of %d types (%s) but Nova '
                    'gives a device one type; remove the one it does not '
                    'have: %s' % (_where(device), len(mine),
                                  ', '.join(traits),
                                  _unset_command('<trait>', device)))))
        if mine or not any(keys.values()):
            continue
        if len(carried) == 1:
            trait = carried[0]
            found.append(_finding(
                WARNING, LOST_TRAIT, device, message=(
                    'Device %s has no type trait while its %s siblings on '
                    'host %s carry %s; add it back: %s'
                    % (_where(device), device.resource_class, device.host,
                       trait, _set_command(trait, device))),
                repair=AddTrait(device, trait)))
        else:
            offered = sorted({t for ts in keys.values() for tr in ts.values()
                              for t in tr})
            found.append(_finding(
                WARNING, LOST_TRAIT, device, message=(
                    'Device %s has no type trait while its %s siblings on '
                    'host %s carry %s; which one is its type is not known '
                    "here: audit it with its host's nova.conf (openstack "
                    'mdev audit --compute-conf %s=FILE), or add it: %s'
                    % (_where(device), device.resource_class, device.host,
                       ', '.join(offered), device.host,
                       _set_command('<trait>', device)))))
    return found


# -- provider-config -------------------------------------------------------

def _file_traits(device: providers.Device,
                 entries: Iterable[provider_config.Entry]
                 ) -> set[str] | None:
    """The traits the host's provider config entries give ``device``
    (named by provider name or UUID), or None when none names it.
    """
    found: set[str] | None = None
    for entry in entries:
        if entry.kept and entry.value in (device.candidate.name,
                                          device.uuid):
            found = (found or set()) | set(entry.traits)
    return found


def _export_command(device: providers.Device) -> str:
    return ("openstack mdev trait export --host %s --provider-config-dir DIR"
            % device.host)


def note_provider_configs(
        findings: Iterable[Finding],
        files: Mapping[str, Iterable[provider_config.Entry]]
) -> list[Finding]:
    """The ``lost-trait`` findings of hosts with a provider config file
    (``files``: ``{host: [nova.compute.provider_config.Entry]}``), each saying
    what the file does about the lost trait.
    """
    noted = []
    for finding in findings:
        repair = finding.repair
        entries = files.get(finding.host)
        if finding.check != LOST_TRAIT or entries is None or not isinstance(
                repair, AddTrait):
            noted.append(finding)
            continue
        given = _file_traits(repair.device, entries) or set()
        if repair.trait in given:
            note = (' The provider config file of %s gives it: nova-compute '
                    'puts it back at its next update after refreshing its '
                    'provider cache if it runs with that file (a re-created '
                    'provider gets it at once); if it '
                    'does not come back, install the file and restart '
                    'nova-compute.' % finding.host)
        else:
            note = (' The provider config file of %s does not give it: '
                    'add it there too (openstack mdev trait set '
                    '--provider-config-dir DIR), or the next re-created '
                    'provider loses it again.' % finding.host)
        noted.append(dataclasses.replace(finding,
                                         message=finding.message + note))
    return noted


def provider_config_findings(
        devices: Iterable[providers.Device],
        files: Mapping[str, Iterable[provider_config.Entry]],
        found: Iterable[Finding] = (),
        prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX) -> list[Finding]:
    """``provider-config``: mdev devices of the hosts of ``files`` whose
    custom traits differ from what their host's provider config file
    gives them.

    A trait of the file the device lacks comes back at nova-compute's
    next update (unless a ``lost-trait`` finding of ``found`` already
    says so); a custom trait the file lacks is lost when Nova re-creates
    the provider (warning for a type trait, info for another).
    """
    lost = {(f.provider_uuid, f.repair.trait) for f in found
            if f.check == LOST_TRAIT and isinstance(f.repair, AddTrait)}
    result = []
    seen: set[str] = set()
    for device in devices:
        entries = files.get(device.host)
        if entries is None or device.traits is None or device.uuid in seen:
            continue
        seen.add(device.uuid)
        given = _file_traits(device, entries) or set()
        carried = {t for t in device.traits if names.is_custom_name(t)}
        back = sorted(t for t in given - carried
                      if (device.uuid, t) not in lost)
        if back:
            result.append(_finding(
                WARNING, PROVIDER_CONFIG, device, message=(
                    'Device %s lacks %s, which its host\'s provider config '
                    'file gives it: nova-compute adds %s back at its next '
                    'update after refreshing its provider cache ([compute] '
                    'resource_provider_association_refresh, 300 s by '
                    'default) or restarting; to drop %s for good, '
                    'remove %s from the file too: %s'
                    % (_where(device), ', '.join(back),
                       'it' if len(back) == 1 else 'them',
                       'it' if len(back) == 1 else 'them',
                       'it' if len(back) == 1 else 'them',
                       _unset_from_files_command(back, device)))))
        missing = sorted(carried - given)
        for kind, traits in (
                (WARNING, [t for t in missing
                           if trait_logic.is_type_trait(t, prefix)]),
                (INFO, [t for t in missing
                        if not trait_logic.is_type_trait(t, prefix)])):
            if not traits:
                continue
            result.append(_finding(
                kind, PROVIDER_CONFIG, device, message=(
                    'Device %s carries %s, which its host\'s provider config '
                    'file does not give it: lost when Nova re-creates the '
                    'provider; export again: %s'
                    % (_where(device), ', '.join(traits),
                       _export_command(device)))))
    return result


# -- unschedulable-flavor -------------------------------------------------

def flavor_requests(flavor_list: Iterable[nova_servers.Flavor],
                    classes: Iterable[str],
                    pci_config: pci_rules.PciConfig | None = None
                    ) -> dict[str, rr.Request]:
    """``{flavor id: nova.scheduler.utils.Request}`` of the enabled flavors the
    ``unschedulable-flavor`` check judges, built from their extra specs as
    ``openstack mdev capacity --flavor`` builds them: those asking for an
    mdev class in ``classes`` (VGPU and the classes the devices have). A
    class that exists but no mdev device has is not ours to judge.

    Flavors with ``pci_passthrough:alias`` are judged only with
    ``pci_config`` (the controller's ``[pci]``), their PCI devices
    asked as Nova asks them (with its ``pci_in_placement``); an alias Nova
    refuses leaves the flavor out here (``unschedulable_flavors`` says
    why).
    """
    found = {}
    for flavor in flavor_list:
        if flavor.disabled:
            continue
        if has_pci_alias(flavor.extra_specs) and pci_config is None:
            continue
        try:
            request = rr.request_for(flavor, pci_config)
        except rr.RequestError:
            continue
        if set(request.mdev_classes()) & set(classes) or any(
                g.is_pci for g in request.groups):
            found[flavor.id] = request
    return found


def unschedulable_flavors(flavor_list: Sequence[nova_servers.Flavor],
                          trees: Sequence[fit.Host],
                          missing_classes: Iterable[str] = (),
                          pci_config: pci_rules.PciConfig | None = None
                          ) -> list[Finding]:
    """``unschedulable-flavor``: flavors whose mdev request no device in
    the cloud can serve even when nothing is used (the capacity explainer
    on ``trees``, the compute node trees of ``features.capacity.reads``:
    no device of the class, none with a required trait, all with a
    forbidden one, too small, disabled compute services), or that ask
    for a resource
    class Placement does not have (``missing_classes``). The message
    gives the explainer's reason and smallest change. Disabled flavors
    are left out; a full cloud is no finding. With ``pci_config`` (the
    controller's ``[pci]``), flavors with ``pci_passthrough:alias`` are
    judged too, and one whose alias Nova refuses is a finding.
    """
    classes = {names.VGPU} | {rc for h in trees for d in h.devices
                              for rc in d.inventories}
    requests = flavor_requests(flavor_list, classes, pci_config)
    found = []
    for flavor in flavor_list:
        if flavor.disabled:
            continue
        specs = flavor.extra_specs
        label = '%s (%s)' % (flavor.name, flavor.id)
        gone = sorted({k.name for k in map(rr.spec_key, specs)
                       if k and k.is_resource
                       and k.name in missing_classes})
        if gone:
            found.append(Finding(
                WARNING, check=UNSCHEDULABLE_FLAVOR, resource_class=gone[0],
                message='Flavor %s asks for resource class %s, which does '
                        'not exist in Placement; see it with: openstack '
                        'mdev flavor show %s' % (label, ', '.join(gone),
                                                 flavor.id)))
            continue
        request = requests.get(flavor.id)
        if request is None and pci_config is not None \
                and has_pci_alias(specs):
            try:
                rr.request_for(flavor, pci_config)
            except rr.RequestError as exc:
                found.append(Finding(
                    WARNING, check=UNSCHEDULABLE_FLAVOR,
                    message='Flavor %s cannot be booted: %s; see it with: '
                            'openstack mdev flavor show %s' % (
                                label, exc, flavor.id)))
            continue
        if request is None:
            continue
        reason = explanation.unschedulable_reason(request, trees)
        if reason:
            found.append(Finding(
                WARNING, check=UNSCHEDULABLE_FLAVOR,
                resource_class=', '.join(request.mdev_classes()),
                message='Flavor %s cannot be scheduled: %s; see it with: '
                        'openstack mdev capacity --flavor %s --explain'
                        % (label, reason, flavor.id)))
    return found


def unknown_classes(flavor_list: Iterable[nova_servers.Flavor],
                    known: Container[str]) -> list[str]:
    """``CUSTOM_`` classes the flavors ask for that are not in ``known``."""
    return sorted({k.name for f in flavor_list
                   for k in map(rr.spec_key, f.extra_specs)
                   if k and k.is_resource and k.name.startswith('CUSTOM_')
                   and k.name not in known})


# -- repairs --------------------------------------------------------------

def repairs(findings: Iterable[Finding], checks: Container[str]
            ) -> list[RemoveAllocations | AddTrait]:
    """The distinct repairs of the findings of ``checks``, in order."""
    seen: dict[tuple[str, ...], RemoveAllocations | AddTrait] = {}
    for finding in findings:
        repair = finding.repair
        if finding.check in checks and isinstance(
                repair, (RemoveAllocations, AddTrait)):
            seen.setdefault(_repair_key(repair), repair)
    return list(seen.values())


def _repair_key(repair: findings.Repair) -> tuple[str, ...]:
    if isinstance(repair, RemoveAllocations):
        return ('consumer', repair.consumer)
    assert isinstance(repair, AddTrait)     # the audit's other repair
    return ('trait', repair.device.uuid, repair.trait)


def repair_key(repair: findings.Repair) -> tuple[str, ...]:
    return _repair_key(repair)


def pci_alias_unchecked(servers: Iterable[nova_servers.Server] | None,
                        flavor_list: Iterable[nova_servers.Flavor] | None
                        ) -> Finding | None:
    """The one note that ``pci_passthrough:alias`` requests were not
    judged (the controller's ``[pci] alias`` was not given): how many of
    ``servers`` (embedded flavors) and enabled ``flavor_list`` ask for
    PCI devices by alias. None when none do.
    """
    n_servers = sum(1 for s in servers or () if has_pci_alias(
        s.flavor.extra_specs))
    n_flavors = sum(1 for f in flavor_list or ()
                    if not f.disabled and has_pci_alias(f.extra_specs))
    if not n_servers and not n_flavors:
        return None
    what = [words.count(n, word)
            for n, word in ((n_servers, 'server'), (n_flavors, 'flavor'))
            if n]
    return Finding(
        INFO, check=PCI_ALIAS_UNCHECKED,
        message='%s ask%s for PCI devices by alias (%s), which %s and %s '
                "did not check; check them with the controller's "
                'nova.conf: openstack mdev audit --controller-conf '
                '<file>.' % (
                    ' and '.join(what), 's' if len(what) == 1 and (
                        n_servers or n_flavors) == 1 else '',
                    rr.PCI_ALIAS_KEY, MISSING_ALLOCATION,
                    UNSCHEDULABLE_FLAVOR))
