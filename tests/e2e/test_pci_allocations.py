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

"""Allocations on PCI-in-Placement devices, with real Nova naming the
servers.

Real Nova boots the servers (an mdev one, and plain ones); a provider
for the VFs of a PF is then made under a compute node as nova-compute
makes it with ``[pci] report_in_placement = True`` (``<node>_<ADDRESS>``,
COMPUTE_MANAGED_PCI_DEVICE, OWNER_NOVA), and the plain servers'
allocations gain a share of it, as the scheduler claims one. No periodic
update runs meanwhile, so Nova leaves that provider alone.
"""

import json
import uuid

import pytest

from tests.cloud import client
from tests.e2e.helpers import mdev
from tests.e2e.helpers import mdev_json
from tests.e2e.helpers import placement_request

VF_CLASS = 'CUSTOM_PCI_10DE_25B6'
ADDRESS = '0000:af:00.0'
ORPHAN = str(uuid.UUID('7a1d0c2e-3c0b-4f0e-9d7e-1f6b5b2e9c11'))


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('cloud')) as cloud:
        yield cloud


def _boot(cloud, flavor):
    [server] = cloud.control('boot', flavor=flavor)
    assert server['status'] == 'ACTIVE', server.get('fault')
    return server


def _add_allocation(cloud, consumer, rp_uuid, amount=1):
    body = placement_request(cloud, 'GET', '/allocations/%s' % consumer)
    allocations = {rp: {'resources': a['resources']}
                   for rp, a in body['allocations'].items()}
    allocations[rp_uuid] = {'resources': {VF_CLASS: amount}}
    placement_request(cloud, 'PUT', '/allocations/%s' % consumer, json={
        'allocations': allocations,
        'consumer_generation': body['consumer_generation'],
        'project_id': body['project_id'], 'user_id': body['user_id'],
        'consumer_type': 'INSTANCE'})


@pytest.fixture(scope='module')
def pci(cloud):
    plain = cloud.control('create_flavor', name='e2e-pci-plain')['id']
    vgpu = cloud.control('create_flavor', name='e2e-pci-vgpu', extra_specs={
        'resources:VGPU': '1'})['id']
    servers = [_boot(cloud, plain) for _ in range(2)]
    mdev_server = _boot(cloud, vgpu)
    # The node Nova put the first server on: its root provider.
    allocs = placement_request(cloud, 'GET',
                               '/allocations/%s' % servers[0]['id'])
    [root_uuid] = list(allocs['allocations'])
    root = placement_request(cloud, 'GET',
                             '/resource_providers/%s' % root_uuid)
    node = root['name']
    name = '%s_%s' % (node, ADDRESS.upper())
    rp = placement_request(cloud, 'POST', '/resource_providers', json={
        'name': name, 'parent_provider_uuid': root_uuid})
    placement_request(cloud, 'PUT', '/resource_classes/%s' % VF_CLASS)
    placement_request(
        cloud, 'PUT', '/resource_providers/%s/inventories' % rp['uuid'],
        json={'resource_provider_generation': rp['generation'],
              'inventories': {VF_CLASS: {'total': 4, 'max_unit': 4}}})
    gen = placement_request(cloud, 'GET', '/resource_providers/%s'
                            % rp['uuid'])['generation']
    placement_request(
        cloud, 'PUT', '/resource_providers/%s/traits' % rp['uuid'],
        json={'resource_provider_generation': gen,
              'traits': ['COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA']})
    on_node = [s for s in servers if list(placement_request(
        cloud, 'GET', '/allocations/%s' % s['id'])['allocations']) == [
            root_uuid]]
    for s in on_node:
        _add_allocation(cloud, s['id'], rp['uuid'])
    # A consumer no server is: an orphaned allocation on the PCI device.
    placement_request(cloud, 'PUT', '/allocations/%s' % ORPHAN, json={
        'allocations': {rp['uuid']: {'resources': {VF_CLASS: 1}}},
        'project_id': 'gone', 'user_id': 'gone',
        'consumer_generation': None, 'consumer_type': 'INSTANCE'})
    return {'node': node, 'rp': rp['uuid'], 'servers': on_node,
            'mdev_server': mdev_server}


def test_allocation_show_goes_from_server_to_vf(cloud, pci):
    server = pci['servers'][0]
    rows = mdev_json('allocation', 'show', server['id'], '--kind', 'pci')
    assert [(r['Server Name'], r['Host'], r['Device'], r['Kind'],
             r['Resource Class'], r['Amount'], r['Provider UUID'])
            for r in rows] == [(server['name'], pci['node'], ADDRESS, 'pci',
                                VF_CLASS, 1, pci['rp'])]
    assert rows[0]['Traits'] == ['COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA']
    result = mdev('allocation', 'show', server['id'], '-f', 'json')
    assert result.json() == []
    assert 'holds 1 on PCI-in-Placement devices' in result.stderr
    assert '--kind pci' in result.stderr


def test_allocation_list_goes_from_vf_to_servers(cloud, pci):
    for device in ('%s:%s' % (pci['node'], ADDRESS.upper()),
                   '%s_%s' % (pci['node'], ADDRESS.upper()), pci['rp']):
        rows = mdev_json('allocation', 'list', '--device', device)
        assert sorted((r['Server'], r['Server Name']) for r in rows) == sorted(
            [(s['id'], s['name']) for s in pci['servers']]
            + [(ORPHAN, '(orphaned: no such server in Nova)')])
    rows = mdev_json('allocation', 'list', '--kind', 'all', '--host',
                     pci['node'])
    kinds = {(r['Server'], r['Kind']) for r in rows}
    assert {(s['id'], 'pci') for s in pci['servers']} <= kinds
    default = mdev_json('allocation', 'list', '--host', pci['node'])
    assert all(r['Device'] != ADDRESS and 'Kind' not in r for r in default)


def test_audit_finds_the_orphaned_pci_allocation(cloud, pci):
    result = mdev('audit', '-f', 'json', '--long', '--host', pci['node'])
    assert result.rc == 1, result.stderr     # an error-level finding
    found = json.loads(result.stdout)
    rows = [r for r in found if r['Check'] == 'orphaned-allocation']
    assert [(r['Host'], r['Device'], r['Server'], r['Resource Class'])
            for r in rows] == [(pci['node'], ADDRESS, ORPHAN, VF_CLASS)]
    # The servers holding a VF with a flavor that asks for none are no
    # missing-allocation: a flavor asks for PCI devices with an alias.
    assert not [r for r in found
                if r['Check'] == 'missing-allocation'
                and r['Server'] in {s['id'] for s in pci['servers']}]
