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

"""``[pci] alias`` and a flavor's ``pci_passthrough:alias``: what a
server asks for, as nova-api and the scheduler read it.

Mirrors nova/pci/request.py (``get_alias_from_config`` and its checks,
``_translate_alias_to_requests``) and, for the request groups the
scheduler asks Placement for with ``[filter_scheduler]
pci_in_placement``, ``RequestSpec.generate_request_groups_from_pci_requests``
(nova/objects/request_spec.py), whose class and traits are
``nova.pci.placement_translator``'s.
"""

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses
import json
import re

from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.pci import devspec
from osc_mdev.nova.pci import placement_translator as translator

DEVICE_TYPES = (devspec.TYPE_PCI, devspec.TYPE_PF, devspec.TYPE_VF)
NUMA_POLICIES = ('required', 'legacy', 'preferred', 'socket')
ALIAS_KEYS = ('name', 'capability_type', 'product_id', 'vendor_id',
              'device_type', 'numa_policy', 'resource_class', 'traits',
              'live_migratable')
_PCI_ID_RE = re.compile(r'^[\da-fA-F]{4}$')
# nova/api/validation/extra_specs/pci_passthrough.py
ALIAS_SPEC_RE = re.compile(r'[^:]+:\d+(?:\s*,\s*[^:]+:\d+)*')
ALIAS_KEY = 'pci_passthrough:alias'


class AliasError(novaconf.NovaConfError):
    """Nova's ``PciInvalidAlias``: nova-api and nova-compute refuse to
    start. ``where`` the alias is written (``[pci] alias`` when not
    known), ``reason`` what is wrong with it.
    """

    def __init__(self, where: str, reason: str):
        self.where = where or '[pci] alias'
        self.reason = reason
        super().__init__('%s: %s' % (self.where, reason))


#: One definition of an alias, as Nova keeps it (``vendor_id``,
#: ``product_id``, ``dev_type``, ``resource_class``, ``traits``...).
AliasSpec = dict[str, str]
#: A request group Nova makes of an alias device: ``({class: 1},
#: traits)``.
PciGroup = tuple[dict[str, int], frozenset[str]]


@dataclasses.dataclass(frozen=True)
class Alias:
    """One ``[pci] alias`` name as Nova reads it: a NUMA policy and its
    specs (vendor_id, product_id, dev_type, resource_class, traits...).
    """

    name: str
    numa_policy: str
    # Left out of the hash (its specs are dicts): a request for an alias
    # keys a dict, as the migration plan's Placement answers do.
    specs: tuple[AliasSpec, ...] = dataclasses.field(hash=False)
    where: str = ''

    @property
    def device_type(self) -> str | None:
        return self.specs[0].get('dev_type')

    def request_groups(self, count: int,
                       pci_in_placement: bool = True) -> list[PciGroup]:
        return alias_request_groups(self, count, pci_in_placement)

    @property
    def resource_class(self) -> str:
        spec = self.specs[0]
        return translator.pci_resource_class(spec.get('resource_class'),
                                             spec.get('vendor_id'),
                                             spec.get('product_id'))

    @property
    def traits(self) -> set[str]:
        return translator.pci_traits(self.specs[0].get('traits', ''))


def _alias_schema_problem(spec: object) -> str | None:
    """Mirrors ``_ALIAS_SCHEMA``, checked by hand."""
    if not isinstance(spec, dict):
        return '%s is not of type \'object\'' % devspec.json_text(spec)
    extra = sorted(k for k in spec if k not in ALIAS_KEYS)
    if extra:
        return ('Additional properties are not allowed (%s unexpected)'
                % ', '.join("'%s'" % k for k in extra))
    if 'name' not in spec:
        return "'name' is a required property"
    for key, value in spec.items():
        if not isinstance(value, str):
            return "%s: %s is not of type 'string'" % (
                key, devspec.json_text(value))
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


def _alias_entry(text: str, where: str) -> tuple[str, str, AliasSpec]:
    """``(name, numa_policy, spec)`` of one ``[pci] alias`` value, as the
    loop of ``get_alias_from_config`` reads it: JSON checked against
    ``_ALIAS_SCHEMA``, the name stripped, ``legacy`` for no NUMA policy,
    ``device_type`` kept as ``dev_type``, ``live_migratable`` as
    ``'true'`` or ``'false'``.
    """
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise AliasError(where, 'not valid JSON (%s)' % exc)
    problem = _alias_schema_problem(spec)
    if problem:
        raise AliasError(where, problem)
    spec = dict(spec)
    name = spec.pop('name').strip()
    numa_policy = spec.pop('numa_policy', None) or 'legacy'
    dev_type = spec.pop('device_type', None)
    if dev_type:
        spec['dev_type'] = dev_type
    if 'live_migratable' in spec:
        try:
            spec['live_migratable'] = ('true' if devspec.bool_from_string(
                spec['live_migratable'], True) else 'false')
        except ValueError:
            raise AliasError(where, 'live_migratable %s is not a boolean'
                             % spec['live_migratable'])
    return name, numa_policy, spec


def _add_alias(aliases: dict[str, Alias], name: str, numa_policy: str,
               spec: AliasSpec, where: str) -> None:
    """Mirrors ``get_alias_from_config`` adding a definition to
    ``aliases``: a name defined again must keep its NUMA policy and
    device type.
    """
    if name not in aliases:
        aliases[name] = Alias(name, numa_policy, (spec,), where)
        return
    first = aliases[name]
    if first.numa_policy != numa_policy:
        raise AliasError(where, "NUMA policy mismatch for alias '%s'" % name)
    if 'dev_type' not in first.specs[0] or 'dev_type' not in spec:
        raise AliasError(
            where, "alias '%s' is defined more than once, so every "
            "definition needs device_type (Nova fails with 'dev_type')"
            % name)
    if first.specs[0]['dev_type'] != spec['dev_type']:
        raise AliasError(where, "Device type mismatch for alias '%s'" % name)
    aliases[name] = dataclasses.replace(first, specs=first.specs + (spec,))


def _validate_multispec(aliases: Mapping[str, Alias],
                        pci_in_placement: bool) -> None:
    """Mirrors ``_validate_multispec``: with ``pci_in_placement``, one
    definition per alias.
    """
    if not pci_in_placement:
        return
    multi = [n for n, a in aliases.items() if len(a.specs) > 1]
    if multi:
        raise AliasError(
            aliases[multi[0]].where,
            'alias %s has several definitions, which [filter_scheduler] '
            'pci_in_placement does not support (give the devices one '
            'resource_class in [pci] device_spec instead)' % ','.join(multi))


def _validate_required_ids(aliases: Mapping[str, Alias],
                           pci_in_placement: bool) -> None:
    """Mirrors ``_validate_required_ids``: every definition gives
    ``vendor_id`` and ``product_id`` or, with ``pci_in_placement``, a
    ``resource_class``.
    """
    missing = sorted(
        n for n, a in aliases.items() for s in a.specs
        if not ('vendor_id' in s and 'product_id' in s)
        and not (pci_in_placement and 'resource_class' in s))
    if missing:
        raise AliasError(
            aliases[missing[0]].where,
            'alias %s has no vendor_id and product_id%s'
            % (','.join(dict.fromkeys(missing)),
               ' nor resource_class' if pci_in_placement else ''))


def pci_aliases(entries: Iterable[tuple[str, str]],
                pci_in_placement: bool = False) -> dict[str, Alias]:
    """Mirrors ``get_alias_from_config`` (and ``_validate_aliases``):
    ``{name: Alias}`` of the ``[pci] alias`` values, given as ``(text,
    where)``; entries with one name are alternatives and must agree on
    ``numa_policy`` and ``device_type``. Raises AliasError where Nova
    raises PciInvalidAlias: nova-api and nova-compute refuse to start.
    """
    aliases: dict[str, Alias] = {}
    for text, where in entries:
        name, numa_policy, spec = _alias_entry(text, where)
        _add_alias(aliases, name, numa_policy, spec, where)
    _validate_multispec(aliases, pci_in_placement)
    _validate_required_ids(aliases, pci_in_placement)
    return aliases


def parse_alias_request(text: object) -> list[tuple[str, int]]:
    """Mirrors ``_translate_alias_to_requests`` (with the API's check of
    ``pci_passthrough:alias``: ``name:count[,...]``): ``[(name,
    count)]``. Raises ValueError for a value the API refuses.
    """
    if not isinstance(text, str) or not ALIAS_SPEC_RE.fullmatch(text):
        raise ValueError(
            "'%s' is not of the form NAME:COUNT[,NAME:COUNT...]" % text)
    requests = []
    for part in text.split(','):
        name, count = part.split(':')
        requests.append((name.strip(), int(count)))
    return requests


@dataclasses.dataclass(frozen=True)
class PciRequest:
    """One ``InstancePCIRequest`` of a flavor: ``count`` devices of
    ``alias``.
    """

    alias: Alias
    count: int


class AliasNotDefined(ValueError):
    """Nova's ``PciRequestAliasNotDefined``: the flavor names aliases
    (``names``) the controller's ``[pci] alias`` does not define
    (``defined``); Nova's API refuses to boot it.
    """

    def __init__(self, names: Iterable[str], defined: Iterable[str]):
        self.names = tuple(dict.fromkeys(names))
        self.defined = tuple(sorted(defined))
        super().__init__(
            'PCI alias %s of the flavor is not defined in [pci] alias '
            '(defined: %s), so Nova refuses to boot it' % (
                ', '.join(self.names), ', '.join(self.defined) or 'none'))


def get_pci_requests_from_flavor(extra_specs: Mapping[str, str],
                                 aliases: Mapping[str, Alias]
                                 ) -> tuple[PciRequest, ...]:
    """Mirrors ``get_pci_requests_from_flavor`` (and
    ``_translate_alias_to_requests``): the PCI requests of the flavor's
    ``pci_passthrough:alias`` with the controller's ``aliases``, whatever
    ``pci_in_placement`` says. Raises ValueError for a value the API
    refuses, AliasNotDefined for an alias ``aliases`` does not define.
    """
    if ALIAS_KEY not in extra_specs:
        return ()
    requested = parse_alias_request(extra_specs[ALIAS_KEY])
    unknown = [name for name, _ in requested if name not in aliases]
    if unknown:
        raise AliasNotDefined(unknown, aliases)
    return tuple(PciRequest(aliases[name], count)
                 for name, count in requested)


def generate_request_groups_from_pci_requests(
        pci_requests: Iterable[PciRequest], pci_in_placement: bool
) -> list[list[PciGroup]]:
    """Mirrors ``RequestSpec.generate_request_groups_from_pci_requests``
    (nova/objects/request_spec.py): per PCI request, its request groups
    (``alias_request_groups``); none without ``pci_in_placement``.
    """
    return [alias_request_groups(r.alias, r.count, pci_in_placement)
            for r in pci_requests]


def alias_request_groups(alias: Alias, count: int,
                         pci_in_placement: bool = True) -> list[PciGroup]:
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
