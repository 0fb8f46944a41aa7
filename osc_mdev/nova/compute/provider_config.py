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

"""nova-compute's provider config files as it reads them: what
``config check --provider-config`` and ``audit --provider-config`` judge
and what ``trait export`` checks its files against.

nova-compute reads every ``*.yaml`` file of ``[compute]
provider_config_location`` (default ``/etc/nova/provider_config/``) once,
when it starts (``nova.compute.provider_config.get_provider_configs``),
and refuses to start on a file it rejects.

Mirrors nova/compute/provider_config.py: each of its rules is one
function below, named after the Nova code it mirrors;
tests/unit/test_provider_config.py runs Nova's own functions on the same
files. What nova-compute then does with the entries on its provider tree
is ``nova.compute.resource_tracker``'s; the files ``trait export`` writes are
``features.trait.export_files``'s. Pure: texts in, entries and findings out.
"""

from collections.abc import Collection
from collections.abc import Iterable
import dataclasses
import re
import typing

import yaml

from osc_mdev.base import findings
from osc_mdev.nova import names

ERROR, WARNING, INFO = findings.ERROR, findings.WARNING, findings.INFO
Finding = findings.Finding

#: The schema version osc-mdev writes, the one Nova 34 knows.
SCHEMA_VERSION = '1.0'
#: ``nova.compute.provider_config.SUPPORTED_SCHEMA_VERSIONS``.
SUPPORTED_SCHEMA_VERSIONS = {1: {0}}
#: The UUID that stands for every compute node root provider of the
#: service.
COMPUTE_NODE = '$COMPUTE_NODE'
#: Nova reads only the files of the directory whose name matches this
#: (``glob('*.yaml')``: not ``.yml``, not hidden files).
FILE_SUFFIX = '.yaml'
DEFAULT_LOCATION = '/etc/nova/provider_config/'

# The patterns of Nova's SCHEMA_V1, searched as jsonschema searches them
# (re.search; ``$`` also matches before a final newline).
_VERSION_PATTERN = re.compile(r'^1.([0-9]|[1-9][0-9]+)$')
_UUID_PATTERN = re.compile(
    r'^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-'
    r'[0-9A-Fa-f]{12}$')
_NAME_PATTERN = re.compile(r'^[A-Z0-9_]{1,255}$')
_NAME_MAX = 200
_INVENTORY_FIELDS = {'total': 'integer', 'reserved': 'integer',
                     'min_unit': 'integer', 'max_unit': 'integer',
                     'step_size': 'integer', 'allocation_ratio': 'number'}
_CUSTOM = 'CUSTOM_'
_REFUSED = 'nova-compute refuses to start with this file.'

#: Where a value sits in a YAML document: its keys and indexes.
YamlPath = tuple[str | int, ...]


def refused_by_nova(findings: Iterable[Finding]) -> list[Finding]:
    """The findings of rules that stop nova-compute at start (the files
    Nova's own ``get_provider_configs`` rejects).
    """
    return [f for f in findings if f.stops_nova]


@dataclasses.dataclass(frozen=True)
class Entry:
    """One provider of a file, as Nova keeps it.

    ``key`` is how it is identified (``name`` or ``uuid``) and ``value``
    the name or UUID (Nova's ``uuid_or_name``); ``traits`` and
    ``resource_classes`` are its ``additional`` traits and inventories.
    """

    source: str
    line: int
    key: str
    value: str
    traits: tuple[str, ...] = ()
    resource_classes: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return '%s:%d' % (self.source, self.line)

    @property
    def kept(self) -> bool:
        """Nova ignores an entry with neither traits nor inventories."""
        return bool(self.traits or self.resource_classes)


@dataclasses.dataclass
class ConfigFile:
    """A provider config file as Nova reads it: its entries (those that
    could be read) and the findings of Nova's file rules.
    """

    source: str
    entries: list[Entry]
    findings: list[Finding]

    @property
    def refused(self) -> bool:
        """True when nova-compute refuses to start with this file."""
        return bool(refused_by_nova(self.findings))


def _error(where: str, message: str) -> Finding:
    """A rule of Nova's: nova-compute refuses to start with the file."""
    return Finding(ERROR, where, '%s %s' % (message, _REFUSED),
                   stops_nova=True)


# -- Reading a file -------------------------------------------------------

def load_yaml(text: str, source: str
              ) -> tuple[typing.Any, yaml.Node | None, Finding | None]:
    """``(document, node)`` of a file's text, or a finding.

    Mirrors ``nova.compute.provider_config._load_yaml_file``:
    ``yaml.safe_load``, one document. ``node`` (PyYAML's composed tree)
    gives the lines of the findings.
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        document = loader.construct_document(node) if node else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, 'problem_mark', None)
        where = '%s:%d' % (source, mark.line + 1) if mark else source
        problem = getattr(exc, 'problem', None) or str(exc)
        return None, None, _error(where, 'Not YAML: %s.' % problem)
    finally:
        loader.dispose()
    return document, node, None


def parse_version(raw: typing.Any) -> tuple[int, int] | None:
    """``(major, minor)`` or None.

    Mirrors ``microversion_parse.parse_version_string`` as
    ``nova.compute.provider_config._parse_provider_yaml`` calls it: the
    text split once on ``.``, each part read by ``int()``.
    """
    try:
        parts = raw.split('.', 1)
        if len(parts) != 2:
            return None
        return int(parts[0]), int(parts[1])
    except (ValueError, TypeError, AttributeError):
        return None


def schema_version(document: object, source: str) -> list[Finding]:
    """Findings of ``meta.schema_version``; the first error stops Nova.

    Mirrors ``nova.compute.provider_config._parse_provider_yaml``: a
    version that cannot be found or read and an unknown major version
    are refused; an unknown minor version is only warned about.
    """
    meta = document.get('meta') if isinstance(document, dict) else None
    raw = meta.get('schema_version') if isinstance(meta, dict) else None
    version = parse_version(raw) if raw is not None else None
    if version is None:
        return [_error(source, "No schema version Nova can read: the file "
                       "must hold meta: {schema_version: '%s'}, quoted."
                       % SCHEMA_VERSION)]
    major, minor = version
    if major not in SUPPORTED_SCHEMA_VERSIONS:
        return [_error(source, 'Schema version %s: Nova knows major '
                       'version 1 only.' % raw)]
    if minor not in SUPPORTED_SCHEMA_VERSIONS[major]:
        return [Finding(WARNING, source, (
            'Schema version %s: Nova knows %s only; it reads the file but '
            'may ignore fields.' % (raw, SCHEMA_VERSION)))]
    return []


# -- Nova's SCHEMA_V1 -------------------------------------------------------
# jsonschema's types: a YAML mapping is an object, a sequence an array;
# an integer is an int (not a bool) or a float with no fraction.

def _is_integer(value: object) -> bool:
    return not isinstance(value, bool) and (
        isinstance(value, int)
        or isinstance(value, float) and value.is_integer())


def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float))


def _lines(node: yaml.Node | None) -> dict[YamlPath, int]:
    """``{path: line}`` of a composed YAML tree (1-based lines; paths are
    tuples of keys and indexes).
    """
    found = {}

    def walk(n: yaml.Node, path: YamlPath) -> None:
        found[path] = n.start_mark.line + 1
        if isinstance(n, yaml.MappingNode):
            for key, value in n.value:
                if isinstance(key, yaml.ScalarNode):
                    walk(value, path + (key.value,))
        elif isinstance(n, yaml.SequenceNode):
            for index, item in enumerate(n.value):
                walk(item, path + (index,))

    if node is not None:
        walk(node, ())
    return found


def schema_findings(document: dict[str, typing.Any], source: str,
                    lines: dict[YamlPath, int]) -> list[Finding]:
    """Findings of the file's top level against Nova's schema.

    Mirrors ``jsonschema.validate(yaml_file, SCHEMA_V1)`` in
    ``nova.compute.provider_config._parse_provider_yaml`` for the top
    level (``__source_file`` is Nova's own key; ``meta.schema_version``
    must match ``^1.([0-9]|[1-9][0-9]+)$``; ``providers`` is a list).
    The providers are ``provider_findings``' job.
    """
    found = []

    def at(*path: str) -> str:
        return '%s:%d' % (source, lines.get(path, 1))

    if '__source_file' in document:
        found.append(_error(at('__source_file'),
                            '__source_file is a key Nova keeps for itself.'))
    raw = document['meta']['schema_version']
    if not isinstance(raw, str) or not _VERSION_PATTERN.search(raw):
        found.append(_error(
            at('meta', 'schema_version'),
            "Schema version %r is not written as Nova's schema wants it "
            "(quoted, as '%s')." % (raw, SCHEMA_VERSION)))
    providers = document.get('providers', [])
    if not isinstance(providers, list):
        found.append(_error(at('providers'),
                            'providers must be a list of providers.'))
    return found


def identification_findings(identification: object,
                            where: str) -> list[Finding]:
    """Mirrors SCHEMA_V1's ``providerIdentification``: a mapping of
    exactly one of ``name`` (1 to 200 characters) and ``uuid`` (a UUID or
    ``$COMPUTE_NODE``).
    """
    if not isinstance(identification, dict):
        return [_error(where, 'identification must be a mapping holding '
                       'name or uuid.')]
    keys = list(identification)
    unknown = [k for k in keys if k not in ('name', 'uuid')]
    if unknown:
        return [_error(where, 'identification knows name and uuid only, '
                       'not %s.' % ', '.join(str(k) for k in unknown))]
    if len(keys) != 1:
        return [_error(where, 'identification must hold exactly one of '
                       'name and uuid, not %s.'
                       % ('both' if keys else 'none'))]
    value = identification[keys[0]]
    if keys[0] == 'name':
        if not isinstance(value, str) or not 1 <= len(value) <= _NAME_MAX:
            return [_error(where, 'The provider name %r must be text of 1 '
                           'to %d characters.' % (value, _NAME_MAX))]
    elif not isinstance(value, str) or not (
            _UUID_PATTERN.search(value) or value == COMPUTE_NODE):
        return [_error(where, 'The provider uuid %r is neither a UUID nor '
                       '%s.' % (value, COMPUTE_NODE))]
    return []


def traits_findings(traits: object, where: str) -> list[Finding]:
    """Mirrors SCHEMA_V1's ``providerTraits``: a mapping whose
    ``additional`` is a list of names matching ``^[A-Z0-9_]{1,255}$``.
    """
    if not isinstance(traits, dict):
        return [_error(where, "traits must be a mapping such as "
                       "{additional: [CUSTOM_X]}.")]
    additional = traits.get('additional', [])
    if not isinstance(additional, list):
        return [_error(where, 'traits.additional must be a list of '
                       'traits.')]
    bad = [t for t in additional
           if not isinstance(t, str) or not _NAME_PATTERN.search(t)]
    if bad:
        return [_error(where, 'Trait %s is not a trait name (upper-case '
                       'letters, digits and _, at most 255).'
                       % ', '.join(repr(t) for t in bad))]
    return []


def inventories_findings(inventories: object, where: str) -> list[Finding]:
    """Mirrors SCHEMA_V1's ``providerInventories``: ``additional`` is a
    list of ``{RESOURCE_CLASS: {total: N, ...}}``, the fields of a
    Placement inventory only, ``total`` required.
    """
    if not isinstance(inventories, dict):
        return [_error(where, 'inventories must be a mapping such as '
                       '{additional: [{CUSTOM_X: {total: 1}}]}.')]
    additional = inventories.get('additional', [])
    if not isinstance(additional, list):
        return [_error(where, 'inventories.additional must be a list.')]
    found = []
    for item in additional:
        if not isinstance(item, dict):
            # The schema lets it through; Nova then fails on it.
            if item not in ('', []):
                found.append(_error(where, 'Inventory %r is not a mapping '
                                    'of resource class to inventory.'
                                    % (item,)))
            continue
        for rc, fields in item.items():
            if not isinstance(rc, str) or not _NAME_PATTERN.search(rc):
                found.append(_error(where, 'Resource class %r is not a '
                                    'class name.' % (rc,)))
                continue
            if not isinstance(fields, dict) or 'total' not in fields:
                found.append(_error(where, 'Inventory of %s needs a total.'
                                    % rc))
                continue
            for field, value in fields.items():
                kind = _INVENTORY_FIELDS.get(field)
                if kind is None:
                    found.append(_error(where, 'Inventory of %s has no '
                                        'field %s.' % (rc, field)))
                elif not (_is_integer(value) if kind == 'integer'
                          else _is_number(value)):
                    found.append(_error(where, 'Inventory of %s: %s must be '
                                        'a%s %s.' % (rc, field,
                                                     'n' if kind[0] == 'i'
                                                     else '', kind)))
    return found


def provider_findings(provider: object, where: str) -> list[Finding]:
    """One item of ``providers`` against SCHEMA_V1: a mapping with an
    ``identification``, and ``traits`` and ``inventories`` as above.
    """
    if not isinstance(provider, dict):
        return [_error(where, 'Each provider must be a mapping with an '
                       'identification.')]
    if 'identification' not in provider:
        return [_error(where, 'The provider has no identification.')]
    found = identification_findings(provider['identification'], where)
    if 'traits' in provider:
        found += traits_findings(provider['traits'], where)
    if 'inventories' in provider:
        found += inventories_findings(provider['inventories'], where)
    return found


# -- Nova's checks after the schema ------------------------------------------

def custom_findings(entry: Entry) -> list[Finding]:
    """Mirrors ``nova.compute.provider_config._validate_provider_config``
    (its ``_validate_traits`` and ``_validate_rc``): only custom traits
    and resource classes; an entry with neither is ignored with a warning.
    """
    found = []
    standard = sorted({t for t in entry.traits if not t.startswith(_CUSTOM)})
    if standard:
        found.append(_error(entry.where, 'Only custom traits may be added '
                            'this way, not %s.' % ', '.join(standard)))
    classes = sorted({rc for rc in entry.resource_classes
                      if not rc.startswith(_CUSTOM)})
    if classes:
        found.append(_error(entry.where, 'Only custom resource classes may '
                            'be added this way, not %s.'
                            % ', '.join(classes)))
    if not entry.kept:
        found.append(Finding(WARNING, entry.where, (
            'Provider %s has no additional traits or inventories: Nova '
            'ignores it.' % entry.value)))
    return found


def placement_name_findings(entry: Entry) -> list[Finding]:
    """Trait names Nova accepts but Placement refuses (``CUSTOM_`` and
    nothing after it): nova-compute starts, and then cannot create the
    trait, so its updates of the node fail.
    """
    bad = sorted({t for t in entry.traits if t.startswith(_CUSTOM)
                  and not names.is_custom_name(t)})
    if not bad:
        return []
    return [Finding(ERROR, entry.where, (
        'Placement refuses trait %s (%s): nova-compute starts, but every '
        'update of its providers fails.'
        % (', '.join(bad), names.CUSTOM_NAME_RULE)))]


def _entry(provider: dict[str, typing.Any], source: str,
           line: int) -> Entry:
    identification = provider['identification']
    key = next(iter(identification))
    classes: list[str] = []
    for item in (provider.get('inventories') or {}).get('additional', []):
        if isinstance(item, dict):
            classes.extend(item)
    return Entry(source, line, key, identification[key],
                 tuple((provider.get('traits') or {}).get('additional', [])),
                 tuple(classes))


def parse(text: str, source: str) -> ConfigFile:
    """A ConfigFile of ``text`` (read from ``source``), by Nova's rules
    for one file.
    """
    document, node, failed = load_yaml(text, source)
    if failed:
        return ConfigFile(source, [], [failed])
    found = schema_version(document, source)
    if any(f.severity == ERROR for f in found):
        return ConfigFile(source, [], found)
    lines = _lines(node)
    found += schema_findings(document, source, lines)
    entries = []
    providers = document.get('providers', [])
    for index, provider in enumerate(
            providers if isinstance(providers, list) else ()):
        where = '%s:%d' % (source, lines.get(('providers', index), 1))
        wrong = provider_findings(provider, where)
        found += wrong
        if wrong:
            continue
        entry = _entry(provider, source, lines.get(('providers', index), 1))
        found += custom_findings(entry)
        found += placement_name_findings(entry)
        entries.append(entry)
    return ConfigFile(source, entries, found)


def duplicate_findings(files: Iterable[ConfigFile]) -> list[Finding]:
    """A provider defined twice, in one file or in two.

    Mirrors ``nova.compute.provider_config.get_provider_configs``: the
    files are read in sorted order, and a name or UUID already defined by
    an entry Nova keeps is refused (entries with no traits or inventories
    are not kept, so they do not count).
    """
    seen: dict[str, Entry] = {}
    found = []
    for config in files:
        for entry in config.entries:
            if not entry.kept:
                continue
            first = seen.setdefault(entry.value, entry)
            if first is not entry:
                found.append(_error(entry.where, (
                    'Provider %s is defined twice: here and at %s.'
                    % (entry.value, first.where))))
    return found


def ignored_file_findings(ignored: Iterable[str]) -> list[Finding]:
    """Files of a directory nova-compute does not read although they look
    like provider config files: Nova globs ``*.yaml``, so a ``.yml`` or
    ``.YAML`` file or a hidden file is silently skipped.
    """
    return [Finding(WARNING, path, (
        'nova-compute reads only the *.yaml files of the directory, not '
        'hidden ones: it ignores this file.'))
        for path in ignored
        if path.endswith(('.yml', '.YAML', '.yaml', '.YML'))]


def check_files(files: Collection[ConfigFile],
                ignored: Iterable[str] = ()) -> list[Finding]:
    """Every finding of a set of files nova-compute reads together (the
    files of its ``provider_config_location``, as ConfigFile in Nova's
    order): each file's own and the duplicates across them.
    """
    found = []
    for config in files:
        found += config.findings
    found += duplicate_findings(files)
    if not files:
        found.append(Finding(INFO, '', (
            'No provider config file: nova-compute adds no trait to its '
            'providers.')))
    return found
