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

"""``openstack mdev capacity`` against a cloud that real Nova schedules.

Two hosts of nvidia-12 GPUs (8 instances each), a flavor asking 4 VGPU
from one device: 2 servers per GPU, 6 in all. The counts are checked
against what Nova's scheduler does: single boots succeed exactly while
the command says one more fits, and a multi-create of N succeeds exactly
when the command's --count says so (the scheduler claims only the first
allocation candidate of each host, bug 1874664).
"""

import pytest
import requests

from tests.cloud import client
from tests.e2e.helpers import fits
from tests.fixtures import cli

TOPOLOGY = {'hosts': [
    {'name': 'cap1', 'gpus': 2, 'bus': '0x84',
     'enabled_mdev_types': ['nvidia-12']},
    {'name': 'cap2.rack1', 'gpus': 1, 'bus': '0x85',
     'enabled_mdev_types': ['nvidia-12']},
]}
NO_VALID_HOST = 'No valid host was found'


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('capacity'),
                              topology=TOPOLOGY) as cloud:
        yield cloud


@pytest.fixture(scope='module')
def flavor(cloud):
    return cloud.control('create_flavor', name='cap-vgpu4',
                         extra_specs={'resources:VGPU': '4'})['name']


def capacity(*args):
    return cli.openstack('mdev', 'capacity', *args, '-f', 'json').json()


def capacity_table(*args):
    """The rows of the table format, with its summary rows."""
    return cli.openstack('mdev', 'capacity', *args, '-f', 'table').table()


def test_01_capacity_of_an_empty_cloud(cloud, flavor):
    rows = capacity('--flavor', flavor, '--long')
    assert rows == [
        {'Host': 'cap1', 'Fits': 4,
         'Devices': ['cap1:0000:84:00.0', 'cap1:0000:84:01.0'],
         'Free': 16, 'Limit': 'VGPU'},
        {'Host': 'cap2.rack1', 'Fits': 2,
         'Devices': ['cap2.rack1:0000:85:00.0'], 'Free': 8,
         'Limit': 'VGPU'},
    ]
    assert capacity_table('--flavor', flavor, '--long')[-1] == {
        'Host': 'Total', 'Fits': '6', 'Devices': '3 devices', 'Free': '24',
        'Limit': ''}


def test_02_count_above_one_request_is_no_valid_host(cloud, flavor):
    rows = capacity('--flavor', flavor, '--count', '6')
    assert sum(r['Fits'] for r in rows) == 6
    # One request claims only the first candidate (one GPU) per host.
    total = capacity_table('--flavor', flavor, '--count', '6')[-1]
    assert (total['Host'], total['Fits'], total['One Request']) == (
        'Total', '6', '4')
    assert total['Verdict'].startswith('NoValidHost'), total
    servers = cloud.control('boot', flavor=flavor, count=6,
                            name='cap-six')
    assert {s['status'] for s in servers} == {'ERROR'}
    assert all(NO_VALID_HOST in (s['fault'] or '') for s in servers)
    assert fits(flavor) == 6


def test_03_count_within_one_request_is_placed(cloud, flavor):
    rows = capacity_table('--flavor', flavor, '--count', '4')
    assert rows[-1]['Verdict'] == 'one request of 4 servers is placed'
    servers = cloud.control('boot', flavor=flavor, count=4,
                            name='cap-four')
    assert {s['status'] for s in servers} == {'ACTIVE'}, servers
    assert fits(flavor) == 2


def test_04_boot_until_no_valid_host(cloud, flavor):
    left = fits(flavor)
    booted = 0
    while True:
        server, = cloud.control('boot', flavor=flavor,
                                name='cap-one-%d' % booted)
        if server['status'] != 'ACTIVE':
            assert NO_VALID_HOST in (server['fault'] or ''), server
            break
        booted += 1
        assert fits(flavor) == left - booted
        assert booted <= 10, 'the cloud never filled up'
    # Nova said NoValidHost exactly when the command said none fit.
    assert booted == left
    assert fits(flavor) == 0


def test_05_no_valid_host_keeps_the_host_rows(cloud, flavor):
    """After Nova's NoValidHost the answer is still a count: every host
    with Fits 0, whatever the format.
    """
    result = cli.openstack('mdev', 'capacity', '--flavor', flavor,
                           '-f', 'value', '-c', 'Fits')
    assert (result.rc, result.stdout) == (0, '0\n0\n'), result.stderr
    assert capacity('--flavor', flavor) == [
        {'Host': 'cap1', 'Fits': 0, 'Devices': [], 'Free': 0},
        {'Host': 'cap2.rack1', 'Fits': 0, 'Devices': [], 'Free': 0}]
    table = cli.openstack('mdev', 'capacity', '--flavor', flavor)
    assert table.rc == 0, table.stderr
    assert table.table()[-1] == {'Host': 'Total', 'Fits': '0',
                                 'Devices': '0 devices', 'Free': '0'}
    # The table (only) points to the explanation.
    assert '--explain' in table.stderr
    assert '--explain' not in result.stderr


def test_05_no_valid_host_is_explained(cloud, flavor):
    rows = capacity('--flavor', flavor, '--explain')
    steps = {r['Constraint']: r for r in rows}
    assert steps['room for 4 VGPU']['Devices Ruled Out'] == 3
    assert steps['room for 4 VGPU']['Hosts Left'] == 0
    # The summary is in the table only: JSON holds the steps.
    assert not [r for r in rows if r['Constraint'].startswith(
        ('Servers that fit', 'Smallest change'))]
    table = capacity_table('--flavor', flavor, '--explain')
    assert table[-2]['Constraint'] == 'Servers that fit: 0'
    assert table[-1]['Constraint'].startswith('Smallest change: free ')


def compute(cloud, method, path, **kwargs):
    rsp = requests.request(
        method, cloud.compute_url + path, timeout=60,
        headers={'X-Auth-Token': 'admin',
                 'OpenStack-API-Version': 'compute 2.53'}, **kwargs)
    rsp.raise_for_status()
    return rsp.json() if rsp.content else None


def set_service(cloud, host, status):
    service, = compute(cloud, 'GET', '/os-services?binary=nova-compute'
                       '&host=%s' % host)['services']
    compute(cloud, 'PUT', '/os-services/%s' % service['id'],
            json={'status': status})


def test_06_disabled_compute_service_fits_nothing(cloud, flavor):
    host = 'cap2.rack1'
    on_host = compute(cloud, 'GET', '/servers/detail?all_tenants=1&host=%s'
                      % host)['servers']
    for server in on_host:
        cloud.control('delete', server=server['id'])
    assert fits(flavor) == 2
    set_service(cloud, host, 'disabled')
    try:
        rows = capacity('--flavor', flavor, '--explain')
        steps = {r['Constraint']: r for r in rows}
        disabled = steps['compute service enabled (root without '
                         'COMPUTE_STATUS_DISABLED)']
        assert (disabled['Hosts Ruled Out'], disabled['Hosts Left']) == (
            1, 0)
        assert capacity_table('--flavor', flavor, '--explain')[-1][
            'Constraint'] == (
            'Smallest change: enable the compute service of %s' % host)
        server, = cloud.control('boot', flavor=flavor, name='cap-disabled')
        assert NO_VALID_HOST in (server['fault'] or ''), server
    finally:
        set_service(cloud, host, 'enabled')
    assert fits(flavor) == 2


def test_07_several_flavors_share_one_table(cloud, flavor):
    cloud.control('create_flavor', name='cap-plain')
    rows = capacity('--flavor', flavor, '--flavor', 'cap-plain')
    assert {r['Flavor'] for r in rows} == {flavor, 'cap-plain'}
    totals = {name: sum(r['Fits'] for r in rows if r['Flavor'] == name)
              for name in (flavor, 'cap-plain')}
    # No GPU left for the vGPU flavor; a flavor without mdevs still fits.
    assert totals[flavor] == 2 and totals['cap-plain'] > 0
    # The table sums each flavor's hosts in a Total row.
    table = capacity_table('--flavor', flavor, '--flavor', 'cap-plain')
    assert {r['Flavor']: int(r['Fits']) for r in table
            if r['Host'] == 'Total'} == totals
