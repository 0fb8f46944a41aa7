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

from osc_mdev.cloud import fit as capacity
from osc_mdev.cloud import payloads as nova_payloads
from osc_mdev.features.flavor import specs as flavors
from osc_mdev.nova.scheduler import utils as rr


def request_of(flavor, pci_config=None, booted_from_volume=False):
    """The request of a flavor as Nova's API gives it, built as every
    command builds it.
    """
    return rr.request_for(nova_payloads.flavor(flavor), pci_config,
                          booted_from_volume)


MDEV = {'VGPU', 'CUSTOM_MLX5'}


def req(rc, amount=1, required=(), forbidden=(), spread=False):
    return rr.bare_request(rc, amount, required, forbidden, spread)


def test_single_group():
    request = req('VGPU', 2, ('CUSTOM_NVIDIA_11',), ('CUSTOM_BROKEN',))
    assert flavors.to_extra_specs(request) == {
        'resources:VGPU': '2',
        'trait:CUSTOM_NVIDIA_11': 'required',
        'trait:CUSTOM_BROKEN': 'forbidden'}
    assert request.describe_devices() == (
        'resources: 2 x VGPU with CUSTOM_NVIDIA_11 without CUSTOM_BROKEN')


def test_spread_uses_isolated_numbered_groups():
    request = req('VGPU', 2, ('CUSTOM_T',), spread=True)
    assert flavors.to_extra_specs(request) == {
        'group_policy': 'isolate',
        'resources1:VGPU': '1', 'trait1:CUSTOM_T': 'required',
        'resources2:VGPU': '1', 'trait2:CUSTOM_T': 'required'}
    # Group numbers already used by other requests are skipped.
    assert set(flavors.to_extra_specs(request, used_groups={'1'})) == {
        'group_policy', 'resources2:VGPU', 'trait2:CUSTOM_T',
        'resources3:VGPU', 'trait3:CUSTOM_T'}
    assert request.describe_devices() == (
        'resources1: 1 x VGPU with CUSTOM_T; resources2: 1 x VGPU with '
        'CUSTOM_T; group_policy=isolate')


def test_spread_of_one_is_a_single_group():
    assert flavors.to_extra_specs(req('VGPU', 1, spread=True)) == {
        'resources:VGPU': '1'}


WRITTEN = [
    req('VGPU', 1),
    req('CUSTOM_MLX5', 3, ('CUSTOM_A', 'CUSTOM_B'), ('CUSTOM_C',)),
    req('VGPU', 3, ('CUSTOM_A',), spread=True),
]


def _device_groups(groups):
    """``{suffix: (mdev amounts, required, forbidden)}`` of the groups
    that ask for mdev classes; ``groups`` as ``(suffix, resources,
    required, forbidden)``.
    """
    found = {}
    for suffix, resources, required, forbidden in groups:
        amounts = {rc: n for rc, n in dict(resources).items() if rc in MDEV}
        if amounts:
            found[suffix] = (amounts, set(required), set(forbidden))
    return found


@pytest.mark.parametrize('request_', WRITTEN)
def test_written_specs_read_back_as_written(request_):
    specs = flavors.to_extra_specs(request_)
    specs['hw:cpu_policy'] = 'dedicated'
    read = request_of({'vcpus': 2, 'extra_specs': specs})

    def devices(request):
        return _device_groups((g.suffix, g.resources, g.required,
                               g.forbidden) for g in request.groups)

    assert devices(read) == devices(request_)
    assert read.group_policy == request_.group_policy


@pytest.mark.nova
@pytest.mark.parametrize('request_', WRITTEN)
def test_written_specs_are_what_nova_reads(request_):
    from tests.unit.test_request_vs_nova import nova_request

    specs = flavors.to_extra_specs(request_)
    specs['hw:cpu_policy'] = 'dedicated'
    groups, policy = nova_request(
        dict(vcpus=2, ram=512, disk=1, ephemeral=0, swap=''), specs, False)
    assert _device_groups(
        (suffix, resources, required, forbidden)
        for suffix, (resources, required, forbidden) in groups.items()
    ) == _device_groups((g.suffix, g.resources, g.required, g.forbidden)
                        for g in request_.groups)
    assert policy == request_.group_policy


@pytest.mark.parametrize('specs,text', [
    ({'resources_GPU:VGPU': '1', 'trait_GPU:CUSTOM_NVIDIA_12': 'required'},
     'resources_GPU: 1 x VGPU with CUSTOM_NVIDIA_12'),
    ({'resources:VCPU': '0', 'hw:mem': '1'}, None),
    ({'resources1:VGPU': '1', 'resources_B:CUSTOM_MLX5': '2',
      'trait_B:CUSTOM_X': 'forbidden', 'group_policy': 'none'},
     'resources1: 1 x VGPU; resources_B: 2 x CUSTOM_MLX5 without CUSTOM_X; '
     'group_policy=none'),
])
def test_describe_devices_names_each_group(specs, text):
    request = request_of({'vcpus': 1, 'extra_specs': specs})
    assert request.describe_devices() == text


def test_plan_replaces_stale_keys_and_keeps_unrelated():
    current = {
        'resources:VGPU': '1', 'trait:CUSTOM_NVIDIA_11': 'required',
        'trait:HW_CPU_X86_AVX2': 'required',     # the compute node's
        'hw:cpu_policy': 'dedicated',
        'resources1:CUSTOM_PCI_10DE': '1',        # another request group
        'trait1:CUSTOM_PCI_TAG': 'required',
    }
    new = req('CUSTOM_MLX5', 2, ('CUSTOM_MLX5_CORE',), spread=True)
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


@pytest.mark.parametrize('current,to_set,to_delete', [
    # A named group: replaced where it is written, not added beside.
    ({'resources_GPU:VGPU': '1', 'trait_GPU:CUSTOM_NVIDIA_12': 'required'},
     {'resources:VGPU': '1', 'trait:CUSTOM_NVIDIA_12': 'required'},
     ['resources_GPU:VGPU', 'trait_GPU:CUSTOM_NVIDIA_12']),
    # A numbered one, with a named group of something else kept.
    ({'resources3:VGPU': '2', 'trait3:CUSTOM_OLD': 'forbidden',
      'resources_NIC:CUSTOM_NIC': '1', 'trait_NIC:CUSTOM_PORT': 'required',
      'group_policy': 'none'},
     {'resources:VGPU': '1', 'trait:CUSTOM_NVIDIA_12': 'required'},
     ['group_policy', 'resources3:VGPU', 'trait3:CUSTOM_OLD']),
    # Several named groups of one spread request.
    ({'resources_A:VGPU': '1', 'resources_B:VGPU': '1',
      'group_policy': 'isolate'},
     {'resources:VGPU': '1', 'trait:CUSTOM_NVIDIA_12': 'required'},
     ['group_policy', 'resources_A:VGPU', 'resources_B:VGPU']),
])
def test_plan_replaces_the_request_in_any_group(current, to_set, to_delete):
    new = req('VGPU', 1, ('CUSTOM_NVIDIA_12',))
    got_set, got_delete, _ = flavors.plan(current, new, MDEV)
    assert (got_set, got_delete) == (to_set, to_delete)
    after = flavors.resulting(current, got_set, got_delete)
    read = request_of({'vcpus': 1, 'extra_specs': after})
    assert read.device_amounts(MDEV) == {'VGPU': 1}


def test_plan_same_request_changes_nothing():
    request = req('VGPU', 1, ('CUSTOM_A',))
    current = flavors.to_extra_specs(request)
    to_set, to_delete, changes = flavors.plan(current, request, MDEV)
    assert (to_set, to_delete) == ({}, [])
    assert {c.action for c in changes} == {'unchanged'}


def test_plan_from_spread_back_to_single_drops_group_policy():
    current = flavors.to_extra_specs(req('VGPU', 2, ('CUSTOM_A',),
                                         spread=True))
    to_set, to_delete, _ = flavors.plan(current, req('VGPU', 1), MDEV)
    assert to_set == {'resources:VGPU': '1'}
    assert to_delete == sorted([
        'group_policy', 'resources1:VGPU', 'resources2:VGPU',
        'trait1:CUSTOM_A', 'trait2:CUSTOM_A'])


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
     req('VGPU', 1, ('CUSTOM_NEW',)),
     {'trait:CUSTOM_NEW': 'required'}, ['trait:CUSTOM_OLD'],
     {'trait:CUSTOM_OLD': 'stale: no resource provider has CUSTOM_OLD '
                          'any more'}),
    # The new request names the stale trait again: it stays, no note.
    ({'resources:VGPU': '1', 'trait:CUSTOM_OLD': 'required'},
     req('VGPU', 1, ('CUSTOM_OLD',)), {}, [], {}),
    # The compute node's trait and an existing guard are kept.
    ({'trait:HW_CPU_X86_AVX2': 'required',
      'trait:CUSTOM_GUARD': 'forbidden'},
     req('VGPU', 2),
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
     req('VGPU', 2, spread=True), ['resources1:CUSTOM_NIC']),
    # Not spread: no numbered mdev groups, isolate is not set.
    ({'resources1:CUSTOM_NIC': '1', 'group_policy': 'none'},
     req('VGPU', 2), []),
    # A spread of one is a single unnumbered group.
    ({'resources1:CUSTOM_NIC': '1'},
     req('VGPU', 1, spread=True), []),
    # The flavor's own earlier spread is replaced, not "other".
    (flavors.to_extra_specs(req('VGPU', 2, spread=True)),
     req('VGPU', 3, spread=True), []),
])
def test_isolate_reaches_others(current, request_, others):
    assert flavors.isolate_reaches_others(current, request_, MDEV) == others


def _gpu(uuid, rc='VGPU', max_unit=4, traits=()):
    return capacity.Provider(
        uuid, 'h_pci_' + uuid, {rc: capacity.Inventory(
            total=max_unit, max_unit=max_unit)}, {},
        frozenset(('OWNER_NOVA',) + tuple(traits)), '0000:%s:00.0' % uuid)


def _host(name, traits, *gpus):
    root = capacity.Provider('root-' + name, name, {
        'VCPU': capacity.Inventory(total=64),
        'MEMORY_MB': capacity.Inventory(total=65536),
        'DISK_GB': capacity.Inventory(total=1000)}, {},
        frozenset(('OWNER_NOVA',) + traits))
    return capacity.Host(name, root, gpus)


TREE = [
    _host('h1', ('HW_CPU_X86_AVX2',),
          _gpu('a1', traits=('CUSTOM_NEW',)),
          _gpu('a2', traits=('CUSTOM_NEW', 'CUSTOM_GUARD'))),
    _host('h2', ('COMPUTE_NODE',),
          _gpu('b1', traits=('CUSTOM_NEW',), max_unit=1)),
    _host('h3', (), _gpu('c1', rc='CUSTOM_MLX5', max_unit=2)),
]


@pytest.mark.parametrize('specs,problem', [
    ({'resources:VGPU': '1', 'trait:CUSTOM_NEW': 'required'}, None),
    # Both the old and the new type trait: what issue 9 reproduced.
    ({'resources:VGPU': '1', 'trait:CUSTOM_NEW': 'required',
      'trait:CUSTOM_OLD': 'required'},
     'resources requires trait CUSTOM_OLD, which no resource provider has'),
    ({'resources:VGPU': '1', 'trait:CUSTOM_GONE': 'forbidden'},
     'names trait CUSTOM_GONE, which does not exist in Placement'),
    # Unnumbered traits may sit on the compute node...
    ({'resources:VGPU': '1', 'trait:HW_CPU_X86_AVX2': 'required'}, None),
    # ...but on the node of a host with a matching device.
    ({'resources:VGPU': '2', 'trait:COMPUTE_NODE': 'required'},
     'room for 2 VGPU rules out 1 device and 1 host'),
    # The compute node gives the unnumbered group its VCPU: a forbidden
    # trait there rules the host out.
    ({'resources:VGPU': '1', 'trait:CUSTOM_NEW': 'required',
      'trait:HW_CPU_X86_AVX2': 'forbidden', 'trait:COMPUTE_NODE':
      'forbidden'},
     'compute node without HW_CPU_X86_AVX2 rules out 2 devices and 1 host'),
    # Numbered and named groups: the trait must be on the device itself.
    ({'resources1:VGPU': '1', 'trait1:HW_CPU_X86_AVX2': 'required'},
     'required trait HW_CPU_X86_AVX2 rules out 3 devices and 2 hosts'),
    ({'resources_GPU:VGPU': '1', 'trait_GPU:HW_CPU_X86_AVX2': 'required'},
     'required trait HW_CPU_X86_AVX2 rules out 3 devices and 2 hosts'),
    ({'resources_GPU:VGPU': '1', 'trait_GPU:CUSTOM_NEW': 'required'}, None),
    ({'resources1:VGPU': '1', 'trait1:CUSTOM_GUARD': 'forbidden'}, None),
    # Two suffixed groups need a group_policy.
    ({'resources1:VGPU': '1', 'resources_B:VGPU': '1'}, 'no group_policy'),
    # isolate: one device per numbered mdev group, on one host.
    ({'group_policy': 'isolate', 'resources1:VGPU': '1',
      'resources2:VGPU': '1'}, None),
    ({'group_policy': 'isolate', 'resources1:VGPU': '1',
      'resources2:VGPU': '1', 'resources3:VGPU': '1'},
     '3 different devices on one host (group_policy=isolate) rules out'),
    # none: groups may share a device.
    ({'group_policy': 'none', 'resources1:VGPU': '1',
      'resources2:VGPU': '1', 'resources3:VGPU': '1'}, None),
    # A numbered group of the compute node's VCPU takes no device.
    ({'group_policy': 'isolate', 'resources1:VCPU': '1',
      'resources2:VGPU': '1', 'resources3:VGPU': '1'}, None),
    # Two mdev classes that no one host has together.
    ({'resources1:VGPU': '1', 'resources2:CUSTOM_MLX5': '1',
      'group_policy': 'none'}, 'offers CUSTOM_MLX5, VGPU rules out'),
    ({'resources:CUSTOM_NONE': '1'}, 'offers CUSTOM_NONE rules out'),
    ({'resources:VGPU': '0'}, None),          # Nova drops a zero amount
    ({'resources:VGPU': '1', 'trait1:CUSTOM_NEW': 'required'},
     'resources1 has traits but no resources'),
])
def test_can_never_serve(specs, problem):
    request = request_of(
        {'vcpus': 2, 'ram': 2048, 'disk': 20, 'extra_specs': specs})
    got = flavors.can_never_serve(request, TREE, CARRIED,
                                  EXISTING | {'COMPUTE_NODE'})
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem in got, got


@pytest.mark.parametrize('specs,problem', [
    ({'resources:VGPU': '1', 'trait:CUSTOM_X': 'required'}, None),
    ({'resources_GPU:VGPU': 'one'},
     "Nova refuses extra spec 'resources_GPU:VGPU': 'one' is not a valid "
     "integer value"),
    ({'trait_GPU:CUSTOM_X': 'yes'},
     "Nova refuses extra spec 'trait_GPU:CUSTOM_X': 'yes' is not one of: "
     "required, forbidden"),
    ({'resources:vgpu': '1'},
     "Nova refuses extra spec 'resources:vgpu': does not appear to be a "
     "valid extra spec"),
    ({'group_policy': 'spread'},
     "Nova refuses extra spec 'group_policy': 'spread' is not one of: "
     "isolate, none"),
    ({'hw:cpu_policy': 'whatever'}, None),     # not a request key
])
def test_refused(specs, problem):
    assert flavors.refused(specs) == problem


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

def test_describe_pci():
    assert flavors.describe_pci('a16:2, nic:1') == (
        '2 devices of PCI alias a16, 1 device of PCI alias nic')
    assert flavors.describe_pci('a16').startswith('invalid:')


def test_plan_pci_sets_replaces_and_removes():
    pci = flavors.PciRequest((('a16', 2),))
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
