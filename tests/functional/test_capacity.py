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

"""``openstack mdev capacity`` against a real Placement.

Every answer is checked against Placement itself: for each host said to
fit N more servers, ``GET /allocation_candidates`` for the same request
limited to that tree has a candidate, and claiming its first candidate N
times (as the scheduler claims) succeeds while the N+1th finds none; a
host said to be full has no candidate.
"""

import uuid as uuidlib

import pytest

from tests.fixtures import cli
from tests.fixtures import placement_data
from tests.fixtures.placement_data import Gpu

ROOT_QUERY = 'OWNER_NOVA,!COMPUTE_STATUS_DISABLED'


class Cloud:
    """Hosts laid out the way Nova reports them, with usage, traits, a
    disabled compute node and a device whose max_unit is below its total.
    """

    def __init__(self, placement):
        self.placement = placement
        self.roots = {}
        self.gpus = {}
        layout = {
            'cap1': [Gpu('pci_0000_84_00_0', 'VGPU', 4,
                         ('CUSTOM_NVIDIA_11',)),
                     Gpu('pci_0000_85_00_0', 'VGPU', 4)],
            'cap2.example.com': [Gpu('pci_0000_84_00_0', 'VGPU', 2),
                                 Gpu('pci_0000_85_00_0', 'VGPU', 2,
                                     ('CUSTOM_NVIDIA_11',))],
            'cap_3': [Gpu('pci_0000_3b_00_0', 'CUSTOM_MLX5', 8),
                      Gpu('pci_0000_3c_00_0', 'VGPU', 3)],
            'cap4': [Gpu('pci_0000_84_00_0', 'VGPU', 16)],
            'cap5': [Gpu('pci_0000_84_00_0', 'VGPU', 2)],
            'plain': [],
        }
        for host, gpus in layout.items():
            self.roots[host] = placement.add_compute_node(host, gpus)
            for gpu in gpus:
                self.gpus[(host, gpu.nodedev)] = gpu
        # Usage: cap1's first GPU has 1 of 4 used, cap2's first is full.
        placement.boot_server(self.roots['cap1'],
                              self.gpus[('cap1', 'pci_0000_84_00_0')])
        for _ in range(2):
            placement.boot_server(
                self.roots['cap2.example.com'],
                self.gpus[('cap2.example.com', 'pci_0000_84_00_0')])
        # cap_3's VGPU device gives at most 1 per allocation.
        gpu = self.gpus[('cap_3', 'pci_0000_3c_00_0')]
        placement.set_inventory(gpu.uuid, {'VGPU': {
            'total': 3, 'max_unit': 1}})
        # cap5 has no free VCPU: only its free memory puts it in an
        # allocation candidate summary.
        for _ in range(4):
            placement.allocate(str(uuidlib.uuid4()),
                               {self.roots['cap5']: {'VCPU': 64}})
        # cap4's compute service is disabled: Nova sets the trait.
        placement.set_traits(self.roots['cap4'], placement_data.ROOT_TRAITS
                             + ['COMPUTE_STATUS_DISABLED'])


@pytest.fixture(scope='module')
def cloud(placement):
    return Cloud(placement)


def capacity(auth, *args):
    return cli.openstack(*auth, 'mdev', 'capacity', *args)


def capacity_rows(auth, *args):
    return capacity(auth, *args, '-f', 'json').json()


def capacity_table(auth, *args):
    """The rows of the table format, its summary rows included."""
    return capacity(auth, *args, '-f', 'table').table()


# Bare requests: (command arguments, allocation candidate parameters).
REQUESTS = {
    'one VGPU': (
        ['--resource-class', 'VGPU'],
        {'resources': 'VGPU:1'}),
    'two VGPU from one device': (
        ['--resource-class', 'VGPU', '--amount', '2'],
        {'resources': 'VGPU:2'}),
    'two VGPU spread': (
        ['--resource-class', 'VGPU', '--amount', '2', '--spread'],
        {'resources1': 'VGPU:1', 'resources2': 'VGPU:1',
         'group_policy': 'isolate'}),
    'required trait': (
        ['--resource-class', 'VGPU', '--require-trait', 'CUSTOM_NVIDIA_11'],
        {'resources': 'VGPU:1', 'required': 'CUSTOM_NVIDIA_11'}),
    'forbidden trait': (
        ['--resource-class', 'VGPU', '--forbid-trait', 'CUSTOM_NVIDIA_11'],
        {'resources': 'VGPU:1', 'required': '!CUSTOM_NVIDIA_11'}),
    'trait on the root only': (
        ['--resource-class', 'VGPU', '--require-trait', 'HW_CPU_X86_AVX2'],
        {'resources': 'VGPU:1', 'required': 'HW_CPU_X86_AVX2'}),
    'custom class, three': (
        ['--resource-class', 'CUSTOM_MLX5', '--amount', '3'],
        {'resources': 'CUSTOM_MLX5:3'}),
}


def candidates(placement, params, root):
    return placement.candidates_in_tree(
        dict(params, root_required=ROOT_QUERY).items(), root)


@pytest.mark.parametrize('name', sorted(REQUESTS))
def test_fits_agree_with_allocation_candidates(cloud, auth, name):
    args, params = REQUESTS[name]
    rows = capacity_rows(auth, *args, '--long')
    assert rows, rows
    table = capacity_table(auth, *args, '--long')
    # Host rows even where nothing fits (Fits 0); the total is a row of
    # the table only.
    total = table.pop()
    assert total['Host'] == 'Total'
    assert int(total['Fits']) == sum(r['Fits'] for r in rows)
    assert [r['Host'] for r in table] == [r['Host'] for r in rows]
    listed = {r['Host'] for r in rows}
    # Hosts without any mdev device are not listed for a bare request.
    assert 'plain' not in listed
    for row in rows:
        root = cloud.roots[row['Host']]
        assert cloud.placement.claim_until_full(
            dict(params, root_required=ROOT_QUERY).items(), root) == \
            row['Fits'], row
    for host, root in cloud.roots.items():
        if host not in listed:
            assert not candidates(cloud.placement, params, root)[
                'allocation_requests'], host


def test_one_vgpu_rows(cloud, auth):
    rows = capacity_rows(auth, '--resource-class', 'VGPU', '--long')
    assert rows == [
        {'Host': 'cap1', 'Fits': 7,
         'Devices': ['cap1:0000:84:00.0', 'cap1:0000:85:00.0'],
         'Free': 7, 'Limit': 'VGPU'},
        {'Host': 'cap2.example.com', 'Fits': 2,
         'Devices': ['cap2.example.com:0000:85:00.0'], 'Free': 2,
         'Limit': 'VGPU'},
        {'Host': 'cap4', 'Fits': 0, 'Devices': [], 'Free': 16,
         'Limit': 'compute disabled'},
        {'Host': 'cap5', 'Fits': 2,
         'Devices': ['cap5:0000:84:00.0'], 'Free': 2, 'Limit': 'VGPU'},
        {'Host': 'cap_3', 'Fits': 3,
         'Devices': ['cap_3:0000:3c:00.0'], 'Free': 3, 'Limit': 'VGPU'},
    ]
    assert capacity_table(auth, '--resource-class', 'VGPU', '--long')[
        -1] == {'Host': 'Total', 'Fits': '14', 'Devices': '5 devices',
                'Free': '30', 'Limit': ''}


def test_host_filter(cloud, auth):
    rows = capacity_rows(auth, '--resource-class', 'VGPU', '--host', 'cap1')
    assert [(r['Host'], r['Fits']) for r in rows] == [('cap1', 7)]
    table = capacity_table(auth, '--resource-class', 'VGPU', '--host', 'cap1')
    assert [(r['Host'], r['Fits']) for r in table] == [
        ('cap1', '7'), ('Total', '7')]


def test_explain_names_the_constraint_and_the_fix(cloud, auth):
    rows = capacity_rows(auth, '--resource-class', 'VGPU', '--amount', '4',
                         '--require-trait', 'CUSTOM_NVIDIA_11', '--explain')
    steps = {r['Constraint']: r for r in rows}
    assert steps['offers VGPU'] == {
        'Constraint': 'offers VGPU', 'Devices Ruled Out': 1,
        'Hosts Ruled Out': 0, 'Devices Left': 7, 'Hosts Left': 5}
    assert steps['required trait CUSTOM_NVIDIA_11'] == {
        'Constraint': 'required trait CUSTOM_NVIDIA_11',
        'Devices Ruled Out': 5, 'Hosts Ruled Out': 3,
        'Devices Left': 2, 'Hosts Left': 2}
    assert steps['room for 4 VGPU']['Hosts Left'] == 0
    # The summary is in the table only: JSON holds the steps.
    assert not [r for r in rows if r['Constraint'].startswith(
        ('Servers that fit', 'Smallest change'))]
    table = capacity_table(auth, '--resource-class', 'VGPU', '--amount', '4',
                           '--require-trait', 'CUSTOM_NVIDIA_11', '--explain')
    assert table[:-2] == [{k: str(v) for k, v in r.items()} for r in rows]
    assert table[-2]['Constraint'] == 'Servers that fit: 0'
    assert table[-1]['Constraint'] == (
        'Smallest change: tag cap1:0000:85:00.0 with CUSTOM_NVIDIA_11')


def test_explain_on_request_when_servers_fit(cloud, auth):
    rows = capacity_rows(auth, '--resource-class', 'VGPU', '--explain')
    table = capacity_table(auth, '--resource-class', 'VGPU', '--explain')
    assert table[-2]['Constraint'] == 'Servers that fit: 14'
    assert table[-1]['Constraint'] == 'Smallest change: none needed'
    disabled = next(r for r in rows
                    if r['Constraint'].startswith('compute service'))
    assert disabled['Hosts Ruled Out'] == 1


def test_count_with_a_bare_request(cloud, auth):
    rows = capacity_rows(auth, '--resource-class', 'VGPU', '--count', '5')
    assert all('One Request' in r for r in rows)
    assert 'Verdict' not in rows[0] and 'Total' not in {
        r['Host'] for r in rows}
    total = capacity_table(auth, '--resource-class', 'VGPU', '--count',
                           '5')[-1]
    assert total['Host'] == 'Total'
    # One request claims each host's first candidate only.
    assert int(total['One Request']) <= 5
    assert total['Verdict']


@pytest.mark.parametrize('args, message', [
    ([], 'Give --flavor'),
    (['--resource-class', 'VGPU', '--amount', '0'], 'at least 1'),
    (['--resource-class', 'vgpu'], 'vgpu'),
    (['--resource-class', 'VGPU', '--require-trait', 'CUSTOM_A',
      '--forbid-trait', 'CUSTOM_A'], 'both required and forbidden'),
    (['--resource-class', 'VGPU', '--count', '0'], 'at least 1'),
    (['--resource-class', 'VGPU', '--host', 'nosuch'], 'nosuch'),
    (['--resource-class', 'VGPU', '--controller-conf', 'nova.conf'],
     '--controller-conf gives the PCI aliases of a flavor'),
    (['--flavor', 'f', '--controller-conf', '/nonexistent/nova.conf'],
     '/nonexistent/nova.conf'),
])
def test_bad_input_is_one_line(cloud, auth, args, message):
    cli.assert_one_line_error(capacity(auth, *args), message)


def spent(placement_url, *args):
    before = placement_data.server_stats(placement_url)['requests']
    capacity_rows(*args)
    return placement_data.server_stats(placement_url)['requests'] - before


def test_requests_do_not_grow_with_devices(cloud, auth, placement_url):
    # The listing, one allocation candidate summary (anchored on memory:
    # cap5, whose VCPUs are all used, is in it), one ?resources= listing
    # for the amount.
    assert spent(placement_url, auth, '--resource-class', 'VGPU') == 3
    # A second amount is one more listing; a host limit reads no less.
    assert spent(placement_url, auth, '--resource-class', 'VGPU',
                 '--amount', '2', '--spread') == 3
    assert spent(placement_url, auth, '--resource-class', 'VGPU',
                 '--host', 'cap1') == 3


def test_a_class_placement_does_not_have_fits_nowhere(cloud, auth,
                                                      placement_url):
    """Placement refuses ``?resources=`` naming a class it does not have
    (400): nobody can take it, and the command says so.
    """
    before = placement_data.server_stats(placement_url)['requests']
    rows = capacity_rows(auth, '--resource-class', 'CUSTOM_NOBODY_HAS')
    # The listing, the summary, the refused ?resources= listing and the
    # read of the class that tells why.
    assert placement_data.server_stats(placement_url)['requests'] \
        - before == 4
    # Every host with devices, none with room.
    assert [(r['Host'], r['Fits']) for r in rows] == [
        (host, 0) for host in sorted(cloud.roots) if host != 'plain']
    result = capacity(auth, '--resource-class', 'CUSTOM_NOBODY_HAS',
                      '--explain', '-f', 'table')
    assert result.rc == 0, result.stderr
    # The summary (servers that fit) is a row of the table format only.
    steps = {r['Constraint']: r for r in result.table()}
    assert steps['offers CUSTOM_NOBODY_HAS']['Hosts Left'] == '0'
    assert 'Servers that fit: 0' in steps
