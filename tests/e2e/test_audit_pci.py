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

"""``openstack mdev audit --controller-conf`` on the demo cloud's
PCI-in-Placement host ``sriov1``: a server of a ``pci_passthrough:alias``
flavor whose PCI allocation is removed with Placement's API is found,
and a flavor asking more VFs than any host has is unschedulable.
"""

import json

import pytest

from tests.e2e.helpers import mdev
from tests.e2e.helpers import placement_request as placement
from tests.e2e.helpers import rewrite_allocations

L40S = 'CUSTOM_NVIDIA_L40S_VF'


@pytest.fixture(scope='module')
def broken(cloud):
    flavor = cloud.control('create_flavor', name='audit-l40s-2', extra_specs={
        'pci_passthrough:alias': 'l40s-vf:2'})
    # Three H100 VFs: the host has two, so no server of it can boot.
    too_big = cloud.control('create_flavor', name='audit-h100-3',
                            extra_specs={'pci_passthrough:alias': 'h100-vf:3'})
    servers = cloud.control('boot', flavor=flavor['id'], count=2,
                            name='audit-pci')
    assert {s['status'] for s in servers} == {'ACTIVE'}, servers
    keep, missing = servers
    pci_rps = {rp['uuid'] for rp in placement(
        cloud, 'GET', '/resource_providers')['resource_providers']
        if rp['name'].startswith('sriov1_')}
    before = placement(cloud, 'GET', '/allocations/%s' % missing['id'])
    assert pci_rps & set(before['allocations'])
    rewrite_allocations(cloud, missing['id'], lambda allocs: {
        rp: a for rp, a in allocs.items() if rp not in pci_rps})
    yield {'keep': keep, 'missing': missing, 'too_big': too_big}
    for server in servers:
        cloud.control('delete', server=server['id'])


def audit(*args):
    result = mdev('audit', *args, '-f', 'json')
    return result.rc, json.loads(result.stdout)


def test_without_aliases_alias_requests_are_not_judged(cloud, broken):
    rc, rows = audit()
    assert rc == 0, rows
    assert not any(r['Check'] == 'missing-allocation' for r in rows), rows
    [note] = [r for r in rows if r['Check'] == 'pci-alias-unchecked']
    assert note['Severity'] == 'info'
    assert note['Message'].startswith(
        '2 servers and 2 flavors ask for PCI devices by alias')
    assert '--controller-conf' in note['Message']


def test_missing_pci_allocation_and_unschedulable_alias_flavor(
        cloud, broken, controller):
    rc, rows = audit('--controller-conf', controller, '--long')
    assert rc == 1, rows
    assert not any(r['Check'] == 'pci-alias-unchecked' for r in rows)
    [missing] = [r for r in rows if r['Check'] == 'missing-allocation']
    assert missing['Server'] == broken['missing']['id']
    assert missing['Host'] == 'sriov1'
    assert missing['Resource Class'] == L40S
    assert ('asks for 2 x %s but it holds none' % L40S) in \
        missing['Message']
    [flavor] = [r for r in rows if r['Check'] == 'unschedulable-flavor']
    assert broken['too_big']['id'] in flavor['Message']
    assert flavor['Resource Class'] == 'CUSTOM_PCI_10DE_2330'
    assert 'rules out' in flavor['Message']
    # The server that holds its VFs is no finding.
    assert not any(r['Server'] == broken['keep']['id'] for r in rows)
