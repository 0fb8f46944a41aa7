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

import pytest

from osc_mdev.cloud import allocations
from osc_mdev.cloud import payloads as nova_payloads
from osc_mdev.cloud import providers
from tests.fixtures import placement_data


_rp = placement_data.provider_record


CANDIDATES = {c.uuid: c for c in providers.find_candidates([
    _rp('r1', 'compute1'),
    _rp('g1', 'compute1_pci_0000_84_00_0', 'r1'),
    _rp('g2', 'compute1_pci_0000_85_00_0', 'r1'),
    _rp('r2', 'compute_2.dc'),
    _rp('g3', 'compute_2.dc_mtty_mtty', 'r2'),
])}


def test_of_consumer_keeps_only_mdev_parts_on_devices():
    found = allocations.of_consumer('s1', {
        'r1': {'resources': {'VCPU': 2, 'MEMORY_MB': 2048}},
        'g2': {'resources': {'VGPU': 1}},
        'g1': {'resources': {'CUSTOM_MLX5': 2}},
    }, CANDIDATES)
    assert [(a.host, a.device, a.resource_class, a.amount)
            for a in found] == [
        ('compute1', '0000:84:00.0', 'CUSTOM_MLX5', 2),
        ('compute1', '0000:85:00.0', 'VGPU', 1)]
    assert all(a.consumer == 's1' for a in found)


def test_of_consumer_without_mdev():
    assert allocations.of_consumer(
        's1', {'r1': {'resources': {'VCPU': 1}}}, CANDIDATES) == []
    assert allocations.of_consumer('s1', {}, CANDIDATES) == []


def test_of_providers():
    found = allocations.of_providers({
        'g3': {'b': {'resources': {'CUSTOM_MTTY': 1}}},
        'g1': {'a': {'resources': {'VGPU': 1}},
               'c': {'resources': {'VGPU': 2}}},
        'g2': {},
    }, CANDIDATES)
    assert [(a.consumer, a.host, a.device, a.amount) for a in found] == [
        ('a', 'compute1', '0000:84:00.0', 1),
        ('c', 'compute1', '0000:84:00.0', 2),
        ('b', 'compute_2.dc', 'mtty_mtty', 1)]


def test_server_views():
    view = allocations.ServerView.from_server(nova_payloads.server({
        'id': 's', 'name': 'vm1', 'status': 'ACTIVE',
        'OS-EXT-SRV-ATTR:host': 'gpu3',
        'OS-EXT-SRV-ATTR:hypervisor_hostname': 'gpu3.dc2.example.net'}))
    assert (view.name, view.status, view.nova_host, view.nova_node) == (
        'vm1', 'ACTIVE', 'gpu3', 'gpu3.dc2.example.net')
    orphan = allocations.ServerView.unknown('INSTANCE')
    assert orphan.status == 'ORPHANED' and 'orphaned' in orphan.name
    moving = allocations.ServerView.unknown('MIGRATION')
    assert moving.status == 'MIGRATION'


@pytest.mark.parametrize('consumer_type', [None, 'unknown', 'OTHER'])
def test_consumer_of_unknown_type_is_never_orphaned(consumer_type):
    # None: a Placement older than 1.38 cannot say; 'unknown': Placement
    # has no type for the consumer. Either may be a move's allocation.
    view = allocations.ServerView.unknown(consumer_type)
    assert view.status == 'UNKNOWN'
    assert 'orphaned' not in view.name
    assert (view.nova_host, view.nova_node) == (None, None)


def _found(*pairs):
    """MdevAllocations of consumer on the GPU of the named root."""
    by_host = {c.host: c for c in CANDIDATES.values()}
    return [allocations.MdevAllocation(consumer, by_host[host], 'VGPU', 1)
            for consumer, host in pairs]


def _view(host, node):
    return allocations.ServerView('vm', 'ACTIVE', host, node)


def test_node_mismatch_compares_nodes_not_hosts():
    found = _found(('same', 'compute_2.dc'), ('moved', 'compute1'),
                   ('moved', 'compute1'), ('orphan', 'compute1'))
    views = {
        # Service host 'compute_2' of node 'compute_2.dc': no mismatch.
        'same': _view('compute_2', 'compute_2.dc'),
        'moved': _view('compute_2', 'compute_2.dc'),
        'orphan': allocations.ServerView.unknown('INSTANCE'),
    }
    assert allocations.node_mismatches(found, views) == [
        allocations.NodeMismatch('moved', 'compute1', 'compute_2.dc',
                                 'compute_2')]


def test_a_consumer_nova_lists_as_a_migration():
    view = allocations.ServerView.unknown(
        'unknown', {'uuid': 'm', 'instance_uuid': 'srv', 'status':
                    'confirmed', 'migration_type': 'migration'})
    assert view.status == 'MIGRATION'
    assert view.name == '(migration of server srv, confirmed)'


def test_pci_device_parts_keep_every_class():
    pci = {c.uuid: c for c in providers.find_candidates([
        _rp('r5', 'gpu5'),
        _rp('p1', 'gpu5_0000:AF:00.0', 'r5'),
        _rp('g5', 'gpu5_pci_0000_84_00_0', 'r5'),
    ], providers.KINDS)}
    found = allocations.of_consumer('s1', {
        'r5': {'resources': {'VCPU': 2}},
        'p1': {'resources': {'CUSTOM_PCI_10DE_25B6': 1}},
        'g5': {'resources': {'VGPU': 1, 'PGPU': 1}},
    }, pci)
    assert [(a.device, a.kind, a.resource_class) for a in found] == [
        ('0000:84:00.0', 'mdev', 'VGPU'),
        ('0000:af:00.0', 'pci', 'CUSTOM_PCI_10DE_25B6')]
    # A class set in [pci] device_spec may be a standard one.
    [part] = allocations.of_providers(
        {'p1': {'s2': {'resources': {'PGPU': 1}}}}, pci)
    assert (part.consumer, part.kind, part.resource_class) == (
        's2', 'pci', 'PGPU')
