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

"""Where a server with mdevs (or PCI-in-Placement GPUs) can move, live or
cold, and whether Nova will agree.

Pure logic over what Placement, the Nova API and (optionally) the
computes' nova.conf files say. Each rule Nova applies is one function
below whose docstring names the Nova function it mirrors; they are used
in the order Nova applies them, so the first that fails is the reason
Nova gives:

1. the API: the server's state (``API.live_migrate`` / ``API.resize``);
2. the conductor: the source's nova-compute is up;
3. the scheduler: the server's request in the target's tree, disabled and
   down computes excluded (Placement and the ``ComputeFilter``), with
   room on devices and root (the one fit engine of ``capacity``);
4. live only, the conductor: the target's hypervisor is not older
   (``_check_compatible_with_source_hypervisor``, unless its
   ``[workarounds] skip_hypervisor_version_check_on_lm``), PCI alias
   devices are live-migratable (``_check_can_migrate_pci``);
5. live only, the libvirt driver: libvirt and QEMU on both hosts can
   migrate mdevs (``_host_can_support_mdev_live_migration``), the
   server's mdev types are enabled on the target and the devices Placement
   gives there map one to one onto them
   (``check_source_migrate_data_at_dest``).

What Nova does not check but an operator must know is ours: a cold
migration onto a device of another type gives the server another vGPU
(Nova accepts it); a flavor that does not ask for the type lets Placement
pick a device of another type on hosts with several types; NVIDIA vGPUs
need the ``[libvirt] live_migration_downtime*`` settings of Nova's vGPU
guide. What the APIs cannot show (libvirt's own version, the kernel) is
said, never guessed.

The type of a device comes from a nova.conf of its host (``--compute-
conf``: ``novaconf.vgpu_type_per_pgpu``) or its type trait
(``traits.mdev_type_of_traits``); room on devices of the server's type
is counted by giving each such device a marker trait that the server's
request requires (``typed``), so the capacity engine counts it like any
trait.
"""

import collections
import dataclasses

from osc_mdev.domain import capacity
from osc_mdev.domain import names
from osc_mdev.domain import novaconf
from osc_mdev.domain import providers
from osc_mdev.domain import resource_request as rr
from osc_mdev.domain import traits as trait_logic

LIVE = 'live'
COLD = 'cold'
YES, NO = 'yes', 'no'

# nova/virt/libvirt/driver.py (nova 34).
MIN_MDEV_LIVEMIG_LIBVIRT_VERSION = (8, 6, 0)
MIN_MDEV_LIVEMIG_QEMU_VERSION = (8, 1, 0)
HV_DRIVER_QEMU = 'QEMU'
# Nova's vGPU admin guide: what NVIDIA vGPUs need to converge.
NVIDIA_DOWNTIME = {'live_migration_downtime': 500000,
                   'live_migration_downtime_steps': 3,
                   'live_migration_downtime_delay': 3}
# The linux kernel the guide asks for (mdev live migration, vfio v2).
MIN_KERNEL = '5.18'

# vm_state (OS-EXT-STS:vm_state) Nova's API accepts for each move.
LIVE_VM_STATES = ('active', 'paused')
COLD_VM_STATES = ('active', 'stopped')

# Marks the devices of one mdev type for the fit engine: real traits are
# upper case, so this never names one.
TYPE_MARK = 'mdev-type:'

UP, DOWN = 'up', 'down'
ENABLED, DISABLED = 'enabled', 'disabled'


# -- Nova's rules, one function each ---------------------------------------

def version_tuple(version):
    """``8001000`` -> ``(8, 1, 0)``: the integer Nova stores as
    ``hypervisor_version`` (``versionutils.convert_version_to_int``) as a
    tuple; None stays None.
    """
    if version is None:
        return None
    version = int(version)
    return (version // 1000000, version // 1000 % 1000, version % 1000)


def version_text(version):
    return '.'.join(str(p) for p in version)


def vm_state_allows(kind, vm_state, task_state):
    """Mirrors the ``check_instance_state`` decorators of
    nova/compute/api.py ``API.live_migrate`` (vm_state active or paused)
    and ``API.resize`` (a cold migration: active or stopped), both with
    no task in progress. Answers None or the reason in Nova's words
    (``InstanceInvalidState``).
    """
    allowed = LIVE_VM_STATES if kind == LIVE else COLD_VM_STATES
    method = 'live_migrate' if kind == LIVE else 'resize'
    if vm_state not in allowed:
        return ('Instance is in vm_state %s (Nova %s accepts %s only)' % (
            vm_state, method, ' or '.join(allowed)))
    if task_state is not None:
        return ('Instance is in task_state %s (a task is in progress)'
                % task_state)
    return None


def host_can_support_mdev_live_migration(qemu_version, libvirt_version=None,
                                         hypervisor_type=HV_DRIVER_QEMU):
    """Mirrors nova/virt/libvirt/driver.py
    ``LibvirtDriver._host_can_support_mdev_live_migration``
    (``Host.has_min_version(MIN_MDEV_LIVEMIG_LIBVIRT_VERSION,
    MIN_MDEV_LIVEMIG_QEMU_VERSION, HV_DRIVER_QEMU)``): libvirt and QEMU
    at least 8.6.0 and 8.1.0, on QEMU.

    Versions are tuples. The Compute API shows QEMU's version only
    (``hypervisor_version``): with ``libvirt_version`` None the answer is
    the one of what is known (libvirt is assumed new enough, and the
    caller says it was not checked).
    """
    if hypervisor_type != HV_DRIVER_QEMU:
        return False
    if libvirt_version is not None and (
            tuple(libvirt_version) < MIN_MDEV_LIVEMIG_LIBVIRT_VERSION):
        return False
    return tuple(qemu_version) >= MIN_MDEV_LIVEMIG_QEMU_VERSION


def mdev_versions_refusal(failed):
    """The reason ``LibvirtDriver._assert_source_can_live_migrate_mdevs``
    gives when ``failed`` ('source' or 'target') cannot migrate mdevs.
    """
    return ('Either libvirt or QEMU version for compute service %s are '
            'too old than the supported ones : (QEMU: %s, libvirt: %s)' % (
                failed, version_text(MIN_MDEV_LIVEMIG_QEMU_VERSION),
                version_text(MIN_MDEV_LIVEMIG_LIBVIRT_VERSION)))


def compatible_with_source_hypervisor(source_type, source_version,
                                      destination_type, destination_version,
                                      skip_version_check=False):
    """Mirrors nova/conductor/tasks/live_migrate.py
    ``LiveMigrationTask._check_compatible_with_source_hypervisor``: the
    same hypervisor type, and unless ``[workarounds]
    skip_hypervisor_version_check_on_lm`` a destination version not older
    than the source's. None, or the reason in Nova's words
    (``InvalidHypervisorType``, ``DestinationHypervisorTooOld``).
    """
    if source_type != destination_type:
        return 'The supplied hypervisor type of is invalid.'
    if not skip_version_check and source_version > destination_version:
        return ('The instance requires a newer hypervisor version than has '
                'been provided.')
    return None


def skips_hypervisor_version_check(settings: novaconf.Settings) -> bool:
    """``[workarounds] skip_hypervisor_version_check_on_lm`` as
    nova-conductor reads it in
    ``LiveMigrationTask._check_compatible_with_source_hypervisor``
    (nova/conductor/tasks/live_migrate.py): the conductor, not
    nova-compute, checks the versions, so this is the value of the
    conductor's files (the superconductor's with cells). NovaConfError
    for a value oslo.config refuses.
    """
    value = settings.workarounds[novaconf.SKIP_HYPERVISOR_VERSION_CHECK]
    if value.error is not None:
        raise novaconf.NovaConfError(
            '%s: the value %s is refused by oslo.config (%s), so '
            'nova-conductor cannot read it; write True or False' % (
                value.where, value.written.value, value.error))
    return bool(value.value)


def pci_request_live_migratable(aliases):
    """Mirrors ``LiveMigrationTask._check_can_migrate_pci`` for flavor
    PCI requests (``InstancePCIRequest.is_live_migratable``: every spec
    of the alias says ``live_migratable`` true). ``aliases`` are the
    pci.Alias of the flavor's ``pci_passthrough:alias``. None, or the
    reason in Nova's words.
    """
    for alias in aliases:
        if not all(spec.get('live_migratable') == 'true'
                   for spec in alias.specs):
            return ('This request does not explicitly request '
                    'live-migratable devices.')
    return None


def unsupported_mdev_types(source_mdev_types, supported_vgpu_types):
    """Mirrors the first check of nova/virt/libvirt/driver.py
    ``LibvirtDriver.check_source_migrate_data_at_dest``: every type of
    the server's mdevs (``{mdev: type}``) must be among the target's
    ``supported_vgpu_types``. None, or the reason in Nova's words.
    """
    if not all(t in supported_vgpu_types
               for t in source_mdev_types.values()):
        return ('Source mdev types %s are not supported by this compute : '
                '%s' % (list(source_mdev_types.values()),
                        list(supported_vgpu_types)))
    return None


def target_mdevs(source_mdev_types, dest_mdev_types):
    """Mirrors the mapping of ``LibvirtDriver
    .check_source_migrate_data_at_dest``: each source mdev (``{mdev:
    type}``) takes the first target mdev of its type not taken yet
    (``dest_mdev_types``, the mdevs Nova allocates on the devices
    Placement gave). Answers ``{source mdev: target mdev}``; Nova refuses
    the migration ("not fully mapped") when it maps fewer than all.
    """
    mapped = {}
    for src_mdev, src_type in source_mdev_types.items():
        for dst_mdev, dst_type in dest_mdev_types.items():
            if (src_type == dst_type and src_type not in mapped and
                    dst_mdev not in mapped.values()):
                mapped[src_mdev] = dst_mdev
                continue
    return mapped


def downtime_off(values):
    """What Nova's vGPU guide asks of the computes that live-migrate
    NVIDIA vGPUs: ``[libvirt] live_migration_downtime = 500000``,
    ``live_migration_downtime_steps = 3`` and
    ``live_migration_downtime_delay = 3``, or the migration does not
    converge. ``values`` is ``{option: value}`` (Nova's defaults where
    unset: 500, 10, 75; None for a value oslo.config refuses). Answers
    ``[(option, value)]`` of the options that are off.
    """
    off = []
    for option, wanted in NVIDIA_DOWNTIME.items():
        value = values.get(option)
        if value is None or (value < wanted if option ==
                             'live_migration_downtime' else value > wanted):
            off.append((option, value))
    return off


def downtime_problem(values):
    """``downtime_off`` as text (``option = value, ...``), or None."""
    off = downtime_off(values)
    return ', '.join('%s = %s' % (option, 'invalid' if value is None
                                  else value)
                     for option, value in off) or None


def downtime_settings(settings: novaconf.Settings) -> dict:
    """``{option: value}`` of the ``[libvirt] live_migration_downtime*``
    options nova-compute uses with these nova.conf files (a
    novaconf.Settings): Nova's defaults where unset, whether or not the
    files have a ``[libvirt]`` section; None for a value oslo.config
    refuses.
    """
    return {option: value.value
            for option, value in settings.libvirt.items()}


DOWNTIME_NEEDED = (
    'NVIDIA vGPUs need %s, or their live migration does not converge '
    '(Nova\'s vGPU guide)' % ', '.join(
        '%s = %d' % item for item in NVIDIA_DOWNTIME.items()))


# -- what is known of the hosts and the server ------------------------------

@dataclasses.dataclass(frozen=True)
class Hypervisor:
    """A compute node as ``os-hypervisors`` shows it."""

    node: str                    # hypervisor_hostname: the root provider
    service_host: str            # service.host, for the migrate commands
    status: str = ENABLED        # enabled / disabled (the service)
    state: str = UP              # up / down (the service)
    hypervisor_type: str = HV_DRIVER_QEMU
    version: tuple | None = None  # QEMU's, from hypervisor_version
    disabled_reason: str | None = None


@dataclasses.dataclass(frozen=True)
class Conf:
    """What a host's nova.conf says (``--compute-conf``): its enabled
    types (``supported_vgpu_types``, as MdevType), the type of each
    device (libvirt name -> MdevType or None) and the ``[libvirt]``
    downtime values its nova-compute uses (``downtime_settings``).
    """

    supported: tuple
    type_of: object              # callable: nodedev -> MdevType | None
    downtime: dict


@dataclasses.dataclass(frozen=True)
class Node:
    """A compute node: its tree in Placement (a capacity.Host, None when
    Placement has none), what Nova says of it, its device types and its
    nova.conf when given.
    """

    name: str
    tree: capacity.Host | None
    hypervisor: Hypervisor | None
    types: dict                  # device uuid -> MdevType | None
    nodedevs: dict               # device uuid -> libvirt name
    conf: Conf | None = None

    @property
    def service_host(self):
        return self.hypervisor.service_host if self.hypervisor else None

    def known_types(self):
        """The MdevTypes of its mdev devices, None for devices of unknown
        type among them.
        """
        return [self.types.get(d.uuid) for d in self.tree.devices
                if d.uuid in self.nodedevs] if self.tree else []


@dataclasses.dataclass(frozen=True)
class Held:
    """One device allocation of the server on its source."""

    device: str                  # HOST:ADDR
    uuid: str
    resource_class: str
    amount: int
    mdev_type: object            # MdevType | None; None for PCI too
    kind: str = providers.MDEV


@dataclasses.dataclass(frozen=True)
class Server:
    """The server to move: its state, place, request and devices."""

    id: str
    name: str
    vm_state: str | None
    task_state: str | None
    node: str                    # the source compute node
    flavor_name: str = ''
    request: rr.Request | None = None   # the flavor's, no prefilters
    problem: str | None = None   # why the request is not known
    held: tuple = ()
    pci_aliases: tuple = ()      # pci.Alias of the flavor's alias devices

    @property
    def mdevs(self):
        return [h for h in self.held if h.kind == providers.MDEV]

    def mdev_types(self):
        """``{mdev: MdevType or None}``, one entry per mdev held."""
        found = {}
        for held in self.mdevs:
            for n in range(held.amount):
                found['%s#%d' % (held.uuid, n)] = held.mdev_type
        return found

    @property
    def type_keys(self):
        """The keys of its mdev types (empty when one is unknown)."""
        types = list(self.mdev_types().values())
        if not types or any(t is None for t in types):
            return frozenset()
        return frozenset(t.key for t in types)

    def size(self):
        """What it asks, for the plan's biggest-first order."""
        if self.request is None:
            return (0, 0, 0, 0)
        roots = self.request.root_amounts()
        return (sum(self.request.device_amounts().values()),
                roots.get(rr.VCPU, 0) + roots.get(rr.PCPU, 0),
                roots.get(rr.MEMORY_MB, 0), roots.get(rr.DISK_GB, 0))


def hypervisor_from_api(hypervisor):
    """A Hypervisor of one ``os-hypervisors/detail`` entry."""
    service = hypervisor.get('service') or {}
    return Hypervisor(
        node=hypervisor['hypervisor_hostname'],
        service_host=service.get('host') or hypervisor['hypervisor_hostname'],
        status=hypervisor.get('status') or ENABLED,
        state=hypervisor.get('state') or UP,
        hypervisor_type=hypervisor.get('hypervisor_type') or HV_DRIVER_QEMU,
        version=version_tuple(hypervisor.get('hypervisor_version')),
        disabled_reason=service.get('disabled_reason'))


def conf_from(mdev_config, prefix=trait_logic.DEFAULT_TRAIT_PREFIX):
    """The Conf of a compute node's nova.conf (a novaconf.MdevConfig):
    what its libvirt driver enables (``supported_vgpu_types``), the type
    it gives each device (``vgpu_type_per_pgpu``) and its downtime
    settings (``downtime_settings``).
    """
    def type_of(nodedev):
        name = mdev_config.type_for(nodedev)
        return trait_logic.mdev_type(name, prefix) if name else None

    return Conf(tuple(trait_logic.mdev_type(t, prefix)
                      for t in mdev_config.supported_types),
                type_of, downtime_settings(mdev_config.settings))


def type_label(mdev_type):
    return mdev_type.name if mdev_type is not None else 'unknown type'


# -- typed trees: room on devices of one type --------------------------------

def _mark(key):
    return TYPE_MARK + key


def typed(request, node, key):
    """``(request, tree)`` where the request's mdev groups require the
    marker of type ``key`` and the node's devices of that type (and those
    of unknown type) carry it: the fit engine then counts room on devices
    of the type only. ``key`` None: both as they are.
    """
    tree = node.tree
    if key is None or tree is None:
        return request, tree
    groups = tuple(dataclasses.replace(g, required=g.required | {_mark(key)})
                   if _is_mdev_group(g) else g for g in request.groups)
    children = []
    for child in tree.children:
        mdev_type = node.types.get(child.uuid)
        if child.uuid in node.nodedevs and (
                mdev_type is None or mdev_type.key == key):
            child = dataclasses.replace(
                child, traits=child.traits | {_mark(key)})
        children.append(child)
    return (dataclasses.replace(request, groups=groups),
            dataclasses.replace(tree, children=tuple(children)))


def _is_mdev_group(group):
    return not group.is_pci and any(
        names.is_mdev_resource_class(rc) and rc not in rr.ROOT_CLASSES
        for rc, _ in group.resources)


def _without_type(free, node, key):
    """``free`` with the devices of type ``key`` (and of unknown type)
    emptied: what Placement could still give from devices of other types.
    """
    emptied = dict(free)
    for child in node.tree.children:
        mdev_type = node.types.get(child.uuid)
        if child.uuid in node.nodedevs and (
                mdev_type is None or mdev_type.key == key):
            for rc in child.inventories:
                emptied[(child.uuid, rc)] = 0
    return emptied


def _other_type_devices(request, node, key, free):
    """Devices of another type than ``key`` the request could take now."""
    return [d for d in capacity.serving_devices(request, node.tree, free)
            if d.uuid in node.nodedevs and node.types.get(d.uuid) is not None
            and node.types[d.uuid].key != key]


# -- the verdict on one target ----------------------------------------------

@dataclasses.dataclass
class Verdict:
    """Whether a server can move to one target, and why not."""

    node: str
    service_host: str | None
    live: str                    # YES / NO
    cold: str
    devices: tuple               # HOST:ADDR of the devices with room
    reason: str                  # the first rule that fails, or warnings
    not_checked: tuple = ()
    live_refusal: str | None = None
    cold_refusal: str | None = None
    placement: dict = dataclasses.field(default_factory=dict)
    # (the engine's placement on the target: {kind: [(group, provider,
    # amounts)]}, for the plan)
    caveats: dict = dataclasses.field(default_factory=dict)
    # (what a move of each kind Nova allows leans on: {kind: (not
    # checked, warnings)}, for the plan)

    @property
    def fits(self):
        return self.live == YES or self.cold == YES


# What Placement's in_tree answer was not asked for.
NOT_ASKED = object()


def judge(server: Server, source: Node, target: Node,
          first: object = NOT_ASKED, free: dict | None = None,
          owner_nova: bool = True, strict_types: bool = False,
          skip_version_check: bool = False) -> Verdict:
    """Whether ``server`` can move live and cold to ``target`` (Nodes).

    ``first`` is Placement's first allocation request for the server's
    request in the target's tree (``{provider uuid: {class: amount}}``),
    None when Placement gave none, NOT_ASKED when it was not asked.
    ``free`` is what is left on the target (``capacity.free_map``; the
    tree as read when None). With ``strict_types`` (the plan), a target
    where the request could land on a device of another type is refused
    even when Placement's first candidate is of the right type now.
    ``skip_version_check``: the conductor's ``[workarounds]
    skip_hypervisor_version_check_on_lm``.
    """
    notes = []                 # (LIVE or None for both, what)
    warnings = []              # the same
    live, cold = [], []        # refusals, in Nova's order
    request = server.request
    name = target.name
    if request is None:
        problem = server.problem or 'the server\'s request is not known'
        return Verdict(name, target.service_host, NO, NO, (), problem,
                       live_refusal=problem, cold_refusal=problem)

    # 1. The API.
    for kind, out in ((LIVE, live), (COLD, cold)):
        refusal = vm_state_allows(kind, server.vm_state, server.task_state)
        if refusal:
            out.append(refusal)
    # 2. The conductor: the source's nova-compute is up.
    source_hyp = source.hypervisor
    if source_hyp is not None and source_hyp.state == DOWN:
        refusal = ('Compute service of %s is unavailable at this time '
                   '(its nova-compute is down)' % source_hyp.service_host)
        live.append(refusal)
        cold.append(refusal)

    # 3. The scheduler.
    hyp = target.hypervisor
    scheduler = _scheduler_refusal(target, hyp)
    plain = rr.with_prefilters(request, owner_nova=owner_nova)
    key = next(iter(server.type_keys)) if len(server.type_keys) == 1 \
        else None
    typed_request, typed_tree = typed(plain, target, key)
    placement = {}
    devices = ()
    if scheduler is None:
        free = capacity.free_map(target.tree) if free is None else free
        found = capacity.place(plain, target.tree, dict(free))
        if found is None:
            scheduler = 'No valid host: %s' % _why_not(plain, target.tree,
                                                       free)
        elif first is None:
            scheduler = ('No valid host: Placement returns no allocation '
                         'candidate for the server\'s request in this tree')
    if scheduler is not None:
        live.append(scheduler)
        cold.append(scheduler)
    else:
        typed_found = capacity.place(typed_request, typed_tree, dict(free))
        if typed_found is not None:
            placement = {COLD: typed_found, LIVE: typed_found}
        devices = _devices(typed_request, typed_tree, free, first, target,
                           key)
        type_refusal, type_notes, type_warnings = _types(
            server, target, key, plain, typed_found, free, first,
            strict_types)
        notes += type_notes
        warnings += type_warnings
        # 4. The conductor, live only.
        refusal, said, warned = _conductor_versions(source, target,
                                                    skip_version_check)
        if refusal:
            live.append(refusal)
        notes += [(LIVE, n) for n in said]
        warnings += [(LIVE, w) for w in warned]
        if server.pci_aliases:
            refusal = pci_request_live_migratable(server.pci_aliases)
            if refusal:
                live.append(refusal)
            else:
                notes.append((LIVE, 'live_migratable devices in the [pci] '
                              'device_spec of %s' % name))
        # 5. The libvirt driver, live only.
        if server.mdevs:
            live.extend(_mdev_version_refusals(source, target))
            notes.append((LIVE, 'libvirt >= %s and Linux >= %s on both '
                          'hosts (not shown by the API)' % (
                              version_text(MIN_MDEV_LIVEMIG_LIBVIRT_VERSION),
                              MIN_KERNEL)))
            if type_refusal.get('supported'):
                live.append(type_refusal['supported'])
            if type_refusal.get(LIVE):
                live.append(type_refusal[LIVE])
            live_warnings = []
            notes += [(LIVE, n) for n in _downtime_notes(
                server, source, target, live_warnings)]
            warnings += [(LIVE, w) for w in live_warnings]
        if type_refusal.get(COLD):
            cold.append(type_refusal[COLD])

    def relevant(items):
        return list(dict.fromkeys(
            text for kind, text in items
            if (kind is None and not (live and cold))
            or (kind == LIVE and not live)))

    reason = '; '.join(r for r in [_reason(live, cold)] + [
        'warning: %s' % w for w in relevant(warnings)] if r)
    allowed = [k for k, refused in ((LIVE, live), (COLD, cold))
               if not refused]
    return Verdict(
        name, target.service_host, NO if live else YES,
        NO if cold else YES, devices, reason, tuple(relevant(notes)),
        live[0] if live else None, cold[0] if cold else None,
        {k: v for k, v in placement.items() if k in allowed},
        {k: (_of_kind(notes, k), _of_kind(warnings, k)) for k in allowed})


def _of_kind(items: list, kind: str) -> tuple:
    """The texts of ``(kind or None, text)`` items that concern a move
    of ``kind``.
    """
    return tuple(dict.fromkeys(t for k, t in items if k in (None, kind)))


def _conductor_versions(source: Node, target: Node,
                        skip_version_check: bool
                        ) -> tuple[str | None, list[str], list[str]]:
    """``compatible_with_source_hypervisor`` on what the API shows of
    both hosts: ``(refusal or None, notes, warnings)``. The versions are
    a note when the API does not show them and the conductor compares
    them; a warning when only ``skip_version_check`` lets an older
    target through.
    """
    src, dst = source.hypervisor, target.hypervisor
    if src is None or dst is None:
        return None, [], []
    known = src.version is not None and dst.version is not None
    if not known and not skip_version_check:
        return None, ['hypervisor versions (not shown for %s)' % (
            source.name if src.version is None else target.name)], []
    versions = (' (QEMU %s here, %s on the source)' % (
        version_text(dst.version), version_text(src.version))
        if known else '')
    refusal = compatible_with_source_hypervisor(
        src.hypervisor_type, src.version, dst.hypervisor_type, dst.version,
        skip_version_check)
    if refusal:
        return refusal + versions, [], []
    if known and src.version > dst.version:
        return None, [], [
            'QEMU %s here is older than %s on the source: the conductor '
            'lets it through only because of [workarounds] %s' % (
                version_text(dst.version), version_text(src.version),
                novaconf.SKIP_HYPERVISOR_VERSION_CHECK)]
    return None, [], []


def _reason(live, cold):
    if not live and not cold:
        return ''
    if live and cold and live[0] == cold[0]:
        return live[0]
    if live and cold:
        head, _, live_rest = live[0].partition(': ')
        other, _, cold_rest = cold[0].partition(': ')
        if head == other and live_rest and cold_rest:
            return '%s: live: %s; cold: %s' % (head, live_rest, cold_rest)
    parts = []
    if live:
        parts.append('live: %s' % live[0])
    if cold:
        parts.append('cold: %s' % cold[0])
    return '; '.join(parts)


def _scheduler_refusal(target, hyp):
    """The scheduler's view of the target's compute service (the
    ``ComputeFilter`` and the ``compute_status_filter`` prefilter).
    """
    if target.tree is None:
        return 'No valid host: Placement has no compute node %s' % (
            target.name)
    if hyp is None:
        return ('No valid host: the Compute API lists no hypervisor %s'
                % target.name)
    if hyp.status == DISABLED:
        return 'No valid host: the compute service of %s is disabled%s' % (
            hyp.service_host, ' (%s)' % hyp.disabled_reason
            if hyp.disabled_reason else '')
    if hyp.state == DOWN:
        return 'No valid host: the compute service of %s is down' % (
            hyp.service_host)
    return None


def _why_not(request, tree, free):
    """Why one server of ``request`` does not fit on ``tree`` now, in the
    explainer's words (``capacity.explain``), with the root's numbers
    when the root is short.
    """
    host = _with_free(tree, free)
    steps, _ = capacity.explain(request, [host])
    step = next((s for s in steps if s.hosts_out), None)
    if step is None:
        return 'the request does not fit'
    text = step.constraint
    if text.startswith('root room for'):
        short = ['%s %d asked, %d free' % (rc, n, host.root.free(rc))
                 for rc, n in sorted(request.root_amounts().items())
                 if host.root.free(rc) < n]
        return 'root resources short: %s' % ', '.join(short)
    if text.startswith('room for'):
        return 'no device with %s' % text
    if text.startswith('compute service enabled'):
        return ('the root provider carries COMPUTE_STATUS_DISABLED (Nova '
                'syncs it with the service on its next update)')
    for start, words in (('required trait ', 'no device with trait '),
                         ('forbidden trait ', 'every device has trait '),
                         ('offers ', 'no device offers ')):
        if text.startswith(start):
            return words + text[len(start):]
    return text


def _with_free(tree, free):
    """``tree`` with usages that leave ``free`` (the plan's view)."""
    def provider(p):
        usages = dict(p.usages)
        for rc, inventory in p.inventories.items():
            if (p.uuid, rc) in free:
                usages[rc] = inventory.capacity - free[(p.uuid, rc)]
        return dataclasses.replace(p, usages=usages)
    return dataclasses.replace(
        tree, root=provider(tree.root),
        children=tuple(provider(c) for c in tree.children))


def _devices(typed_request, typed_tree, free, first, target, key):
    """HOST:ADDR of the devices of the server's type (or of unknown type)
    with room for one of its device groups; those of Placement's first
    candidate first.
    """
    found = capacity.serving_devices(typed_request, typed_tree, free)
    if key is not None:
        found = [d for d in found if d.uuid not in target.nodedevs
                 or _mark(key) in d.traits]
    chosen = set(first) if isinstance(first, dict) else set()
    found.sort(key=lambda d: (d.uuid not in chosen, d.device))
    return tuple('%s:%s' % (target.name, d.device) for d in found)


def _types(server, target, key, plain, typed_found, free, first, strict):
    """Nova's type checks and ours: ``({'supported'|LIVE|COLD: refusal},
    notes, warnings)``.

    Nova refuses a live migration when a type of the server is not
    enabled on the target, or when the devices Placement gives there
    (its first candidate, which the scheduler claims) do not map one to
    one onto the server's types; a cold migration onto a device of
    another type is accepted and gives the server another vGPU, which
    is refused here.
    """
    refusal = {}
    notes, warnings = [], []
    if not server.mdevs:
        return refusal, notes, warnings
    source_types = server.mdev_types()
    if any(t is None for t in source_types.values()):
        held = [h.device for h in server.mdevs if h.mdev_type is None]
        notes.append((None, 'the mdev type of %s (no type trait: tag it '
                      'with "openstack mdev trait set --compute-conf '
                      'HOST=FILE", or give the nova.conf of its host)'
                      % ', '.join(held)))
        return refusal, notes, warnings
    wanted = ', '.join(sorted({t.name for t in source_types.values()}))

    supported = _supported(target)
    if supported is None:
        unknown = sorted(d.device for d in target.tree.devices
                         if d.uuid in target.nodedevs
                         and target.types.get(d.uuid) is None)
        notes.append((LIVE, 'the mdev types %s enables (%s: no type '
                      'trait)' % (target.name, ', '.join(unknown))))
    else:
        names_by_key = {t.key: t.name for t in supported}
        missing = unsupported_mdev_types(
            {m: t.key for m, t in source_types.items()}, set(names_by_key))
        if missing:
            refusal['supported'] = (
                'type %s not enabled on %s (%s): Source mdev types %s are '
                'not supported by this compute : %s' % (
                    wanted, target.name,
                    'its nova.conf' if target.conf else
                    'by its devices\' type traits',
                    sorted({t.name for t in source_types.values()}),
                    sorted(names_by_key.values())))

    if isinstance(first, dict):
        dest, unknown = {}, False
        for uuid, resources in sorted(first.items()):
            if uuid not in target.nodedevs:
                continue
            mdev_type = target.types.get(uuid)
            unknown = unknown or mdev_type is None
            amount = sum(n for rc, n in resources.items()
                         if names.is_mdev_resource_class(rc))
            for n in range(amount):
                dest['%s#%d' % (uuid, n)] = mdev_type and mdev_type.key
        picked = _device_names(target, first)
        if unknown:
            notes.append((None, 'the mdev type of %s, which Placement '
                          'picks' % picked))
        elif len(target_mdevs({m: t.key for m, t in source_types.items()},
                              dest)) != len(source_types):
            got = ', '.join(sorted({type_label(target.types.get(u))
                                    for u in first if u in target.nodedevs}))
            text = 'the flavor lets Placement pick %s (%s)' % (picked, got)
            refusal[LIVE] = (
                '%s: Source mdevs are not fully mapped for this compute%s' % (
                    text, '' if typed_found is not None else
                    ' (no %s device with room)' % wanted))
            refusal[COLD] = ('%s: Nova would accept it and give the server '
                             'a %s vGPU instead of %s' % (text, got, wanted))
    if typed_found is None and key is not None and COLD not in refusal:
        refusal[COLD] = 'no %s device of %s with room' % (
            wanted, target.name)
        refusal.setdefault(LIVE, refusal[COLD])

    if key is not None and LIVE not in refusal and COLD not in refusal:
        others = _other_type_devices(plain, target, key, free)
        if others and capacity.place(
                plain, target.tree, _without_type(free, target, key)):
            text = 'the flavor lets Placement pick %s (%s) too' % (
                ', '.join('%s:%s' % (target.name, d.device)
                          for d in others),
                ', '.join(sorted({type_label(target.types.get(d.uuid))
                                  for d in others})))
            if strict:
                refusal[LIVE] = refusal[COLD] = (
                    '%s, and the plan does not rely on the order Placement '
                    'lists devices in (flavor %s does not ask for the type: '
                    'resize the server to one that does)' % (
                        text, server.flavor_name))
            else:
                warnings.append((None, (
                    '%s: Placement\'s first candidate is a %s device now; '
                    'if it picks another, Nova refuses a live migration and '
                    'a cold one gives the server another vGPU type'
                    % (text, wanted))))
    return refusal, notes, warnings


def _device_names(target, allocation):
    devices = {d.uuid: d.device for d in target.tree.children}
    return ', '.join('%s:%s' % (target.name, devices[u])
                     for u in sorted(allocation, key=lambda u: devices.get(
                         u, '')) if u in devices)


def _supported(node):
    """The target's enabled types (MdevTypes), or None when they cannot
    be known: from its nova.conf, else from its devices' type traits
    when every mdev device has one.
    """
    if node.conf is not None:
        return tuple(node.conf.supported)
    known = node.known_types()
    if any(t is None for t in known):
        return None
    return tuple({t.key: t for t in known}.values())


def _mdev_version_refusals(source, target):
    """Both hosts able to migrate mdevs, by QEMU's version (what the API
    shows); the source first, as Nova checks.
    """
    found = []
    for role, node in (('source', source), ('target', target)):
        hyp = node.hypervisor
        if hyp is None or hyp.version is None:
            continue
        if not host_can_support_mdev_live_migration(
                hyp.version, None, hyp.hypervisor_type):
            found.append('%s (%s has QEMU %s)' % (
                mdev_versions_refusal(role), node.name,
                version_text(hyp.version)))
    return found


def _downtime_notes(server: Server, source: Node, target: Node,
                    warnings: list) -> list[str]:
    """The ``[libvirt] live_migration_downtime*`` settings NVIDIA vGPUs
    need, checked in the values the nova.conf of each host given makes
    nova-compute use (a warning), noted for the others.
    """
    if not any(t is not None and t.is_nvidia
               for t in server.mdev_types().values()):
        return []
    notes, off = [], []
    for node in (source, target):
        if node.conf is None:
            notes.append('[libvirt] live_migration_downtime* of %s (give '
                         'its nova.conf)' % node.name)
            continue
        problem = downtime_problem(node.conf.downtime)
        if problem:
            off.append('%s on %s' % (problem, node.name))
    if off:
        warnings.append('[libvirt] %s: %s' % ('; '.join(off),
                                              DOWNTIME_NEEDED))
    return notes


def offers(request, node):
    """Whether ``node`` has a device of each device class ``request``
    asks for: a node without one is no candidate at all.
    """
    have = {rc for d in (node.tree.children if node.tree else ())
            for rc in d.inventories}
    return set(request.device_amounts()) <= have


# -- the plan ----------------------------------------------------------------

@dataclasses.dataclass
class Move:
    """One row of a plan: where a server goes, or why it cannot; for a
    move, what it leans on that the APIs cannot show (``not_checked``)
    and its warnings (``reason``), as ``judge`` says them.
    """

    server: Server
    node: str | None = None
    service_host: str | None = None
    kind: str | None = None
    reason: str = ''
    not_checked: tuple = ()


def plan(servers: list, source: Node, targets: list,
         kinds: tuple = (LIVE, COLD), firsts: dict | None = None,
         owner_nova: bool = True, fix: object = None,
         skip_version_check: bool = False) -> list[Move]:
    """Where each of ``servers`` (on ``source``) goes, jointly.

    Biggest requests first; each takes the target where it fits best
    (live before cold when both are allowed, then the least room left
    on the devices it takes, then by name), and the room it takes is no
    longer offered to the next. ``firsts`` is ``{(server id, target
    node): Placement's first candidate}``; targets where the server's
    request could land on a device of another type are not used (the plan
    must hold whatever order Placement lists devices in). ``fix(server,
    nodes)`` says what would let a server that cannot move fit;
    ``skip_version_check`` is as for ``judge``. Each move carries the
    caveats ``judge`` gives for its kind.
    """
    firsts = firsts or {}
    free = {t.name: capacity.free_map(t.tree) for t in targets
            if t.tree is not None}
    moves = []
    ordered = sorted(servers, key=lambda s: (
        tuple(-n for n in s.size()), s.name, s.id))
    for server in ordered:
        best, refusals = None, []
        for target in sorted(targets, key=lambda t: t.name):
            if server.request is not None and not offers(
                    server.request, target):
                continue
            verdict = judge(
                server, source, target,
                firsts.get((server.id, target.name), NOT_ASKED),
                free.get(target.name), owner_nova, strict_types=True,
                skip_version_check=skip_version_check)
            usable = [k for k in kinds
                      if (verdict.live if k == LIVE else verdict.cold) == YES
                      and verdict.placement.get(k)]
            if not usable:
                refusals.append((target.name, _refusal(verdict, kinds)))
                continue
            kind = usable[0]
            left = _room_left(verdict.placement[kind], free[target.name])
            rank = (kinds.index(kind), left, target.name)
            if best is None or rank < best[0]:
                best = (rank, target, kind, verdict)
        if best is None:
            moves.append(Move(server, reason=_no_target(
                server, refusals, targets, free, fix)))
            continue
        _, target, kind, verdict = best
        for _, provider, amounts in verdict.placement[kind]:
            for rc, n in amounts.items():
                free[target.name][(provider.uuid, rc)] -= n
        not_checked, warnings = verdict.caveats[kind]
        moves.append(Move(
            server, target.name, target.service_host, kind,
            '; '.join('warning: %s' % w for w in warnings), not_checked))
    order = {s.id: i for i, s in enumerate(servers)}
    moves.sort(key=lambda m: order[m.server.id])
    return moves


def _refusal(verdict, kinds):
    if kinds == (LIVE,):
        return verdict.live_refusal or verdict.reason
    if kinds == (COLD,):
        return verdict.cold_refusal or verdict.reason
    return verdict.reason


def _room_left(placed, free):
    """Room left on the devices a placement takes (best fit: least)."""
    left = 0
    for _, provider, amounts in placed:
        if provider.device:
            for rc, n in amounts.items():
                left += free[(provider.uuid, rc)] - n
    return left


def _no_target(server, refusals, targets, free, fix):
    if server.request is None:
        return server.problem or 'the server\'s request is not known'
    if not refusals:
        return ('no other compute node has a device of %s' % ', '.join(
            sorted(server.request.device_amounts())))
    counts = collections.Counter(r for _, r in refusals)
    parts = []
    for reason, _ in counts.most_common(3):
        hosts = [n for n, r in refusals if r == reason]
        parts.append('%s: %s' % (', '.join(hosts[:3]) + (
            ' and %d more' % (len(hosts) - 3) if len(hosts) > 3 else ''),
            reason))
    if len(counts) > 3:
        parts.append('%d more reasons' % (len(counts) - 3))
    text = 'no target: ' + '; '.join(parts)
    if fix is not None:
        change = fix(server, [
            dataclasses.replace(t, tree=_with_free(t.tree, free[t.name]))
            for t in targets if t.tree is not None])
        if change:
            text += '; smallest change: %s' % change
    return text


def smallest_fix(server, targets, owner_nova=True):
    """The smallest change on one target that lets ``server`` fit there,
    on devices of its type only (``capacity.smallest_fix``): traits to
    add to devices, mdevs to free, a compute service to enable.
    """
    if server.request is None:
        return None
    key = next(iter(server.type_keys)) if len(server.type_keys) == 1 \
        else None
    request = rr.with_prefilters(server.request, owner_nova=owner_nova)
    hosts = []
    for target in targets:
        tree = target.tree
        if key is not None:
            tree = dataclasses.replace(tree, children=tuple(
                c for c in tree.children if c.uuid not in target.nodedevs
                or target.types.get(c.uuid) is None
                or target.types[c.uuid].key == key))
        hosts.append(dataclasses.replace(
            tree, disabled=target.hypervisor is not None and
            target.hypervisor.status == DISABLED))
    return capacity.smallest_fix(request, hosts)


# -- commands ---------------------------------------------------------------

LIVE_COMMAND = ('openstack --os-compute-api-version 2.30 server migrate '
                '--live-migration --host %(host)s --wait %(server)s')
COLD_COMMAND = ('openstack --os-compute-api-version 2.56 server migrate '
                '--host %(host)s --wait %(server)s && openstack server '
                'migration confirm %(server)s')


def command(kind, service_host, server_id):
    """The ``openstack`` command that makes the move (the target is a
    service host: the one ``server migrate --host`` takes).
    """
    return (LIVE_COMMAND if kind == LIVE else COLD_COMMAND) % {
        'host': service_host, 'server': server_id}
