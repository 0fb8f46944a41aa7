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

"""PCI-in-Placement GPUs next to mdev GPUs, against a real Placement.

The providers are made as nova-compute makes them with ``[pci]
report_in_placement = True`` (``<root>_<ADDRESS>``, one class,
COMPUTE_MANAGED_PCI_DEVICE and OWNER_NOVA), written with plain HTTP.
"""

import json

import pytest

from tests.fixtures import cli
from tests.fixtures import placement_data
from tests.fixtures.placement_data import Gpu

A16_VF = 'CUSTOM_PCI_10DE_25B6'     # Nova's default class of A16 VFs
L4 = 'CUSTOM_PCI_10DE_27B8'
PASSTHROUGH = 'CUSTOM_A100_PASSTHROUGH'   # set in [pci] device_spec


class Cloud:
    """An mdev host, a host with PCI-in-Placement GPUs, and a host with
    only PCI devices.
    """

    def __init__(self, pg):
        self.pg = pg
        p = self.placement = placement_data.Placement(pg.url)
        self.roots = {}
        self.mdev_gpu = Gpu('pci_0000_84_00_0', 'VGPU', 4,
                            ('CUSTOM_NVIDIA_35',))
        self.roots['mdev1'] = p.add_compute_node('mdev1', [self.mdev_gpu])
        self.mdev_server = p.boot_server(self.roots['mdev1'], self.mdev_gpu)

        root = self.roots['gpu5.dc2'] = p.add_compute_node('gpu5.dc2')
        # One provider for the 4 VFs of PF 0000:af:00.0 (an A16).
        self.vfs = p.add_pci_device(root, 'gpu5.dc2', '0000:af:00.0',
                                    A16_VF, 4, ('CUSTOM_A16_2Q',))
        # Whole GPUs: one with the class of its device spec, one default.
        self.whole = p.add_pci_device(root, 'gpu5.dc2', '0000:3b:00.0',
                                      PASSTHROUGH, 1)
        self.l4 = p.add_pci_device(root, 'gpu5.dc2', '0000:3c:00.0', L4, 1)
        # Named like a PCI device but not Nova's: no device.
        self.impostor = p.create_provider('gpu5.dc2_0000:99:00.0',
                                          parent=root)
        p.set_inventory(self.impostor, {L4: {'total': 1}})
        self.vf_servers = [p.boot_server(root, self.vfs) for _ in range(2)]
        self.whole_server = p.boot_server(root, self.whole)

        root = self.roots['gpu6'] = p.add_compute_node('gpu6')
        self.lone = p.add_pci_device(root, 'gpu6', '0000:25:00.0', L4, 2)
        self.lone_servers = [p.boot_server(root, self.lone)
                             for _ in range(2)]
        # Over capacity: the inventory shrank under its servers.
        p.set_inventory(self.lone.uuid, {L4: {
            'total': 2, 'reserved': 1, 'max_unit': 2}})


@pytest.fixture(scope='module')
def cloud(pg_placement):
    return Cloud(pg_placement)


@pytest.fixture(scope='module')
def auth(cloud):
    return cli.admin_token_args(cloud.pg.url)


def mdev(auth, *args):
    return cli.openstack(*auth, 'mdev', *args)


def listed(auth, *args):
    return mdev(auth, 'provider', 'list', '-f', 'json', *args).json()


def counted(cloud, func):
    before = cloud.pg.requests()
    result = func()
    return result, cloud.pg.requests() - before


PCI_ROWS = [
    # (host, device, kind, vendor, product, VFs of PF, class, used, free)
    ('gpu5.dc2', '0000:3b:00.0', 'pci', None, None, None, PASSTHROUGH, 1, 0),
    ('gpu5.dc2', '0000:3c:00.0', 'pci', '10de', '27b8', None, L4, 0, 1),
    ('gpu5.dc2', '0000:af:00.0', 'pci', '10de', '25b6', '0000:af:00.0',
     A16_VF, 2, 2),
    ('gpu6', '0000:25:00.0', 'pci', '10de', '27b8', '0000:25:00.0', L4, 2,
     0),
]


def _summary(rows):
    return [(r['Host'], r['Device'], r['Kind'], r['Vendor ID'],
             r['Product ID'], r['VFs of PF'], r['Resource Class'],
             r['Used'], r['Free']) for r in rows]


def test_default_list_is_mdev_only_and_unchanged(cloud, auth):
    result = mdev(auth, 'provider', 'list', '-f', 'json')
    rows = result.json()
    assert [(r['Host'], r['Device']) for r in rows] == [
        ('mdev1', '0000:84:00.0')]
    assert list(rows[0]) == ['UUID', 'Host', 'Device', 'Resource Class',
                             'Capacity', 'Used', 'Free', 'Traits']
    assert result.stderr == ''


def test_list_pci_devices(cloud, auth):
    rows = listed(auth, '--kind', 'pci')
    assert _summary(rows) == PCI_ROWS
    assert list(rows[0]) == [
        'UUID', 'Host', 'Device', 'Kind', 'Vendor ID', 'Product ID',
        'VFs of PF', 'Resource Class', 'Capacity', 'Used', 'Free',
        'State', 'Traits']
    vfs = next(r for r in rows if r['Device'] == '0000:af:00.0')
    assert vfs['UUID'] == cloud.vfs.uuid
    assert vfs['Capacity'] == 4
    assert vfs['Traits'] == ['COMPUTE_MANAGED_PCI_DEVICE', 'CUSTOM_A16_2Q',
                             'OWNER_NOVA']
    # The provider named like one but without Nova's trait is none.
    assert cloud.impostor not in [r['UUID'] for r in rows]


def test_list_all_kinds_long(cloud, auth):
    rows = listed(auth, '--kind', 'all', '--long')
    assert [(r['Host'], r['Device'], r['Kind']) for r in rows] == [
        ('gpu5.dc2', '0000:3b:00.0', 'pci'),
        ('gpu5.dc2', '0000:3c:00.0', 'pci'),
        ('gpu5.dc2', '0000:af:00.0', 'pci'),
        ('gpu6', '0000:25:00.0', 'pci'),
        ('mdev1', '0000:84:00.0', 'mdev')]
    lone = rows[3]
    assert lone['Name'] == 'gpu6_0000:25:00.0'
    assert (lone['Total'], lone['Reserved'], lone['Used'], lone['Free']) == (
        2, 1, 2, 0)
    assert rows[4]['Vendor ID'] is None and rows[4]['VFs of PF'] is None


def test_pci_filters(cloud, auth):
    rows = listed(auth, '--kind', 'pci', '--resource-class', L4, '--free')
    assert [r['Device'] for r in rows] == ['0000:3c:00.0']
    rows = listed(auth, '--kind', 'all', '--require-trait', 'CUSTOM_A16_2Q')
    assert [r['Device'] for r in rows] == ['0000:af:00.0']


def test_empty_mdev_list_points_to_pci_devices(cloud, auth):
    result = mdev(auth, 'provider', 'list', '--host', 'gpu6', '-f', 'json')
    assert result.json() == []
    assert result.stderr == (
        "Note: no mdev device matches, but 1 PCI-in-Placement device does; "
        "run 'openstack mdev provider list --kind pci' to see it.\n")
    # Not when PCI devices were asked for, nor when mdev devices match.
    assert mdev(auth, 'provider', 'list', '--host', 'mdev1').stderr == ''
    assert mdev(auth, 'provider', 'list', '--host', 'gpu6', '--kind',
                'pci').stderr == ''


@pytest.mark.parametrize('reference', [
    'gpu5.dc2:0000:AF:00.0', 'gpu5.dc2:0000:af:00.0', '0000:AF:00.0',
    'af:00.0', 'gpu5.dc2_0000:AF:00.0'])
def test_show_pci_device(cloud, auth, reference):
    shown = mdev(auth, 'provider', 'show', reference, '-f', 'json').json()
    assert shown['UUID'] == cloud.vfs.uuid
    assert shown['Kind'] == 'pci'
    assert shown['VFs of PF'] == '0000:af:00.0'
    assert (shown['Vendor ID'], shown['Product ID']) == ('10de', '25b6')
    assert sorted(c['consumer'] for c in shown['Consumers']) == sorted(
        cloud.vf_servers)


def test_show_counts(cloud, auth):
    _, by_name = counted(cloud, lambda: mdev(
        auth, 'provider', 'show', 'gpu5.dc2_0000:AF:00.0'))
    _, by_address = counted(cloud, lambda: mdev(
        auth, 'provider', 'show', 'gpu5.dc2:0000:af:00.0'))
    # host lookup, the tree, 3 reads of the device; a provider name with
    # ':' costs one more lookup.
    assert (by_address, by_name) == (5, 6)


def test_show_impostor_is_refused(cloud, auth):
    cli.assert_one_line_error(
        mdev(auth, 'provider', 'show', 'gpu5.dc2_0000:99:00.0'),
        'is named like a PCI-in-Placement device',
        'COMPUTE_MANAGED_PCI_DEVICE')


def _state(cloud):
    placement = cloud.placement
    rps = placement.request('GET', '/resource_providers')[
        'resource_providers']
    return {rp['name']: (rp['generation'],
                         sorted(placement.get_traits(rp['uuid'])))
            for rp in rps}


REFUSAL = ("Device gpu5.dc2:0000:af:00.0 is a PCI-in-Placement device, "
           "whose traits Nova replaces with its device spec's when "
           "nova-compute restarts or refreshes its provider cache, so set "
           "them with the traits tag of [pci] device_spec on that compute.")


@pytest.mark.parametrize('args', [
    ['set', '--trait', 'CUSTOM_NEW_ONE', 'gpu5.dc2:0000:AF:00.0'],
    ['set', '--trait', 'CUSTOM_NEW_ONE', 'mdev1:0000:84:00.0',
     'gpu5.dc2_0000:AF:00.0'],
    ['unset', '--trait', 'CUSTOM_A16_2Q', '0000:af:00.0'],
    ['set', '--trait', 'CUSTOM_NEW_ONE', '--dry-run',
     'gpu5.dc2:0000:af:00.0'],
])
def test_trait_write_on_pci_device_refused(cloud, auth, args):
    before = _state(cloud)
    line = cli.assert_one_line_error(mdev(auth, 'trait', *args))
    assert line == REFUSAL
    assert _state(cloud) == before
    assert 'CUSTOM_NEW_ONE' not in [
        t for t in cloud.placement.request('GET', '/traits')['traits']]


def test_trait_selection_leaves_pci_devices_out(cloud, auth):
    cli.assert_one_line_error(
        mdev(auth, 'trait', 'set', '--trait', 'CUSTOM_NEW_ONE', '--host',
             'gpu5.dc2'), 'No mdev device on host gpu5.dc2')
    before = _state(cloud)
    result = mdev(auth, 'trait', 'set', '--trait', 'CUSTOM_POOL_A', '--all',
                  '-f', 'json')
    assert [r['Device'] for r in result.json()] == ['0000:84:00.0']
    after = _state(cloud)
    changed = sorted(n for n in after if after[n] != before[n])
    assert changed == ['mdev1_pci_0000_84_00_0']
    mdev(auth, 'trait', 'unset', '--trait', 'CUSTOM_POOL_A', '--all')


def capacity(auth, *args):
    return mdev(auth, 'capacity', '-f', 'json', *args).json()


def test_capacity_counts_pci_devices(cloud, auth):
    rows = capacity(auth, '--resource-class', L4, '--amount', '1')
    by_host = {r['Host']: r for r in rows}
    assert by_host['gpu5.dc2']['Fits'] == 1
    assert by_host['gpu5.dc2']['Devices'] == ['gpu5.dc2:0000:3c:00.0']
    assert sum(r['Fits'] for r in rows) == 1
    rows = capacity(auth, '--resource-class', A16_VF)
    assert sum(r['Fits'] for r in rows) == 2
    # The whole GPU is taken: the explanation counts it as a device.
    rows = capacity(auth, '--resource-class', PASSTHROUGH)
    assert sum(r['Fits'] for r in rows) == 0
    rows = capacity(auth, '--resource-class', PASSTHROUGH, '--explain')
    steps = {r['Constraint']: r for r in rows}
    assert steps['offers %s' % PASSTHROUGH]['Devices Left'] == 1
    table = mdev(auth, 'capacity', '--resource-class', PASSTHROUGH,
                 '--explain').table()
    assert table[-2]['Constraint'] == 'Servers that fit: 0'


def test_audit_over_capacity_covers_pci(cloud, auth, tmp_path, monkeypatch):
    cli.use_cloud_without_nova(cloud.pg.url, tmp_path, monkeypatch)
    result = cli.openstack('mdev', 'audit', '-f', 'json', '--long',
                           '--host', 'gpu6')
    findings = [f for f in json.loads(result.stdout)
                if f['Check'] == 'over-capacity']
    assert [(f['Host'], f['Device'], f['Resource Class'])
            for f in findings] == [('gpu6', '0000:25:00.0', L4)]
    assert sorted(findings[0]['Server'].split(',')) == sorted(
        cloud.lone_servers)


def test_request_counts_of_a_mixed_cloud(cloud, auth):
    counts = {}
    for kind in ('mdev', 'pci', 'all'):
        _, counts[kind] = counted(
            cloud, lambda: listed(auth, '--kind', kind))
        _, counts[kind + ' --long'] = counted(
            cloud, lambda: listed(auth, '--kind', kind, '--long'))
    # listing + summaries, whatever the kind; --long adds one inventories
    # read per device shown (for Total).
    assert counts == {'mdev': 2, 'mdev --long': 2 + 1,
                      'pci': 2, 'pci --long': 2 + 4,
                      'all': 2, 'all --long': 2 + 5}
    # Without Total (-c), the count does not grow with the devices.
    _, narrow = counted(cloud, lambda: listed(
        auth, '--kind', 'all', '-c', 'Device', '-c', 'Used', '-c', 'Free',
        '-c', 'VFs of PF'))
    assert narrow == 2
