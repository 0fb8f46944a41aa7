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

"""``[pci] device_spec`` as nova-compute reads it: which PCI functions of
a node Nova may give to servers.

Mirrors nova/pci/devspec.py (``PciDeviceSpec``, its address specs and
its match) and the two functions of nova/pci/whitelist.py that use it
(``Whitelist._parse_white_list_from_config`` reads an option value into
specs, ``Whitelist.get_devspec`` picks a device's). What Nova reports to
Placement of the devices a spec matches is ``nova.pci.placement_translator``'s.
"""

from collections.abc import Collection
from collections.abc import Iterable
import dataclasses
import json
import re
import string
import typing

from osc_mdev.nova.conf import settings as novaconf

ANY = '*'
TYPE_PCI, TYPE_PF, TYPE_VF = 'type-PCI', 'type-PF', 'type-VF'
_TRUE = ('1', 't', 'true', 'on', 'y', 'yes')
_FALSE = ('0', 'f', 'false', 'off', 'n', 'no')
_BOOLEAN_TAGS = ('managed', 'live_migratable', 'one_time_use')
_STRING_TAGS = ('resource_class', 'traits')


def bool_from_string(value: object, strict: bool = False) -> bool:
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


def json_text(value: object) -> str:
    """A JSON value as a message shows it."""
    return json.dumps(value, sort_keys=True)


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
    def single(self) -> bool:
        """Mirrors ``PciAddressSpec.is_single_address``: every field is
        hex digits, regular expressions too (``{"bus": "25", ...}``).
        """
        return all(all(c in string.hexdigits for c in part)
                   for part in (self.domain, self.bus, self.slot, self.func))

    @property
    def function_address(self) -> str:
        """``DDDD:BB:SS.F`` of the fields as written, where Nova looks for
        a physical function (``WhitelistPciAddress
        ._check_physical_function``).
        """
        return '%s:%s:%s.%s' % (self.domain, self.bus, self.slot, self.func)

    def __str__(self) -> str:
        if self.regex:
            return '{domain: %s, bus: %s, slot: %s, function: %s}' % (
                self.domain, self.bus, self.slot, self.func)
        return '%s:%s:%s.%s' % (self.domain, self.bus, self.slot, self.func)

    def matches(self, address: str) -> bool:
        """Mirrors ``PciAddressGlobSpec.match`` and
        ``PciAddressRegexSpec.match``.
        """
        fields = zip((self.domain, self.bus, self.slot, self.func),
                     _split_address(address))
        if self.regex:
            return all(re.match(p, v) for p, v in fields)
        return all(p in (ANY, v) for p, v in fields)


def _split_address(address: str) -> tuple[str, str, str, str]:
    dbs, _, func = address.partition('.')
    domain, bus, slot = dbs.split(':')
    return domain, bus, slot, func


def _hex_field(prop: str, value: str, maxval: int, form: str) -> str:
    """Mirrors ``PciAddressSpec._set_pci_dev_info``."""
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


def parse_address_spec(address: object) -> PciAddress:
    """Mirrors ``WhitelistPciAddress._init_address_fields``
    (``PciAddressGlobSpec`` for a string, ``PciAddressRegexSpec`` for a
    dict): raises NovaConfError where Nova raises
    PciDeviceWrongAddressFormat or PciConfigInvalidSpec.
    """
    if isinstance(address, dict):
        domain, bus, slot, func = (address.get(k, '.*') for k in
                                   ('domain', 'bus', 'slot', 'function'))
        try:
            for field in (domain, bus, slot, func):
                re.compile(field)
        except (re.error, TypeError):
            raise novaconf.NovaConfError(
                'address %s is not a valid set of regular expressions'
                % json_text(address))
        return PciAddress(domain, bus, slot, func, regex=True)
    if not isinstance(address, str):
        raise novaconf.NovaConfError(
            'address %s is neither a string nor a dict' % json_text(address))
    dbs, _, func = address.partition('.')
    func = _hex_field('function', func.strip() if func else ANY, 0x7,
                      '%01x')
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


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """One entry of ``[pci] device_spec`` as Nova reads it: the ids and
    the address or ``devname`` it matches devices by, and its other tags
    (``resource_class``, ``traits``, ``physical_network``...).
    """

    where: str
    conf: dict[str, typing.Any]        # as written
    vendor_id: str                     # '%04x' or '*'
    product_id: str
    address: PciAddress | None
    devname: str | None
    tags: dict[str, typing.Any]

    def describe(self) -> str:
        parts = []
        if self.devname:
            parts.append('devname %s' % self.devname)
        elif self.address is not None:
            parts.append('address %s' % self.address)
        parts.append('%s:%s' % (self.vendor_id, self.product_id))
        return ' '.join(parts)


def device_spec_entries(text: str, where: str = '',
                        report_in_placement: bool = False
                        ) -> list[DeviceSpec]:
    """Mirrors nova/pci/whitelist.py ``Whitelist
    ._parse_white_list_from_config`` for one ``device_spec`` value: JSON
    holding a dict or a list of dicts, each read by
    :func:`device_spec` (``PciDeviceSpec``). Raises NovaConfError where
    Nova raises PciConfigInvalidSpec and nova-compute does not start.
    """
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


def _boolean_tags(tags: dict[str, typing.Any],
                  report_in_placement: bool) -> None:
    """Mirrors ``PciDeviceSpec._normalize_device_spec_tag`` and the
    one_time_use check of ``_init_dev_details``: the boolean tags become
    ``'true'`` or ``'false'`` (in ``tags``).
    """
    for tag in _BOOLEAN_TAGS:
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


def device_spec(conf: dict[str, typing.Any], where: str = '',
                report_in_placement: bool = False) -> DeviceSpec:
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
    _boolean_tags(tags, report_in_placement)
    for tag in _STRING_TAGS:
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


def spec_matches(spec: DeviceSpec, device: PciDevice,
                 physical_functions: Collection[str] = ()) -> bool:
    """Mirrors nova/pci/devspec.py ``PciDeviceSpec.match``: vendor and
    product (or ``*``), and the address; a spec naming one physical
    function's address (``physical_functions``), as a glob or as
    regular expressions, also matches its virtual functions
    (``WhitelistPciAddress.match``). ``devname`` specs match nothing
    here (Nova looks the name up on the host).
    """
    if spec.devname or spec.address is None:
        return False
    if spec.vendor_id not in (ANY, device.vendor_id):
        return False
    if spec.product_id not in (ANY, device.product_id):
        return False
    if (spec.address.single
            and spec.address.function_address in physical_functions
            and device.parent_addr
            and spec.address.matches(device.parent_addr)):
        return True
    return spec.address.matches(device.address)


def device_spec_for(specs: Iterable[DeviceSpec], device: PciDevice,
                    physical_functions: Collection[str] = ()
                    ) -> DeviceSpec | None:
    """Mirrors nova/pci/whitelist.py ``Whitelist.get_devspec``: the first
    spec that matches the device, or None.
    """
    for spec in specs:
        if spec_matches(spec, device, physical_functions):
            return spec
    return None


def physical_functions(devices: Iterable[PciDevice]) -> set[str]:
    """The addresses of the physical functions among ``devices``."""
    return {d.address for d in devices if d.dev_type == TYPE_PF}
