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

"""What Nova's libvirt driver reads of a guest's domain definition
(nova/virt/libvirt/config.py): the domain's UUID and name and its mdevs
(``<hostdev mode='subsystem' type='mdev'>``, whose ``<source><address
uuid=.../>`` is the mdev's UUID), as ``LibvirtConfigGuest.parse_dom``
and ``LibvirtConfigGuestHostdevMDEV.parse_dom`` read them. Standard
library only; a text that is no XML raises ``GuestParseError``.
"""

from __future__ import annotations

import dataclasses
from xml.etree import ElementTree

#: Nova's name of a guest's metadata (nova/virt/libvirt/config.py
#: ``LibvirtConfigGuestMetaNovaInstance``).
NOVA_NAMESPACE = 'http://openstack.org/xmlns/libvirt/nova/1.1'


class GuestParseError(Exception):
    """A domain definition that is not XML."""


@dataclasses.dataclass(frozen=True)
class GuestHostdevMdev:
    """An mdev of a guest: its UUID (None when the definition gives
    none) and model (``vfio-pci`` unless the definition says another).
    """

    uuid: str | None
    model: str = 'vfio-pci'


@dataclasses.dataclass(frozen=True)
class Guest:
    """A guest as Nova reads its definition: the domain's UUID (Nova's
    instance UUID), its libvirt name, the server's name Nova wrote in
    the metadata (None without it) and its mdevs in order.
    """

    uuid: str | None
    name: str | None
    mdevs: tuple[GuestHostdevMdev, ...] = ()
    display_name: str | None = None


def hostdev_mdev_parse_dom(xmldoc: ElementTree.Element) -> GuestHostdevMdev:
    """Mirrors nova/virt/libvirt/config.py
    ``LibvirtConfigGuestHostdevMDEV.parse_dom``: the ``uuid`` of the
    first ``<address>`` of the first ``<source>`` that has one, the
    ``model`` attribute when set.
    """
    model = xmldoc.get('model') or 'vfio-pci'
    for child in xmldoc:
        if child.tag == 'source':
            for sub in child:
                if sub.tag == 'address':
                    return GuestHostdevMdev(sub.get('uuid'), model)
    return GuestHostdevMdev(None, model)


def _display_name(metadata: ElementTree.Element) -> str | None:
    name = metadata.find('{%s}instance/{%s}name' % (NOVA_NAMESPACE,
                                                    NOVA_NAMESPACE))
    return name.text if name is not None else None


def guest_parse_dom(xmldoc: ElementTree.Element) -> Guest:
    """Mirrors nova/virt/libvirt/config.py ``LibvirtConfigGuest.parse_dom``
    for what the mdevs need: ``<uuid>`` and ``<name>`` (its
    ``_parse_basic_props``) and each ``<hostdev type='mdev'>`` of
    ``<devices>``, whatever its mode, as Nova does; the server's name from
    Nova's ``<metadata>`` besides.
    """
    uuid = name = display = None
    mdevs = []
    for child in xmldoc:
        if child.tag == 'devices':
            mdevs += [hostdev_mdev_parse_dom(device) for device in child
                      if device.tag == 'hostdev' and
                      device.get('type') == 'mdev']
        elif child.tag == 'uuid':
            uuid = child.text
        elif child.tag == 'name':
            name = child.text
        elif child.tag == 'metadata':
            display = _display_name(child)
    return Guest(uuid, name, tuple(mdevs), display)


def guest_parse_str(text: str) -> Guest:
    """Mirrors nova/virt/libvirt/config.py ``LibvirtConfigObject.parse_str``
    for a guest (``Guest.get_config``); GuestParseError for a text that is
    not XML.
    """
    try:
        return guest_parse_dom(ElementTree.fromstring(text))
    except ElementTree.ParseError as exc:
        raise GuestParseError(str(exc)) from exc
