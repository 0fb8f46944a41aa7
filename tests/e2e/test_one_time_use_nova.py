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

"""One-time-use devices on a cloud real Nova runs: a host with two whole
GPUs (``type-PCI``, ``10de:2330``) whose ``[pci] device_spec`` sets
``"one_time_use": "true"``, booted on by a ``pci_passthrough:alias``
flavor. Nova reserves a device while a server holds it and leaves it so
after the server is gone; ``provider list`` says so, ``audit`` and
``metrics`` report it, ``provider release`` gives it back (never while in
use) and Nova boots on it again. Which device each server got is the
fake hypervisor's record (``pci_truth``).
"""

import json

import pytest

from tests.e2e.helpers import mdev
from tests.e2e.helpers import mdev_json
from tests.e2e.helpers import placement_request

HOST = 'otu1'
RC = 'CUSTOM_PCI_10DE_2330'
# The module's cloud (tests/e2e/conftest.py) runs on this topology.
TOPOLOGY = {
    'hosts': [{'name': HOST, 'gpus': 0, 'bus': '0x41',
               'pci': {'whole': [{'count': 2, 'product_id': '2330'}],
                       'device_spec': [{'vendor_id': '10de',
                                        'product_id': '2330',
                                        'one_time_use': 'true'}]}}],
    'pci_alias': [{'name': 'h100', 'vendor_id': '10de',
                   'product_id': '2330', 'device_type': 'type-PCI'}],
}
FIRST, SECOND = '0000:41:00.0', '0000:41:01.0'
IN_USE, FREE, TO_CLEAN = 'in use', 'free', 'used once, to clean'


@pytest.fixture(scope='module')
def flavor(cloud):
    return cloud.control('create_flavor', name='h100', extra_specs={
        'pci_passthrough:alias': 'h100:1'})['id']


def boot(cloud, flavor, status='ACTIVE'):
    server, = cloud.control('boot', flavor=flavor)
    assert server['status'] == status, server.get('fault')
    return server


def device_of(cloud, server):
    """The device the fake hypervisor gave the server."""
    found = [d['pci_address'] for d in cloud.control('pci_truth')
             if d['server'] == server['id']]
    assert len(found) == 1, found
    return found[0]


def states(*args):
    return {r['Device']: r['State'] for r in mdev_json(
        'provider', 'list', '--kind', 'pci', *args)}


def reserved(cloud):
    """``{device: reserved}`` as Nova left them in Placement."""
    found = {}
    for p in placement_request(cloud, 'GET', '/resource_providers')[
            'resource_providers']:
        if p['name'].startswith(HOST + '_'):
            inventory = placement_request(
                cloud, 'GET', '/resource_providers/%s/inventories'
                % p['uuid'])['inventories'][RC]
            found[p['name'][len(HOST) + 1:].lower()] = inventory['reserved']
    return found


def test_used_once_waits_is_released_and_boots_again(cloud, flavor):
    assert states() == {FIRST: FREE, SECOND: FREE}
    traits = mdev_json('provider', 'show', '%s:%s' % (HOST, FIRST))['Traits']
    assert 'HW_PCI_ONE_TIME_USE' in traits

    first = boot(cloud, flavor)
    used = device_of(cloud, first)
    other = SECOND if used == FIRST else FIRST
    # Nova reserves the device while the server holds it.
    assert reserved(cloud) == {used: 1, other: 0}
    assert states() == {used: IN_USE, other: FREE}

    # A device in use is never released.
    result = mdev('provider', 'release', '%s:%s' % (HOST, used), '-f',
                  'json')
    assert result.rc == 1
    assert [r['Result'] for r in json.loads(result.stdout)] == [
        'refused: in use']
    assert mdev_json('provider', 'release', '--all') == []
    assert reserved(cloud) == {used: 1, other: 0}

    cloud.control('delete', server=first['id'])
    # Gone, its device stays reserved, through Nova's periodic update.
    cloud.control('periodic')
    assert reserved(cloud) == {used: 1, other: 0}
    assert states() == {used: TO_CLEAN, other: FREE}
    assert mdev_json('provider', 'show', '%s:%s' % (HOST, used))[
        'State'] == TO_CLEAN
    findings = [f for f in mdev_json('audit')
                if f['Check'] == 'waiting-to-clean']
    assert [f['Device'] for f in findings] == [used]
    waiting = {line.split('device="')[1].split('"')[0]: line.split()[-1]
               for line in mdev('metrics').stdout.splitlines()
               if line.startswith('openstack_mdev_device_waiting_to_clean{')}
    assert waiting == {used: '1.0', other: '0.0'}

    # The other device takes the next server; then nothing is left.
    second = boot(cloud, flavor)
    assert device_of(cloud, second) == other
    refused = boot(cloud, flavor, status='ERROR')
    assert 'No valid host' in str(refused['fault'])
    cloud.control('delete', server=refused['id'])

    # Cleaned: released, only the waiting one (the other is in use).
    rows = mdev_json('provider', 'release', '--all')
    assert [(r['Device'], r['Result']) for r in rows] == [
        (used, 'released')]
    assert reserved(cloud) == {used: 0, other: 1}
    assert states() == {used: FREE, other: IN_USE}

    # Nova boots on it again.
    third = boot(cloud, flavor)
    assert device_of(cloud, third) == used
    assert states() == {used: IN_USE, other: IN_USE}
    for server in (second, third):
        cloud.control('delete', server=server['id'])
    cloud.control('periodic')
    # Each was used once more: both wait again.
    assert states() == {used: TO_CLEAN, other: TO_CLEAN}
