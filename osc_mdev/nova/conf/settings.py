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

"""The nova.conf options osc-mdev reads, parsed exactly as nova-compute
parses them.

``[devices] enabled_mdev_types`` (old name ``enabled_vgpu_types``) lists
the mdev types; each has a group ``[mdev_<type>]`` with
``device_addresses`` (also read from the old group ``[vgpu_<type>]``),
``mdev_class`` and ``max_instances``. Besides them the ``[pci]`` and
``[filter_scheduler]`` options of PCI in Placement (Nova's rules on
those are in ``osc_mdev.nova.pci``), the ``[quota]`` options of unified
limits, and the ``[libvirt]`` and ``[workarounds]`` options of live
migration.

The files' texts (read by ``osc_mdev.local.conf_files``) are parsed by
oslo.config itself (list options, continuation lines, repeated sections,
``$`` interpolation, several files where the later one wins), with the
options registered as Nova registers them. What nova-compute's libvirt
driver makes of the mdev options is in
``osc_mdev.nova.virt.libvirt.driver``.
"""

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
import dataclasses
import re
import typing

import os_resource_classes
from oslo_config import cfg
from oslo_config import iniparser

from osc_mdev.base import findings
from osc_mdev.nova import names

VGPU = names.VGPU
MDEV_CLASS_PATTERN = r'^(VGPU|CUSTOM_[A-Z0-9_]+)$'

# The severities and the finding of ``findings``: ERROR, nova-compute
# refuses to start; WARNING, Nova silently does something other than
# written.
ERROR, WARNING, INFO = findings.ERROR, findings.WARNING, findings.INFO
Finding = findings.Finding


class NovaConfError(ValueError):
    """One line: a file that cannot be read, or that nova-compute would
    refuse to start with.
    """


# -- Parsing with oslo.config ------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Occurrence:
    """One ``name = value`` line of one file."""

    section: str          # as written
    name: str
    value: str
    file: str
    line: int


class _LocatingParser(iniparser.BaseParser):
    """A parser of oslo.config's ini format (``iniparser.BaseParser``,
    the base of oslo.config's own file parser) that fills ``sections``
    and ``normalized`` as oslo.config's ``ConfigParser`` fills them for
    a file (values as lists of lines joined by line feeds; ``normalized``
    by ``group_key``), and remembers where each option and section was
    written.
    """

    def __init__(self, filename: str, lines: list[str],
                 occurrences: list[Occurrence],
                 sections: list[tuple[str, str, int]]) -> None:
        super().__init__()
        self.filename = filename
        self.section: str | None = None
        self.sections: dict[str, dict[str, list[str]]] = {}
        self.normalized: dict[str, dict[str, list[str]]] = {}
        self._lines = lines
        self._occurrences = occurrences
        self._section_lines = sections

    def new_section(self, section: str) -> None:
        self.sections.setdefault(section, {})
        self.normalized.setdefault(group_key(section), {})
        self.section = section
        self._section_lines.append((section, self.filename, self.lineno))

    def assignment(self, key: str, value: list[str]) -> None:
        if not self.section:
            # oslo.config refuses an assignment before the first section.
            raise self.parse_exc('Section must be started before assignment',
                                 self.lineno, '')
        joined = '\n'.join(value)
        for sections, name in ((self.sections, self.section),
                               (self.normalized, group_key(self.section))):
            sections[name].setdefault(key, []).append(joined)
        self._occurrences.append(Occurrence(
            self.section, key, joined, self.filename, self._key_line(key)))

    def _key_line(self, key: str) -> int:
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


def group_key(name: str) -> str:
    """oslo.config's group name normalisation (lower case but DEFAULT)."""
    return name if name == 'DEFAULT' else name.lower()


def _devices_opts() -> list[cfg.Opt]:
    """``[devices] enabled_mdev_types`` as nova/conf/devices.py
    registers it.
    """
    return [cfg.ListOpt('enabled_mdev_types', default=[],
                        deprecated_name='enabled_vgpu_types')]


def _type_opts(mdev_type: str) -> list[cfg.Opt]:
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


def _pci_opts() -> list[cfg.Opt]:
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


def _scheduler_opts() -> list[cfg.Opt]:
    """``[filter_scheduler] pci_in_placement`` (nova/conf/scheduler.py)."""
    return [cfg.BoolOpt('pci_in_placement', default=False)]


# The [quota] options of Nova's unified limits (nova/conf/quota.py).
QUOTA_DRIVERS = ('nova.quota.DbQuotaDriver', 'nova.quota.NoopQuotaDriver',
                 'nova.quota.UnifiedLimitsDriver')
QUOTA_STRATEGIES = ('require', 'ignore')
QUOTA_OPTIONS = ('driver', 'unified_limits_resource_strategy',
                 'unified_limits_resource_list')
# UnifiedLimitsResource in nova/conf/quota.py: the resources besides
# class:<standard class> and class:CUSTOM_*.
QUOTA_RESOURCES = frozenset({
    'server_metadata_items', 'server_injected_files',
    'server_injected_file_content_bytes', 'server_injected_file_path_bytes',
    'server_key_pairs', 'server_groups', 'server_group_members',
    'servers'})
_CUSTOM_RESOURCE = re.compile(r'^class:CUSTOM_[A-Z0-9_]+$')


def _unified_limits_resource(value: str) -> str:
    """Mirrors ``UnifiedLimitsResource`` (nova/conf/quota.py): a
    resource Nova knows, ``class:<standard class>`` or
    ``class:CUSTOM_<NAME>``; ValueError otherwise.
    """
    value = cfg.types.String()(value)
    standard = {'class:%s' % rc for rc in os_resource_classes.STANDARDS}
    if value in QUOTA_RESOURCES or value in standard or \
            _CUSTOM_RESOURCE.match(value):
        return value
    raise ValueError('%s is not a resource Nova limits (servers, '
                     'class:<standard class> or class:CUSTOM_<NAME>...)'
                     % value)


def _quota_opts() -> list[cfg.Opt]:
    """``[quota] driver``, ``unified_limits_resource_strategy`` and
    ``unified_limits_resource_list`` as nova/conf/quota.py registers
    them.
    """
    return [
        cfg.StrOpt('driver', default=QUOTA_DRIVERS[0],
                   choices=QUOTA_DRIVERS),
        cfg.StrOpt('unified_limits_resource_strategy', default='require',
                   choices=QUOTA_STRATEGIES),
        # A callable item type, as Nova's own option has.
        cfg.ListOpt('unified_limits_resource_list', default=['servers'],
                    item_type=_unified_limits_resource),  # type: ignore
    ]


# The [libvirt] options of a live migration's downtime, in the order
# nova/conf/libvirt.py registers them.
LIVE_MIGRATION_DOWNTIME_OPTIONS = (
    'live_migration_downtime', 'live_migration_downtime_steps',
    'live_migration_downtime_delay')


#: The [libvirt] option that lets nova-compute ask for post-copy live
#: migrations (nova/conf/libvirt.py, default False).
POST_COPY = 'live_migration_permit_post_copy'


def _libvirt_opts() -> list[cfg.Opt]:
    """``[libvirt] live_migration_downtime``, ``_steps`` and ``_delay``
    (milliseconds, steps, seconds; defaults 500, 10 and 75; at least
    100, 3 and 3) and ``live_migration_permit_post_copy`` (default
    False) as nova/conf/libvirt.py registers them.
    """
    return [cfg.IntOpt('live_migration_downtime', default=500, min=100),
            cfg.IntOpt('live_migration_downtime_steps', default=10, min=3),
            cfg.IntOpt('live_migration_downtime_delay', default=75, min=3),
            cfg.BoolOpt(POST_COPY, default=False)]


# The [workarounds] option of nova-conductor's live-migration checks.
SKIP_HYPERVISOR_VERSION_CHECK = 'skip_hypervisor_version_check_on_lm'


def _workarounds_opts() -> list[cfg.Opt]:
    """``[workarounds] skip_hypervisor_version_check_on_lm`` as
    nova/conf/workarounds.py registers it.
    """
    return [cfg.BoolOpt(SKIP_HYPERVISOR_VERSION_CHECK, default=False)]


@dataclasses.dataclass(frozen=True)
class Value:
    """An option's effective value and where it was written.

    ``value`` is None and ``error`` says why when oslo.config refuses the
    written value (nova-compute stops on it).
    """

    group: str
    name: str
    value: typing.Any = None    # as oslo.config gives it
    error: str | None = None
    written: Occurrence | None = None

    @property
    def where(self) -> str:
        return where(self.written.section if self.written else self.group,
                     self.written.name if self.written else self.name,
                     self.written)

    @property
    def is_set(self) -> bool:
        return self.written is not None


def where(section: str, option: str | None,
          occurrence: Occurrence | None = None) -> str:
    """``[section] option, FILE:LINE`` (or without the file part)."""
    text = '[%s] %s' % (section, option) if option else '[%s]' % section
    if occurrence is not None:
        text += ', %s:%d' % (occurrence.file, occurrence.line)
    return text


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a set of nova.conf files says about mdevs."""

    files: tuple[str, ...]
    enabled: Value                 # [devices] enabled_mdev_types
    groups: dict[str, dict[str, Value]]  # type -> {option name: Value}
    occurrences: tuple[Occurrence, ...]  # in reading order
    sections: tuple[tuple[str, str, int], ...]
    #                                (section, file, line), reading order
    pci: dict[str, typing.Any] = dataclasses.field(default_factory=dict)
    #                                [pci] and [filter_scheduler] options:
    #                                name -> Value (multi options: a list of
    #                                (text, Occurrence) in Nova's order)
    libvirt: dict[str, Value] = dataclasses.field(default_factory=dict)
    #                                [libvirt] live_migration_downtime*
    #                                and POST_COPY: name -> Value
    workarounds: dict[str, Value] = dataclasses.field(
        default_factory=dict)
    #                                [workarounds]
    #                                skip_hypervisor_version_check_on_lm:
    #                                name -> Value
    quota: dict[str, Value] = dataclasses.field(default_factory=dict)
    #                                [quota] QUOTA_OPTIONS: name -> Value

    def group_line(self, section: str) -> str:
        for name, file, line in self.sections:
            if group_key(name) == group_key(section):
                return '[%s], %s:%d' % (name, file, line)
        return '[%s]' % section


def winner(occurrences: Sequence[Occurrence],
           names_in_order: Sequence[tuple[str, str]]) -> Occurrence | None:
    """The occurrence oslo.config takes the value from: newest file first;
    in it, the current name before deprecated ones; the last line.
    """
    files: list[str] = []
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


def shown(text: str) -> str:
    """A written value in one line, as a message quotes it."""
    return ' '.join(text.split()) or '(empty)'


# How oslo.config parses a value of each kind of ``nova.conf.options.KINDS``.
_PARSERS: dict[str, Callable[[str], typing.Any]] = {
    'bool': cfg.types.Boolean(), 'int': cfg.types.Integer(),
    'float': cfg.types.Float(), 'list': cfg.types.List(),
    'str': cfg.types.String()}


def same_value(kind: str, first: str, second: str) -> bool:
    """Whether oslo.config reads two written values of an option of this
    kind (``nova.conf.options.KINDS``: ``bool``, ``int``, ``float``,
    ``list``, ``str``) as one value: ``yes`` and ``True``, ``07`` and
    ``7``, ``a,b`` and ``a, b``. Never for a value oslo.config refuses,
    nor for a multi option (it gathers the values of every name).
    """
    parse = _PARSERS.get(kind)
    if parse is None:
        return False
    try:
        return reads_as(kind, first, parse(second))
    except ValueError:
        return False


def reads_as(kind: str, text: str, value: typing.Any) -> bool:
    """Whether oslo.config reads ``text``, a written value of an option
    of this kind (see :func:`same_value`), as ``value``.
    """
    parse = _PARSERS.get(kind)
    if parse is None:
        return False
    try:
        return bool(parse(text) == value)
    except ValueError:
        return False


def taken_at(taken: Occurrence, ignored: Occurrence) -> str:
    """Where the value oslo.config takes is, seen from an ignored
    occurrence: `` (line N)`` in its file, `` in a later file
    (FILE:LINE)`` otherwise.
    """
    if taken.file != ignored.file:
        return ' in a later file (%s:%d)' % (taken.file, taken.line)
    return ' (line %d)' % taken.line


def _file_lines(text: str) -> list[str]:
    """The lines oslo.config's parser gets from a file of this text
    (``readlines`` in universal newlines mode): split at line feeds,
    carriage returns and CR LF pairs only, not at the other line breaks
    ``str.splitlines`` knows (form feed, vertical tab, U+2028...).
    """
    lines = text.replace('\r\n', '\n').replace('\r', '\n').split('\n')
    if lines[-1] == '':
        lines.pop()
    return lines


def parse_texts(files: Iterable[tuple[str, str]]) -> Settings:
    """Parse nova.conf texts as nova-compute parses its files.

    ``files``: ``(path, text)`` pairs (any iterable, taken one at a time)
    in the order oslo.config reads the files (a later file wins). Each
    text is parsed by oslo.config's own parser, remembering where each
    option and section was written, and handed to oslo.config as
    ``--config-file`` hands it a parsed file; the options are registered
    as Nova registers them. Raises NovaConfError (one line) for a text
    that cannot be parsed; values oslo.config refuses are kept as
    ``Value.error``.
    """
    paths: list[str] = []
    occurrences: list[Occurrence] = []
    sections: list[tuple[str, str, int]] = []
    parsed: list[_LocatingParser] = []
    for path, text in files:
        paths.append(path)
        lines = _file_lines(text)
        parser = _LocatingParser(path, lines, occurrences, sections)
        try:
            parser.parse(lines)
        except iniparser.ParseError as exc:
            raise NovaConfError(
                '%s line %d cannot be parsed (%s); nova-compute refuses to '
                'start with it' % (path, exc.lineno, exc.msg)) from exc
        parsed.append(parser)

    conf = cfg.ConfigOpts()
    conf.register_opts(_devices_opts(), group='devices')
    conf.register_opts(_pci_opts(), group='pci')
    conf.register_opts(_scheduler_opts(), group='filter_scheduler')
    conf.register_opts(_libvirt_opts(), group='libvirt')
    conf.register_opts(_workarounds_opts(), group='workarounds')
    conf.register_opts(_quota_opts(), group='quota')
    try:
        conf(args=[], project='nova', default_config_files=[],
             default_config_dirs=[], use_env=False)
        for parser in parsed:
            _add_parsed_file(conf, parser)
        enabled = _value(conf, occurrences, 'devices', 'enabled_mdev_types',
                         [('devices', 'enabled_vgpu_types')])
        pci = _pci_values(conf, occurrences)
        libvirt = {name: _value(conf, occurrences, 'libvirt', name)
                   for name in LIVE_MIGRATION_DOWNTIME_OPTIONS +
                   (POST_COPY,)}
        workarounds = {SKIP_HYPERVISOR_VERSION_CHECK: _value(
            conf, occurrences, 'workarounds', SKIP_HYPERVISOR_VERSION_CHECK)}
        quota = {name: _value(conf, occurrences, 'quota', name)
                 for name in QUOTA_OPTIONS}
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
            'start with it' % (', '.join(paths),
                               str(exc).splitlines()[0])) from exc
    finally:
        conf.reset()
    return Settings(tuple(paths), enabled, groups, tuple(occurrences),
                    tuple(sections), pci, libvirt, workarounds, quota)


def _add_parsed_file(conf: cfg.ConfigOpts, parser: _LocatingParser) -> None:
    """Hand ``conf`` a parsed file as ``--config-file`` hands it one.

    The one use of oslo.config's private API, for want of a public one:
    oslo.config reads configuration files only by their paths, opening
    them itself (``--config-file``, ``default_config_files``), and these
    texts have no path to be read from (a generated file read back
    before it is written; a file read once with a size limit). This is
    the step oslo.config's ``ConfigParser._parse_file`` takes once it
    has parsed a file, and the one oslo.config's own test fixture
    (``oslo_config.fixture.Config.load_raw_values``) takes for values
    held in memory.
    """
    namespace = conf._namespace
    assert namespace is not None    # after ``conf(args=[])``
    namespace._add_parsed_config_file(parser.filename, parser.sections,
                                      parser.normalized)


def _value(conf: cfg.ConfigOpts, occurrences: Sequence[Occurrence],
           group: str, name: str,
           deprecated: Iterable[tuple[str, str]] = ()) -> Value:
    written = winner(occurrences, [(group_key(group), name)] + [
        (group_key(g), n) for g, n in deprecated])
    try:
        value = conf[group][name]
    except (cfg.ConfigFileValueError, ValueError) as exc:
        return Value(group, name, error=_oslo_reason(exc), written=written)
    return Value(group, name, value=value, written=written)


def _pci_values(conf: cfg.ConfigOpts, occurrences: Sequence[Occurrence]
                ) -> dict[str, typing.Any]:
    """The [pci] options: multi options as ``[(text, Occurrence)]`` in
    the order oslo.config gives them to Nova, booleans as Value.
    """
    values: dict[str, typing.Any] = {}
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


def _oslo_reason(exc: Exception) -> str:
    text = str(exc)
    # "Value for option X from LocationInfo(...) is not valid: <reason>"
    return text.rsplit('is not valid: ', 1)[-1].strip()


def checked(value: Value, findings: list[Finding],
            default: typing.Any) -> typing.Any:
    """A Value's value (``default`` when unset); an ``error`` Finding in
    ``findings`` and ``default`` when oslo.config refuses it.
    """
    if value.error is None:
        return value.value if value.value is not None else default
    findings.append(Finding(ERROR, value.where, _value_error(value)))
    return default


def _value_error(value: Value) -> str:
    if value.name == 'mdev_class':
        fix = 'use VGPU or %s' % names.CUSTOM_NAME_RULE
    elif value.name == 'max_instances':
        fix = 'use a whole number of at least 1, or leave it unset'
    else:
        fix = 'correct the value'
    return ("%s = %s is refused by nova-compute, which will not start "
            "(%s); %s." % (value.name, value.written.value if value.written
                           else '', value.error, fix))
