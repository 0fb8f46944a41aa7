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

"""The pure checks of ``openstack mdev audit`` (``features.audit.checks``)."""

import dataclasses

import pytest

from osc_mdev.cloud import allocations
from osc_mdev.cloud import explanation
from osc_mdev.cloud import fit as capacity
from osc_mdev.cloud import payloads as nova_payloads
from osc_mdev.cloud import providers
from osc_mdev.features.audit import checks as audit
from osc_mdev.local import conf_files as local_novaconf
from osc_mdev.nova.pci import config as pci
from osc_mdev.nova.pci import request as pci_request
from osc_mdev.nova.scheduler import request_filter
from osc_mdev.nova.scheduler import utils as rr
from tests.fixtures import placement_data


_rp = placement_data.provider_record


CANDIDATES = {c.uuid: c for c in providers.find_candidates([
    _rp('r1', 'c1'),
    _rp('g1', 'c1_pci_0000_84_00_0', 'r1'),
    _rp('g2', 'c1_pci_0000_85_00_0', 'r1'),
    _rp('g3', 'c1_pci_0000_86_00_0', 'r1'),
    _rp('r2', 'c2.dc'),
    _rp('g4', 'c2.dc_pci_0000_3b_00_0', 'r2'),
])}


def device(uuid, traits=(), rc='VGPU', total=4, used=0, reserved=0,
           ratio=1.0):
    return providers.Device(
        CANDIDATES[uuid], rc,
        providers.Inventory(total, reserved, 1, total, 1, ratio), used, 1,
        tuple(sorted(traits)))


def alloc(consumer, uuid, rc='VGPU', amount=1):
    return allocations.MdevAllocation(consumer, CANDIDATES[uuid], rc,
                                      amount)


def server(sid, node='c1', specs=None, status='ACTIVE', task=None):
    return nova_payloads.server({
        'id': sid, 'name': 'n-' + sid, 'status': status,
        'OS-EXT-SRV-ATTR:hypervisor_hostname': node,
        'OS-EXT-STS:task_state': task,
        'flavor': {'extra_specs': specs if specs is not None
                   else {'resources:VGPU': '1'}}})


RECORD = {'allocations': {'g1': {'resources': {'VGPU': 1}}},
          'consumer_generation': 3, 'project_id': 'p', 'user_id': 'u'}


# -- orphaned-allocation --------------------------------------------------

@pytest.mark.parametrize('facts,expected', [
    # Nova lists it: no finding.
    (None, []),
    # Listed too late, but GET /servers/{id} finds it.
    (audit.ConsumerFacts(nova_payloads.server({'id': 'x'}), None, RECORD),
     []),
    # 404 and no migration: orphan, repaired with its generation.
    (audit.ConsumerFacts(None, None, RECORD),
     [('error', 'orphaned-allocation', 'neither a server nor a migration',
       audit.RemoveAllocations('x', 3, 'p', 'u'))]),
    # A migration in progress holds the source allocation.
    (audit.ConsumerFacts(None, {'uuid': 'x', 'status': 'finished'},
                         RECORD), []),
    (audit.ConsumerFacts(None, {'uuid': 'x', 'status': 'running'},
                         RECORD), []),
    # An ended migration does not.
    (audit.ConsumerFacts(None, {'uuid': 'x', 'status': 'confirmed',
                                'instance_uuid': 'i'}, RECORD),
     [('error', 'orphaned-allocation', 'migration x of server i, which '
       'ended (confirmed)', audit.RemoveAllocations('x', 3, 'p', 'u'))]),
    (audit.ConsumerFacts(None, {'uuid': 'x', 'status': 'error'}, RECORD),
     [('error', 'orphaned-allocation', 'ended (error)',
       audit.RemoveAllocations('x', 3, 'p', 'u'))]),
    # Nova could not be asked: never an orphan.
    (audit.ConsumerFacts('Compute failed with HTTP 500.', None, RECORD),
     [('error', 'nova-unreachable', 'Compute failed with HTTP 500', None)]),
    (audit.ConsumerFacts(None, 'Cannot reach the Compute API.', RECORD),
     [('error', 'nova-unreachable', 'Cannot reach the Compute API',
       None)]),
    # Removed since Placement was read.
    (audit.ConsumerFacts(None, None, {'allocations': {}}), []),
])
def test_orphaned_allocations(facts, expected):
    servers = {'x': server('x')} if facts is None else {}
    found = audit.orphaned_allocations(
        [alloc('x', 'g1')], servers, {'x': facts} if facts else {})
    assert [(f.severity, f.check, f.repair) for f in found] == [
        (s, c, r) for s, c, _, r in expected]
    for finding, (_, _, text, _) in zip(found, expected):
        assert text in finding.message
        assert (finding.host, finding.device, finding.server) == (
            'c1', '0000:84:00.0', 'x')


def test_ended_migration_of_an_unaccounted_server_is_not_repaired():
    ended = audit.ConsumerFacts(None, {'uuid': 'x', 'status': 'error',
                                       'instance_uuid': 's'}, RECORD)
    servers = {'s': server('s')}
    [finding] = audit.orphaned_allocations(
        [alloc('x', 'g1')], servers, {'x': ended})
    assert finding.check == 'orphaned-allocation'
    assert finding.repair is None
    assert 'server s holds no mdev of its own' in finding.message
    # Once the server holds its own, the migration's is repaired.
    [finding] = audit.orphaned_allocations(
        [alloc('x', 'g1'), alloc('s', 'g2')], servers, {'x': ended})
    assert finding.repair == audit.RemoveAllocations('x', 3, 'p', 'u')


# -- missing-allocation / node-mismatch -----------------------------------

@pytest.mark.parametrize('srv,held,expected', [
    (server('s'), [alloc('s', 'g1')], None),
    (server('s'), [], 'asks for 1 x VGPU but it holds none'),
    (server('s', specs={'resources1:VGPU': '1', 'resources2:VGPU': '1',
                        'group_policy': 'isolate'}),
     [alloc('s', 'g1')], 'asks for 2 x VGPU but it holds 1 x VGPU'),
    (server('s'), [alloc('s', 'g1', 'CUSTOM_MLX5')],
     'asks for 1 x VGPU but it holds 1 x CUSTOM_MLX5'),
    (server('s', specs={}), [alloc('s', 'g1')],
     'asks for no mdev but it holds 1 x VGPU'),
    # Not settled on a node: not judged.
    (server('s', task='resize_migrating'), [], None),
    (server('s', status='SHELVED_OFFLOADED'), [], None),
    (server('s', node=None), [], None),
    # A flavor without mdevs, a server without: fine.
    (server('s', specs={'resources:CUSTOM_PCI_10DE_1EB8': '1'}), [], None),
])
def test_missing_allocations(srv, held, expected):
    found = audit.missing_allocations([srv], held, {'VGPU'})
    if expected is None:
        assert found == []
    else:
        [finding] = found
        assert finding.check == 'missing-allocation'
        assert expected in finding.message
        assert 'openstack server migrate --wait s' in finding.message


def test_device_amounts_sum_every_group_named_or_numbered():
    srv = server('s', specs={
        'resources:VGPU': '1', 'resources1:VGPU': '2',
        'resources2:CUSTOM_MLX5': '1', 'resources:VCPU': '4',
        'resources_GPU:VGPU': '3', 'resources3:VGPU': 'x'})
    assert audit.server_request(srv).device_amounts(
        {'VGPU', 'CUSTOM_MLX5'}) == {'VGPU': 6, 'CUSTOM_MLX5': 1}


@pytest.mark.parametrize('held,expected', [
    # A healthy server of a named-group flavor is no finding...
    ([alloc('s', 'g1')], None),
    # ...and one whose VGPU allocation went missing is.
    ([], 'asks for 1 x VGPU but it holds none'),
])
def test_missing_allocations_of_named_groups(held, expected):
    srv = server('s', specs={'resources_GPU:VGPU': '1',
                             'trait_GPU:CUSTOM_NVIDIA_12': 'required'})
    found = audit.missing_allocations([srv], held, {'VGPU'})
    assert [f.message for f in found if expected in f.message] == [
        f.message for f in found]
    assert len(found) == (0 if expected is None else 1)


def test_node_mismatch_uses_the_node_not_the_service_host():
    srv = server('s', node='c1')
    srv = dataclasses.replace(srv, host='short-name')
    assert audit.node_mismatches([srv], [alloc('s', 'g1')]) == []
    [finding] = audit.node_mismatches([srv], [alloc('s', 'g4')])
    assert (finding.host, finding.device, finding.server) == (
        'c2.dc', '0000:3b:00.0', 's')
    assert 'runs on node c1' in finding.message
    moving = server('s', task='migrating')
    assert audit.node_mismatches([moving], [alloc('s', 'g4')]) == []


# -- over-capacity --------------------------------------------------------

@pytest.mark.parametrize('dev,over', [
    (device('g1', total=4, used=4), False),
    (device('g1', total=4, used=5), True),
    (device('g1', total=4, reserved=1, used=4), True),
    (device('g1', total=4, ratio=2.0, used=8), False),
    (device('g1', total=4, ratio=0.5, used=3), True),
])
def test_over_capacity(dev, over):
    allocs = [alloc('a', 'g1'), alloc('b', 'g1'), alloc('c', 'g2')]
    found = audit.over_capacity([dev], allocs)
    assert bool(found) == over
    if over:
        assert found[0].server == 'a,b'
        assert found[0].severity == 'error'


# -- lost-trait / wrong-trait ---------------------------------------------

@pytest.mark.parametrize('trait,key', [
    ('CUSTOM_NVIDIA_35', 'NVIDIA_35'),
    ('CUSTOM_VGPU_NVIDIA_35', 'NVIDIA_35'),
    ('CUSTOM_I915_GVTG_V5_4', 'I915_GVTG_V5_4'),
    ('CUSTOM_MTTY_1', 'MTTY_1'),
    ('CUSTOM_MLX5_CORE', 'MLX5_CORE'),
    ('CUSTOM_GOLD', None),
    ('CUSTOM_NVIDIA', None),
    ('OWNER_NOVA', None),
])
def test_type_key(trait, key):
    assert audit.type_key(trait) == key


def _traits(found):
    return sorted((f.check, f.device, f.severity,
                   f.repair.trait if f.repair else None) for f in found)


@pytest.mark.parametrize('devices,expected', [
    # Siblings agree: the bare one lost it, and --fix adds it.
    ([device('g1', ['CUSTOM_NVIDIA_11', 'OWNER_NOVA']),
      device('g2', ['OWNER_NOVA']),
      device('g3', ['CUSTOM_NVIDIA_11'])],
     [('lost-trait', '0000:85:00.0', 'warning', 'CUSTOM_NVIDIA_11')]),
    # Siblings of two types: which one is not known, no repair.
    ([device('g1', ['CUSTOM_NVIDIA_11']), device('g2', []),
      device('g3', ['CUSTOM_NVIDIA_12'])],
     [('lost-trait', '0000:85:00.0', 'warning', None)]),
    # Another resource class is not a sibling.
    ([device('g1', ['CUSTOM_MLX5_CORE'], rc='CUSTOM_MLX5'),
      device('g2', [])], []),
    # Nobody uses type traits: nothing lost.
    ([device('g1', ['CUSTOM_GOLD']), device('g2', [])], []),
    # Two types on one device.
    ([device('g1', ['CUSTOM_NVIDIA_11', 'CUSTOM_NVIDIA_12']),
      device('g2', ['CUSTOM_NVIDIA_11'])],
     [('wrong-trait', '0000:84:00.0', 'error', None)]),
    # The same type under two prefixes is one type.
    ([device('g1', ['CUSTOM_NVIDIA_11', 'CUSTOM_T_NVIDIA_11'])], []),
])
def test_trait_findings_by_siblings(devices, expected):
    assert _traits(audit.trait_findings(devices)) == expected


@pytest.fixture(scope='module')
def CONF(tmp_path_factory):
    path = tmp_path_factory.mktemp('conf') / 'nova.conf'
    path.write_text(
        '[devices]\nenabled_mdev_types = nvidia-11, nvidia-12\n'
        '[mdev_nvidia-12]\ndevice_addresses = 0000:85:00.0\n')
    return local_novaconf.parse_files([str(path)])


def test_trait_findings_by_nova_conf(CONF):
    devices = [device('g1', ['CUSTOM_NVIDIA_11']),
               device('g2', ['CUSTOM_NVIDIA_11']),
               device('g3', []),
               device('g4', [])]
    found = audit.trait_findings(devices, {'c1': CONF})
    assert _traits(found) == [
        ('lost-trait', '0000:85:00.0', 'warning', 'CUSTOM_NVIDIA_12'),
        ('lost-trait', '0000:86:00.0', 'warning', 'CUSTOM_NVIDIA_11'),
        ('wrong-trait', '0000:85:00.0', 'error', None)]
    wrong = next(f for f in found if f.check == 'wrong-trait')
    assert ('openstack mdev trait unset --trait CUSTOM_NVIDIA_11 '
            'c1:0000:85:00.0') in wrong.message


def test_conf_traits_adapter(CONF):
    assert audit.conf_traits(CONF, 'pci_0000_85_00_0') == (
        'CUSTOM_NVIDIA_12', frozenset({'CUSTOM_NVIDIA_11'}))
    assert audit.conf_traits(CONF, 'pci_0000_99_00_0') == (
        'CUSTOM_NVIDIA_11', frozenset({'CUSTOM_NVIDIA_12'}))


# -- unschedulable-flavor -------------------------------------------------

def flavor(specs, disabled=False):
    return nova_payloads.flavor({
        'id': 'f', 'name': 'fl', 'extra_specs': specs,
        'OS-FLV-DISABLED:disabled': disabled, 'vcpus': 2, 'ram': 2048,
        'disk': 10, 'OS-FLV-EXT-DATA:ephemeral': 0, 'swap': ''})


def gpu_rp(uuid, traits=('OWNER_NOVA', 'CUSTOM_NVIDIA_11'), rc='VGPU',
           total=4, used=0):
    candidate = CANDIDATES[uuid]
    return capacity.Provider(
        uuid, candidate.name, {rc: capacity.Inventory(total,
                                                      max_unit=total)},
        {rc: used}, frozenset(traits), candidate.pci_address)


def tree(name, *gpus, disabled=False, vcpu=64):
    root = capacity.Provider(
        'root-' + name, name, {'VCPU': capacity.Inventory(vcpu),
                               'MEMORY_MB': capacity.Inventory(65536),
                               'DISK_GB': capacity.Inventory(1000)},
        {}, frozenset({'OWNER_NOVA'}))
    return capacity.Host(name, root, tuple(gpus), disabled)


CLOUD = [tree('c1', gpu_rp('g1', used=4), gpu_rp('g2')),
         tree('c2.dc', gpu_rp('g4', rc='CUSTOM_MLX5'))]


@pytest.mark.parametrize('specs,missing,expected', [
    ({'resources:VGPU': '1'}, (), None),
    ({'resources:VGPU': '1', 'trait:CUSTOM_GONE': 'required'}, (),
     'required trait CUSTOM_GONE rules out 2 devices and 1 host, leaving '
     'none; smallest change: tag c1:0000:85:00.0 with CUSTOM_GONE'),
    ({'resources:VGPU': '1', 'trait:CUSTOM_NVIDIA_11': 'forbidden'}, (),
     'forbidden trait CUSTOM_NVIDIA_11 rules out 2 devices and 1 host, '
     'leaving none; smallest change: remove CUSTOM_NVIDIA_11 from '
     'c1:0000:85:00.0'),
    # Too big for any device even when empty: no change of traits or
    # usage helps, as capacity --explain says.
    ({'resources:VGPU': '8'}, (),
     'room for 8 VGPU rules out 2 devices and 1 host, leaving none (the '
     'largest VGPU device holds 4); smallest change: none found on the '
     'devices'),
    ({'resources1:VGPU': '1', 'resources2:VGPU': '1',
      'group_policy': 'isolate', 'resources3:VGPU': '1'}, (),
     '3 different devices on one host (group_policy=isolate) rules out 1 '
     'device and 1 host, leaving none; smallest change: none found on the '
     'devices'),
    ({'resources1:VGPU': '1', 'resources2:VGPU': '1'}, (),
     'no group_policy extra spec, so Placement rejects every request'),
    ({'resources:CUSTOM_MLX5': '1', 'resources:VCPU': '128'}, (),
     'root room for DISK_GB:10, MEMORY_MB:2048, VCPU:128 rules out 1 '
     'device and 1 host, leaving none; smallest change: free 64 VCPU on '
     'c2.dc'),
    ({'resources:CUSTOM_OLD': '1'}, ('CUSTOM_OLD',),
     'resource class CUSTOM_OLD, which does not exist'),
    # A class that exists but no mdev device has: not ours to judge.
    ({'resources:CUSTOM_PCI_10DE_1EB8': '1'}, (), None),
    ({'resources:VCPU': '1'}, (), None),
])
def test_unschedulable_flavors(specs, missing, expected):
    found = audit.unschedulable_flavors([flavor(specs)], CLOUD, missing)
    if expected is None:
        assert found == []
    else:
        [finding] = found
        assert expected in finding.message, finding.message
        assert finding.severity == 'warning'
        assert finding.check == 'unschedulable-flavor'
        if not missing:
            assert finding.message.startswith(
                'Flavor fl (f) cannot be scheduled: ')
            assert finding.message.endswith(
                'see it with: openstack mdev capacity --flavor f --explain')
    assert audit.unschedulable_flavors(
        [flavor(specs, disabled=True)], CLOUD, missing) == []


def test_unschedulable_flavor_gives_the_explainers_reason():
    """The constraint that leaves no host and the smallest change are
    those of the capacity explainer on the same trees.
    """
    specs = {'resources:VGPU': '1', 'trait:CUSTOM_GONE': 'required'}
    request = request_filter.process_reqspec(
        rr.request_for(flavor(specs)))
    steps, fix = explanation.explain(request, CLOUD)
    last = next(s for s in steps if not s.hosts_left)
    [finding] = audit.unschedulable_flavors([flavor(specs)], CLOUD)
    assert '%s rules out %d devices' % (last.constraint, last.devices_out) \
        in finding.message
    assert 'smallest change: %s;' % fix in finding.message
    assert finding.resource_class == 'VGPU'


def test_a_full_cloud_is_no_finding():
    full = [tree('c1', gpu_rp('g1', used=4), gpu_rp('g2', used=4))]
    assert audit.unschedulable_flavors(
        [flavor({'resources:VGPU': '1'})], full) == []
    # The one device with the trait is full: the flavor is only full.
    tagged = [tree('c1', gpu_rp('g1', used=4, traits=('CUSTOM_T',)),
                   gpu_rp('g2'))]
    assert audit.unschedulable_flavors(
        [flavor({'resources:VGPU': '1', 'trait:CUSTOM_T': 'required'})],
        tagged) == []


def test_stale_trait_and_full_device_says_both_changes():
    """The trait rules the devices out; the explainer's change is on the
    cloud as it is (tag the free device, not the full one).
    """
    cloud = [tree('c1', gpu_rp('g1', used=4), gpu_rp('g2', used=2))]
    [finding] = audit.unschedulable_flavors(
        [flavor({'resources:VGPU': '3', 'trait:CUSTOM_NEW': 'required'})],
        cloud)
    assert ('required trait CUSTOM_NEW rules out 2 devices and 1 host, '
            'leaving none; smallest change: tag c1:0000:84:00.0 with '
            'CUSTOM_NEW; free 3 VGPU on c1:0000:84:00.0') in finding.message


def test_disabled_computes_make_a_flavor_unschedulable():
    cloud = [tree('c1', gpu_rp('g1'), disabled=True)]
    [finding] = audit.unschedulable_flavors(
        [flavor({'resources:VGPU': '1'})], cloud)
    assert ('compute service enabled (root without COMPUTE_STATUS_DISABLED)'
            ' rules out 1 device and 1 host, leaving none; smallest change: '
            'enable the compute service of c1') in finding.message


def test_unknown_classes():
    assert audit.unknown_classes(
        [flavor({'resources:CUSTOM_A': '1', 'resources1:VGPU': '1',
                 'resources2:CUSTOM_B': '1'})], {'VGPU', 'CUSTOM_B'}) == [
        'CUSTOM_A']


# -- repairs --------------------------------------------------------------

def test_repairs_only_of_the_checks_asked_and_once_each():
    remove = audit.RemoveAllocations('x', 1, 'p', 'u')
    add = audit.AddTrait(device('g1'), 'CUSTOM_T')
    found = [audit.Finding('error', check='orphaned-allocation',
                           repair=remove),
             audit.Finding('error', check='orphaned-allocation',
                           repair=remove),
             audit.Finding('warning', check='lost-trait', repair=add)]
    assert audit.repairs(found, ('orphaned-allocation',)) == [remove]
    assert audit.repairs(found, audit.FIXABLE) == [remove, add]


@pytest.mark.parametrize('servers,flavors,skipped', [
    (None, True, 'orphaned-allocation, missing-allocation, node-mismatch, '
                 'unschedulable-flavor were not checked'),
    (None, False, 'orphaned-allocation, missing-allocation, node-mismatch '
                  'were not checked'),
    ([], True, 'unschedulable-flavor was not checked'),
])
def test_nova_unreachable_names_what_was_skipped(servers, flavors, skipped):
    from osc_mdev.features.audit import reads as client_audit
    snapshot = client_audit.Snapshot(
        [], [alloc('x', 'g1')], servers, 'Cannot reach the Compute API.',
        {}, None, (), frozenset({'c1'}))
    [finding] = client_audit.audit(snapshot, flavors=flavors)
    assert finding.check == 'nova-unreachable'
    assert skipped in finding.message


PCI = {c.uuid: c for c in providers.find_candidates([
    _rp('r5', 'gpu5'),
    _rp('p1', 'gpu5_0000:AF:00.0', 'r5'),
], providers.KINDS)}
PCI_TRAITS = ('COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA')


def test_pci_devices_in_orphan_and_capacity_checks_only():
    from osc_mdev.features.audit import reads as client_audit
    rc = 'CUSTOM_PCI_10DE_25B6'
    full = providers.Device(PCI['p1'], rc, providers.Inventory(2, 1, 1, 2),
                            2, 1, PCI_TRAITS)
    held = [allocations.MdevAllocation(c, PCI['p1'], rc, 1)
            for c in ('s1', 'gone')]
    # s1's flavor asks for a PCI device by alias, not by resource class.
    servers = [server('s1', node='gpu5',
                      specs={'pci_passthrough:alias': 'a16:1'})]
    snapshot = client_audit.Snapshot(
        [full], held, servers, None,
        {'gone': audit.ConsumerFacts(None, None, RECORD)}, [], (),
        frozenset({'gpu5'}))
    found = client_audit.audit(snapshot)
    assert sorted((f.check, f.device, f.server) for f in found) == [
        ('orphaned-allocation', '0000:af:00.0', 'gone'),
        ('over-capacity', '0000:af:00.0', 'gone,s1'),
        # Without the controller's aliases s1 is not judged, and said so.
        ('pci-alias-unchecked', '', '')]


# -- PCI aliases: the controller's [pci] alias -----------------------------

A16 = 'CUSTOM_PCI_10DE_25B6'
CONTROLLER = pci.PciConfig(aliases=pci_request.pci_aliases([
    ('{"name": "a16", "vendor_id": "10de", "product_id": "25b6"}', ''),
    ('{"name": "l40s", "resource_class": "CUSTOM_L40S", '
     '"traits": "fast"}', '')], pci_in_placement=True),
    pci_in_placement=True)


def test_pci_devices_of_the_server_request():
    def amounts(specs):
        request = audit.server_request(server('s', specs=specs),
                                       CONTROLLER)
        return None if request is None else request.device_amounts(())

    assert amounts({}) == {}
    assert amounts({'pci_passthrough:alias': 'a16:2, l40s:1'}) == {
        A16: 2, 'CUSTOM_L40S': 1}
    # Not known: an alias the controller does not define, a bad value.
    assert amounts({'pci_passthrough:alias': 'nope:1'}) is None
    assert amounts({'pci_passthrough:alias': 'a16'}) is None


def pci_alloc(consumer, rc=A16, amount=1):
    return allocations.MdevAllocation(consumer, PCI['p1'], rc, amount)


#: The same aliases, with the scheduler's [filter_scheduler]
#: pci_in_placement off: it asks Placement for no PCI device.
NOT_IN_PLACEMENT = dataclasses.replace(CONTROLLER, pci_in_placement=False)


def test_no_pci_device_is_asked_of_placement_with_pci_in_placement_off():
    request = audit.server_request(
        server('s', specs={'pci_passthrough:alias': 'a16:2',
                           'resources:VGPU': '1'}), NOT_IN_PLACEMENT)
    assert request.device_amounts(()) == {}
    assert request.device_amounts() == {'VGPU': 1}


@pytest.mark.parametrize('held', [
    # Classic PCI passthrough: Placement knows no PCI device.
    [],
    # nova-compute reports its VFs and healed the allocation.
    [pci_alloc('s1')],
])
def test_no_pci_allocation_is_judged_with_pci_in_placement_off(held):
    found = audit.missing_allocations(
        [server('s1', node='gpu5',
                specs={'pci_passthrough:alias': 'a16:1'})], held, {'VGPU'},
        NOT_IN_PLACEMENT)
    assert found == []


@pytest.mark.parametrize('specs, held, expected', [
    # Holds its VF: nothing to say.
    ({'pci_passthrough:alias': 'a16:1'}, [pci_alloc('s1')], None),
    # Its PCI allocation was removed.
    ({'pci_passthrough:alias': 'a16:2'}, [],
     'asks for 2 x %s but it holds none' % A16),
    # One VF of two.
    ({'pci_passthrough:alias': 'a16:2'}, [pci_alloc('s1')],
     'asks for 2 x %s but it holds 1 x %s' % (A16, A16)),
    # An mdev and a VF; the mdev is there, the VF is not.
    ({'pci_passthrough:alias': 'a16:1', 'resources:VGPU': '1'},
     [alloc('s1', 'g1')], 'asks for 1 x %s, 1 x VGPU but it holds 1 x VGPU'
     % A16),
    # An alias the controller does not define is not judged.
    ({'pci_passthrough:alias': 'nope:1'}, [], None),
])
def test_missing_pci_allocations(specs, held, expected):
    found = audit.missing_allocations(
        [server('s1', node='gpu5', specs=specs)], held, {'VGPU'},
        CONTROLLER)
    if expected is None:
        assert found == []
    else:
        [finding] = found
        assert finding.check == 'missing-allocation'
        assert expected in finding.message, finding.message


def test_missing_allocation_through_the_client_with_aliases():
    from osc_mdev.features.audit import reads as client_audit
    rp = providers.Device(PCI['p1'], A16, providers.Inventory(4, 0, 1, 4),
                          1, 1, PCI_TRAITS)
    servers = [server('s1', node='gpu5',
                      specs={'pci_passthrough:alias': 'a16:1'}),
               server('s2', node='gpu5',
                      specs={'pci_passthrough:alias': 'a16:1'})]
    snapshot = client_audit.Snapshot(
        [rp], [pci_alloc('s1')], servers, None, {}, [], (),
        frozenset({'gpu5'}))
    found = client_audit.audit(snapshot, pci_config=CONTROLLER)
    assert [(f.check, f.server) for f in found] == [
        ('missing-allocation', 's2')]


def pci_tree(name, rc=A16, total=4, used=0, traits=PCI_TRAITS):
    pf = capacity.Provider('pf-' + name, name + '_0000:AF:00.0',
                           {rc: capacity.Inventory(total, max_unit=total)},
                           {rc: used}, frozenset(traits), '0000:af:00.0')
    return tree(name, pf)


def test_unschedulable_pci_alias_flavors():
    cloud = [pci_tree('gpu5'), pci_tree('gpu6', rc='CUSTOM_L40S')]
    ok = flavor({'pci_passthrough:alias': 'a16:4'})
    assert audit.unschedulable_flavors([ok], cloud,
                                       pci_config=CONTROLLER) == []
    # Five VFs on one host: no PF has them (group_policy none: any PF).
    [finding] = audit.unschedulable_flavors(
        [flavor({'pci_passthrough:alias': 'a16:5'})], cloud,
        pci_config=CONTROLLER)
    assert 'all groups at once rules out' in finding.message
    # The alias' trait is on no PF.
    [finding] = audit.unschedulable_flavors(
        [flavor({'pci_passthrough:alias': 'l40s:1'})], cloud,
        pci_config=CONTROLLER)
    assert finding.resource_class == 'CUSTOM_L40S'
    assert finding.message.startswith(
        'Flavor fl (f) cannot be scheduled: required trait CUSTOM_FAST '
        'rules out 1 device and 1 host, leaving none; smallest change: '
        'tag gpu6:0000:af:00.0 with CUSTOM_FAST'), finding.message
    # An alias Nova does not know: the boot is refused.
    [finding] = audit.unschedulable_flavors(
        [flavor({'pci_passthrough:alias': 'nope:1'})], cloud,
        pci_config=CONTROLLER)
    assert 'PCI alias nope of the flavor is not defined' in finding.message
    # Without the aliases, alias flavors are not judged here.
    assert audit.unschedulable_flavors(
        [flavor({'pci_passthrough:alias': 'nope:1'})], cloud) == []


def test_pci_alias_unchecked_is_said_once():
    note = audit.pci_alias_unchecked(
        [server('s1', specs={'pci_passthrough:alias': 'a16:1'}),
         server('s2', specs={'pci_passthrough:alias': 'a16:1'}),
         server('s3')],
        [flavor({'pci_passthrough:alias': 'a16:1'}),
         flavor({'pci_passthrough:alias': 'a16:1'}, disabled=True)])
    assert (note.severity, note.check) == ('info', 'pci-alias-unchecked')
    assert note.message == (
        '2 servers and 1 flavor ask for PCI devices by alias '
        '(pci_passthrough:alias), which missing-allocation and '
        "unschedulable-flavor did not check; check them with the "
        "controller's nova.conf: openstack mdev audit --controller-conf "
        '<file>.')
    assert audit.pci_alias_unchecked([server('s3')], []) is None


# -- --trait-prefix ---------------------------------------------------------

@pytest.mark.parametrize('trait,key', [
    ('CUSTOM_GPU_NVIDIA_35', 'NVIDIA_35'),
    ('CUSTOM_GPU_A16_4Q', 'A16_4Q'),        # any type after the prefix
    ('CUSTOM_NVIDIA_35', None),             # the default naming is not it
    ('CUSTOM_GPU_', None),
    ('OWNER_NOVA', None),
])
def test_type_key_with_a_prefix(trait, key):
    assert audit.type_key(trait, prefix='CUSTOM_GPU_') == key


@pytest.mark.parametrize('devices,expected', [
    # The cloud's own naming: nothing lost, nothing wrong.
    ([device('g1', ['CUSTOM_GPU_NVIDIA_11', 'OWNER_NOVA']),
      device('g2', ['CUSTOM_GPU_NVIDIA_11'])], []),
    # A device with only the default name lacks the cloud's: the repair
    # adds the prefixed trait, never the default one.
    ([device('g1', ['CUSTOM_GPU_NVIDIA_11']),
      device('g2', ['CUSTOM_NVIDIA_11'])],
     [('lost-trait', '0000:85:00.0', 'warning', 'CUSTOM_GPU_NVIDIA_11')]),
    ([device('g1', ['CUSTOM_GPU_NVIDIA_11', 'CUSTOM_GPU_NVIDIA_12'])],
     [('wrong-trait', '0000:84:00.0', 'error', None)]),
])
def test_trait_findings_by_siblings_with_a_prefix(devices, expected):
    assert _traits(audit.trait_findings(devices, prefix='CUSTOM_GPU_')) == (
        expected)


def test_trait_findings_by_nova_conf_with_a_prefix(CONF):
    tagged = [device('g1', ['CUSTOM_GPU_NVIDIA_11']),
              device('g2', ['CUSTOM_GPU_NVIDIA_12']),
              device('g3', ['CUSTOM_GPU_NVIDIA_11'])]
    # Tagged as 'trait set --compute-conf --trait-prefix CUSTOM_GPU_'
    # does: clean with that prefix...
    assert audit.trait_findings(tagged, {'c1': CONF},
                                prefix='CUSTOM_GPU_') == []
    # ...while by the default naming every device lacks its trait.
    assert [f.repair.trait for f in audit.trait_findings(
        tagged, {'c1': CONF})] == [
        'CUSTOM_NVIDIA_11', 'CUSTOM_NVIDIA_12', 'CUSTOM_NVIDIA_11']
    wrong = [device('g1', ['CUSTOM_GPU_NVIDIA_12'])]
    assert _traits(audit.trait_findings(wrong, {'c1': CONF},
                                        prefix='CUSTOM_GPU_')) == [
        ('lost-trait', '0000:84:00.0', 'warning', 'CUSTOM_GPU_NVIDIA_11'),
        ('wrong-trait', '0000:84:00.0', 'error', None)]
