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

"""Which anchor comes next, and which answers were cut short.

The requests themselves are tested against real Placement
(tests/functional/test_busy_reads.py); these are the rules alone.
"""

from osc_mdev.cloud import providers
from osc_mdev.cloud import reach


def _summary(root: str, resources: dict, traits=()) -> dict:
    return {'resources': {rc: {'capacity': c, 'used': u}
                          for rc, (c, u) in resources.items()},
            'traits': list(traits), 'root_provider_uuid': root}


def _device(uuid: str, root: str, kind: str = providers.MDEV
            ) -> providers.Candidate:
    return providers.Candidate(
        uuid=uuid, name='h_%s' % uuid, host='h', root_uuid=root,
        nodedev=uuid, pci_address=None, generation=1, kind=kind)


NODE = {'MEMORY_MB': (100, 0), 'DISK_GB': (10, 0), 'VCPU': (8, 8)}
SEEN = {
    'r1': _summary('r1', NODE),
    'g1': _summary('r1', {'VGPU': (4, 1)}),
    'g2': _summary('r1', {'CUSTOM_A40': (2, 0)}),
    'g3': _summary('r1', {'VGPU': (4, 4)}),
    'p1': _summary('r1', {'CUSTOM_PCI_10DE_2236': (1, 0)},
                   ['COMPUTE_MANAGED_PCI_DEVICE']),
}
DEVICES = [_device('g1', 'r1'), _device('g2', 'r1'), _device('g3', 'r1'),
           _device('p1', 'r1', providers.PCI), _device('m1', 'r2')]


def test_the_steps_ask_node_classes_seen_then_devices() -> None:
    asked = {'MEMORY_MB'}
    assert reach.next_anchors(asked, SEEN, DEVICES, {'r2'}) == ['DISK_GB']
    asked.add('DISK_GB')
    # PCPU is on no node reached: not asked.
    assert reach.next_anchors(asked, SEEN, DEVICES, {'r2'}) == ['VCPU']
    asked.add('VCPU')
    # The missing tree holds mdev devices only: their classes, the most
    # frequent first.
    assert reach.next_anchors(asked, SEEN, DEVICES, {'r2'}) == [
        'VGPU', 'CUSTOM_A40']
    asked |= {'VGPU', 'CUSTOM_A40'}
    assert reach.next_anchors(asked, SEEN, DEVICES, {'r2'}) == []


def test_with_no_node_reached_every_node_class_is_tried() -> None:
    assert reach.next_anchors({'MEMORY_MB'}, {}, DEVICES, {'r2'}) == [
        'DISK_GB']
    assert reach.next_anchors({'MEMORY_MB', 'DISK_GB'}, {}, DEVICES,
                              {'r2'}) == ['VCPU', 'PCPU']
    # Nothing seen on any device: no device class to ask.
    assert reach.next_anchors({'MEMORY_MB', 'DISK_GB', 'VCPU', 'PCPU'}, {},
                              DEVICES, {'r2'}) == []


def test_pci_classes_only_for_trees_with_pci_devices() -> None:
    asked = {'MEMORY_MB', 'DISK_GB', 'VCPU'}
    devices = DEVICES + [_device('p2', 'r3', providers.PCI)]
    assert reach.next_anchors(asked, SEEN, devices, {'r3'}) == [
        'CUSTOM_PCI_10DE_2236']


def test_device_classes_are_bounded() -> None:
    asked = {'MEMORY_MB', 'DISK_GB', 'VCPU', 'VGPU'}
    devices = DEVICES + [_device('p2', 'r2', providers.PCI)]
    # One device class asked already: one more at most.
    assert reach.next_anchors(asked, SEEN, devices, {'r2'}) == [
        'CUSTOM_A40']
    assert reach.next_anchors(asked | {'CUSTOM_A40'}, SEEN, devices,
                              {'r2'}) == []


def test_an_answer_lacking_a_tree_with_room_was_cut() -> None:
    merged = {
        'r1': _summary('r1', {'MEMORY_MB': (100, 0), 'VCPU': (8, 8)}),
        'r2': _summary('r2', {'MEMORY_MB': (100, 100), 'VCPU': (8, 0)}),
        'r3': _summary('r3', {'MEMORY_MB': (100, 10), 'VCPU': (8, 0)}),
    }
    answers = {
        # r3 has free memory but is not in this answer.
        'MEMORY_MB': {'r1': merged['r1']},
        # Every tree with a free VCPU is here.
        'VCPU': {'r2': merged['r2'], 'r3': merged['r3']},
        'DISK_GB': {},
    }
    assert reach.cut_anchors(answers, merged) == ['MEMORY_MB']
    answers['VCPU'] = {'r2': merged['r2']}
    # The widest answer first.
    assert reach.cut_anchors(answers, merged) == ['MEMORY_MB', 'VCPU']


def test_reached_and_free() -> None:
    assert reach.reached(SEEN) == {'r1'}
    assert reach.has_free(SEEN['g1'], 'VGPU')
    assert not reach.has_free(SEEN['g3'], 'VGPU')
    assert not reach.has_free(SEEN['g3'], 'CUSTOM_A40')
