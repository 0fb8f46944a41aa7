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

"""``openstack mdev audit --controller-conf`` on clouds whose scheduler
runs with ``[filter_scheduler] pci_in_placement = False``: Nova asks
Placement for no PCI device of a ``pci_passthrough:alias`` flavor (its PCI
filter picks them), so a server that holds no VF in Placement is no
finding: on a cloud of classic PCI passthrough (``[pci]
report_in_placement`` off too, Placement knows no PCI device), nor on one
whose nova-compute reports its VFs and heals their allocations into
Placement.
"""

import json

import pytest

from tests.cloud import client
from tests.e2e.helpers import mdev
from tests.e2e.helpers import placement_request as placement

L40S = 'CUSTOM_NVIDIA_L40S_VF'

HOST = {'name': 'sriov1', 'gpus': 0, 'bus': '0xc1',
        'pci': {
            'pfs': [{'pfs': 2, 'vfs_per_pf': 4, 'product_id': '26b9',
                     'pf_product_id': '26b8'}],
            'device_spec': [{'vendor_id': '10de', 'product_id': '26b9',
                             'resource_class': L40S}]}}
ALIAS = {'name': 'l40s-vf', 'vendor_id': '10de', 'product_id': '26b9',
         'device_type': 'type-VF', 'resource_class': L40S}
#: ``[pci] report_in_placement`` of the computes, by cloud: what the
#: server holds of its VF in Placement.
REPORTED = {'passthrough': 0, 'reported': 1}

CONTROLLER_CONF = """[pci]
alias = {"name": "l40s-vf", "vendor_id": "10de", "product_id": "26b9",
    "device_type": "type-VF", "resource_class": "CUSTOM_NVIDIA_L40S_VF"}

[filter_scheduler]
pci_in_placement = False
"""


@pytest.fixture(scope='module', params=sorted(REPORTED))
def cloud(request, tmp_path_factory):
    topology = {'hosts': [HOST], 'pci_alias': [ALIAS],
                'pci_in_placement': False,
                'report_in_placement': bool(REPORTED[request.param])}
    with client.EmbeddedCloud(tmp_path_factory.mktemp('cloud'),
                              topology=topology) as cloud:
        cloud.reported = REPORTED[request.param]
        yield cloud


@pytest.fixture(scope='module')
def controller(tmp_path_factory):
    path = tmp_path_factory.mktemp('controller') / 'nova.conf'
    path.write_text(CONTROLLER_CONF)
    return str(path)


@pytest.fixture(scope='module')
def server(cloud):
    flavor = cloud.control('create_flavor', name='l40s-1', extra_specs={
        'pci_passthrough:alias': 'l40s-vf:1'})
    [booted] = cloud.control('boot', flavor=flavor['id'], name='vf')
    assert booted['status'] == 'ACTIVE', booted
    yield booted
    cloud.control('delete', server=booted['id'])


def pci_held(cloud, server_id):
    """What the server holds in Placement of the L40S class."""
    body = placement(cloud, 'GET', '/allocations/%s' % server_id)
    return sum(a['resources'].get(L40S, 0)
               for a in body['allocations'].values())


def audit_rows(controller):
    result = mdev('audit', '--controller-conf', controller, '-f', 'json')
    return result.rc, json.loads(result.stdout)


def test_a_server_the_scheduler_claimed_no_vf_for_is_no_finding(
        cloud, controller, server):
    # The fake hypervisor gave the server its VF; the scheduler asked
    # Placement for none, and Placement holds one only where nova-compute
    # reports its VFs (it heals the allocation).
    [vf] = [d for d in cloud.control('pci_truth')
            if d['server'] == server['id']]
    assert vf['dev_type'] == 'type-VF'
    assert pci_held(cloud, server['id']) == cloud.reported
    rc, rows = audit_rows(controller)
    assert not [r for r in rows if r['Check'] == 'missing-allocation'], rows
    assert rc == 0, rows
