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

"""The PCI part of a nova.conf: PCI devices in Placement, as Nova reads it.

``[pci] device_spec`` (old names ``[pci] passthrough_whitelist`` and
``[DEFAULT] pci_passthrough_whitelist``) says which PCI devices Nova may
give to servers; with ``[pci] report_in_placement`` nova-compute reports
them to Placement, one provider per PCI or physical function named
``<node>_<ADDRESS>``. ``[pci] alias`` names what a flavor asks for with
``pci_passthrough:alias``; with ``[filter_scheduler] pci_in_placement``
the scheduler asks Placement for it.

The options are read by ``novaconf.parse_texts`` (oslo.config, with
their deprecated names); each rule Nova applies to them is one function
below whose docstring names the Nova function it mirrors.
"""

import dataclasses
import re

from osc_mdev.domain import names
from osc_mdev.domain import novaconf

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
        raise novaconf.NovaConfError(
            "%s '%s' is not a hex number" % (prop, value))
    if number > maxval:
        raise novaconf.NovaConfError('%s %s is greater than the maximum %X'
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
            raise novaconf.NovaConfError(
                'address %s is not a valid set of regular expressions'
                % json_text(address))
        return PciAddress(*fields, regex=True)
    if not isinstance(address, str):
        raise novaconf.NovaConfError(
            'address %s is neither a string nor a dict' % json_text(address))
    dbs, _, func = address.partition('.')
    func = func.strip() or ANY
    func = _hex_field('function', func, 0x7, '%01x')
    fields = [ANY, ANY, ANY]
    if dbs:
        parts = dbs.split(':')
        if len(parts) > 3:
            raise novaconf.NovaConfError(
                "address '%s' has more than three ':' fields" % address)
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
        raise novaconf.NovaConfError('not valid JSON (%s)' % exc)
    if isinstance(value, dict):
        value = [value]
    elif not isinstance(value, list):
        raise novaconf.NovaConfError(
            'expecting a JSON object or a list of them')
    specs = []
    for entry in value:
        if not isinstance(entry, dict):
            raise novaconf.NovaConfError(
                '%s is not a JSON object' % json_text(entry))
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
        raise novaconf.NovaConfError(
            'vendor_id and product_id must be strings')
    vendor = _hex_field('vendor_id', vendor.strip(), 0xFFFF, '%04x')
    product = _hex_field('product_id', product, 0xFFFF, '%04x')
    if address and devname:
        raise novaconf.NovaConfError(
            'devname and address cannot both be given')
    parsed = None
    if not devname:
        parsed = parse_address_spec(address or '*:*:*.*')
    for tag in ('managed', 'live_migratable', 'one_time_use'):
        if tags.get(tag) is not None:
            try:
                tags[tag] = ('true' if bool_from_string(tags[tag], True)
                             else 'false')
            except ValueError:
                raise novaconf.NovaConfError("tag %s = %s is not a boolean"
                                             % (tag, json_text(tags[tag])))
    if tags.get('one_time_use') == 'true' and not report_in_placement:
        raise novaconf.NovaConfError('one_time_use = true needs [pci] '
                                     'report_in_placement = True')
    for tag in ('resource_class', 'traits'):
        if tag in tags and not isinstance(tags[tag], str):
            raise novaconf.NovaConfError('%s must be a string (traits: comma-'
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
            raise novaconf.NovaConfError(
                '%s: not valid JSON (%s)' % (where_, exc))
        problem = _alias_schema_problem(spec)
        if problem:
            raise novaconf.NovaConfError('%s: %s' % (where_, problem))
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
                raise novaconf.NovaConfError(
                    '%s: live_migratable %s is not a boolean'
                    % (where_, spec['live_migratable']))
        if name not in aliases:
            aliases[name] = Alias(name, numa_policy, (spec,), where_)
            continue
        first = aliases[name]
        if first.numa_policy != numa_policy:
            raise novaconf.NovaConfError(
                "%s: NUMA policy mismatch for alias '%s'" % (where_, name))
        if 'dev_type' not in first.specs[0] or 'dev_type' not in spec:
            raise novaconf.NovaConfError(
                "%s: alias '%s' is defined more than once, so every "
                "definition needs device_type (Nova fails with 'dev_type')"
                % (where_, name))
        if first.specs[0]['dev_type'] != spec['dev_type']:
            raise novaconf.NovaConfError(
                "%s: Device type mismatch for alias '%s'" % (where_, name))
        aliases[name] = dataclasses.replace(first,
                                            specs=first.specs + (spec,))
    if pci_in_placement:
        multi = [n for n, a in aliases.items() if len(a.specs) > 1]
        if multi:
            raise novaconf.NovaConfError(
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
        raise novaconf.NovaConfError(
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
    settings: novaconf.Settings | None = None

    @property
    def configured(self) -> bool:
        """Whether the files give Nova PCI devices to handle: a device
        spec, an alias, or PCI in Placement turned on (off, written or
        not, is Nova's default), or a value Nova refuses.
        """
        pci = self.settings.pci if self.settings else {}
        return bool(pci.get('device_spec') or pci.get('alias') or
                    self.report_in_placement or self.pci_in_placement or
                    self.findings)


def _entry_where(occ, option):
    if occ is None:
        return '[pci] %s' % option
    return novaconf.where(occ.section, occ.name, occ)


def pci_config(settings):
    """The PciConfig of parsed files (``novaconf.parse_texts``)."""
    pci = settings.pci
    findings = []
    flags = {}
    for name in ('report_in_placement', 'pci_in_placement'):
        value = pci[name]
        flags[name] = bool(novaconf.checked(value, findings, False))
    specs = []
    for text, occ in pci['device_spec']:
        here = _entry_where(occ, 'device_spec')
        try:
            specs.extend(device_spec_entries(
                text, here, flags['report_in_placement']))
        except novaconf.NovaConfError as exc:
            findings.append(novaconf.Finding(
                novaconf.ERROR, here, 'nova-compute refuses to start: invalid '
                '[pci] device_spec (%s); fix or remove this entry.' % exc))
    aliases = {}
    entries = [(text, _entry_where(occ, 'alias'))
               for text, occ in pci['alias']]
    try:
        aliases = pci_aliases(entries, flags['pci_in_placement'])
    except novaconf.NovaConfError as exc:
        text = str(exc)
        here, _, reason = text.partition(': ') if text.startswith('[') \
            else ('[pci] alias', '', text)
        findings.append(novaconf.Finding(
            novaconf.ERROR, here, 'nova-api and nova-compute refuse to '
            'start: invalid [pci] alias (%s); fix the alias.' % reason))
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
