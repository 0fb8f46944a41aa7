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

"""``mdev config check``, its mdev half: what nova-compute will make of
a configuration's names (``spelling``), its ``[devices]`` and
``[mdev_<type>]`` options and the live-migration settings vGPUs need.

Nova's own rules come from ``nova.conf.settings`` and
``nova.virt.libvirt.driver`` (one function per Nova rule); this module
adds what Nova does not say (options it silently ignores, addresses that
can never match), compares the file with a compute node's sysfs tree (as
``osc_mdev.local`` read it) and with what Placement shows for the node.
``features.config.check.pci`` is the ``[pci]`` half;
``features.config.check.report`` renders both.
"""

from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import re
import typing

from osc_mdev.base import findings
from osc_mdev.base import words
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.features.config.check import spelling
from osc_mdev.host import gpus as host_gpus
from osc_mdev.nova.conf import options as nova_options
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova import migration as migration_rules
from osc_mdev.nova import names
from osc_mdev.nova.pci import devspec
from osc_mdev.nova.pci import placement_translator as translator
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

ERROR, WARNING, INFO = findings.ERROR, findings.WARNING, findings.INFO
Finding = findings.Finding
OTHER_DEVICES = '(any other device)'
#: Where a finding about the sysfs tree as a whole is.
MDEV_BUS = 'class/mdev_bus'


def _f(severity: str, where: str, message: str) -> Finding:
    return Finding(severity, where, message)


def _where_type(conf: libvirt_driver.MdevConfig, mdev_type: str,
                option: str | None = None) -> str:
    settings = _settings(conf)
    value = settings.groups.get(mdev_type, {}).get(option or '')
    if value is not None and value.is_set:
        return value.where
    return settings.group_line('mdev_%s' % mdev_type)


# -- The file alone ---------------------------------------------------------

def file_findings(conf: libvirt_driver.MdevConfig,
                  sysfs_checked: bool = False) -> list[Finding]:
    """Findings about the files themselves, beyond Nova's fatal ones:
    names Nova does not read (``spelling``), then the mdev rules.
    """
    settings = _settings(conf)
    found = spelling.findings(settings)
    enabled = settings.enabled
    if not enabled.value and enabled.error is None:
        found.append(_f(INFO, where('devices', 'enabled_mdev_types'),
                        'No mdev type is enabled: nova-compute offers no '
                        'mediated devices from this configuration.'))
        return found + _stray_groups(settings, ())
    types = list(dict.fromkeys(
        typing.cast('Iterable[str]', enabled.value or ())))
    for mdev_type in types:
        found.extend(_group_findings(settings, mdev_type))
    found.extend(_stray_groups(settings, types))
    if conf.default_type:
        found.append(_default_type_note(conf))
    for address in conf.unmatched_addresses():
        mdev_type = conf.pgpu_type_mapping[address]
        found.append(_f(
            WARNING, _where_type(conf, mdev_type, 'device_addresses'),
            'Address %s is accepted but matches no device: Nova compares it '
            "literally with libvirt's %s, so that device takes %s and "
            'resource class VGPU instead of %s; write it as %s.'
            % (address, libvirt_driver.libvirt_form(address),
               'the default type %s' % conf.default_type
               if conf.default_type else 'no type at all',
               mdev_type, libvirt_driver.libvirt_form(address))))
    default = conf.mdev_type(conf.default_type) if conf.default_type \
        else None
    if default is not None and default.mdev_class != novaconf.VGPU:
        found.append(_f(
            WARNING, _where_type(conf, default.name, 'mdev_class'),
            'Type %s is the default type (no device_addresses): the devices '
            'that take it are reported as VGPU, not %s, because Nova maps '
            'classes by listed address only; list its devices in '
            'device_addresses to get %s.'
            % (default.name, default.mdev_class, default.mdev_class)))
    if len(conf.types) == 1 and conf.types[0].mdev_class != novaconf.VGPU:
        only = conf.types[0]
        found.append(_f(
            INFO, _where_type(conf, only.name, 'mdev_class'),
            'mdev_class = %s on the only enabled type: computes older than '
            'Nova 29.0.0 (2024.1) ignore it and report VGPU.'
            % only.mdev_class))
    if not sysfs_checked:
        for address in sorted(conf.virtual_mdevs):
            found.append(_f(
                INFO, _where_type(conf, conf.pgpu_type_mapping[address],
                                  'device_addresses'),
                '%s is taken as a virtual parent: nova-compute refuses to '
                'start unless /sys/devices/virtual/%s exists (check it '
                'against the node: openstack mdev config check FILE '
                '--sysfs /sys).' % (address, address.replace('_', '/'))))
    found.extend(downtime_findings(conf))
    return found


def _default_type_note(conf: libvirt_driver.MdevConfig) -> Finding:
    """The type without ``device_addresses`` that Nova gives every
    device no type lists (``pgpu_type_default``), whether its group is
    absent, empty or lists no address.
    """
    name = conf.default_type
    assert name is not None     # asked for a default type only
    settings = _settings(conf)
    addresses = settings.groups.get(name, {}).get('device_addresses')
    if addresses is not None and addresses.is_set:
        here = addresses.where
    elif _section_exists(settings, 'mdev_%s' % name):
        here = settings.group_line('mdev_%s' % name)
    else:
        here = settings.enabled.where
    return _f(INFO, here,
              'Type %s has no device_addresses: it is the default type, '
              'given to every device no other type lists.' % name)


def downtime_findings(conf: libvirt_driver.MdevConfig) -> list[Finding]:
    """The ``[libvirt] live_migration_downtime*`` settings Nova's vGPU
    guide asks of computes with NVIDIA vGPU types
    (``libvirt_driver.downtime_problem``), judged on the values nova-compute
    uses (``libvirt_driver.downtime_settings``: Nova's defaults where unset).
    """
    nvidia = [t.name for t in conf.types
              if trait_logic.mdev_type(t.name).is_nvidia]
    if not nvidia:
        return []
    settings = _settings(conf)
    off = libvirt_driver.downtime_off(
        libvirt_driver.downtime_settings(settings))
    if not off:
        return []
    libvirt = settings.libvirt
    problem = ', '.join(
        '%s = %s (refused by oslo.config: %s)' % (
            option, typing.cast(novaconf.Occurrence,
                                libvirt[option].written).value,
            libvirt[option].error)
        if libvirt[option].error else '%s = %s' % (option, value)
        for option, value in off)
    written = [libvirt[option] for option, _ in off
               if libvirt[option].is_set]
    here = written[0].where if written else settings.group_line('libvirt')
    what = ('Types %s are NVIDIA vGPU types' % ', '.join(nvidia)
            if len(nvidia) > 1 else
            'Type %s is an NVIDIA vGPU type' % nvidia[0])
    return [_f(WARNING, here,
               '%s and nova-compute uses [libvirt] %s: %s; set them on every '
               'compute that live-migrates these vGPUs.' % (
                   what, problem, libvirt_driver.DOWNTIME_NEEDED))]


def post_copy_findings(conf: libvirt_driver.MdevConfig,
                       specs: Sequence[devspec.DeviceSpec]) -> list[Finding]:
    """``[libvirt] live_migration_permit_post_copy`` on a node with VFIO
    devices: enabled mdev types, or ``[pci] device_spec`` devices given
    to guests (not Neutron's SR-IOV ports, with a ``physical_network``,
    which Nova detaches before a live migration). With it, the node's
    driver asks for post-copy in every live migration it runs as the
    source (``nova.migration.post_copy_requested``: not for a paused
    server), and QEMU refuses post-copy with VFIO devices: an error
    where the devices can be live-migrated (mdevs, ``live_migratable``
    specs), so each such migration fails; a warning for devices Nova
    does not live-migrate yet.
    """
    settings = _settings(conf)
    value = settings.libvirt[novaconf.POST_COPY]
    if not migration_rules.post_copy_enabled(value.value):
        return []
    vfio = [s for s in specs if translator.in_placement(s)]
    migratable = [s for s in vfio if s.tags.get('live_migratable') ==
                  'true']
    what = []
    if conf.supported_types:
        what.append('mdev types %s' % ', '.join(conf.supported_types))
    if migratable:
        what.append('live-migratable PCI devices (%s)' % '; '.join(
            s.describe() for s in migratable))
    if what:
        return [Finding(ERROR, value.where, (
            '%s = True with %s: every live migration of their servers '
            'away from this node fails as it starts and leaves the server '
            'in ERROR (a paused server excepted): Nova asks for post-copy, '
            'which QEMU refuses with VFIO devices ("%s"); set it to False '
            '(Nova\'s vGPU guide).'
            % (novaconf.POST_COPY, ' and '.join(what),
               migration_rules.QEMU_POST_COPY_REFUSAL)),
            fails='live migrations of servers with VFIO devices fail')]
    if vfio:
        return [_f(WARNING, value.where, (
            '%s = True with PCI devices given to guests (%s): Nova does '
            'not live-migrate their servers while the devices are not '
            'live_migratable, and once they are, each such migration '
            'fails, as QEMU refuses post-copy with VFIO devices; set it '
            'to False (Nova\'s vGPU guide).' % (
                novaconf.POST_COPY, '; '.join(s.describe() for s in vfio))))]
    return []


def where(section: str, option: str | None,
          occurrence: novaconf.Occurrence | None = None) -> str:
    return novaconf.where(section, option, occurrence)


def _settings(conf: libvirt_driver.MdevConfig) -> novaconf.Settings:
    """The settings ``libvirt_driver.supported_vgpu_types`` always gives."""
    assert conf.settings is not None
    return conf.settings


def _group_findings(settings: novaconf.Settings,
                    mdev_type: str) -> list[Finding]:
    """The options of an enabled type's groups under the old name
    ``[vgpu_<type>]``: Nova reads only ``device_addresses`` there, and
    from one of the two groups only. A line Nova drops for the same
    value (``nova.conf.settings.same_value``) is an info: Nova reads what it
    would read without it.
    """
    found = []
    new = 'mdev_%s' % mdev_type
    old = 'vgpu_%s' % mdev_type
    values = settings.groups.get(mdev_type, {})
    addresses = values.get('device_addresses')
    taken = addresses.written if addresses is not None else None
    taken_old = taken is not None and \
        novaconf.group_key(taken.section) == novaconf.group_key(old)
    same_as_taken: list[novaconf.Occurrence] = []
    if taken is not None and taken_old:
        for occ in _options_in(settings, new):
            if occ.name != 'device_addresses':
                continue
            if _same(occ, taken.value):
                same_as_taken.append(occ)
                continue
            found.append(_f(
                WARNING, where(occ.section, occ.name, occ),
                'Ignored: [%s] device_addresses = %s: [%s] '
                'device_addresses%s wins, with %s: oslo.config reads '
                'the newest file first, under either name; remove one '
                'of them.' % (
                    occ.section, novaconf.shown(occ.value),
                    taken.section, novaconf.taken_at(taken, occ),
                    novaconf.shown(taken.value))))
    for occ in _options_in(settings, old):
        found.append(_old_group_finding(settings, mdev_type, occ, taken,
                                        same_as_taken))
    return found


def _same(occ: novaconf.Occurrence, text: str) -> bool:
    """Whether oslo.config reads the option of ``occ`` (of an
    ``[mdev_<type>]`` group) the same from its value and ``text``.
    """
    kind = nova_options.KINDS.get(('mdev_<type>', occ.name), 'str')
    return novaconf.same_value(kind, occ.value, text)


def _old_group_finding(settings: novaconf.Settings, mdev_type: str,
                       occ: novaconf.Occurrence,
                       taken: novaconf.Occurrence | None,
                       same_as_taken: Sequence[novaconf.Occurrence]
                       ) -> Finding:
    """The finding of one option written in ``[vgpu_<type>]``; ``taken``:
    where Nova takes ``device_addresses`` from; ``same_as_taken``: the
    ``[mdev_<type>]`` lines dropped for its same value.
    """
    new = 'mdev_%s' % mdev_type
    old = 'vgpu_%s' % mdev_type
    here = where(occ.section, occ.name, occ)
    if occ.name != 'device_addresses':
        value = settings.groups.get(mdev_type, {}).get(occ.name)
        kind = nova_options.KINDS.get(('mdev_<type>', occ.name))
        if value is not None and value.error is None and kind and \
                novaconf.reads_as(kind, occ.value, value.value):
            return _f(
                INFO, here,
                '[%s] %s = %s: [%s] is the deprecated name of [%s], from '
                'which alone Nova reads %s; Nova uses the same value '
                'there, so this line changes nothing; remove it.' % (
                    occ.section, occ.name, novaconf.shown(occ.value), old,
                    new, occ.name))
        return _f(WARNING, here,
                  'Ignored: Nova reads %s only from [%s], not from the old '
                  '[%s] group; move it there.' % (occ.name, new, old))
    if taken is not None and \
            novaconf.group_key(taken.section) != novaconf.group_key(old):
        if _same(occ, taken.value):
            return _f(
                INFO, here,
                '[%s] device_addresses = %s: [%s] is the deprecated name '
                'of [%s], which sets device_addresses to the same value%s: '
                'Nova reads %s either way; the old group can go.' % (
                    occ.section, novaconf.shown(occ.value), old, new,
                    novaconf.taken_at(taken, occ),
                    novaconf.shown(taken.value)))
        return _f(
            WARNING, here,
            'Ignored: [%s] device_addresses = %s: [%s] '
            'device_addresses is set too%s, and Nova takes that value, '
            '%s; remove the old group.' % (
                occ.section, novaconf.shown(occ.value), taken.section,
                novaconf.taken_at(taken, occ), novaconf.shown(taken.value)))
    also = ''
    if same_as_taken and occ is taken:
        also = ', and takes it over the same value at %s' % ', '.join(
            where(o.section, o.name, o) for o in same_as_taken)
    return _f(INFO, here,
              '[%s] is the deprecated name of [%s]; Nova still reads '
              'device_addresses from it%s.' % (old, new, also))


def _options_in(settings: novaconf.Settings,
                section: str) -> list[novaconf.Occurrence]:
    return [o for o in settings.occurrences
            if novaconf.group_key(o.section) == novaconf.group_key(section)]


def _section_exists(settings: novaconf.Settings, section: str) -> bool:
    return any(novaconf.group_key(name) == novaconf.group_key(section)
               for name, _, _ in settings.sections)


def _stray_groups(settings: novaconf.Settings,
                  types: Sequence[str]) -> list[Finding]:
    found = []
    seen: set[str] = set()
    enabled = {novaconf.group_key('mdev_%s' % t) for t in types} | {
        novaconf.group_key('vgpu_%s' % t) for t in types}
    for name, file, line in settings.sections:
        key = novaconf.group_key(name)
        if key in seen or key in enabled:
            continue
        if key.startswith(('mdev_', 'vgpu_')):
            seen.add(key)
            meant = spelling.same_type(name[5:], types)
            found.append(_f(
                WARNING, '[%s], %s:%d' % (name, file, line),
                'Ignored: type %s is not in [devices] enabled_mdev_types, so '
                'Nova does not read this group; %s.' % (
                    name[5:], 'did you mean [mdev_%s]?' % meant
                    if meant else 'enable the type or remove the group')))
    return found


# -- The effective result ---------------------------------------------------

@dataclasses.dataclass(frozen=True)
class DeviceResult:
    device: str                # address, nodedev or OTHER_DEVICES
    mdev_type: str | None
    resource_class: str | None
    why: str
    where: str = ''            # the line that decides it


def nodedev_of(address: str) -> str:
    """libvirt's node device name of a device address."""
    if libvirt_driver.matches_libvirt(address):
        return 'pci_' + re.sub('[:.]', '_', address)
    return address


def effective(conf: libvirt_driver.MdevConfig,
              devices: Collection[str] = ()) -> list[DeviceResult]:
    """Each device with the type and class Nova will give it.

    ``devices`` are libvirt node device names known to exist (from sysfs
    or Placement); listed addresses are shown too, and, when the devices
    are not known, one row for every other device.
    """
    rows = {}
    mdev_type: str | None
    known = bool(devices)
    decides = conf.settings.enabled.where if conf.settings else ''
    for address, mdev_type in conf.pgpu_type_mapping.items():
        listed_at = _where_type(conf, mdev_type, 'device_addresses')
        if address not in conf.virtual_mdevs and \
                not libvirt_driver.matches_libvirt(address):
            rows[address] = DeviceResult(
                address, None, None,
                'matches no device (compared literally with %s)'
                % libvirt_driver.libvirt_form(address), listed_at)
            meant = libvirt_driver.libvirt_form(address)
            if meant not in conf.pgpu_type_mapping:
                devices = list(devices) + [nodedev_of(meant)]
            continue
        rows[address] = DeviceResult(
            address, mdev_type,
            libvirt_driver.resource_class_for_device(
                conf, nodedev_of(address)),
            'listed under [mdev_%s]' % mdev_type, listed_at)
    for nodedev in devices:
        address = names.pci_address_from_nodedev(nodedev) or nodedev
        if address in rows:
            continue
        mdev_type = libvirt_driver.vgpu_type_per_pgpu(conf, nodedev)
        rows[address] = DeviceResult(
            address, mdev_type,
            libvirt_driver.resource_class_for_device(conf, nodedev)
            if mdev_type else None,
            'not listed: default type' if mdev_type else
            'not listed and no default type: no inventory', decides)
    result = sorted(rows.values(), key=lambda r: r.device)
    if not known and conf.default_type:
        result.append(DeviceResult(OTHER_DEVICES, conf.default_type,
                                   novaconf.VGPU, 'default type', decides))
    return result


# -- sysfs -------------------------------------------------------------------

def sysfs_findings(conf: libvirt_driver.MdevConfig,
                   parents: Mapping[str, host_gpus.Device] | None,
                   functions: Mapping[str, host_gpus.Device] | None = None
                   ) -> list[Finding]:
    """Compare the file with the mdev parents sysfs shows.

    ``parents``: the node's ``Host.mdev_parents()``; ``functions``: its
    devices by address (to tell the physical functions of SR-IOV GPUs).
    """
    functions = functions or {}
    found = []
    mdev_type: str | None
    if parents is None:
        return [no_mdev_bus(conf)]
    listed = {a: t for a, t in conf.pgpu_type_mapping.items()
              if a not in conf.virtual_mdevs
              and libvirt_driver.matches_libvirt(a)}
    for address, mdev_type in sorted(listed.items()):
        here = _where_type(conf, mdev_type, 'device_addresses')
        device = parents.get(address)
        if device is None:
            pf = functions.get(address)
            if pf is not None and pf.virtfns:
                found.append(_f(
                    WARNING, here,
                    '%s is the physical function of an SR-IOV GPU: its '
                    'mdevs are on its virtual functions (%s); list those '
                    'instead. Nova will report nothing for %s.'
                    % (address, words.first_few(pf.virtfns), address)))
            else:
                found.append(_f(
                    WARNING, here,
                    '%s is not an mdev-capable device on this host (not in '
                    'class/mdev_bus%s): Nova will report nothing for it.'
                    % (address, '; a virtual function that does not exist'
                       if _looks_like_vf(address, parents) else '')))
            continue
        if mdev_type not in device.types:
            found.append(_f(
                WARNING, here,
                '%s does not offer type %s (it offers %s): Nova will report '
                'no inventory for it.' % (
                    address, mdev_type,
                    ', '.join(sorted(device.types)) or 'no type')))
        if device.physfn and device.physfn in listed:
            found.append(_f(
                WARNING, here,
                'Virtual function %s is listed together with its physical '
                'function %s: list the virtual functions only.'
                % (address, device.physfn)))
    found += _max_instances_findings(conf, parents)
    for device in sorted(parents.values(), key=lambda d: d.address):
        nodedev = nodedev_of(device.address)
        mdev_type = libvirt_driver.vgpu_type_per_pgpu(conf, nodedev)
        if mdev_type and device.address not in listed and \
                mdev_type not in device.types:
            found.append(_f(
                WARNING, _settings(conf).enabled.where,
                '%s takes the default type %s, which it does not offer (it '
                'offers %s): Nova will report no inventory for it.'
                % (device.address, mdev_type,
                   ', '.join(sorted(device.types)) or 'no type')))
    return found


def _max_instances_findings(conf: libvirt_driver.MdevConfig,
                            parents: Mapping[str, host_gpus.Device]
                            ) -> list[Finding]:
    """Each type's ``max_instances`` against the instances its devices
    offer.
    """
    found = []
    for mdev_type, limit in sorted(conf.max_instances.items()):
        holders = [d for d in parents.values()
                   if mdev_type in d.types
                   and libvirt_driver.vgpu_type_per_pgpu(
                       conf, nodedev_of(d.address)) == mdev_type]
        available = sum(d.types[mdev_type].available_instances or 0
                        for d in holders)
        here = _where_type(conf, mdev_type, 'max_instances')
        if available > limit:
            found.append(_f(
                WARNING, here,
                'max_instances = %d but the %d device(s) of type %s offer %d '
                'instances: Nova gives inventory to devices only while the '
                'sum stays within %d, and none to the others.'
                % (limit, len(holders), mdev_type, available, limit)))
        elif available < limit:
            found.append(_f(
                INFO, here,
                'max_instances = %d but the devices of type %s offer only %d '
                'instances: the limit has no effect.'
                % (limit, mdev_type, available)))
    return found


def no_mdev_bus(conf: libvirt_driver.MdevConfig) -> Finding:
    """The sysfs tree has no ``class/mdev_bus``: no device offers mdevs.

    nova-compute still starts: nothing it runs at start looks at the
    devices (``_get_supported_vgpu_types`` checks addresses only), and
    ``_get_gpu_inventories`` finds no mdev-capable device in libvirt
    (``list_mdev_capable_devices``), so it reports no mdev inventory;
    ``_ensure_pgpu_providers`` deletes no provider made before.
    """
    if not conf.supported_types:
        return _f(INFO, MDEV_BUS, 'There is no class/mdev_bus in the sysfs '
                  'tree: no device of this host offers mediated devices.')
    return _f(WARNING, MDEV_BUS, (
        'There is no class/mdev_bus in the sysfs tree: no device of this '
        'host offers mediated devices (is the GPU\'s vGPU driver loaded?). '
        'nova-compute will start, but with no mdev-capable device in '
        'libvirt it offers no mediated devices: it reports no mdev '
        'inventory for this node (child providers made before are left as '
        'they are), so servers asking for vGPUs are not scheduled here.'))


def _looks_like_vf(address: str,
                   parents: Mapping[str, host_gpus.Device]) -> bool:
    return any(d.physfn and d.physfn[:10] == address[:10]
               for d in parents.values())


# -- Placement ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PlacementDevice:
    """What Placement shows for one mdev parent of the node."""

    nodedev: str
    address: str
    resource_class: str
    total: int
    traits: tuple[str, ...]
    servers: Sequence[str] = ()        # names (or IDs) of the servers there
    used: int = 0                      # of resource_class, in Placement


def placement_findings(conf: libvirt_driver.MdevConfig, host: str,
                       devices: Iterable[PlacementDevice],
                       prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX
                       ) -> list[Finding]:
    """What changes on ``host`` when nova-compute restarts with ``conf``.

    ``devices``: the node's PlacementDevice list.
    """
    found = []
    mdev_type: str | None
    where_host = 'Placement, host %s' % host
    type_traits = {t: trait_logic.trait_for_mdev_type(t, prefix)
                   for t in conf.supported_types}
    in_placement = {d.address: d for d in devices}
    listed = [a for a in conf.pgpu_type_mapping
              if a in conf.virtual_mdevs or libvirt_driver.matches_libvirt(a)]
    for address in sorted(listed):
        if address not in in_placement:
            mdev_type = conf.pgpu_type_mapping[address]
            found.append(_f(
                WARNING, _where_type(conf, mdev_type, 'device_addresses'),
                'Placement has no device %s on host %s: it does not exist '
                'there, offers no %s instance, or nova-compute has not '
                'reported it yet.' % (address, host, mdev_type)))
    for device in sorted(devices, key=lambda d: d.address):
        mdev_type = libvirt_driver.vgpu_type_per_pgpu(conf, device.nodedev)
        if mdev_type is None:
            on_it = (' Servers with allocations there: %s.'
                     % ', '.join(device.servers) if device.servers else '')
            found.append(_f(
                WARNING, where_host,
                'Device %s (%s, total %d) gets no type from this file: '
                'nova-compute stops reporting it but does not delete its '
                'provider, so Placement keeps offering its old inventory '
                'and the scheduler can still pick it while Nova cannot '
                'create mdevs there; give it a type, or delete the provider '
                'once no server uses it.%s'
                % (device.address, device.resource_class, device.total,
                   on_it)))
            continue
        expected = libvirt_driver.resource_class_for_device(
            conf, device.nodedev)
        if expected != device.resource_class:
            # The servers are named only where a finding says so: a
            # check of many nodes reads them only for those.
            held = (' Placement refuses that while servers hold '
                    'allocations there (%s): nova-compute\'s updates for '
                    'the node fail until they move.'
                    % ', '.join(device.servers) if device.servers else '')
            found.append(_f(
                WARNING, where_host,
                'Device %s is %s in Placement but Nova will report %s '
                '(type %s): its inventory changes class on restart.%s'
                % (device.address, device.resource_class, expected,
                   mdev_type, held)))
        wrong = sorted(t for t in device.traits
                       if t in type_traits.values()
                       and t != type_traits[mdev_type])
        if wrong:
            found.append(_f(
                WARNING, where_host,
                'Device %s carries %s but will be of type %s: run '
                "'openstack mdev trait set --compute-conf %s=FILE' "
                'after the restart to tag it %s.'
                % (device.address, ', '.join(wrong), mdev_type, host,
                   type_traits[mdev_type])))
    return found
