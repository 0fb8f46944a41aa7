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

from osc_mdev.domain import flavors
from osc_mdev.domain import providers

MDEV = {'VGPU', 'CUSTOM_MLX5'}


def test_single_group():
    req = flavors.MdevRequest('VGPU', 2, ('CUSTOM_NVIDIA_11',),
                              ('CUSTOM_BROKEN',))
    assert flavors.to_extra_specs(req) == {
        'resources:VGPU': '2',
        'trait:CUSTOM_NVIDIA_11': 'required',
        'trait:CUSTOM_BROKEN': 'forbidden'}
    assert req.describe() == (
        '2 x VGPU from one device with CUSTOM_NVIDIA_11 without '
        'CUSTOM_BROKEN')


def test_spread_uses_isolated_numbered_groups():
    req = flavors.MdevRequest('VGPU', 2, ('CUSTOM_T',), spread=True)
    assert flavors.to_extra_specs(req) == {
        'group_policy': 'isolate',
        'resources1:VGPU': '1', 'trait1:CUSTOM_T': 'required',
        'resources2:VGPU': '1', 'trait2:CUSTOM_T': 'required'}
    # Group numbers already used by other requests are skipped.
    assert set(flavors.to_extra_specs(req, used_groups={'1'})) == {
        'group_policy', 'resources2:VGPU', 'trait2:CUSTOM_T',
        'resources3:VGPU', 'trait3:CUSTOM_T'}
    assert 'different device' in req.describe()


def test_spread_of_one_is_a_single_group():
    req = flavors.MdevRequest('VGPU', 1, spread=True)
    assert flavors.to_extra_specs(req) == {'resources:VGPU': '1'}


@pytest.mark.parametrize('request_', [
    flavors.MdevRequest('VGPU', 1),
    flavors.MdevRequest('CUSTOM_MLX5', 3, ('CUSTOM_A', 'CUSTOM_B'),
                        ('CUSTOM_C',)),
    flavors.MdevRequest('VGPU', 3, ('CUSTOM_A',), spread=True),
])
def test_parse_round_trip(request_):
    specs = flavors.to_extra_specs(request_)
    specs['hw:cpu_policy'] = 'dedicated'
    assert flavors.parse(specs, MDEV) == request_


def test_parse_no_mdev():
    assert flavors.parse({'resources:VCPU': '0', 'hw:mem': '1'}, MDEV) is None


def test_plan_replaces_stale_keys_and_keeps_unrelated():
    current = {
        'resources:VGPU': '1', 'trait:CUSTOM_NVIDIA_11': 'required',
        'trait:HW_CPU_X86_AVX2': 'required',     # the compute node's
        'hw:cpu_policy': 'dedicated',
        'resources1:CUSTOM_PCI_10DE': '1',        # another request group
        'trait1:CUSTOM_PCI_TAG': 'required',
    }
    new = flavors.MdevRequest('CUSTOM_MLX5', 2, ('CUSTOM_MLX5_CORE',),
                              spread=True)
    to_set, to_delete, changes = flavors.plan(
        current, new, MDEV, device_traits={'CUSTOM_NVIDIA_11'})
    assert to_delete == ['resources:VGPU', 'trait:CUSTOM_NVIDIA_11']
    assert to_set == {
        'group_policy': 'isolate',
        'resources2:CUSTOM_MLX5': '1', 'trait2:CUSTOM_MLX5_CORE': 'required',
        'resources3:CUSTOM_MLX5': '1', 'trait3:CUSTOM_MLX5_CORE': 'required'}
    actions = {c.key: c.action for c in changes}
    assert actions['resources:VGPU'] == 'removed'
    assert actions['resources2:CUSTOM_MLX5'] == 'added'
    assert 'hw:cpu_policy' not in actions


def test_plan_same_request_changes_nothing():
    req = flavors.MdevRequest('VGPU', 1, ('CUSTOM_A',))
    current = flavors.to_extra_specs(req)
    to_set, to_delete, changes = flavors.plan(current, req, MDEV)
    assert (to_set, to_delete) == ({}, [])
    assert {c.action for c in changes} == {'unchanged'}


def test_plan_from_spread_back_to_single_drops_group_policy():
    old = flavors.MdevRequest('VGPU', 2, ('CUSTOM_A',), spread=True)
    current = flavors.to_extra_specs(old)
    to_set, to_delete, _ = flavors.plan(
        current, flavors.MdevRequest('VGPU', 1), MDEV)
    assert to_set == {'resources:VGPU': '1'}
    assert to_delete == sorted([
        'group_policy', 'resources1:VGPU', 'resources2:VGPU',
        'trait1:CUSTOM_A', 'trait2:CUSTOM_A'])


def _device(uuid, host, rc='VGPU', total=4, used=0, traits=()):
    cand = providers.Candidate(uuid, '%s_pci_%s' % (host, uuid), host, 'r',
                               'pci_' + uuid, '0000:%s:00.0' % uuid[-2:], 1)
    [dev] = providers.build_devices(
        cand, {rc: {'total': total, 'max_unit': total}}, 1, {rc: used},
        ('OWNER_NOVA',) + tuple(traits))
    return dev


DEVICES = [
    _device('d01', 'h1', traits=('CUSTOM_A',), total=4, used=4),
    _device('d02', 'h1', traits=('CUSTOM_A',), total=4, used=1),
    _device('d03', 'h2', traits=('CUSTOM_B',), total=8),
    _device('d04', 'h2', rc='CUSTOM_MLX5', total=2),
]


@pytest.mark.parametrize('req,problem', [
    (flavors.MdevRequest('CUSTOM_NONE'),
     'no mdev device offers resource class CUSTOM_NONE'),
    (flavors.MdevRequest('VGPU', required=('CUSTOM_C',)),
     'no VGPU device has trait CUSTOM_C'),
    (flavors.MdevRequest('VGPU', required=('CUSTOM_A',),
                         forbidden=('CUSTOM_A',)),
     'every VGPU device that matches has trait CUSTOM_A'),
    (flavors.MdevRequest('CUSTOM_MLX5', 3),
     'the largest matching device offers 2 CUSTOM_MLX5 per server'),
    (flavors.MdevRequest('VGPU', 3, ('CUSTOM_B',), spread=True),
     'no host has 3 matching devices'),
])
def test_fit_problems(req, problem):
    result = flavors.fit(req, DEVICES)
    assert result.devices == ()
    assert problem in result.problem


def test_fit_lists_devices_with_room():
    result = flavors.fit(flavors.MdevRequest('VGPU', 2, ('CUSTOM_A',)),
                         DEVICES)
    assert result.problem is None
    assert [d.uuid for d in result.devices] == ['d02']
    spread = flavors.fit(
        flavors.MdevRequest('VGPU', 2, ('CUSTOM_A',), spread=True), DEVICES)
    assert spread.problem is None
    assert [d.uuid for d in spread.devices] == ['d02']


def test_servers_that_fit():
    assert flavors.servers_that_fit(
        flavors.MdevRequest('VGPU', 2), DEVICES[:3]) == 0 + 1 + 4
    # Spread over 2 devices of one host: h1 has frees 0 and 3 -> none.
    assert flavors.servers_that_fit(
        flavors.MdevRequest('VGPU', 2, spread=True), DEVICES[:3]) == 0
    two = [_device('x1', 'h', total=3), _device('x2', 'h', total=2)]
    assert flavors.servers_that_fit(
        flavors.MdevRequest('VGPU', 2, spread=True), two) == 2


def test_amount_validation():
    with pytest.raises(ValueError, match='at least 1'):
        flavors.validate_amount(0)


# -- stale keys, resulting extra specs, whole-flavor check, write results --

CARRIED = {'OWNER_NOVA', 'CUSTOM_NEW', 'HW_CPU_X86_AVX2', 'COMPUTE_NODE'}
EXISTING = CARRIED | {'CUSTOM_OLD', 'CUSTOM_GUARD', 'HW_CPU_X86_AVX512F'}


@pytest.mark.parametrize('specs,stale', [
    # A custom trait no provider has: required is stale.
    ({'trait:CUSTOM_OLD': 'required'}, ['trait:CUSTOM_OLD']),
    # Forbidden and existing: harmless, kept.
    ({'trait:CUSTOM_GUARD': 'forbidden'}, []),
    # Forbidden but gone from Placement: Placement refuses the request.
    ({'trait:CUSTOM_GONE': 'forbidden'}, ['trait:CUSTOM_GONE']),
    # Required and carried: not stale.
    ({'trait:CUSTOM_NEW': 'required'}, []),
    # Standard traits are never ours.
    ({'trait:HW_CPU_X86_AVX512F': 'required'}, []),
    # Numbered groups belong to their request.
    ({'trait1:CUSTOM_OLD': 'required'}, []),
    ({'resources:VGPU': '1', 'hw:cpu_policy': 'dedicated'}, []),
])
def test_stale_keys(specs, stale):
    assert sorted(flavors.stale_keys(specs, CARRIED, EXISTING)) == stale


def test_stale_keys_without_known_existence_keeps_forbidden():
    assert flavors.stale_keys({'trait:CUSTOM_GONE': 'forbidden'},
                              CARRIED) == {}


@pytest.mark.parametrize('current,request_,to_set,to_delete,notes', [
    # Re-tagged devices: the old type trait goes, shown as stale.
    ({'resources:VGPU': '1', 'trait:CUSTOM_OLD': 'required'},
     flavors.MdevRequest('VGPU', 1, ('CUSTOM_NEW',)),
     {'trait:CUSTOM_NEW': 'required'}, ['trait:CUSTOM_OLD'],
     {'trait:CUSTOM_OLD': 'stale: no resource provider has CUSTOM_OLD '
                          'any more'}),
    # The new request names the stale trait again: it stays, no note.
    ({'resources:VGPU': '1', 'trait:CUSTOM_OLD': 'required'},
     flavors.MdevRequest('VGPU', 1, ('CUSTOM_OLD',)), {}, [], {}),
    # The compute node's trait and an existing guard are kept.
    ({'trait:HW_CPU_X86_AVX2': 'required',
      'trait:CUSTOM_GUARD': 'forbidden'},
     flavors.MdevRequest('VGPU', 2),
     {'resources:VGPU': '2'}, [], {}),
])
def test_plan_with_stale_keys(current, request_, to_set, to_delete, notes):
    got_set, got_delete, changes = flavors.plan(
        current, request_, MDEV, device_traits={'CUSTOM_NEW'},
        carried=CARRIED, existing=EXISTING)
    assert (got_set, got_delete) == (to_set, to_delete)
    assert {c.key: c.note for c in changes if c.note} == notes
    after = flavors.resulting(current, got_set, got_delete)
    assert set(after) == (set(current) - set(to_delete)) | set(to_set)


@pytest.mark.parametrize('current,request_,others', [
    ({'resources1:CUSTOM_NIC': '1'},
     flavors.MdevRequest('VGPU', 2, spread=True), ['resources1:CUSTOM_NIC']),
    # Not spread: no numbered mdev groups, isolate is not set.
    ({'resources1:CUSTOM_NIC': '1', 'group_policy': 'none'},
     flavors.MdevRequest('VGPU', 2), []),
    # A spread of one is a single unnumbered group.
    ({'resources1:CUSTOM_NIC': '1'},
     flavors.MdevRequest('VGPU', 1, spread=True), []),
    # The flavor's own earlier spread is replaced, not "other".
    (flavors.to_extra_specs(flavors.MdevRequest('VGPU', 2, spread=True)),
     flavors.MdevRequest('VGPU', 3, spread=True), []),
])
def test_isolate_reaches_others(current, request_, others):
    assert flavors.isolate_reaches_others(current, request_, MDEV) == others


def _tree_device(uuid, host, rc='VGPU', max_unit=4, traits=()):
    cand = providers.Candidate(uuid, '%s_pci_%s' % (host, uuid), host,
                               'root-' + host, 'pci_' + uuid,
                               '0000:%s:00.0' % uuid[-2:], 1)
    [dev] = providers.build_devices(
        cand, {rc: {'total': max_unit, 'max_unit': max_unit}}, 1, {rc: 0},
        ('OWNER_NOVA',) + tuple(traits))
    return dev


TREE = [
    _tree_device('a01', 'h1', traits=('CUSTOM_NEW',)),
    _tree_device('a02', 'h1', traits=('CUSTOM_NEW', 'CUSTOM_GUARD')),
    _tree_device('b01', 'h2', traits=('CUSTOM_NEW',), max_unit=1),
    _tree_device('c01', 'h3', rc='CUSTOM_MLX5', max_unit=2),
]
ROOTS = {'root-h1': {'HW_CPU_X86_AVX2'}, 'root-h2': {'COMPUTE_NODE'}}


@pytest.mark.parametrize('specs,problem', [
    ({'resources:VGPU': '1', 'trait:CUSTOM_NEW': 'required'}, None),
    # Both the old and the new type trait: what issue 9 reproduced.
    ({'resources:VGPU': '1', 'trait:CUSTOM_NEW': 'required',
      'trait:CUSTOM_OLD': 'required'},
     'the unnumbered request group requires trait CUSTOM_OLD, which no '
     'resource provider has'),
    ({'resources:VGPU': '1', 'trait:CUSTOM_GONE': 'forbidden'},
     'names trait CUSTOM_GONE, which does not exist in Placement'),
    # Unnumbered traits may sit on the compute node...
    ({'resources:VGPU': '1', 'trait:HW_CPU_X86_AVX2': 'required'}, None),
    # ...but on the node of a host with a matching device.
    ({'resources:VGPU': '2', 'trait:COMPUTE_NODE': 'required'},
     'the largest matching device offers 1 VGPU per server'),
    ({'resources:VGPU': '1', 'trait:CUSTOM_NEW': 'required',
      'trait:HW_CPU_X86_AVX2': 'forbidden', 'trait:COMPUTE_NODE':
      'forbidden'},
     'every VGPU device that matches, or its compute node, has trait '
     'HW_CPU_X86_AVX2'),
    # Numbered groups: the trait must be on the device itself.
    ({'resources1:VGPU': '1', 'trait1:HW_CPU_X86_AVX2': 'required'},
     'no VGPU device has trait HW_CPU_X86_AVX2 (request group 1)'),
    ({'resources1:VGPU': '1', 'trait1:CUSTOM_GUARD': 'forbidden'}, None),
    # Two numbered groups need a group_policy.
    ({'resources1:VGPU': '1', 'resources2:VGPU': '1'},
     'no group_policy'),
    # isolate: one device per numbered mdev group, on one host.
    ({'group_policy': 'isolate', 'resources1:VGPU': '1',
      'resources2:VGPU': '1'}, None),
    ({'group_policy': 'isolate', 'resources1:VGPU': '1',
      'resources2:VGPU': '1', 'resources3:VGPU': '1'},
     'no host has 3 matching devices for a spread request (the most on '
     'one host is 2)'),
    # none: groups may share a device.
    ({'group_policy': 'none', 'resources1:VGPU': '1',
      'resources2:VGPU': '1', 'resources3:VGPU': '1'}, None),
    # Other numbered groups do not take a device.
    ({'group_policy': 'isolate', 'resources1:VCPU': '1',
      'resources2:VGPU': '1', 'resources3:VGPU': '1'}, None),
    # Two mdev classes that no one host has together.
    ({'resources:VGPU': '1', 'resources:CUSTOM_MLX5': '1'},
     'no host has devices for every mdev request group'),
    ({'resources:CUSTOM_NONE': '1'}, None),   # not an mdev class here
    ({'resources:VGPU': '0'}, None),          # Nova drops a zero amount
    ({'resources:VGPU': '1', 'trait1:CUSTOM_NEW': 'required'},
     'request group 1 has traits but no resources'),
])
def test_check_resulting_specs(specs, problem):
    got = flavors.check(specs, TREE, MDEV, CARRIED,
                        EXISTING | {'COMPUTE_NODE'}, ROOTS)
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem in got, got


@pytest.mark.parametrize('other_roots,problem', [
    # Another request's group has a provider on h1's tree: fine.
    ({'1': {'root-h1'}}, None),
    # Only on a tree with no VGPU device.
    ({'1': {'root-h3'}}, 'no host has devices for every mdev request group '
                         'of the flavor and providers for its other'),
    ({'1': set()}, 'no resource provider has CUSTOM_NIC:1 with the traits '
                   'of request group 1 and room for it now'),
])
def test_check_other_groups(other_roots, problem):
    specs = {'resources:VGPU': '1', 'resources1:CUSTOM_NIC': '1',
             'trait1:CUSTOM_NEW': 'required'}
    assert flavors.other_group_queries(specs, MDEV) == {
        '1': ({'CUSTOM_NIC': 1}, ['CUSTOM_NEW'], [])}
    got = flavors.check(specs, TREE, MDEV, CARRIED, EXISTING, ROOTS,
                        other_roots)
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem in got, got


@pytest.mark.parametrize('specs,queries', [
    ({'resources1:VGPU': '1', 'trait1:CUSTOM_A': 'required'}, {}),
    ({'resources:CUSTOM_NIC': '1'}, {}),            # unnumbered: not asked
    ({'resources1:CUSTOM_NIC': '0', 'trait1:X': 'required'}, {}),
    ({'resources2:VCPU': '2', 'trait2:CUSTOM_A': 'forbidden',
      'trait2:CUSTOM_B': 'required', 'group_policy': 'none'},
     {'2': ({'VCPU': 2}, ['CUSTOM_B'], ['CUSTOM_A'])}),
])
def test_other_group_queries(specs, queries):
    assert flavors.other_group_queries(specs, MDEV) == queries


@pytest.mark.parametrize('options,size', [
    ([{'a'}, {'a'}], 1),
    ([{'a', 'b'}, {'a'}], 2),
    ([{'a', 'b'}, {'a', 'b'}, {'b', 'c'}], 3),
    ([set(), {'a'}], 1),
])
def test_distinct_devices(options, size):
    assert flavors._distinct(options) == size


ADD = flavors.SpecChange('trait:CUSTOM_NEW', None, 'required')
CHANGE = flavors.SpecChange('resources:VGPU', '1', '2')
REMOVE = flavors.SpecChange('trait:CUSTOM_OLD', 'required', None)
SAME = flavors.SpecChange('resources:VGPU', '1', '1')


@pytest.mark.parametrize('change,attempted,failed,now,result', [
    (SAME, False, False, None, 'unchanged'),
    (SAME, False, True, {}, 'unchanged'),
    (ADD, True, False, None, 'added'),
    (CHANGE, True, False, None, 'changed'),
    (REMOVE, True, False, None, 'removed'),
    (REMOVE, False, True, None, 'not written'),
    # A failure, nothing read back: the attempted keys failed.
    (ADD, True, True, None, 'failed'),
    # Read back after a failure: what the flavor holds decides.
    (ADD, True, True, {'trait:CUSTOM_NEW': 'required'}, 'added'),
    (ADD, True, True, {}, 'failed'),
    (CHANGE, True, True, {'resources:VGPU': '1'}, 'failed'),
    (REMOVE, True, True, {}, 'removed'),
    (REMOVE, True, True, {'trait:CUSTOM_OLD': 'required'}, 'failed'),
])
def test_write_result(change, attempted, failed, now, result):
    assert flavors.write_result(change, attempted, failed, now) == result


# -- pci_passthrough:alias ----------------------------------------------------

@pytest.mark.parametrize('values,expected', [
    (['a16'], 'a16:1'),
    (['a16:2'], 'a16:2'),
    (['a16:2,nic'], 'a16:2,nic:1'),
    (['a16:2', 'nic:3'], 'a16:2,nic:3'),
    ([' a16 : 2 '], 'a16:2'),
])
def test_pci_alias_arguments(values, expected):
    assert flavors.parse_pci_aliases(values).value == expected


@pytest.mark.parametrize('values,fragment', [
    (['a16:x'], 'is not NAME or NAME:COUNT'),
    (['a16:'], 'is not NAME or NAME:COUNT'),
    (['a:b:1'], 'is not NAME or NAME:COUNT'),
    (['a16:0'], 'asks for no device'),
    ([':2'], 'is not NAME or NAME:COUNT'),
    (['a16', 'a16:2'], 'given twice'),
])
def test_pci_alias_arguments_refused(values, fragment):
    with pytest.raises(ValueError, match=fragment):
        flavors.parse_pci_aliases(values)


def test_describe_pci():
    assert flavors.describe_pci('a16:2, nic:1') == (
        '2 devices of PCI alias a16, 1 device of PCI alias nic')
    assert flavors.describe_pci('a16').startswith('invalid:')


def test_plan_pci_sets_replaces_and_removes():
    pci = flavors.parse_pci_aliases(['a16:2'])
    assert flavors.plan_pci({}, pci)[0] == {ALIAS: 'a16:2'}
    to_set, to_delete, [change] = flavors.plan_pci({ALIAS: 'old:1'}, pci)
    assert (to_set, to_delete, change.action) == ({ALIAS: 'a16:2'}, [],
                                                  'changed')
    to_set, _, [change] = flavors.plan_pci({ALIAS: 'a16:2'}, pci)
    assert (to_set, change.action) == ({}, 'unchanged')
    _, to_delete, [change] = flavors.plan_pci({ALIAS: 'old:1'}, None)
    assert to_delete == [ALIAS]
    assert change.note == 'replaced by the mdev request'
    assert flavors.plan_pci({'hw:cpu_policy': 'dedicated'}, None) == (
        {}, [], [])


def test_plan_without_mdev_keeps_unrelated_keys():
    current = {'resources:VGPU': '1', 'trait:CUSTOM_NVIDIA_11': 'required',
               'trait:CUSTOM_GONE': 'required', 'hw:cpu_policy': 'dedicated',
               'trait:HW_CPU_X86_AVX2': 'required',
               'resources1:CUSTOM_NIC': '1'}
    to_delete, changes = flavors.plan_without_mdev(
        current, {'VGPU'}, {'CUSTOM_NVIDIA_11'}, carried={'CUSTOM_NVIDIA_11'},
        existing={'CUSTOM_NVIDIA_11'})
    assert to_delete == ['resources:VGPU', 'trait:CUSTOM_GONE',
                         'trait:CUSTOM_NVIDIA_11']
    assert {c.key: c.note for c in changes}['resources:VGPU'] == (
        'replaced by the PCI request')


def test_pci_query_is_one_group_per_device():
    from urllib.parse import parse_qsl
    groups = [({'CUSTOM_A16': 1}, frozenset({'CUSTOM_BLUE'}))] * 2
    assert parse_qsl(flavors.pci_query(groups, 'isolate')) == [
        ('resources_PCI1', 'CUSTOM_A16:1'), ('required_PCI1', 'CUSTOM_BLUE'),
        ('resources_PCI2', 'CUSTOM_A16:1'), ('required_PCI2', 'CUSTOM_BLUE'),
        ('group_policy', 'isolate'), ('limit', '1')]
    assert 'group_policy=none' in flavors.pci_query(groups[:1])


ALIAS = flavors.ALIAS_KEY
