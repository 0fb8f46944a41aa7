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

"""Capacity of flavors with ``pci_passthrough:alias``, against a real
Placement with PCI-in-Placement providers (one per PF, holding its VFs).

There is no Nova in this tier, so the flavor is given as Nova returns it
and the controller's aliases are read from a nova.conf file; the reads
are the command's own (osc_mdev.features.capacity.reads against Placement's
API). For every host said to fit N servers, ``GET /allocation_candidates``
of the same request limited to that tree gives a candidate, and claiming
its first candidate N times succeeds while the N+1th finds none; full
hosts have none.
"""

import urllib.parse

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
import pytest

from osc_mdev.api import http
from osc_mdev.api import placement as placement_client
from osc_mdev.cloud import explanation
from osc_mdev.cloud import fit as fit
from osc_mdev.cloud import payloads as nova_payloads
from osc_mdev.features.capacity import reads
from osc_mdev.local import conf_files as local_novaconf
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.scheduler import request_filter
from osc_mdev.nova.scheduler import utils as rr
from tests.fixtures.placement_data import Gpu


def request_of(flavor, pci_config=None, booted_from_volume=False):
    """The request of a flavor as Nova's API gives it, built as every
    command builds it.
    """
    return rr.request_for(nova_payloads.flavor(flavor), pci_config,
                          booted_from_volume)


L40S = 'CUSTOM_NVIDIA_L40S_VF'
H100 = 'CUSTOM_PCI_10DE_2330'
CONTROLLER = '''[filter_scheduler]
pci_in_placement = True

[pci]
alias = {"name": "l40s-vf", "vendor_id": "10de", "product_id": "26b9",
  "device_type": "type-VF", "resource_class": "CUSTOM_NVIDIA_L40S_VF"}
alias = {"name": "h100-vf", "vendor_id": "10de", "product_id": "2330",
  "device_type": "type-VF", "traits": "GPU_H100"}
'''
FLAVOR = {'name': 'f', 'vcpus': 4, 'ram': 4096, 'disk': 10, 'swap': '',
          'OS-FLV-EXT-DATA:ephemeral': 0}

SPECS = {
    'one l40s vf': {'pci_passthrough:alias': 'l40s-vf:1'},
    'two l40s vfs': {'pci_passthrough:alias': 'l40s-vf:2'},
    'two l40s vfs isolated': {'pci_passthrough:alias': 'l40s-vf:2',
                              'group_policy': 'isolate'},
    'three l40s vfs': {'pci_passthrough:alias': 'l40s-vf:3'},
    'h100 vf with its trait': {'pci_passthrough:alias': 'h100-vf:1'},
    'vf and a vgpu': {'pci_passthrough:alias': 'l40s-vf:1',
                      'resources:VGPU': '1'},
}


class Cloud:
    """sriov-a: 2 PFs x 4 L40S VFs, 3 + 1 used; sriov-b: 1 PF of 4 L40S
    VFs and 1 PF of 2 H100 VFs with their trait; sriov-c: 2 H100 VFs
    without the trait, and an mdev GPU; full: 1 PF, every VF used;
    mdev: an mdev host only.
    """

    def __init__(self, p):
        self.placement = p
        self.roots = {}
        r = self.roots['sriov-a'] = p.add_compute_node('sriov-a')
        a0 = p.add_pci_device(r, 'sriov-a', '0000:c1:00.0', L40S, 4)
        a1 = p.add_pci_device(r, 'sriov-a', '0000:c1:01.0', L40S, 4)
        self._use(r, a0, 3)
        self._use(r, a1, 1)
        r = self.roots['sriov-b'] = p.add_compute_node('sriov-b')
        p.add_pci_device(r, 'sriov-b', '0000:c1:00.0', L40S, 4)
        p.add_pci_device(r, 'sriov-b', '0000:c1:02.0', H100, 2,
                         ('CUSTOM_GPU_H100',))
        gpu = Gpu('pci_0000_84_00_0', 'VGPU', 2)
        r = self.roots['sriov-c'] = p.add_compute_node('sriov-c', [gpu])
        p.add_pci_device(r, 'sriov-c', '0000:c1:02.0', H100, 2)
        p.add_pci_device(r, 'sriov-c', '0000:c1:00.0', L40S, 2)
        r = self.roots['full'] = p.add_compute_node('full')
        f0 = p.add_pci_device(r, 'full', '0000:c1:00.0', L40S, 2)
        self._use(r, f0, 2)
        self.roots['mdev'] = p.add_compute_node(
            'mdev', [Gpu('pci_0000_84_00_0', 'VGPU', 4)])

    def _use(self, root, device, n):
        for _ in range(n):
            self.placement.boot_server(root, device)


@pytest.fixture(scope='module')
def cloud(placement):
    return Cloud(placement)


@pytest.fixture(scope='module')
def client(placement_url):
    session = ks_session.Session(
        auth=token_endpoint.Token(placement_url, 'admin'))
    return placement_client.PlacementClient(http.Service(
        session, 'placement', 'Placement', endpoint_override=placement_url))


@pytest.fixture(scope='module')
def controller(tmp_path_factory):
    path = tmp_path_factory.mktemp('controller') / 'nova.conf'
    path.write_text(CONTROLLER)
    pci = pci_rules.pci_config(local_novaconf.load([str(path)]))
    assert pci.pci_in_placement and not pci.findings
    return pci


def counted(client, request):
    trees = reads.read_hosts(client, request, client.list_providers())
    request = request_filter.process_reqspec(
        request, owner_nova=fit.owner_nova_in_effect(trees))
    return request, {h.host: h for h in fit.capacity(request, trees)}


@pytest.mark.parametrize('name', sorted(SPECS))
def test_fits_agree_with_allocation_candidates(cloud, client, controller,
                                               name):
    request, per_host = counted(client, request_of(
        dict(FLAVOR, extra_specs=SPECS[name]), controller))
    assert any(g.is_pci for g in request.groups)
    assert set(per_host) == set(cloud.roots)
    for host, root in cloud.roots.items():
        query = urllib.parse.parse_qsl(rr.to_querystring(request, None))
        assert cloud.placement.claim_until_full(query, root) == \
            per_host[host].fits, (host, per_host[host])


def test_pci_rows(cloud, client, controller):
    _, per_host = counted(client, request_of(
        dict(FLAVOR, extra_specs=SPECS['two l40s vfs']), controller))
    assert {h: (c.fits, c.devices, c.free, c.limit)
            for h, c in per_host.items()} == {
        'sriov-a': (2, ('0000:c1:00.0', '0000:c1:01.0'), 4, L40S),
        'sriov-b': (2, ('0000:c1:00.0',), 4, L40S),
        'sriov-c': (1, ('0000:c1:00.0',), 2, L40S),
        'full': (0, (), 0, L40S),
        'mdev': (0, (), 0, 'no matching device'),
    }


def test_explain_names_the_pci_constraint(cloud, client, controller):
    request, _ = counted(client, request_of(
        dict(FLAVOR, extra_specs=SPECS['three l40s vfs']), controller))
    trees = reads.read_hosts(client, request, client.list_providers())
    steps, fix = explanation.explain(request, trees)
    by_name = {s.constraint: s for s in steps}
    assert by_name['offers %s' % L40S].hosts_out == 1
    assert by_name['required trait OWNER_NOVA'].hosts_out == 0
    assert by_name['room for 1 %s' % L40S].devices_out == 1
    # sriov-c has 2 free VFs, each group finds one: only all three
    # groups at once rule it out.
    assert steps[-1].constraint == 'all groups at once'
    assert (steps[-1].hosts_out, steps[-1].hosts_left) == (1, 2)
    # h100-vf requires the alias' trait on the PF's provider.
    request, per_host = counted(client, request_of(
        dict(FLAVOR, extra_specs=SPECS['h100 vf with its trait']),
        controller))
    trees = reads.read_hosts(client, request, client.list_providers())
    steps, _ = explanation.explain(request, trees)
    step = next(s for s in steps
                if s.constraint == 'required trait CUSTOM_GPU_H100')
    assert (step.devices_out, step.hosts_out) == (1, 1)
    assert per_host['sriov-c'].fits == 0
