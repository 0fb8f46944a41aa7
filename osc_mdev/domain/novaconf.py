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

"""The mdev part of a nova.conf, read exactly as nova-compute reads it.

``[devices] enabled_mdev_types`` (old name ``enabled_vgpu_types``) lists
the types; each has a group ``[mdev_<type>]`` with ``device_addresses``
(also read from the old group ``[vgpu_<type>]``), ``mdev_class`` and
``max_instances``.

Files are parsed by oslo.config itself (list options, continuation
lines, repeated sections, ``$`` interpolation, several files where the
later one wins), with the options registered as Nova registers them.
Each rule nova-compute applies when it starts is one function below whose
docstring names the Nova function it mirrors. Addresses are kept as
written, as Nova keeps them: ``84:00.0`` stops nova-compute, while
``0000:3B:00.4`` starts fine but never matches libvirt's lower-case
``0000:3b:00.4``, so that device takes the default type.
"""

import dataclasses
import glob
import logging
import os
import re

from oslo_config import cfg
from oslo_config import iniparser

from osc_mdev.domain import names

MAX_FILE_BYTES = 10 * 1024 * 1024
VGPU = names.VGPU
MDEV_CLASS_PATTERN = r'^(VGPU|CUSTOM_[A-Z0-9_]+)$'

ERROR = 'error'        # nova-compute refuses to start
WARNING = 'warning'    # Nova silently does something other than written
INFO = 'info'
SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}

# libvirt's name of a PCI parent and the address Nova compares with it.
_LIBVIRT_PCI_RE = re.compile(r'^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')
# nova/pci/utils.py _PCI_ADDRESS_PATTERN: the ``.`` is any character.
_NOVA_PCI_ADDRESS_RE = re.compile(
    r'^([\da-fA-F]{4}):([\da-fA-F]{2}):([\da-fA-F]{2}).([0-7]{1})$')


class NovaConfError(ValueError):
    """One line: a file that cannot be read, or that nova-compute would
    refuse to start with.
    """


@dataclasses.dataclass(frozen=True)
class Finding:
    severity: str
    where: str
    message: str


# -- Reading the files (shared by every command that takes a nova.conf) --

def config_files(paths, directories=True):
    """The files ``paths`` stand for, in the order oslo.config reads them.

    A directory is read like ``--config-dir``: its ``*.conf`` files in
    sorted order (only with ``directories``). Raises NovaConfError for a
    directory with no ``.conf`` file.
    """
    files = []
    for path in paths:
        if os.path.isdir(path) and directories:
            found = sorted(glob.glob(os.path.join(path, '*.conf')))
            if not found:
                raise NovaConfError(
                    '%s is a directory with no .conf file; give the nova.conf '
                    'file or the --config-dir directory nova-compute reads'
                    % path)
            files.extend(found)
        else:
            files.append(path)
    return files


def read_text(path):
    """The text of a nova.conf, or NovaConfError naming the file and what
    is wrong: missing, unreadable, a directory, huge, binary, not UTF-8 or
    empty.
    """
    if os.path.isdir(path):
        raise NovaConfError('%s is a directory, not a nova.conf file' % path)
    try:
        with open(path, 'rb') as conf_file:
            data = conf_file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise NovaConfError('Cannot read %s: %s' % (
            path, exc.strerror or exc)) from exc
    if len(data) > MAX_FILE_BYTES:
        raise NovaConfError(
            '%s is larger than %d MB, too large to be a nova.conf'
            % (path, MAX_FILE_BYTES // (1024 * 1024)))
    if b'\0' in data:
        raise NovaConfError('%s is a binary file, not a nova.conf' % path)
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise NovaConfError(
            '%s is not UTF-8 text (invalid byte at offset %d), so it is not '
            'a nova.conf' % (path, exc.start)) from exc
    if not text.strip():
        raise NovaConfError('%s is empty' % path)
    return text


# -- Parsing with oslo.config ------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Occurrence:
    """One ``name = value`` line of one file."""

    section: str          # as written
    name: str
    value: str
    file: str
    line: int


class _LocatingParser(cfg.ConfigParser):
    """oslo.config's own file parser, remembering where each option and
    section was written.
    """

    def __init__(self, filename, lines, occurrences, sections):
        super().__init__(filename, {})
        self._lines = lines
        self._occurrences = occurrences
        self._section_lines = sections

    def new_section(self, section):
        super().new_section(section)
        self._section_lines.append((section, self.filename, self.lineno))

    def assignment(self, key, value):
        super().assignment(key, value)
        self._occurrences.append(Occurrence(
            self.section, key, '\n'.join(value), self.filename,
            self._key_line(key)))

    def _key_line(self, key):
        # The assignment is reported once its last line (or the line after
        # it) is read: the first line after the previous assignment that
        # starts with the key.
        start = getattr(self, '_last_line', 0)
        for number in range(start + 1, min(self.lineno, len(self._lines)) + 1):
            line = self._lines[number - 1]
            if line[:1] not in ('', ' ', '\t', '#', ';', '[') and \
                    re.split('[:=]', line, 1)[0].strip() == key:
                self._last_line = number
                return number
        return self.lineno


def group_key(name):
    """oslo.config's group name normalisation (lower case but DEFAULT)."""
    return name if name == 'DEFAULT' else name.lower()


def _devices_opts():
    """``[devices] enabled_mdev_types`` as nova/conf/devices.py
    registers it.
    """
    return [cfg.ListOpt('enabled_mdev_types', default=[],
                        deprecated_name='enabled_vgpu_types')]


def _type_opts(mdev_type):
    """The ``[mdev_<type>]`` options as nova/conf/devices.py
    ``register_dynamic_opts`` registers them: only ``device_addresses``
    is also read from the old ``[vgpu_<type>]`` group.
    """
    return [
        cfg.ListOpt('device_addresses', default=[],
                    item_type=cfg.types.String(),
                    deprecated_group='vgpu_%s' % mdev_type),
        cfg.StrOpt('mdev_class', default=VGPU, regex=MDEV_CLASS_PATTERN,
                   max_length=255),
        cfg.IntOpt('max_instances', default=None, min=1),
    ]


# Where oslo.config reads each [pci] multi option from: current name first.
PCI_MULTI_NAMES = {
    'device_spec': [('pci', 'device_spec'), ('pci', 'passthrough_whitelist'),
                    ('DEFAULT', 'pci_passthrough_whitelist')],
    'alias': [('pci', 'alias'), ('DEFAULT', 'pci_alias')],
}


def _pci_opts():
    """``[pci] alias``, ``device_spec`` and ``report_in_placement`` as
    nova/conf/pci.py registers them (with their deprecated names).
    """
    return [
        cfg.MultiStrOpt('alias', default=[], deprecated_name='pci_alias',
                        deprecated_group='DEFAULT'),
        cfg.MultiStrOpt('device_spec', default=[], deprecated_opts=[
            cfg.DeprecatedOpt('passthrough_whitelist', group='pci'),
            cfg.DeprecatedOpt('pci_passthrough_whitelist',
                              group='DEFAULT')]),
        cfg.BoolOpt('report_in_placement', default=False),
    ]


def _scheduler_opts():
    """``[filter_scheduler] pci_in_placement`` (nova/conf/scheduler.py)."""
    return [cfg.BoolOpt('pci_in_placement', default=False)]


@dataclasses.dataclass(frozen=True)
class Value:
    """An option's effective value and where it was written.

    ``value`` is None and ``error`` says why when oslo.config refuses the
    written value (nova-compute stops on it).
    """

    group: str
    name: str
    value: object = None
    error: str | None = None
    written: Occurrence | None = None

    @property
    def where(self):
        return where(self.written.section if self.written else self.group,
                     self.written.name if self.written else self.name,
                     self.written)

    @property
    def is_set(self):
        return self.written is not None


def where(section, option, occurrence=None):
    """``[section] option, FILE:LINE`` (or without the file part)."""
    text = '[%s] %s' % (section, option) if option else '[%s]' % section
    if occurrence is not None:
        text += ', %s:%d' % (occurrence.file, occurrence.line)
    return text


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a set of nova.conf files says about mdevs."""

    files: tuple
    enabled: Value                 # [devices] enabled_mdev_types
    groups: dict                   # type -> {option name: Value}
    occurrences: tuple             # every Occurrence, in reading order
    sections: tuple                # (section, file, line), reading order
    pci: dict = dataclasses.field(default_factory=dict)
    #                                [pci] and [filter_scheduler] options:
    #                                name -> Value (multi options: a list of
    #                                (text, Occurrence) in Nova's order)

    def group_line(self, section):
        for name, file, line in self.sections:
            if group_key(name) == group_key(section):
                return '[%s], %s:%d' % (name, file, line)
        return '[%s]' % section


def _winner(occurrences, names_in_order):
    """The occurrence oslo.config takes the value from: newest file first;
    in it, the current name before deprecated ones; the last line.
    """
    files = []
    for occ in occurrences:
        if occ.file not in files:
            files.append(occ.file)
    for file in reversed(files):
        for group, option in names_in_order:
            found = [o for o in occurrences if o.file == file and
                     group_key(o.section) == group and o.name == option]
            if found:
                return found[-1]
    return None


class _QuietDeprecations(logging.Filter):
    def filter(self, record):
        return False


def load(paths, directories=True):
    """Parse nova.conf files (and directories) as nova-compute does.

    Raises NovaConfError (one line) for a file that cannot be read or
    parsed; values oslo.config refuses are kept as ``Value.error``.
    """
    files = config_files(paths, directories)
    occurrences, sections = [], []
    for path in files:
        lines = read_text(path).splitlines()
        parser = _LocatingParser(path, lines, occurrences, sections)
        try:
            iniparser.BaseParser.parse(parser, lines)
        except iniparser.ParseError as exc:
            raise NovaConfError(
                '%s line %d cannot be parsed (%s); nova-compute refuses to '
                'start with it' % (path, exc.lineno, exc.msg)) from exc

    conf = cfg.ConfigOpts()
    conf.register_opts(_devices_opts(), group='devices')
    conf.register_opts(_pci_opts(), group='pci')
    conf.register_opts(_scheduler_opts(), group='filter_scheduler')
    args = []
    for path in files:
        args += ['--config-file', path]
    quiet = _QuietDeprecations()
    oslo_log = logging.getLogger('oslo_config.cfg')
    oslo_log.addFilter(quiet)
    try:
        conf(args=args, project='nova', default_config_files=[],
             default_config_dirs=[], use_env=False)
        enabled = _value(conf, occurrences, 'devices', 'enabled_mdev_types',
                         [('devices', 'enabled_vgpu_types')])
        pci = _pci_values(conf, occurrences)
        groups = {}
        for mdev_type in enabled.value or ():
            group = 'mdev_%s' % mdev_type
            if group in groups:
                continue
            conf.register_opts(_type_opts(mdev_type), group=group)
            groups[mdev_type] = {
                'device_addresses': _value(
                    conf, occurrences, group, 'device_addresses',
                    [('vgpu_%s' % mdev_type, 'device_addresses')]),
                'mdev_class': _value(conf, occurrences, group, 'mdev_class'),
                'max_instances': _value(conf, occurrences, group,
                                        'max_instances'),
            }
    except cfg.Error as exc:
        raise NovaConfError(
            '%s cannot be read by oslo.config (%s); nova-compute refuses to '
            'start with it' % (', '.join(files),
                               str(exc).splitlines()[0])) from exc
    finally:
        oslo_log.removeFilter(quiet)
        conf.reset()
    return Settings(tuple(files), enabled, groups, tuple(occurrences),
                    tuple(sections), pci)


def _value(conf, occurrences, group, name, deprecated=()):
    written = _winner(occurrences, [(group_key(group), name)] + [
        (group_key(g), n) for g, n in deprecated])
    try:
        value = conf[group][name]
    except (cfg.ConfigFileValueError, ValueError) as exc:
        return Value(group, name, error=_oslo_reason(exc), written=written)
    return Value(group, name, value=value, written=written)


def _pci_values(conf, occurrences):
    """The [pci] options: multi options as ``[(text, Occurrence)]`` in
    the order oslo.config gives them to Nova, booleans as Value.
    """
    values = {}
    for name, places in PCI_MULTI_NAMES.items():
        written = [o for o in occurrences
                   if (group_key(o.section), o.name) in
                   [(group_key(g), n) for g, n in places]]
        unused = list(written)
        entries = []
        for text in conf['pci'][name]:
            occ = next((o for o in unused if o.value.strip() == text.strip()),
                       None)
            if occ is not None:
                unused.remove(occ)
            entries.append((text, occ))
        values[name] = entries
    values['report_in_placement'] = _value(conf, occurrences, 'pci',
                                           'report_in_placement')
    values['pci_in_placement'] = _value(conf, occurrences, 'filter_scheduler',
                                        'pci_in_placement')
    return values


def _oslo_reason(exc):
    text = str(exc)
    # "Value for option X from LocationInfo(...) is not valid: <reason>"
    return text.rsplit('is not valid: ', 1)[-1].strip()


# -- Nova's rules, one function each ---------------------------------------

def parse_address(address):
    """Mirrors nova/pci/utils.py ``parse_address``: the (domain, bus,
    slot, function) of ``hex{4}:hex{2}:hex{2}.[0-7]``, upper or lower
    case; ValueError for anything else.
    """
    match = _NOVA_PCI_ADDRESS_RE.match(address)
    if not match:
        raise ValueError("'%s' is not a PCI address" % address)
    return match.groups()


def looks_like_virtual_parent(address):
    """Whether ``address`` can name a virtual parent device (``mtty_mtty``
    for ``/sys/devices/virtual/mtty/mtty``) when sysfs cannot be read.
    """
    return names.is_nodedev_name(address) and not address.startswith('pci_')


def sysfs_virtual_parent(root):
    """A ``virtual_parent_exists`` that looks under ROOT like Nova looks
    under /sys.
    """
    def exists(address):
        return os.path.exists(os.path.join(
            root, 'devices', 'virtual', address.replace('_', '/')))
    return exists


def validate_device_address(address, virtual_parent_exists=None):
    """Mirrors nova/virt/libvirt/driver.py ``_validate_device_address``.

    Returns ``'pci'`` for what ``parse_address`` accepts (even if it can
    never match, see :func:`matches_libvirt`) and ``'virtual'`` for a
    virtual parent that exists (``mtty_mtty`` ->
    ``/sys/devices/virtual/mtty/mtty``). Anything else raises
    NovaConfError: Nova raises InvalidLibvirtMdevConfig and
    nova-compute stops. Without ``virtual_parent_exists`` the check is
    on the name's form only.
    """
    try:
        parse_address(address)
        return 'pci'
    except ValueError:
        pass
    exists = virtual_parent_exists or looks_like_virtual_parent
    if exists(address):
        return 'virtual'
    hint = ('write the full lower-case address, e.g. 0000:84:00.0'
            if ':' in address or address.startswith('pci_') else
            'give a PCI address such as 0000:84:00.0 or an existing virtual '
            'parent such as mtty_mtty')
    raise NovaConfError(
        "device address '%s' is neither a PCI address nor a virtual mdev "
        "parent: nova-compute refuses to start (incorrect device address); "
        "%s" % (address, hint))


def matches_libvirt(address):
    """Whether a PCI address Nova accepted can ever equal the address Nova
    builds from libvirt's name (``_get_device_address``): lower-case hex
    and a ``.`` before the function.
    """
    return bool(_LIBVIRT_PCI_RE.match(address))


@dataclasses.dataclass(frozen=True)
class MdevType:
    name: str
    device_addresses: tuple      # as written
    mdev_class: str = VGPU
    max_instances: int | None = None


@dataclasses.dataclass(frozen=True)
class MdevConfig:
    """What nova-compute makes of the file: the attributes its libvirt
    driver sets in ``_get_supported_vgpu_types``.
    """

    supported_types: tuple       # supported_vgpu_types, in Nova's order
    types: tuple                 # MdevType of each supported type
    pgpu_type_mapping: dict      # address as written -> type
    mdev_class_mapping: dict     # address as written -> resource class
    default_type: str | None     # pgpu_type_default
    virtual_mdevs: frozenset
    max_instances: dict          # mdev_type_max_mapping
    findings: tuple = ()
    settings: Settings | None = None

    @property
    def errors(self):
        return [f for f in self.findings if f.severity == ERROR]

    def mdev_type(self, name):
        for mdev_type in self.types:
            if mdev_type.name == name:
                return mdev_type
        return None

    def type_for(self, nodedev):
        return vgpu_type_per_pgpu(self, nodedev)

    def resource_class_for(self, nodedev):
        return resource_class_for_device(self, nodedev)

    def unmatched_addresses(self):
        """PCI addresses Nova accepts but never matches to a device."""
        return [a for a in self.pgpu_type_mapping
                if a not in self.virtual_mdevs and not matches_libvirt(a)]


def supported_vgpu_types(settings, virtual_parent_exists=None):
    """Mirrors nova/virt/libvirt/driver.py ``_get_supported_vgpu_types``.

    Walks ``enabled_mdev_types`` in order: the first type without
    ``device_addresses`` becomes the default type (``pgpu_type_default``)
    and any further one is dropped with only a warning; each listed
    address must pass ``_validate_device_address`` and may appear under
    one type only ("duplicate types for PCI ID"); the class goes into
    ``mdev_class_mapping`` for the listed addresses only. Where Nova
    stops at its first fatal error this goes on and records every one as
    an ``error`` Finding.
    """
    findings = []
    supported, types = [], []
    type_mapping, class_mapping, max_mapping = {}, {}, {}
    virtual, where_of = set(), {}
    default = None
    for mdev_type in settings.enabled.value or ():
        supported.append(mdev_type)
        opts = settings.groups[mdev_type]
        mdev_class = _checked(opts['mdev_class'], findings, VGPU)
        max_instances = _checked(opts['max_instances'], findings, None)
        if max_instances:
            max_mapping[mdev_type] = max_instances
        addresses = _checked(opts['device_addresses'], findings, [])
        if not addresses:
            if default is None:
                default = mdev_type
            else:
                findings.append(Finding(
                    WARNING, settings.group_line('mdev_%s' % mdev_type),
                    'Type %s has no device_addresses and %s is already the '
                    'default type, so Nova does not use %s at all (it only '
                    'logs a warning); list the devices of %s in '
                    'device_addresses or remove it from enabled_mdev_types.'
                    % (mdev_type, default, mdev_type, mdev_type)))
                supported.remove(mdev_type)
                continue
            types.append(MdevType(mdev_type, (), mdev_class, max_instances))
            continue
        listed = []
        for address in addresses:
            here = opts['device_addresses'].where
            if address in type_mapping:
                findings.append(Finding(
                    ERROR, here,
                    "Device address %s is also listed under [mdev_%s] "
                    "(%s): nova-compute refuses to start (duplicate types "
                    "for PCI ID %s); list each device under one type only."
                    % (address, type_mapping[address], where_of[address],
                       address)))
                continue
            try:
                kind = validate_device_address(address, virtual_parent_exists)
            except NovaConfError as exc:
                findings.append(Finding(ERROR, here, '%s.' % (
                    str(exc)[0].upper() + str(exc)[1:])))
                continue
            if kind == 'virtual':
                virtual.add(address)
            type_mapping[address] = mdev_type
            class_mapping[address] = mdev_class
            where_of[address] = here
            listed.append(address)
        types.append(MdevType(mdev_type, tuple(listed), mdev_class,
                              max_instances))
    return MdevConfig(tuple(supported), tuple(types), type_mapping,
                      class_mapping, default, frozenset(virtual), max_mapping,
                      tuple(findings), settings)


def _checked(value, findings, default):
    if value.error is None:
        return value.value if value.value is not None else default
    findings.append(Finding(ERROR, value.where, _value_error(value)))
    return default


def _value_error(value):
    if value.name == 'mdev_class':
        fix = 'use VGPU or %s' % names.CUSTOM_NAME_RULE
    elif value.name == 'max_instances':
        fix = 'use a whole number of at least 1, or leave it unset'
    else:
        fix = 'correct the value'
    return ("%s = %s is refused by nova-compute, which will not start "
            "(%s); %s." % (value.name, value.written.value if value.written
                           else '', value.error, fix))


def device_address(conf, nodedev):
    """Mirrors nova/virt/libvirt/driver.py ``_get_device_address``: a
    listed virtual parent keeps its name, ``pci_0000_84_00_0`` becomes
    ``0000:84:00.0``, anything else None.
    """
    if nodedev in conf.virtual_mdevs:
        return nodedev
    return names.pci_address_from_nodedev(nodedev)


def vgpu_type_per_pgpu(conf, nodedev):
    """Mirrors nova/virt/libvirt/driver.py ``_get_vgpu_type_per_pgpu``:
    the type listed for the device's address, compared literally, else
    the default type; None when no type is enabled or the device has no
    address.
    """
    if not conf.supported_types:
        return None
    address = device_address(conf, nodedev)
    if not address:
        return None
    return conf.pgpu_type_mapping.get(address) or conf.default_type


def resource_class_for_device(conf, nodedev):
    """Mirrors nova/virt/libvirt/driver.py
    ``_get_resource_class_for_device`` (``mdev_class_mapping``): the
    ``mdev_class`` of the type that lists the device's address, VGPU for
    every other device, the default type's included.
    """
    address = device_address(conf, nodedev)
    if not address:
        return VGPU
    return conf.mdev_class_mapping.get(address, VGPU)


# -- Using the rules -------------------------------------------------------

def parse_files(paths, virtual_parent_exists=None, directories=True):
    """``load`` + ``supported_vgpu_types``: the MdevConfig of the files."""
    return supported_vgpu_types(load(paths, directories),
                                virtual_parent_exists)


def fatal(conf):
    """Raise NovaConfError with the first error finding, if any."""
    for finding in conf.errors:
        raise NovaConfError('%s: %s' % (finding.where, finding.message
                                        .rstrip('.')))


def libvirt_form(address):
    """The address libvirt would give the device ``address`` means."""
    return '%s.%s' % (address[:10].lower(), address[11:])


def unmatched_notes(conf):
    """One sentence per address Nova accepts but never matches."""
    notes = []
    for address in conf.unmatched_addresses():
        if conf.default_type:
            takes = 'the default type %s' % conf.default_type
        else:
            takes = 'no type (no type without device_addresses is enabled)'
        notes.append(
            '%s in [mdev_%s] device_addresses matches no device: Nova '
            "compares it literally with libvirt's %s, so that device takes "
            '%s; write it as %s'
            % (address, conf.pgpu_type_mapping[address],
               libvirt_form(address), takes, libvirt_form(address)))
    return notes


# -- [pci]: PCI devices in Placement -----------------------------------------
#
# ``[pci] device_spec`` (old names ``[pci] passthrough_whitelist`` and
# ``[DEFAULT] pci_passthrough_whitelist``) says which PCI devices Nova may
# give to servers; with ``[pci] report_in_placement`` nova-compute reports
# them to Placement, one provider per PCI or physical function named
# ``<node>_<ADDRESS>``. ``[pci] alias`` names what a flavor asks for with
# ``pci_passthrough:alias``; with ``[filter_scheduler] pci_in_placement``
# the scheduler asks Placement for it.

ANY = '*'
COMPUTE_MANAGED_PCI_DEVICE = 'COMPUTE_MANAGED_PCI_DEVICE'
HW_PCI_LIVE_MIGRATABLE = 'HW_PCI_LIVE_MIGRATABLE'
TYPE_PCI, TYPE_PF, TYPE_VF = 'type-PCI', 'type-PF', 'type-VF'
DEVICE_TYPES = (TYPE_PCI, TYPE_PF, TYPE_VF)
NUMA_POLICIES = ('required', 'legacy', 'preferred', 'socket')
ALIAS_KEYS = ('name', 'capability_type', 'product_id', 'vendor_id',
              'device_type', 'numa_policy', 'resource_class', 'traits',
              'live_migratable')
_PCI_ID_RE = re.compile(r'^[\da-fA-F]{4}$')
# nova/api/validation/extra_specs/pci_passthrough.py
ALIAS_SPEC_RE = re.compile(r'[^:]+:\d+(?:\s*,\s*[^:]+:\d+)*')
_TRUE = ('1', 't', 'true', 'on', 'y', 'yes')
_FALSE = ('0', 'f', 'false', 'off', 'n', 'no')
ALIAS_KEY = 'pci_passthrough:alias'


def bool_from_string(value, strict=False):
    """oslo.utils ``strutils.bool_from_string``, which Nova reads the
    boolean tags of device specs and aliases with.
    """
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if strict and text not in _FALSE:
        raise ValueError(
            "Unrecognized value '%s', acceptable values are: %s"
            % (value, ', '.join("'%s'" % v for v in _TRUE + _FALSE)))
    return False


def normalize_resource_class(name):
    """Mirrors nova/compute/pci_placement_translator.py
    ``_normalize_resource_class``: upper case; a name that is neither a
    standard class nor ``CUSTOM_...`` becomes os-resource-classes'
    ``normalize_name`` of it (``a16-16a`` -> ``CUSTOM_A16_16A``).
    """
    import os_resource_classes

    rc = name.upper()
    if (rc not in os_resource_classes.STANDARDS
            and not os_resource_classes.is_custom(rc)):
        rc = os_resource_classes.normalize_name(rc)
    return rc


def pci_resource_class(requested, vendor_id, product_id):
    """Mirrors nova/compute/pci_placement_translator.py
    ``get_resource_class``: the normalized ``resource_class`` when one is
    given, else ``CUSTOM_PCI_<VENDOR>_<PRODUCT>``.
    """
    if requested:
        return normalize_resource_class(requested)
    return ('CUSTOM_PCI_%s_%s' % (vendor_id, product_id)).upper()


def normalize_traits(names_):
    """Mirrors nova/compute/pci_placement_translator.py
    ``_normalize_traits``: standard traits as written (a lower-case
    standard name is not standard: it becomes ``CUSTOM_<NAME>``), any
    other name upper-cased and normalized by os-traits (``" big"`` ->
    ``CUSTOM__BIG``, ``""`` -> ``CUSTOM_``).
    """
    import os_traits

    standard, rest = os_traits.check_traits(names_)
    custom = []
    for name in rest:
        name = name.upper()
        custom.append(name if os_traits.is_custom(name)
                      else os_traits.normalize_name(name))
    return list(standard) + custom


def pci_traits(text):
    """Mirrors nova/compute/pci_placement_translator.py ``get_traits``:
    the set of normalized traits of a comma-separated string.
    """
    if not text:
        return set()
    return set(normalize_traits(text.split(',')))


def device_traits(tags):
    """Mirrors nova/compute/pci_placement_translator.py
    ``_get_traits_for_dev``: the spec's ``traits`` plus
    COMPUTE_MANAGED_PCI_DEVICE, and HW_PCI_LIVE_MIGRATABLE when
    ``live_migratable`` is true.
    """
    traits = pci_traits(tags.get('traits', '')) | {
        COMPUTE_MANAGED_PCI_DEVICE}
    if bool_from_string(tags.get('live_migratable', 'false')):
        traits.add(HW_PCI_LIVE_MIGRATABLE)
    return traits


def placement_name_problem(name, kind):
    """Why Placement refuses a class or trait name Nova made, or None.

    Placement takes standard names and ``^CUSTOM_[A-Z0-9_]+$`` of at most
    255 characters.
    """
    if len(name) > names.MAX_NAME_LENGTH:
        return '%s %s... is %d characters long, more than the %d Placement ' \
            'accepts' % (kind, name[:40], len(name), names.MAX_NAME_LENGTH)
    if name.startswith('CUSTOM_') and not re.match(
            r'^CUSTOM_[A-Z0-9_]+$', name):
        return "%s '%s' has nothing after CUSTOM_, which Placement " \
            'refuses' % (kind, name)
    return None


@dataclasses.dataclass(frozen=True)
class PciAddress:
    """An address pattern of a device spec: glob (``0000:25:*.*``) or
    regular expressions per field; ``single`` when it names one function.
    """

    domain: str
    bus: str
    slot: str
    func: str
    regex: bool = False

    @property
    def single(self):
        return not self.regex and all(
            all(c in '0123456789abcdef' for c in part)
            for part in (self.domain, self.bus, self.slot, self.func))

    def __str__(self):
        if self.regex:
            return '{domain: %s, bus: %s, slot: %s, function: %s}' % (
                self.domain, self.bus, self.slot, self.func)
        return '%s:%s:%s.%s' % (self.domain, self.bus, self.slot, self.func)

    def matches(self, address):
        domain, bus, slot, func = _split_address(address)
        fields = zip((self.domain, self.bus, self.slot, self.func),
                     (domain, bus, slot, func))
        if self.regex:
            return all(re.match(p, v) for p, v in fields)
        return all(p in (ANY, v) for p, v in fields)


def _split_address(address):
    dbs, _, func = address.partition('.')
    domain, bus, slot = dbs.split(':')
    return domain, bus, slot, func


def _hex_field(prop, value, maxval, form):
    """nova/pci/devspec.py ``PciAddressSpec._set_pci_dev_info``."""
    if value == ANY:
        return value
    try:
        number = int(value, 16)
    except (TypeError, ValueError):
        raise NovaConfError("%s '%s' is not a hex number" % (prop, value))
    if number > maxval:
        raise NovaConfError('%s %s is greater than the maximum %X'
                            % (prop, value, maxval))
    return form % number


def parse_address_spec(address):
    """Mirrors nova/pci/devspec.py ``WhitelistPciAddress
    ._init_address_fields`` (``PciAddressGlobSpec`` for a string,
    ``PciAddressRegexSpec`` for a dict): raises NovaConfError where Nova
    raises PciDeviceWrongAddressFormat or PciConfigInvalidSpec.
    """
    if isinstance(address, dict):
        fields = [address.get(k, '.*') for k in
                  ('domain', 'bus', 'slot', 'function')]
        try:
            for field in fields:
                re.compile(field)
        except (re.error, TypeError):
            raise NovaConfError('address %s is not a valid set of regular '
                                'expressions' % json_text(address))
        return PciAddress(*fields, regex=True)
    if not isinstance(address, str):
        raise NovaConfError('address %s is neither a string nor a dict'
                            % json_text(address))
    dbs, _, func = address.partition('.')
    func = func.strip() or ANY
    func = _hex_field('function', func, 0x7, '%01x')
    fields = [ANY, ANY, ANY]
    if dbs:
        parts = dbs.split(':')
        if len(parts) > 3:
            raise NovaConfError("address '%s' has more than three ':' "
                                'fields' % address)
        parts = [ANY] * (3 - len(parts)) + parts
        fields = [p.strip() or ANY for p in parts]
    domain = _hex_field('domain', fields[0], 0xFFFF, '%04x')
    bus = _hex_field('bus', fields[1], 0xFF, '%02x')
    slot = _hex_field('slot', fields[2], 0x1F, '%02x')
    return PciAddress(domain, bus, slot, func)


def json_text(value):
    import json
    return json.dumps(value, sort_keys=True)


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """One entry of ``[pci] device_spec`` as Nova reads it."""

    where: str
    conf: dict                 # as written
    vendor_id: str             # '%04x' or '*'
    product_id: str
    address: PciAddress | None
    devname: str | None
    tags: dict                 # what is left: resource_class, traits...

    @property
    def resource_class(self):
        """The class of its devices, None when it depends on each
        device's vendor and product.
        """
        requested = self.tags.get('resource_class')
        if requested:
            return pci_resource_class(requested, None, None)
        if ANY in (self.vendor_id, self.product_id):
            return None
        return pci_resource_class(None, self.vendor_id, self.product_id)

    def resource_class_for(self, vendor_id, product_id):
        return pci_resource_class(self.tags.get('resource_class'),
                                  vendor_id, product_id)

    @property
    def traits(self):
        return device_traits(self.tags)

    @property
    def in_placement(self):
        """Whether Nova reports its devices to Placement (specs with a
        ``physical_network`` are Neutron's and are left out).
        """
        return not self.tags.get('physical_network')

    def describe(self):
        parts = []
        if self.devname:
            parts.append('devname %s' % self.devname)
        elif self.address is not None:
            parts.append('address %s' % self.address)
        parts.append('%s:%s' % (self.vendor_id, self.product_id))
        return ' '.join(parts)


def device_spec_entries(text, where='', report_in_placement=False):
    """Mirrors nova/pci/whitelist.py ``Whitelist
    ._parse_white_list_from_config`` for one ``device_spec`` value: JSON
    holding a dict or a list of dicts, each read by
    :func:`device_spec` (``PciDeviceSpec``). Raises NovaConfError where
    Nova raises PciConfigInvalidSpec and nova-compute does not start.
    """
    import json

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise NovaConfError('not valid JSON (%s)' % exc)
    if isinstance(value, dict):
        value = [value]
    elif not isinstance(value, list):
        raise NovaConfError('expecting a JSON object or a list of them')
    specs = []
    for entry in value:
        if not isinstance(entry, dict):
            raise NovaConfError('%s is not a JSON object' % json_text(entry))
        specs.append(device_spec(entry, where, report_in_placement))
    return specs


def device_spec(conf, where='', report_in_placement=False):
    """Mirrors nova/pci/devspec.py ``PciDeviceSpec._init_dev_details``:
    vendor and product ids (hex, at most FFFF), ``devname`` or
    ``address`` (not both), the boolean tags ``managed``,
    ``live_migratable`` and ``one_time_use`` (the last needs
    ``report_in_placement``). Raises NovaConfError where Nova raises.
    """
    tags = dict(conf)
    vendor = tags.pop('vendor_id', ANY)
    product = tags.pop('product_id', ANY)
    devname = tags.pop('devname', None)
    address = tags.pop('address', None)
    if not isinstance(vendor, str) or not isinstance(product, str):
        raise NovaConfError('vendor_id and product_id must be strings')
    vendor = _hex_field('vendor_id', vendor.strip(), 0xFFFF, '%04x')
    product = _hex_field('product_id', product, 0xFFFF, '%04x')
    if address and devname:
        raise NovaConfError('devname and address cannot both be given')
    parsed = None
    if not devname:
        parsed = parse_address_spec(address or '*:*:*.*')
    for tag in ('managed', 'live_migratable', 'one_time_use'):
        if tags.get(tag) is not None:
            try:
                tags[tag] = ('true' if bool_from_string(tags[tag], True)
                             else 'false')
            except ValueError:
                raise NovaConfError("tag %s = %s is not a boolean"
                                    % (tag, json_text(tags[tag])))
    if tags.get('one_time_use') == 'true' and not report_in_placement:
        raise NovaConfError('one_time_use = true needs [pci] '
                            'report_in_placement = True')
    for tag in ('resource_class', 'traits'):
        if tag in tags and not isinstance(tags[tag], str):
            raise NovaConfError('%s must be a string (traits: comma-'
                                'separated), not %s'
                                % (tag, json_text(tags[tag])))
    return DeviceSpec(where, dict(conf), vendor, product, parsed, devname,
                      tags)


@dataclasses.dataclass(frozen=True)
class PciDevice:
    """A PCI function of a compute node as libvirt reports it."""

    address: str
    vendor_id: str
    product_id: str
    dev_type: str = TYPE_PCI
    parent_addr: str | None = None


def spec_matches(spec, device, physical_functions=()):
    """Mirrors nova/pci/devspec.py ``PciDeviceSpec.match``: vendor and
    product (or ``*``), and the address; a spec naming one physical
    function's address also matches its virtual functions
    (``WhitelistPciAddress.match``). ``devname`` specs match nothing
    here (Nova looks the name up on the host).
    """
    if spec.devname or spec.address is None:
        return False
    if spec.vendor_id not in (ANY, device.vendor_id):
        return False
    if spec.product_id not in (ANY, device.product_id):
        return False
    if (spec.address.single and str(spec.address) in physical_functions
            and device.parent_addr
            and spec.address.matches(device.parent_addr)):
        return True
    return spec.address.matches(device.address)


def device_spec_for(specs, device, physical_functions=()):
    """Mirrors nova/pci/whitelist.py ``Whitelist.get_devspec``: the first
    spec that matches the device, or None.
    """
    for spec in specs:
        if spec_matches(spec, device, physical_functions):
            return spec
    return None


@dataclasses.dataclass
class PciProvider:
    """The provider Nova makes for a PF/PCI function and its VFs."""

    name: str
    parent: PciDevice | None = None
    children: list = dataclasses.field(default_factory=list)
    resource_class: str | None = None
    traits: set | None = None

    @property
    def devices(self):
        return [self.parent] if self.parent else self.children


def pci_providers(root_name, devices, specs, physical_functions=()):
    """Mirrors nova/compute/pci_placement_translator.py ``PlacementView``
    (``process_dev``, ``_add_dev``, ``PciResourceProvider.add_child`` and
    ``add_parent``): each PCI or physical function is a provider named
    ``<root>_<ADDRESS>``, the virtual functions share their parent's.

    Returns ``(providers, problems)``: ``problems`` are the
    ``(Nova exception, message)`` pairs where nova-compute stops:
    PlacementPciDependentDeviceException (a PF and its VFs both listed),
    PlacementPciMixedResourceClassException and
    PlacementPciMixedTraitsException (VFs of one PF differing), and
    PlacementPciException (one_time_use on a VF). Nova stops at the
    first; this goes on.
    """
    providers, problems = {}, []
    for device in devices:
        spec = device_spec_for(specs, device, physical_functions)
        if spec is None or not spec.in_placement:
            continue
        tags = spec.tags
        if device.dev_type in (TYPE_PCI, TYPE_PF):
            name = '%s_%s' % (root_name, device.address.upper())
        else:
            name = '%s_%s' % (root_name, (device.parent_addr or '').upper())
        rp = providers.setdefault(name, PciProvider(name))
        rc = spec.resource_class_for(device.vendor_id, device.product_id)
        traits = device_traits(tags)
        if device.dev_type in (TYPE_PCI, TYPE_PF):
            if rp.parent or rp.children:
                problems.append(('PlacementPciDependentDeviceException', (
                    'both %s and %s are listed, but either the physical '
                    'function or its virtual functions can be given to '
                    'servers' % (device.address, ','.join(
                        d.address for d in rp.devices)))))
                continue
            rp.parent, rp.resource_class, rp.traits = device, rc, traits
            continue
        if rp.parent:
            problems.append(('PlacementPciDependentDeviceException', (
                'both %s and %s are listed, but either the physical '
                'function or its virtual functions can be given to servers'
                % (device.address, rp.parent.address))))
            continue
        if rp.resource_class and rc != rp.resource_class:
            problems.append(('PlacementPciMixedResourceClassException', (
                'virtual functions of %s get different resource classes: '
                '%s for %s and %s for %s' % (
                    device.parent_addr, rc, device.address,
                    rp.resource_class,
                    ','.join(d.address for d in rp.children)))))
            continue
        if rp.traits is not None and rp.traits != traits:
            problems.append(('PlacementPciMixedTraitsException', (
                'virtual functions of %s get different traits: %s for %s '
                'and %s for %s' % (
                    device.parent_addr, ','.join(sorted(traits)),
                    device.address, ','.join(sorted(rp.traits)),
                    ','.join(d.address for d in rp.children)))))
            continue
        if 'one_time_use' in tags:
            problems.append(('PlacementPciException', (
                'one_time_use is set for virtual function %s; only PCI and '
                'physical functions may set it' % device.address)))
            continue
        rp.children.append(device)
        rp.resource_class, rp.traits = rc, traits
    return providers, problems


@dataclasses.dataclass(frozen=True)
class Alias:
    """One ``[pci] alias`` name as Nova reads it: a NUMA policy and its
    specs (vendor_id, product_id, dev_type, resource_class, traits...).
    """

    name: str
    numa_policy: str
    specs: tuple
    where: str = ''

    @property
    def device_type(self):
        return self.specs[0].get('dev_type')

    def request_groups(self, count, pci_in_placement=True):
        return alias_request_groups(self, count, pci_in_placement)

    @property
    def resource_class(self):
        spec = self.specs[0]
        return pci_resource_class(spec.get('resource_class'),
                                  spec.get('vendor_id'),
                                  spec.get('product_id'))

    @property
    def traits(self):
        return pci_traits(self.specs[0].get('traits', ''))


def _alias_schema_problem(spec):
    """nova/pci/request.py ``_ALIAS_SCHEMA``, checked by hand."""
    if not isinstance(spec, dict):
        return '%s is not of type \'object\'' % json_text(spec)
    extra = sorted(k for k in spec if k not in ALIAS_KEYS)
    if extra:
        return ('Additional properties are not allowed (%s unexpected)'
                % ', '.join("'%s'" % k for k in extra))
    if 'name' not in spec:
        return "'name' is a required property"
    for key, value in spec.items():
        if not isinstance(value, str):
            return "%s: %s is not of type 'string'" % (key,
                                                       json_text(value))
    if not 1 <= len(spec['name']) <= 256:
        return 'name must be 1 to 256 characters long'
    for key in ('vendor_id', 'product_id'):
        if key in spec and not _PCI_ID_RE.match(spec[key]):
            return "%s '%s' is not four hex digits" % (key, spec[key])
    enums = {'capability_type': ('pci',), 'device_type': DEVICE_TYPES,
             'numa_policy': NUMA_POLICIES}
    for key, allowed in enums.items():
        if key in spec and spec[key] not in allowed:
            return "%s '%s' is not one of %s" % (key, spec[key],
                                                 ', '.join(allowed))
    return None


def pci_aliases(entries, pci_in_placement=False):
    """Mirrors nova/pci/request.py ``get_alias_from_config`` (and
    ``_validate_aliases``): ``{name: Alias}`` of the ``[pci] alias``
    values, given as ``(text, where)``; entries with one name are
    alternatives and must agree on ``numa_policy`` and ``device_type``.
    Raises NovaConfError where Nova raises PciInvalidAlias: nova-api and
    nova-compute refuse to start.
    """
    import json

    aliases = {}
    for text, where_ in entries:
        try:
            spec = json.loads(text)
        except ValueError as exc:
            raise NovaConfError('%s: not valid JSON (%s)' % (where_, exc))
        problem = _alias_schema_problem(spec)
        if problem:
            raise NovaConfError('%s: %s' % (where_, problem))
        spec = dict(spec)
        name = spec.pop('name').strip()
        numa_policy = spec.pop('numa_policy', None) or 'legacy'
        dev_type = spec.pop('device_type', None)
        if dev_type:
            spec['dev_type'] = dev_type
        if 'live_migratable' in spec:
            try:
                spec['live_migratable'] = ('true' if bool_from_string(
                    spec['live_migratable'], True) else 'false')
            except ValueError:
                raise NovaConfError('%s: live_migratable %s is not a '
                                    'boolean' % (where_,
                                                 spec['live_migratable']))
        if name not in aliases:
            aliases[name] = Alias(name, numa_policy, (spec,), where_)
            continue
        first = aliases[name]
        if first.numa_policy != numa_policy:
            raise NovaConfError("%s: NUMA policy mismatch for alias '%s'"
                                % (where_, name))
        if 'dev_type' not in first.specs[0] or 'dev_type' not in spec:
            raise NovaConfError(
                "%s: alias '%s' is defined more than once, so every "
                "definition needs device_type (Nova fails with 'dev_type')"
                % (where_, name))
        if first.specs[0]['dev_type'] != spec['dev_type']:
            raise NovaConfError("%s: Device type mismatch for alias '%s'"
                                % (where_, name))
        aliases[name] = dataclasses.replace(first,
                                            specs=first.specs + (spec,))
    if pci_in_placement:
        multi = [n for n, a in aliases.items() if len(a.specs) > 1]
        if multi:
            raise NovaConfError(
                '%s: alias %s has several definitions, which '
                '[filter_scheduler] '
                'pci_in_placement does not support (give the devices one '
                'resource_class in [pci] device_spec instead)'
                % (aliases[multi[0]].where, ','.join(multi)))
    missing = sorted(
        n for n, a in aliases.items() for s in a.specs
        if not ('vendor_id' in s and 'product_id' in s)
        and not (pci_in_placement and 'resource_class' in s))
    if missing:
        raise NovaConfError(
            '%s: alias %s has no vendor_id and product_id%s'
            % (aliases[missing[0]].where, ','.join(dict.fromkeys(missing)),
               ' nor resource_class' if pci_in_placement else ''))
    return aliases


def parse_alias_request(text):
    """Mirrors nova/pci/request.py ``_translate_alias_to_requests`` (with
    the API's check of ``pci_passthrough:alias``: ``name:count[,...]``):
    ``[(name, count)]``. Raises ValueError for a value the API refuses.
    """
    if not isinstance(text, str) or not ALIAS_SPEC_RE.fullmatch(text):
        raise ValueError(
            "'%s' is not of the form NAME:COUNT[,NAME:COUNT...]" % text)
    requests = []
    for part in text.split(','):
        name, count = part.split(':')
        requests.append((name.strip(), int(count)))
    return requests


def alias_request_groups(alias, count, pci_in_placement=True):
    """Mirrors nova/objects/request_spec.py ``RequestSpec
    .generate_request_groups_from_pci_requests``: with
    ``pci_in_placement``, one request group per device, each
    ``{resource class: 1}`` with the alias' traits; nothing without.
    """
    if not pci_in_placement:
        return []
    if len(alias.specs) != 1:
        raise ValueError('PCI tracking in placement does not support '
                         'multiple specs per PCI request')
    return [({alias.resource_class: 1}, frozenset(alias.traits))
            for _ in range(count)]


@dataclasses.dataclass(frozen=True)
class PciConfig:
    """What the files say about PCI devices: the device specs and aliases
    Nova reads, and the errors it stops at (as Findings).
    """

    specs: tuple                    # DeviceSpec
    aliases: dict                   # name -> Alias (empty on alias error)
    report_in_placement: bool
    pci_in_placement: bool
    findings: tuple = ()
    settings: Settings | None = None

    @property
    def configured(self):
        pci = self.settings.pci if self.settings else {}
        return bool(pci.get('device_spec') or pci.get('alias') or any(
            pci.get(n) is not None and pci[n].is_set
            for n in ('report_in_placement', 'pci_in_placement')))


def _entry_where(occ, option):
    if occ is None:
        return '[pci] %s' % option
    return where(occ.section, occ.name, occ)


def pci_config(settings):
    """The PciConfig of parsed files (``load``)."""
    pci = settings.pci
    findings = []
    flags = {}
    for name in ('report_in_placement', 'pci_in_placement'):
        value = pci[name]
        flags[name] = bool(_checked(value, findings, False))
    specs = []
    for text, occ in pci['device_spec']:
        here = _entry_where(occ, 'device_spec')
        try:
            specs.extend(device_spec_entries(
                text, here, flags['report_in_placement']))
        except NovaConfError as exc:
            findings.append(Finding(
                ERROR, here, 'nova-compute refuses to start: invalid '
                '[pci] device_spec (%s); fix or remove this entry.' % exc))
    aliases = {}
    entries = [(text, _entry_where(occ, 'alias'))
               for text, occ in pci['alias']]
    try:
        aliases = pci_aliases(entries, flags['pci_in_placement'])
    except NovaConfError as exc:
        text = str(exc)
        here, _, reason = text.partition(': ') if text.startswith('[') \
            else ('[pci] alias', '', text)
        findings.append(Finding(
            ERROR, here, 'nova-api and nova-compute refuse to start: invalid '
            '[pci] alias (%s); fix the alias.' % reason))
    return PciConfig(tuple(specs), aliases, flags['report_in_placement'],
                     flags['pci_in_placement'], tuple(findings), settings)


def tracking_disabled_after_enabled(report_in_placement, provider_traits):
    """Mirrors nova/compute/pci_placement_translator.py
    ``ensure_tracking_was_not_enabled_before``: with ``[pci]
    report_in_placement`` off, a node whose providers (``provider_traits``:
    the traits of each provider of its tree) include one with
    COMPUTE_MANAGED_PCI_DEVICE had it on before, and nova-compute refuses
    to start (PlacementPciException): it cannot be turned off again.
    """
    if report_in_placement:
        return False
    return any(COMPUTE_MANAGED_PCI_DEVICE in traits
               for traits in provider_traits)
