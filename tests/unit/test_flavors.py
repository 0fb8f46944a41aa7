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
