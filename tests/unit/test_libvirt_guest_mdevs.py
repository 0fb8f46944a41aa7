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

"""The mdevs of a guest's domain definition, read as Nova reads them
(``LibvirtConfigGuest.parse_str``, ``_get_all_assigned_mediated_devices``)
and checked against Nova's own functions on the same texts.
"""

import types

import pytest

from osc_mdev.nova.virt.libvirt import config
from osc_mdev.nova.virt.libvirt import driver

SERVER_A = '5b2c0e8e-7f4c-4a55-9b36-1f1c3b0f6a01'
SERVER_B = '0f2a8d3e-2b9e-4c1d-8e55-9d6f1a7c2b02'
MDEV_1 = 'c2177883-f1bb-47f0-914d-32a22e3a8804'
MDEV_2 = 'a297db4a-f4c2-11e6-90f6-d3b88d6c9525'
MDEV_3 = '8b8c1f9e-0a5d-4d27-b1a3-52f3b6a0e703'


def domain(uuid, name, hostdevs, metadata=True):
    meta = ('<metadata><nova:instance xmlns:nova="%s"><nova:name>%s'
            '</nova:name></nova:instance></metadata>'
            % (config.NOVA_NAMESPACE, name + '-server')) if metadata else ''
    return ("<domain type='kvm'><name>%s</name><uuid>%s</uuid>%s"
            '<devices><disk type="file" device="disk"/>%s</devices>'
            '</domain>' % (name, uuid, meta, ''.join(hostdevs)))


def mdev(uuid, model="model='vfio-pci' ", mode='subsystem'):
    return ("<hostdev mode='%s' type='mdev' %smanaged='no'><source>"
            "<address uuid='%s'/></source></hostdev>" % (mode, model, uuid))


PCI = ("<hostdev mode='subsystem' type='pci' managed='yes'><source>"
       "<address domain='0x0000' bus='0x84' slot='0x00' function='0x1'/>"
       '</source></hostdev>')

TEXTS = [
    domain(SERVER_A, 'instance-00000001', [mdev(MDEV_1), PCI]),
    domain(SERVER_B, 'instance-00000002',
           [mdev(MDEV_2, model="model='vfio-ccw' "), mdev(MDEV_3, model='')],
           metadata=False),
    domain(SERVER_A, 'instance-00000003', []),
    # No <source>: Nova keeps the device with no UUID.
    domain(SERVER_B, 'instance-00000004',
           ["<hostdev mode='subsystem' type='mdev'/>"]),
]


def test_a_guest_and_its_mdevs():
    guest = config.guest_parse_str(TEXTS[0])
    assert guest == config.Guest(SERVER_A, 'instance-00000001',
                                 (config.GuestHostdevMdev(MDEV_1),),
                                 'instance-00000001-server')
    other = config.guest_parse_str(TEXTS[1])
    assert other.mdevs == (config.GuestHostdevMdev(MDEV_2, 'vfio-ccw'),
                           config.GuestHostdevMdev(MDEV_3))
    assert other.display_name is None


def test_a_text_that_is_no_xml():
    with pytest.raises(config.GuestParseError):
        config.guest_parse_str('<domain><uuid>')


def test_assigned_mdevs():
    guests = [config.guest_parse_str(t) for t in TEXTS]
    assert driver.get_all_assigned_mediated_devices(guests) == {
        MDEV_1: SERVER_A, MDEV_2: SERVER_B, MDEV_3: SERVER_B,
        None: SERVER_B}


@pytest.mark.nova
@pytest.mark.parametrize('text', TEXTS)
def test_guest_parsing_matches_nova(text):
    from nova.virt.libvirt import config as nova_config

    guest = nova_config.LibvirtConfigGuest()
    guest.parse_str(text)
    nova = [(d.uuid, d.model) for d in guest.devices
            if isinstance(d, nova_config.LibvirtConfigGuestHostdevMDEV)]
    ours = config.guest_parse_str(text)
    assert [(d.uuid, d.model) for d in ours.mdevs] == nova
    assert (ours.uuid, ours.name) == (guest.uuid, guest.name)


class FakeDomain:
    """What Nova's Guest asks of a libvirt domain here."""

    def __init__(self, text):
        self.text = text

    def XMLDesc(self, flags):
        return self.text

    def UUIDString(self):
        return config.guest_parse_str(self.text).uuid


@pytest.mark.nova
def test_assigned_mdevs_match_nova():
    from nova.virt.libvirt import driver as nova_driver
    from nova.virt.libvirt import guest as nova_guest

    fake_host = types.SimpleNamespace(list_guests=lambda only_running: [
        nova_guest.Guest(FakeDomain(t)) for t in TEXTS])
    fake_driver = types.SimpleNamespace(instance_claimed_mdevs={},
                                        _host=fake_host)
    nova = nova_driver.LibvirtDriver._get_all_assigned_mediated_devices(
        fake_driver)
    ours = driver.get_all_assigned_mediated_devices(
        config.guest_parse_str(t) for t in TEXTS)
    assert ours == nova
