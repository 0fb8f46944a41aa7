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

"""``mdev config check``: what nova-compute will make of a configuration.

Nova's own rules come from ``novaconf`` and ``pci`` (one function per
Nova rule);
this module adds what Nova does not say (options it silently ignores,
addresses that can never match), compares the file with a compute node's
sysfs tree and with what Placement shows for the node. Pure logic apart
from reading the sysfs tree.
"""

import dataclasses
import re

from osc_mdev.domain import migration
from osc_mdev.domain import names
from osc_mdev.domain import novaconf
from osc_mdev.domain import pci as pci_rules
from osc_mdev.domain import spelling
from osc_mdev.domain import traits as trait_logic
from osc_mdev.domain import words

ERROR, WARNING, INFO = novaconf.ERROR, novaconf.WARNING, novaconf.INFO
Finding = novaconf.Finding
OTHER_DEVICES = '(any other device)'
#: Where a finding about the sysfs tree as a whole is.
MDEV_BUS = 'class/mdev_bus'


def _f(severity, where, message):
    return Finding(severity, where, message)


def _where_type(conf, mdev_type, option=None):
    value = conf.settings.groups.get(mdev_type, {}).get(option or '')
    if value is not None and value.is_set:
        return value.where
    return conf.settings.group_line('mdev_%s' % mdev_type)


# -- The file alone ---------------------------------------------------------

def file_findings(conf: novaconf.MdevConfig,
                  sysfs_checked: bool = False) -> list[Finding]:
    """Findings about the files themselves, beyond Nova's fatal ones:
    names Nova does not read (``spelling``), then the mdev rules.
    """
    settings = conf.settings
    found = spelling.findings(settings)
    enabled = settings.enabled
    if not enabled.value and enabled.error is None:
        found.append(_f(INFO, where('devices', 'enabled_mdev_types'),
                        'No mdev type is enabled: nova-compute offers no '
                        'mediated devices from this configuration.'))
        return found + _stray_groups(settings, ())
    types = list(dict.fromkeys(enabled.value or ()))
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
            % (address, novaconf.libvirt_form(address),
               'the default type %s' % conf.default_type
               if conf.default_type else 'no type at all',
               mdev_type, novaconf.libvirt_form(address))))
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


def _default_type_note(conf: novaconf.MdevConfig) -> Finding:
    """The type without ``device_addresses`` that Nova gives every
    device no type lists (``pgpu_type_default``), whether its group is
    absent, empty or lists no address.
    """
    name = conf.default_type
    addresses = conf.settings.groups.get(name, {}).get('device_addresses')
    if addresses is not None and addresses.is_set:
        here = addresses.where
    elif _section_exists(conf.settings, 'mdev_%s' % name):
        here = conf.settings.group_line('mdev_%s' % name)
    else:
        here = conf.settings.enabled.where
    return _f(INFO, here,
              'Type %s has no device_addresses: it is the default type, '
              'given to every device no other type lists.' % name)


def downtime_findings(conf: novaconf.MdevConfig) -> list[Finding]:
    """The ``[libvirt] live_migration_downtime*`` settings Nova's vGPU
    guide asks of computes with NVIDIA vGPU types
    (``migration.downtime_problem``), judged on the values nova-compute
    uses (``migration.downtime_settings``: Nova's defaults where unset).
    """
    nvidia = [t.name for t in conf.types
              if trait_logic.mdev_type(t.name).is_nvidia]
    if not nvidia:
        return []
    off = migration.downtime_off(migration.downtime_settings(conf.settings))
    if not off:
        return []
    settings = conf.settings.libvirt
    problem = ', '.join(
        '%s = %s (refused by oslo.config: %s)' % (
            option, settings[option].written.value, settings[option].error)
        if settings[option].error else '%s = %s' % (option, value)
        for option, value in off)
    written = [settings[option] for option, _ in off
               if settings[option].is_set]
    here = (written[0].where if written
            else conf.settings.group_line('libvirt'))
    what = ('Types %s are NVIDIA vGPU types' % ', '.join(nvidia)
            if len(nvidia) > 1 else
            'Type %s is an NVIDIA vGPU type' % nvidia[0])
    return [_f(WARNING, here,
               '%s and nova-compute uses [libvirt] %s: %s; set them on every '
               'compute that live-migrates these vGPUs.' % (
                   what, problem, migration.DOWNTIME_NEEDED))]


def where(section, option, occurrence=None):
    return novaconf.where(section, option, occurrence)


def _group_findings(settings: novaconf.Settings,
                    mdev_type: str) -> list[Finding]:
    """The options of an enabled type's groups under the old name
    ``[vgpu_<type>]``: Nova reads only ``device_addresses`` there, and
    from one of the two groups only.
    """
    found = []
    new = 'mdev_%s' % mdev_type
    old = 'vgpu_%s' % mdev_type
    addresses = settings.groups.get(mdev_type, {}).get('device_addresses')
    taken = addresses.written if addresses is not None else None
    taken_old = taken is not None and \
        novaconf.group_key(taken.section) == novaconf.group_key(old)
    if taken_old:
        for occ in _options_in(settings, new):
            if occ.name == 'device_addresses':
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
        if occ.name != 'device_addresses':
            found.append(_f(
                WARNING, where(occ.section, occ.name, occ),
                'Ignored: Nova reads %s only from [%s], not from the old '
                '[%s] group; move it there.' % (occ.name, new, old)))
        elif taken is not None and not taken_old:
            found.append(_f(
                WARNING, where(occ.section, occ.name, occ),
                'Ignored: [%s] device_addresses = %s: [%s] '
                'device_addresses is set too%s, and Nova takes that value, '
                '%s; remove the old group.' % (
                    occ.section, novaconf.shown(occ.value), taken.section,
                    novaconf.taken_at(taken, occ),
                    novaconf.shown(taken.value))))
        else:
            found.append(_f(
                INFO, where(occ.section, occ.name, occ),
                '[%s] is the deprecated name of [%s]; Nova still reads '
                'device_addresses from it.' % (old, new)))
    return found


def _options_in(settings, section):
    return [o for o in settings.occurrences
            if novaconf.group_key(o.section) == novaconf.group_key(section)]


def _section_exists(settings, section):
    return any(novaconf.group_key(name) == novaconf.group_key(section)
               for name, _, _ in settings.sections)


def _stray_groups(settings, types):
    found = []
    seen = set()
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


def nodedev_of(address):
    """libvirt's node device name of a device address."""
    if novaconf.matches_libvirt(address):
        return 'pci_' + re.sub('[:.]', '_', address)
    return address


def effective(conf, devices=()):
    """Each device with the type and class Nova will give it.

    ``devices`` are libvirt node device names known to exist (from sysfs
    or Placement); listed addresses are shown too, and, when the devices
    are not known, one row for every other device.
    """
    rows = {}
    known = bool(devices)
    decides = conf.settings.enabled.where if conf.settings else ''
    for address, mdev_type in conf.pgpu_type_mapping.items():
        listed_at = _where_type(conf, mdev_type, 'device_addresses')
        if address not in conf.virtual_mdevs and \
                not novaconf.matches_libvirt(address):
            rows[address] = DeviceResult(
                address, None, None,
                'matches no device (compared literally with %s)'
                % novaconf.libvirt_form(address), listed_at)
            meant = novaconf.libvirt_form(address)
            if meant not in conf.pgpu_type_mapping:
                devices = list(devices) + [nodedev_of(meant)]
            continue
        rows[address] = DeviceResult(
            address, mdev_type,
            novaconf.resource_class_for_device(conf, nodedev_of(address)),
            'listed under [mdev_%s]' % mdev_type, listed_at)
    for nodedev in devices:
        address = names.pci_address_from_nodedev(nodedev) or nodedev
        if address in rows:
            continue
        mdev_type = novaconf.vgpu_type_per_pgpu(conf, nodedev)
        rows[address] = DeviceResult(
            address, mdev_type,
            novaconf.resource_class_for_device(conf, nodedev)
            if mdev_type else None,
            'not listed: default type' if mdev_type else
            'not listed and no default type: no inventory', decides)
    result = sorted(rows.values(), key=lambda r: r.device)
    if not known and conf.default_type:
        result.append(DeviceResult(OTHER_DEVICES, conf.default_type,
                                   novaconf.VGPU, 'default type', decides))
    return result


# -- sysfs -------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class SysfsDevice:
    address: str
    types: dict                # type -> available_instances (or None)
    physfn: str | None = None  # parent PF address for a VF
    virtfns: tuple = ()        # VF addresses for a PF


def sysfs_findings(conf, parents, functions=None):
    """Compare the file with the mdev parents sysfs shows.

    ``parents``: ``read_sysfs`` of the node; ``functions``: other PCI
    functions by address (physical functions of SR-IOV GPUs).
    """
    functions = functions or {}
    found = []
    if parents is None:
        return [no_mdev_bus(conf)]
    listed = {a: t for a, t in conf.pgpu_type_mapping.items()
              if a not in conf.virtual_mdevs and novaconf.matches_libvirt(a)}
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
                    % (address, _short(pf.virtfns), address)))
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
    for mdev_type, limit in sorted(conf.max_instances.items()):
        holders = [d for d in parents.values()
                   if mdev_type in d.types and novaconf.vgpu_type_per_pgpu(
                       conf, nodedev_of(d.address)) == mdev_type]
        available = sum(d.types[mdev_type] or 0 for d in holders)
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
    for device in sorted(parents.values(), key=lambda d: d.address):
        nodedev = nodedev_of(device.address)
        mdev_type = novaconf.vgpu_type_per_pgpu(conf, nodedev)
        if mdev_type and device.address not in listed and \
                mdev_type not in device.types:
            found.append(_f(
                WARNING, conf.settings.enabled.where,
                '%s takes the default type %s, which it does not offer (it '
                'offers %s): Nova will report no inventory for it.'
                % (device.address, mdev_type,
                   ', '.join(sorted(device.types)) or 'no type')))
    return found


def no_mdev_bus(conf):
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


def _short(items, limit=4):
    items = list(items)
    text = ', '.join(items[:limit])
    return text + (' and %d more' % (len(items) - limit)
                   if len(items) > limit else '')


def _looks_like_vf(address, parents):
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
    traits: tuple
    servers: tuple = ()        # names (or IDs) of servers allocated there


def placement_findings(conf, host, devices, prefix=trait_logic
                       .DEFAULT_TRAIT_PREFIX):
    """What changes on ``host`` when nova-compute restarts with ``conf``.

    ``devices``: the node's PlacementDevice list.
    """
    found = []
    where_host = 'Placement, host %s' % host
    type_traits = {t: trait_logic.trait_for_mdev_type(t, prefix)
                   for t in conf.supported_types}
    in_placement = {d.address: d for d in devices}
    listed = [a for a in conf.pgpu_type_mapping
              if a in conf.virtual_mdevs or novaconf.matches_libvirt(a)]
    for address in sorted(listed):
        if address not in in_placement:
            mdev_type = conf.pgpu_type_mapping[address]
            found.append(_f(
                WARNING, _where_type(conf, mdev_type, 'device_addresses'),
                'Placement has no device %s on host %s: it does not exist '
                'there, offers no %s instance, or nova-compute has not '
                'reported it yet.' % (address, host, mdev_type)))
    for device in sorted(devices, key=lambda d: d.address):
        mdev_type = novaconf.vgpu_type_per_pgpu(conf, device.nodedev)
        held = (' Placement refuses that while servers hold allocations '
                'there (%s): nova-compute\'s updates for the node fail until '
                'they move.' % ', '.join(device.servers)
                if device.servers else '')
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
        expected = novaconf.resource_class_for_device(conf, device.nodedev)
        if expected != device.resource_class:
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


def sort_findings(findings):
    return sorted(findings, key=lambda f: novaconf.SEVERITY_ORDER[f.severity])


# -- [pci]: PCI devices in Placement ----------------------------------------

_DEPRECATED_PCI = {
    ('pci', 'passthrough_whitelist'): '[pci] device_spec',
    ('DEFAULT', 'pci_passthrough_whitelist'): '[pci] device_spec',
    ('DEFAULT', 'pci_alias'): '[pci] alias',
}


def _written_traits(text):
    return [t for t in text.split(',')] if isinstance(text, str) and text \
        else []


def _name_findings(kind: str, written: str, normalized: str, here: str,
                   fatal_where: str) -> list[Finding]:
    """Findings about one class or trait name as Nova normalizes it."""
    found = []
    problem = pci_rules.placement_name_problem(normalized, kind)
    if problem:
        found.append(_f(ERROR, here, '%s from %r: %s; %s.' % (
            normalized, written, problem, fatal_where)))
        return found
    if written == normalized:
        return found
    if written != written.strip():
        found.append(_f(WARNING, here, (
            '%s %r has spaces around it: Nova makes %s of it, not %s; '
            'remove the spaces (write "a,b", not "a, b").') % (
                kind, written, normalized,
                pci_rules.normalize_traits([written.strip()])[0]
                if kind == 'trait' else
                pci_rules.normalize_resource_class(written.strip()))))
    elif kind == 'trait' and _is_standard_trait(written.upper()):
        found.append(_f(WARNING, here, (
            'trait %r is the standard trait %s in lower case: Nova does not '
            'recognise it and reports the custom trait %s instead; write '
            '%s.') % (written, written.upper(), normalized, written.upper())))
    # Else Nova makes of it what was meant (blue: CUSTOM_BLUE), as of the
    # name written in full: the effective rows show the name.
    return found


def _is_standard_trait(name):
    import os_traits
    return os_traits.check_traits([name])[0] == {name}


def _spec_name_findings(spec, fatal_where):
    found = []
    requested = spec.tags.get('resource_class')
    if requested:
        found += _name_findings(
            'resource class', requested,
            pci_rules.normalize_resource_class(requested), spec.where,
            fatal_where)
    for written in _written_traits(spec.tags.get('traits', '')):
        found += _name_findings('trait', written,
                                pci_rules.normalize_traits([written])[0],
                                spec.where, fatal_where)
    return found


def _alias_name_findings(alias, fatal_where):
    found = []
    spec = alias.specs[0]
    if spec.get('resource_class'):
        found += _name_findings(
            'resource class', spec['resource_class'],
            pci_rules.normalize_resource_class(spec['resource_class']),
            alias.where, fatal_where)
    for written in _written_traits(spec.get('traits', '')):
        found += _name_findings('trait', written,
                                pci_rules.normalize_traits([written])[0],
                                alias.where, fatal_where)
    return found


def _ids_compatible(spec, vendor, product):
    """Whether a device spec can match devices with these ids."""
    return (spec.vendor_id in (pci_rules.ANY, (vendor or '').lower())
            and spec.product_id in (pci_rules.ANY, (product or '').lower()))


def alias_problem(alias, specs, in_placement):
    """Why no device spec of ``specs`` can serve ``alias``, or None.

    ``in_placement``: the scheduler asks Placement (resource class and
    traits of the device spec); else Nova's PCI filter matches vendor and
    product ids.
    """
    spec = alias.specs[0]
    vendor, product = spec.get('vendor_id'), spec.get('product_id')
    if not in_placement:
        if vendor is None or product is None or any(
                _ids_compatible(s, vendor, product) for s in specs):
            # An alias without ids asks Placement only (and this node is
            # not in Placement: reported apart).
            return None
        return 'no device spec matches vendor_id %s and product_id %s' % (
            vendor, product)
    rc = alias.resource_class
    of_class = []
    for s in specs:
        if s.resource_class is not None:
            if s.resource_class == rc:
                of_class.append(s)
            continue
        match = re.match(r'^CUSTOM_PCI_([0-9A-F]{4})_([0-9A-F]{4})$', rc)
        if match and _ids_compatible(s, *match.groups()):
            of_class.append(s)
    if not of_class:
        return 'no device spec gives resource class %s' % rc
    missing = set(alias.traits)
    with_traits = [s for s in of_class if alias.traits <= s.traits]
    if not with_traits:
        missing = sorted(alias.traits - min(
            (s.traits for s in of_class), key=lambda t: len(alias.traits - t)))
        return 'no device spec of class %s has trait %s' % (
            rc, ', '.join(missing))
    return None


def pci_findings(pci: pci_rules.PciConfig,
                 sysfs_devices: list | None = None,
                 root_name: str = '<node>') -> list[Finding]:
    """Findings about ``[pci]`` (and ``[filter_scheduler]
    pci_in_placement``) beyond the errors ``pci.pci_config`` found.

    ``sysfs_devices``: the node's PCI functions (``read_pci_devices``)
    when known.
    """
    settings = pci.settings
    found = list(pci.findings)
    for occ in settings.occurrences:
        new = _DEPRECATED_PCI.get((novaconf.group_key(occ.section),
                                   occ.name))
        if new:
            found.append(_f(INFO, where(occ.section, occ.name, occ),
                            '%s is the deprecated name of %s; Nova still '
                            'reads it.' % (occ.name, new)))
    placed = [s for s in pci.specs if s.in_placement]
    starting = 'nova-compute cannot report the device to Placement'
    if pci.report_in_placement:
        for spec in placed:
            if spec.devname:
                found.append(_f(
                    ERROR, spec.where,
                    'nova-compute refuses to start: PCI in Placement does '
                    'not support devname (%s) in [pci] device_spec; give '
                    'the PCI address instead.' % spec.devname))
            found += _spec_name_findings(spec, starting)
        for spec in pci.specs:
            if not spec.in_placement:
                found.append(_f(
                    INFO, spec.where,
                    'Has physical_network: Neutron SR-IOV, not reported to '
                    'Placement by Nova.'))
        if placed and sysfs_devices is None:
            found.append(_f(
                INFO, where('pci', 'device_spec'),
                "Without the node's sysfs the virtual functions of each "
                'physical function are not known: nova-compute refuses to '
                'start when VFs of one PF get different classes or traits, '
                'or a PF is listed with its VFs; check it against the '
                'node: openstack mdev config check FILE --sysfs /sys.'))
        pis = settings.pci['pci_in_placement']
        if not pci.pci_in_placement:
            found.append(_f(
                WARNING, pis.where,
                '[pci] report_in_placement is on but [filter_scheduler] '
                'pci_in_placement is off here: unless it is True on '
                'nova-api, nova-scheduler and nova-conductor, the scheduler '
                'ignores the PCI devices in Placement and does not allocate '
                'them there.'))
    else:
        for spec in pci.specs:
            named = [t for t in ('resource_class', 'traits')
                     if t in spec.tags]
            if named:
                found.append(_f(
                    WARNING, spec.where,
                    'Ignored: %s is only used with [pci] report_in_placement '
                    '= True, which is off.' % ' and '.join(named)))
        if pci.pci_in_placement and placed:
            found.append(_f(
                WARNING, settings.pci['report_in_placement'].where,
                '[filter_scheduler] pci_in_placement is on but this '
                "compute's [pci] report_in_placement is off: its devices "
                'are not in Placement, so servers with PCI aliases are never '
                'scheduled to it.'))
    scheduler = 'the scheduler cannot ask Placement for the alias'
    for name, alias in sorted(pci.aliases.items()):
        spec = alias.specs[0]
        if pci.pci_in_placement:
            found += _alias_name_findings(alias, scheduler)
        else:
            named = [t for t in ('resource_class', 'traits') if t in spec]
            if named:
                found.append(_f(
                    WARNING, alias.where,
                    'Alias %s: %s is ignored while [filter_scheduler] '
                    'pci_in_placement is off (it is only used to ask '
                    'Placement).' % (name, ' and '.join(named))))
        if pci.specs:
            in_placement = pci.pci_in_placement and pci.report_in_placement
            problem = alias_problem(
                alias, placed if in_placement else pci.specs, in_placement)
            if problem:
                found.append(_f(
                    WARNING, alias.where,
                    'Alias %s cannot be served by this node: %s, so servers '
                    'asking for it are never scheduled here.'
                    % (name, problem)))
    if sysfs_devices is not None and pci.specs:
        found += _pci_sysfs_findings(pci, sysfs_devices, root_name)
    return found


def _physical_functions(devices):
    return {d.address for d in devices if d.dev_type == pci_rules.TYPE_PF}


def _pci_sysfs_findings(pci, devices, root_name):
    found = []
    pfs = _physical_functions(devices)
    for spec in pci.specs:
        if not any(pci_rules.spec_matches(spec, d, pfs) for d in devices):
            found.append(_f(
                WARNING, spec.where,
                "Matches no PCI device of the node's sysfs (%s): Nova "
                'offers nothing from it.' % spec.describe()))
    if pci.report_in_placement:
        _, problems = pci_rules.pci_providers(root_name, devices,
                                              pci.specs, pfs)
        for exception, message in problems:
            found.append(_f(
                ERROR, where('pci', 'device_spec'),
                'nova-compute refuses to start (%s): %s; list either the '
                'PF or its VFs, and give VFs of one PF one resource_class '
                'and one set of traits.' % (exception, message)))
    return found


def alias_request(alias, count=1, pci_in_placement=True):
    """An alias' request in words."""
    spec = alias.specs[0]
    kind = spec.get('dev_type') or 'any type'
    if pci_in_placement:
        groups = pci_rules.alias_request_groups(alias, count)
        [rc] = groups[0][0]
        text = '%d request group%s of %s:1' % (
            count, '' if count == 1 else 's', rc)
        if groups[0][1]:
            text += ' with ' + ', '.join(sorted(groups[0][1]))
    else:
        ids = ' or '.join(
            '%s:%s' % (s.get('vendor_id', '*'), s.get('product_id', '*'))
            for s in alias.specs)
        text = '%s %s' % (words.count(count, 'device'), ids)
        text += ' (PCI filter only, not Placement)'
    return '%s; %s; numa_policy %s' % (text, kind, alias.numa_policy)


@dataclasses.dataclass(frozen=True)
class PlacementPciProvider:
    """One PCI provider of the node in Placement (one row per class)."""

    name: str
    resource_class: str | None
    total: int
    used: int
    traits: tuple


def pci_placement_findings(pci, host, placed, predicted=None):
    """What happens to the node's PCI providers when nova-compute
    restarts with the files.

    ``placed``: PlacementPciProvider rows; ``predicted``: the providers
    Nova will make (``pci.pci_providers`` of the sysfs devices, by
    name), None when the devices are not known.
    """
    found = []
    where_host = 'Placement, host %s' % host
    if pci_rules.tracking_disabled_after_enabled(
            pci.report_in_placement, [p.traits for p in placed]):
        found.append(_f(
            ERROR, pci.settings.pci['report_in_placement'].where,
            'nova-compute refuses to start (PlacementPciException): [pci] '
            'report_in_placement is off but Placement has %d PCI '
            'provider(s) of %s (%s), so it was on before, and Nova cannot '
            'turn it off again; set report_in_placement = True.'
            % (len({p.name for p in placed}), host,
               _short(sorted({p.name for p in placed})))))
        return found
    if not pci.report_in_placement or predicted is None:
        return found
    for provider in placed:
        expected = predicted.get(provider.name)
        in_use = (' %d in use: Placement refuses the change while '
                  'servers hold allocations there, so nova-compute\'s '
                  'updates of the node fail until they go.' % provider.used
                  if provider.used else '')
        if expected is None:
            found.append(_f(
                WARNING, where_host,
                'Provider %s (%s, total %d) matches no device spec any '
                'more: nova-compute removes it on restart%s' % (
                    provider.name, provider.resource_class, provider.total,
                    ' (it keeps it while %d server device(s) use it).'
                    % provider.used if provider.used else '.')))
            continue
        if provider.resource_class != expected.resource_class:
            found.append(_f(
                WARNING, where_host,
                'Provider %s is %s in Placement but Nova will report %s: '
                'its inventory changes class on restart.%s' % (
                    provider.name, provider.resource_class,
                    expected.resource_class, in_use)))
        lost = sorted(set(provider.traits) - set(expected.traits or ())
                      - {'OWNER_NOVA'})
        if lost:
            found.append(_f(
                WARNING, where_host,
                'Provider %s carries %s, which nova-compute removes when it '
                'restarts: it sets the traits of PCI providers from '
                '[pci] device_spec only; put them in the spec\'s traits.'
                % (provider.name, ', '.join(lost))))
    for name in sorted(set(predicted) - {p.name for p in placed}):
        found.append(_f(
            INFO, where_host, 'Provider %s (%s) is new: nova-compute '
            'creates it on restart.' % (name,
                                        predicted[name].resource_class)))
    return found
