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

"""Read the mdev part of a nova.conf the way nova-compute does.

``[devices] enabled_mdev_types`` (old name ``enabled_vgpu_types``) lists
the types; each has a group ``[mdev_<type>]`` (old name ``[vgpu_<type>]``)
with ``device_addresses``, ``mdev_class`` and ``max_instances``. The rules
nova-compute applies when it starts are applied here too, so a file Nova
would refuse is refused before anything is written.
"""

import configparser
import dataclasses
import re

from osc_mdev.domain import names

_MDEV_CLASS_RE = re.compile(r'^(VGPU|CUSTOM_[A-Z0-9_]+)$')


class NovaConfError(ValueError):
    """The file is one nova-compute would refuse to start with."""


@dataclasses.dataclass(frozen=True)
class MdevType:
    name: str
    device_addresses: tuple
    mdev_class: str = 'VGPU'
    max_instances: int | None = None


@dataclasses.dataclass(frozen=True)
class MdevConfig:
    types: tuple                 # MdevType, in enabled_mdev_types order
    by_address: dict             # device address -> type name
    default_type: str | None     # type of every device not listed
    warnings: tuple = ()

    def type_for(self, device):
        """The type Nova gives a device (PCI address or nodedev name)."""
        return self.by_address.get(device, self.default_type)

    def mdev_class(self, type_name):
        for mdev_type in self.types:
            if mdev_type.name == type_name:
                return mdev_type.mdev_class
        return None


def _list(value):
    return tuple(item.strip() for item in value.split(',') if item.strip())


def _option(parser, groups, option):
    """First value of ``option`` in ``groups`` (new name first)."""
    for group in groups:
        if parser.has_option(group, option):
            return parser.get(group, option)
    return None


def _device_address(text, type_name, source):
    if ':' in text or names.looks_like_pci_address(text):
        try:
            return names.normalize_pci_address(text)
        except ValueError as exc:
            raise NovaConfError(
                "%s: [mdev_%s] device_addresses has %s; nova-compute refuses "
                "to start with it" % (source, type_name, exc)) from exc
    if not names.is_nodedev_name(text):
        raise NovaConfError(
            "%s: [mdev_%s] device_addresses has '%s', which is neither a PCI "
            "address nor a virtual device name such as mtty_mtty"
            % (source, type_name, text))
    return text


def parse(text, source='nova.conf'):
    """Return the MdevConfig of a nova.conf's text.

    Raises NovaConfError (with the offending address or value) for what
    nova-compute refuses: the same address under two types, malformed
    addresses, an invalid ``mdev_class`` or ``max_instances``.
    """
    parser = configparser.ConfigParser(
        strict=False, interpolation=None, default_section='__no_default__')
    try:
        parser.read_string(text, source=source)
    except configparser.Error as exc:
        raise NovaConfError('%s is not a valid INI file: %s'
                            % (source, str(exc).splitlines()[0])) from exc

    enabled = _option(parser, ['devices'], 'enabled_mdev_types')
    if enabled is None:
        enabled = _option(parser, ['devices'], 'enabled_vgpu_types')
    type_names = _list(enabled or '')

    types, by_address, warnings = [], {}, []
    default_type = None
    for type_name in type_names:
        groups = ['mdev_%s' % type_name, 'vgpu_%s' % type_name]
        mdev_class = _option(parser, groups, 'mdev_class') or 'VGPU'
        if len(mdev_class) > 255 or not _MDEV_CLASS_RE.match(mdev_class):
            raise NovaConfError(
                "%s: [mdev_%s] mdev_class = %s is invalid: use VGPU or %s"
                % (source, type_name, mdev_class, names.CUSTOM_NAME_RULE))
        max_instances = _option(parser, groups, 'max_instances')
        if max_instances is not None:
            try:
                max_instances = int(max_instances)
            except ValueError:
                max_instances = 0
            if max_instances < 1:
                raise NovaConfError(
                    '%s: [mdev_%s] max_instances must be a whole number of '
                    'at least 1' % (source, type_name))
        addresses = tuple(
            _device_address(a, type_name, source)
            for a in _list(_option(parser, groups, 'device_addresses') or ''))
        if not addresses:
            if default_type is None:
                default_type = type_name
            else:
                warnings.append(
                    '[mdev_%s] has no device_addresses and %s is already the '
                    'default type, so nova-compute does not use %s'
                    % (type_name, default_type, type_name))
                continue
        for address in addresses:
            if address in by_address:
                raise NovaConfError(
                    '%s: device %s is listed under both [mdev_%s] and '
                    '[mdev_%s]; nova-compute refuses duplicate types for a '
                    'PCI ID' % (source, address, by_address[address],
                                type_name))
            by_address[address] = type_name
        types.append(MdevType(type_name, addresses, mdev_class,
                              max_instances))
    if not types:
        raise NovaConfError(
            '%s enables no mdev type: [devices] enabled_mdev_types is '
            'empty or missing' % source)
    return MdevConfig(tuple(types), by_address, default_type,
                      tuple(warnings))
