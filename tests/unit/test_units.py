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

"""What the bulk reads tell of unit rules (``cloud.units``)."""

from osc_mdev.cloud import units


def _answer(*takers):
    return {'allocation_requests': [
        {'allocations': {uuid: {'resources': {rc: n}}}}
        for uuid, rc, n in takers]}


def test_nothing_read_tells_nothing():
    assert units.Known().takes('a', 'VCPU', 4) is None


def test_a_listing_of_one_class_tells_who_takes_and_who_refuses():
    known = units.Known()
    known.add_listing({'VCPU': 4}, ['a'], {('a', 'VCPU'): 8,
                                           ('b', 'VCPU'): 8,
                                           ('c', 'VCPU'): 3})
    assert known.takes('a', 'VCPU', 4) is True
    assert known.takes('b', 'VCPU', 4) is False
    # No room for 4: the listing says nothing of its units.
    assert known.takes('c', 'VCPU', 4) is None
    # Other amounts: unknown without the unit of 1.
    assert known.takes('a', 'VCPU', 2) is None
    assert known.takes('b', 'VCPU', 8) is None


def test_a_listing_of_several_classes_tells_only_who_takes():
    known = units.Known()
    known.add_listing({'VCPU': 4, 'MEMORY_MB': 512}, ['a'],
                      {('b', 'VCPU'): 8, ('b', 'MEMORY_MB'): 1024})
    assert known.takes('a', 'MEMORY_MB', 512) is True
    assert known.takes('b', 'VCPU', 4) is None


def test_taking_one_unit_spans_every_amount_up_to_the_largest_taken():
    known = units.Known()
    known.add_candidates(_answer(('a', 'VCPU', 1), ('b', 'VCPU', 1),
                                 ('x', 'VGPU', 2)))
    known.add_listing({'VCPU': 6}, ['a'], {('a', 'VCPU'): 9,
                                           ('b', 'VCPU'): 9})
    assert [known.takes('a', 'VCPU', n) for n in (1, 3, 6, 7)] == [
        True, True, True, None]
    # b refuses 6: max_unit is below it, so below 6 is unknown, from 6
    # up refused.
    assert [known.takes('b', 'VCPU', n) for n in (1, 3, 6, 7)] == [
        True, None, False, False]
    # Only a unit of 1 counts from an allocation request.
    assert known.takes('x', 'VGPU', 2) is None
    assert known.takes('x', 'VGPU', 1) is None


def test_without_the_unit_of_one_a_refusal_says_nothing_of_others():
    known = units.Known()
    known.add_listing({'VGPU': 2}, [], {('a', 'VGPU'): 4})
    # A step_size of 2 or 3 would refuse 3, take 4.
    assert known.takes('a', 'VGPU', 2) is False
    assert known.takes('a', 'VGPU', 3) is None
    assert known.takes('a', 'VGPU', 4) is None


def test_a_providers_own_inventories_settle_every_amount():
    known = units.Known()
    known.add_inventories('a', {'MEMORY_MB': {
        'total': 4096, 'min_unit': 1, 'max_unit': 4096, 'step_size': 1024}},
        {'MEMORY_MB': {1024, 1536}, 'VCPU': {2}})
    assert known.takes('a', 'MEMORY_MB', 1024) is True
    assert known.takes('a', 'MEMORY_MB', 1536) is False
    assert known.takes('a', 'VCPU', 2) is False
    known.add_inventories('gone', None, {'VGPU': {1}})
    assert known.takes('gone', 'VGPU', 1) is False
