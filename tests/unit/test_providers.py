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

from osc_mdev.cloud import providers as providers


def _rp(uuid, name, root=None, parent=None, generation=1):
    return {'uuid': uuid, 'name': name, 'generation': generation,
            'root_provider_uuid': root or uuid,
            'parent_provider_uuid': parent or (root if root else None)}


PROVIDERS = [
    _rp('r1', 'compute_1.example.com'),
    _rp('g1', 'compute_1.example.com_pci_0000_84_00_0', root='r1'),
    _rp('g2', 'compute_1.example.com_pci_0000_85_00_0', root='r1'),
    _rp('r2', 'compute2'),
    _rp('g3', 'compute2_pci_0000_84_00_0', root='r2'),
    _rp('m1', 'compute2_mtty_mtty', root='r2'),
    _rp('p1', 'compute2_0000:81:00.0', root='r2'),
    _rp('n1', 'compute2:Open vSwitch agent', root='r2'),
    _rp('r3', 'compute'),  # a host whose name prefixes others
    _rp('x1', 'unrelated-child', root='r3'),
]


def test_find_candidates_uses_root_names():
    found = {c.uuid: c for c in providers.find_candidates(PROVIDERS)}
    assert sorted(found) == ['g1', 'g2', 'g3', 'm1']
    assert found['g1'].host == 'compute_1.example.com'
    assert found['g1'].device == '0000:84:00.0'
    assert found['g3'].host == 'compute2'
    assert found['m1'].device == 'mtty_mtty'
    assert found['m1'].pci_address is None


def test_find_candidates_of_kinds():
    pci = {c.uuid: c for c in providers.find_candidates(PROVIDERS, ('pci',))}
    assert sorted(pci) == ['p1']
    assert pci['p1'].kind == 'pci'
    assert pci['p1'].device == '0000:81:00.0'
    assert pci['p1'].host == 'compute2'
    both = providers.find_candidates(PROVIDERS, providers.KINDS)
    assert sorted(c.uuid for c in both) == ['g1', 'g2', 'g3', 'm1', 'p1']
    assert {c.kind for c in both if c.uuid != 'p1'} == {'mdev'}


def _pci(uuid='p1'):
    return {c.uuid: c for c in providers.find_candidates(
        PROVIDERS, providers.KINDS)}[uuid]


PCI_TRAITS = ['COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA']


def test_pci_device_rows_keep_every_class():
    [device] = providers.build_devices(
        _pci(), {'CUSTOM_PCI_10DE_25B6': {'total': 4, 'max_unit': 4}}, 3,
        {'CUSTOM_PCI_10DE_25B6': 1}, PCI_TRAITS)
    assert device.kind == 'pci'
    assert device.pci_ids == ('10de', '25b6')
    assert device.holds_vfs   # total 4: the VFs of PF 0000:81:00.0
    assert (device.capacity, device.used, device.free) == (4, 1, 3)
    # A class set by [pci] device_spec, even a standard one, makes a row.
    [named] = providers.build_devices(_pci(), {'PGPU': {'total': 1}}, 3, {},
                                      PCI_TRAITS)
    assert named.pci_ids is None and not named.holds_vfs


def test_pci_named_provider_without_nova_trait_is_no_device():
    assert providers.build_devices(
        _pci(), {'CUSTOM_PCI_10DE_25B6': {'total': 1}}, 3, {},
        ['OWNER_NOVA']) == []
    summary = providers.Summary(resources={'CUSTOM_X': (2, 0)},
                                traits=('OWNER_NOVA',))
    assert providers.devices_from_summary(_pci(), summary) == []
    assert not providers.has_device_inventory(_pci(), summary)


def test_pci_device_from_summary():
    summary = providers.Summary(resources={'CUSTOM_A16': (8, 2)},
                                traits=tuple(PCI_TRAITS))
    [device] = providers.devices_from_summary(_pci(), summary)
    assert device.holds_vfs and device.free == 6
    assert providers.has_device_inventory(_pci(), summary)
    one = providers.Summary(resources={'CUSTOM_A16': (1, 0)},
                            traits=tuple(PCI_TRAITS))
    assert not providers.devices_from_summary(_pci(), one)[0].holds_vfs


def test_filter_by_kind():
    device = providers.build_devices(_pci(), {'CUSTOM_A16': {'total': 1}}, 1,
                                     {}, PCI_TRAITS)[0]
    assert not providers.DeviceFilter().wants(device)
    assert providers.DeviceFilter(kinds=('pci',)).wants(device)
    assert providers.DeviceFilter(kinds=providers.KINDS).wants(device)
    mdev = providers.build_devices(_candidate(), {'VGPU': {'total': 1}}, 1, {})
    assert not providers.DeviceFilter(kinds=('pci',)).wants(mdev[0])


@pytest.mark.parametrize('reference', [
    'compute2_0000:81:00.0', '0000:81:00.0', '81:00.0',
    'compute2:0000:81:00.0', 'p1'])
def test_resolve_pci_device(reference):
    candidates = providers.find_candidates(PROVIDERS, ('pci',))
    assert providers.resolve_device(reference, candidates).uuid == 'p1'


def test_hosts_of():
    assert providers.hosts_of(PROVIDERS) == {
        'compute_1.example.com', 'compute2', 'compute'}


def _candidate(uuid='g1'):
    return {c.uuid: c for c in providers.find_candidates(PROVIDERS)}[uuid]


def test_build_devices_keeps_only_mdev_classes():
    inventories = {
        'VGPU': {'total': 8, 'max_unit': 8, 'reserved': 1,
                 'allocation_ratio': 1.0},
        'PGPU': {'total': 1},
    }
    [device] = providers.build_devices(
        _candidate(), inventories, 7, {'VGPU': 3}, ['OWNER_NOVA', 'CUSTOM_A'])
    assert device.resource_class == 'VGPU'
    assert (device.inventory.total, device.used, device.free) == (8, 3, 4)
    assert device.traits == ('CUSTOM_A', 'OWNER_NOVA')
    assert device.generation == 7
    assert providers.build_devices(_candidate(), {'PGPU': {'total': 1}}, 1,
                                   {}) == []


def test_free_never_negative():
    [device] = providers.build_devices(
        _candidate(), {'VGPU': {'total': 2}}, 1, {'VGPU': 5})
    assert device.free == 0


def _device(uuid, rc='VGPU', total=4, used=0, traits=('OWNER_NOVA',)):
    [device] = providers.build_devices(
        _candidate(uuid), {rc: {'total': total}}, 1, {rc: used}, traits)
    return device


def test_filter():
    full = _device('g1', total=2, used=2)
    free = _device('g2', rc='CUSTOM_MLX5', traits=('CUSTOM_X', 'OWNER_NOVA'))
    other_host = _device('g3')
    devices = [full, free, other_host]

    def pick(**kwargs):
        wanted = providers.DeviceFilter(**kwargs)
        return [d.uuid for d in devices if wanted.wants(d)]

    assert pick() == ['g1', 'g2', 'g3']
    assert pick(hosts=('compute2',)) == ['g3']
    assert pick(hosts=('compute2', 'compute_1.example.com')) == [
        'g1', 'g2', 'g3']
    assert pick(resource_class='CUSTOM_MLX5') == ['g2']
    assert pick(traits=('CUSTOM_X',)) == ['g2']
    assert pick(traits=('CUSTOM_X', 'CUSTOM_Y')) == []
    assert pick(free=True) == ['g2', 'g3']
    assert pick(full=True) == ['g1']


def test_usages_and_consumers_from_allocations():
    allocations = {
        'b': {'resources': {'VGPU': 1}},
        'a': {'resources': {'VGPU': 2, 'CUSTOM_OTHER': 1}},
    }
    assert providers.usages_from_allocations(allocations) == {
        'VGPU': 3, 'CUSTOM_OTHER': 1}
    assert providers.consumers_of(allocations, 'VGPU') == [
        {'consumer': 'a', 'resource_class': 'VGPU', 'amount': 2},
        {'consumer': 'b', 'resource_class': 'VGPU', 'amount': 1}]


CANDIDATES = providers.find_candidates(PROVIDERS)


@pytest.mark.parametrize('reference,uuid', [
    ('g1', 'g1'),
    ('compute2_mtty_mtty', 'm1'),
    ('compute2:0000:84:00.0', 'g3'),
    ('compute2:84:00.0', 'g3'),
    ('compute2:pci_0000_84_00_0', 'g3'),
    ('compute_1.example.com:0000:85:00.0', 'g2'),
    ('compute_1.example.com:0000:85:00.0 ', 'g2'),
    ('0000:85:00.0', 'g2'),   # only one host has it
    ('compute2:mtty_mtty', 'm1'),
    ('mtty_mtty', 'm1'),
])
def test_resolve_device(reference, uuid):
    assert providers.resolve_device(reference, CANDIDATES).uuid == uuid


def test_resolve_device_ambiguous_lists_matches():
    with pytest.raises(providers.DeviceLookupError) as err:
        providers.resolve_device('0000:84:00.0', CANDIDATES)
    assert str(err.value) == (
        "'0000:84:00.0' matches 2 devices (compute2:0000:84:00.0, "
        "compute_1.example.com:0000:84:00.0); name one as HOST:PCI_ADDRESS.")


@pytest.mark.parametrize('reference,message', [
    ('compute2:0000:99:00.0', 'host compute2 has no mdev device'),
    ('nohost:0000:84:00.0', 'no host named nohost has mdev devices'),
    ('r1', 'No mdev device matches'),
])
def test_resolve_device_unknown(reference, message):
    with pytest.raises(providers.DeviceLookupError, match=message):
        providers.resolve_device(reference, CANDIDATES)


@pytest.mark.parametrize('reference', [
    'compute2:0000:84:00', '0000:84:00', 'compute2:pci_0000_84', '84:00.9'])
def test_resolve_device_malformed_address(reference):
    with pytest.raises(ValueError, match='0000:84:00.0'):
        providers.resolve_device(reference, CANDIDATES)


def test_named_device_outside_the_options():
    [candidate] = providers.find_candidates([
        {'uuid': 'r', 'name': 'h1', 'root_provider_uuid': 'r'},
        {'uuid': 'c', 'name': 'h1_pci_0000_84_00_0',
         'root_provider_uuid': 'r'}])
    assert providers.outside_selection('x', candidate, ('h1',)) is None
    outside = providers.outside_selection('x', candidate, ('h2', 'h3'))
    assert (outside.reference, outside.selector, outside.value,
            outside.wanted) == ('x', providers.BY_HOST, 'h1', ('h2', 'h3'))
    device = providers.build_devices(
        candidate, {'CUSTOM_MLX5': {'total': 4}}, 1, {})[0]
    outside = providers.outside_selection('x', device, (), 'VGPU')
    assert (outside.selector, outside.value, outside.wanted) == (
        providers.BY_RESOURCE_CLASS, 'CUSTOM_MLX5', ('VGPU',))


SUMMARIES_BODY = {
    'allocation_requests': [],
    'provider_summaries': {
        'g1': {'resources': {'VGPU': {'capacity': 14, 'used': 3}},
               'traits': ['OWNER_NOVA', 'CUSTOM_A'],
               'parent_provider_uuid': 'r1', 'root_provider_uuid': 'r1'},
        'p1': {'resources': {'CUSTOM_PCI_10DE_1EB8': {'capacity': 1,
                                                      'used': 0}},
               'traits': []},
        'n1': {'resources': {}, 'traits': ['CUSTOM_PHYSNET']},
    },
}


def test_parse_summaries():
    summaries = providers.parse_summaries(SUMMARIES_BODY)
    assert summaries['g1'].resources == {'VGPU': (14, 3)}
    assert summaries['g1'].traits == ('CUSTOM_A', 'OWNER_NOVA')
    assert providers.parse_summaries({'provider_summaries': {}}) == {}


def test_devices_from_summary_without_inventories():
    summary = providers.parse_summaries(SUMMARIES_BODY)['g1']
    [device] = providers.devices_from_summary(_candidate(), summary)
    assert device.inventory is None
    # Capacity is (total - reserved) x ratio as Placement computed it.
    assert (device.capacity, device.used, device.free) == (14, 3, 11)
    assert device.traits == ('CUSTOM_A', 'OWNER_NOVA')
    assert device.generation == 1   # the listing's


def test_devices_from_summary_with_inventories_matches_per_device_reads():
    summary = providers.parse_summaries(SUMMARIES_BODY)['g1']
    inventories = {'VGPU': {'total': 8, 'reserved': 1, 'max_unit': 8,
                            'allocation_ratio': 2.0}}
    [merged] = providers.devices_from_summary(
        _candidate(), summary, inventories, generation=9)
    [direct] = providers.build_devices(
        _candidate(), inventories, 9, {'VGPU': 3}, ['CUSTOM_A', 'OWNER_NOVA'])
    assert merged == direct
    assert merged.free == 11 and merged.inventory.total == 8


def test_devices_from_summary_full_and_overcommitted():
    full = providers.Summary(resources={'VGPU': (4, 4)}, traits=())
    over = providers.Summary(resources={'VGPU': (4, 6)}, traits=())
    assert providers.devices_from_summary(_candidate(), full)[0].free == 0
    assert providers.devices_from_summary(_candidate(), over)[0].free == 0


def test_devices_from_summary_inventories_win_on_class_change():
    # The class changed between the summaries and the inventories read.
    summary = providers.Summary(resources={'VGPU': (4, 1)}, traits=())
    [device] = providers.devices_from_summary(
        _candidate(), summary, {'CUSTOM_X': {'total': 2}}, generation=3)
    assert (device.resource_class, device.used, device.free) == (
        'CUSTOM_X', 0, 2)
    assert providers.devices_from_summary(
        _candidate(), providers.Summary({'FPGA': (1, 0)}, ())) == []


OTU_TRAITS = tuple(PCI_TRAITS) + ('HW_PCI_ONE_TIME_USE',)


@pytest.mark.parametrize('traits, total, reserved, used, state', [
    (OTU_TRAITS, 1, 1, 0, providers.TO_CLEAN),   # used once, gone
    (OTU_TRAITS, 1, 1, 1, providers.IN_USE),     # Nova's, while in use
    (OTU_TRAITS, 1, 0, 0, providers.FREE),       # never used, or released
    (OTU_TRAITS, 1, 0, 1, providers.IN_USE),
    (tuple(PCI_TRAITS), 1, 1, 0, providers.RESERVED),  # not one-time-use
    (OTU_TRAITS, 2, 1, 0, providers.FREE),       # reserved below total
    (OTU_TRAITS, 2, 2, 0, providers.TO_CLEAN),
])
def test_state_of_a_device(traits, total, reserved, used, state):
    inventories = {'CUSTOM_A16': {'total': total, 'reserved': reserved}}
    [device] = providers.build_devices(_pci(), inventories, 3,
                                       {'CUSTOM_A16': used}, traits)
    assert device.state == state
    assert device.waiting == (state == providers.TO_CLEAN)
    # From the summary alone: capacity 0, no consumer, with the trait.
    summary = providers.Summary(
        resources={'CUSTOM_A16': (total - reserved, used)}, traits=traits)
    assert providers.may_wait(summary) == (
        'HW_PCI_ONE_TIME_USE' in traits and total == reserved and not used)
    [summed] = providers.devices_from_summary(_pci(), summary)
    assert summed.state == state
