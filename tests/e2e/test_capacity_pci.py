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

"""``openstack mdev capacity --flavor`` for a flavor with
``pci_passthrough:alias``, on the demo cloud's PCI-in-Placement host
``sriov1`` (2 PFs of 4 L40S VFs, alias ``l40s-vf``), scheduled by real
Nova with ``[filter_scheduler] pci_in_placement``: single boots succeed
exactly while the command says one more fits.
"""

import pytest

from osc_mdev.api import http
from tests.e2e import helpers
from tests.e2e.helpers import mdev
from tests.e2e.helpers import mdev_json
from tests.e2e.helpers import mdev_table
from tests.fixtures import cli

NO_VALID_HOST = 'No valid host was found'
L40S = 'CUSTOM_NVIDIA_L40S_VF'


@pytest.fixture(scope='module')
def flavor(cloud):
    return cloud.control(
        'create_flavor', name='cap-l40s-2',
        extra_specs={'pci_passthrough:alias': 'l40s-vf:2'})['name']


def fits(flavor, controller):
    return helpers.fits(flavor, '--controller-conf', controller, '--host',
                        'sriov1')


def test_01_alias_flavor_needs_the_controller_conf(cloud, flavor):
    cli.assert_one_line_error(
        mdev('capacity', '--flavor', flavor),
        'asks for PCI devices (pci_passthrough:alias=l40s-vf:2)',
        "controller's [pci] alias", '--controller-conf')


def test_02_capacity_of_the_empty_host(cloud, flavor, controller,
                                       monkeypatch):
    calls = []
    real = http.Service.request

    def counting(self, method, url, *args, **kwargs):
        calls.append((self.service_type, method, url))
        return real(self, method, url, *args, **kwargs)

    monkeypatch.setattr(http.Service, 'request', counting)
    rows = mdev_json('capacity', '--flavor', flavor, '--controller-conf',
                     controller, '--long')
    monkeypatch.undo()
    by_host = {r['Host']: r for r in rows}
    # 8 VFs, 2 per server from either PF (group_policy none).
    assert by_host['sriov1'] == {
        'Host': 'sriov1', 'Fits': 4,
        'Devices': ['sriov1:0000:c1:00.0', 'sriov1:0000:c1:01.0'],
        'Free': 8, 'Limit': L40S}
    assert {h: r['Fits'] for h, r in by_host.items()
            if h != 'sriov1'} == dict.fromkeys(set(by_host) - {'sriov1'}, 0)
    assert sum(r['Fits'] for r in rows) == 4
    placement = [c for c in calls if c[0] == 'placement']
    compute = [c for c in calls if c[0] == 'compute']
    # The listing, the tree summaries, and the unit rules in two flat
    # ?resources= listings: the compute node's classes together (VCPU:1,
    # MEMORY_MB:512, DISK_GB:1) and the VF's CUSTOM_NVIDIA_L40S_VF:1 (the
    # same for both groups); the flavor and the compute services. None
    # grows with the devices or with the amounts the flavor asks.
    print('capacity --flavor (alias) requests: placement %d, compute %d'
          % (len(placement), len(compute)))
    assert len(placement) == 4, placement
    assert sum(1 for c in placement if 'L40S' in c[2]) == 1, placement
    assert len(compute) <= 3, compute


def test_03_boot_until_no_valid_host(cloud, flavor, controller):
    left = fits(flavor, controller)
    assert left == 4
    servers = []
    try:
        while True:
            server, = cloud.control('boot', flavor=flavor,
                                    name='cap-pci-%d' % len(servers))
            if server['status'] != 'ACTIVE':
                assert NO_VALID_HOST in (server['fault'] or ''), server
                cloud.control('delete', server=server['id'])
                break
            servers.append(server)
            assert fits(flavor, controller) == left - len(servers)
            assert len(servers) <= 8, 'the host never filled up'
        # Nova said NoValidHost exactly when the command said none fit.
        assert len(servers) == left
        assert fits(flavor, controller) == 0
        used = [d for d in cloud.control('pci_truth')
                if d['server'] in {s['id'] for s in servers}]
        assert len(used) == 2 * left
        rows = mdev_table('capacity', '--flavor', flavor,
                          '--controller-conf', controller, '--host', 'sriov1',
                          '--explain')
        steps = {r['Constraint']: r for r in rows}
        assert steps['room for 1 %s' % L40S]['Devices Ruled Out'] == '2'
        assert rows[-2]['Constraint'] == 'Servers that fit: 0'
        assert rows[-1]['Constraint'].startswith(
            'Smallest change: free 2 %s on sriov1:' % L40S)
    finally:
        for server in servers:
            cloud.control('delete', server=server['id'])
    assert fits(flavor, controller) == 4


def test_04_count_matches_a_multi_create(cloud, flavor, controller):
    """Whether Nova places one request of 4 depends on the first
    candidate Placement lists (2 VFs of one PF hold 2 servers per
    request, VFs of two PFs 4), which changes with the random names Nova
    gives the PCI groups: the verdict gives the range, and Nova's answer
    is one of its ends.
    """
    assert fits(flavor, controller) == 4
    rows = mdev_table('capacity', '--flavor', flavor, '--controller-conf',
                      controller, '--count', '4', '--host', 'sriov1')
    verdict = rows[-1]['Verdict']
    print('capacity --count 4 on sriov1: %s' % verdict)
    # Nova names a request's PCI groups anew each time, so which
    # candidate comes first is not known in advance: a VF from each PF
    # (4 placed) or two from one PF (2): the verdict says it may be.
    assert verdict.startswith(
        'one request of 4 servers may be placed: it places 2 to 4'), verdict
    servers = cloud.control('boot', flavor=flavor, count=4,
                            name='cap-pci-four')
    try:
        statuses = {s['status'] for s in servers}
        assert statuses in ({'ACTIVE'}, {'ERROR'}), servers
    finally:
        for server in servers:
            cloud.control('delete', server=server['id'])
    assert fits(flavor, controller) == 4
