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

"""One answer to "which physical GPU does Nova pick?": ``fit.pick_order``.

Capacity, ``capacity --count`` (one multi-create), ``migration check``
and the drain plan run on one cloud; with the order reversed, each of
them changes: none decides the order on its own.
"""

import urllib.parse

import pytest

from osc_mdev.cloud import allocation_candidates
from osc_mdev.cloud import fit
from osc_mdev.cloud import multicreate
from osc_mdev.cloud import payloads as nova_payloads
from osc_mdev.cloud import traits
from osc_mdev.features.capacity import reads as capacity_reads
from osc_mdev.features.migration import model
from osc_mdev.features.migration import plan as migration_plan
from osc_mdev.features.migration import reads as migration_reads
from osc_mdev.features.migration import verdict as migration_verdict
from osc_mdev.nova import objects
from osc_mdev.nova.scheduler import request_filter
from osc_mdev.nova.scheduler import utils as rr

N11 = traits.mdev_type('nvidia-11')
N12 = traits.mdev_type('nvidia-12')
FLAVOR = {'vcpus': 1, 'ram': 512, 'disk': 1,
          'extra_specs': {'resources:VGPU': '1'}}
REQUEST = rr.request_for(nova_payloads.flavor(FLAVOR), None, False)


def device(uuid, address, used):
    return fit.Provider(uuid, 'node_' + address,
                        {'VGPU': fit.Inventory(total=16, max_unit=16)},
                        {'VGPU': used}, frozenset({'OWNER_NOVA'}), address)


def node(name, devices, memory_used=0):
    root = fit.Provider(
        'root-' + name, name,
        {'VCPU': fit.Inventory(total=16, max_unit=16),
         'MEMORY_MB': fit.Inventory(total=8192, max_unit=8192),
         'DISK_GB': fit.Inventory(total=100, max_unit=100)},
        {'MEMORY_MB': memory_used}, frozenset({'OWNER_NOVA'}))
    return model.Node(
        name, fit.Host(name, root, tuple(d for d, _ in devices)),
        objects.Hypervisor(name, name, 'enabled', 'up', 'QEMU', (8, 1, 0)),
        {d.uuid: t for d, t in devices},
        {d.uuid: 'pci_' + d.device for d, _ in devices})


SOURCE = node('src', [(device('src-gpu', '0000:81:00.0', 1), N11)])
# a: room for 10 servers on the root; a GPU of the server's type with 16
# free and one of another type with 6. b: two of its type, 16 and 6
# free. c: one with 10 free.
TARGETS = [
    node('a', [(device('a1', '0000:82:00.0', 0), N11),
               (device('a2', '0000:83:00.0', 10), N12)], memory_used=3072),
    node('b', [(device('b1', '0000:84:00.0', 0), N11),
               (device('b2', '0000:85:00.0', 10), N11)]),
    node('c', [(device('c1', '0000:86:00.0', 6), N11)]),
]
SERVER = model.Server(
    'srv', 'vm', 'active', None, 'src', 'f', REQUEST, None,
    (model.Held('src:0000:81:00.0', 'src-gpu', 'VGPU', 1, N11),))


def answer(roots=None):
    """Placement's JSON answer for REQUEST (``in_tree``: ``roots``): one
    allocation request per GPU, by address, and every provider's summary.
    """
    requests, summaries = [], {}
    for target in TARGETS:
        tree = target.tree
        for provider in tree.providers:
            summaries[provider.uuid] = {
                'resources': {rc: {'capacity': inv.capacity,
                                   'used': provider.usages.get(rc, 0)}
                              for rc, inv in provider.inventories.items()},
                'traits': sorted(provider.traits),
                'root_provider_uuid': tree.root.uuid}
        if roots is not None and tree.root.uuid not in roots:
            continue
        for gpu in tree.devices:
            requests.append({'allocations': {
                gpu.uuid: {'resources': REQUEST.device_amounts()},
                tree.root.uuid: {'resources': REQUEST.root_amounts()}}})
    return {'allocation_requests': requests, 'provider_summaries': summaries}


class Placement:
    """Placement's allocation candidates answer, as the client gives it."""

    def allocation_candidates(self, querystring):
        in_tree = urllib.parse.parse_qs(querystring).get('in_tree')
        return answer(in_tree)

    def map(self, call, items):
        return [call(i) for i in items]


def outcomes():
    """What capacity, --count, migration check and the plan say."""
    trees = [t.tree for t in TARGETS]
    request = request_filter.process_reqspec(
        REQUEST, owner_nova=fit.owner_nova_in_effect(trees))
    counted = {h.host: (h.fits, h.devices)
               for h in fit.capacity(request, trees)}
    found = capacity_reads.read_candidates(Placement(), request)
    names = {t.root.uuid: t.name for t in trees}
    one_request = multicreate.multi_create(
        30, {names[r]: v for r, v in found.by_root().items()},
        found.summaries)
    firsts = migration_reads._firsts(
        Placement(), [(REQUEST, t.tree.root.uuid) for t in TARGETS])
    first = {t.name: firsts[(REQUEST, t.tree.root.uuid)] for t in TARGETS}
    checked = {}
    for target in TARGETS:
        verdict = migration_verdict.judge(SERVER, SOURCE, target,
                                          first[target.name])
        checked[target.name] = (verdict.live, verdict.cold, verdict.devices)
    moves = migration_plan.plan(
        [SERVER], SOURCE, TARGETS,
        firsts={(SERVER.id, n): f for n, f in first.items()})
    return counted, one_request, checked, [(m.node, m.kind) for m in moves]


def test_each_follows_the_order():
    counted, one_request, checked, moves = outcomes()
    a = TARGETS[0].tree
    # The most room first: a1, then (had it not room enough) a2.
    assert fit.pick_order(a.devices, room=lambda d: d.free('VGPU'))[0] \
        is a.children[0]
    assert counted == {'a': (10, ('0000:82:00.0',)),
                       'b': (16, ('0000:84:00.0',)),
                       'c': (10, ('0000:86:00.0',))}
    # Placement's first candidate of each host is claimed: a1 (root room
    # for 10), b1 (16 VCPUs), c1 (10 free).
    assert one_request == (30, {'a': 10, 'b': 16, 'c': 10})
    # On a, Placement's first candidate is of the server's type now.
    assert checked['a'][:2] == ('yes', 'yes')
    # The plan takes b1 on b (15 left) or c1 (9 left): c fits best.
    assert moves == [('c', 'live')]


def test_one_order_decides_for_all_four(monkeypatch):
    before = outcomes()
    original = fit.pick_order
    monkeypatch.setattr(fit, 'pick_order', lambda *a, **k: list(
        reversed(original(*a, **k))))
    counted, one_request, checked, moves = outcomes()
    # Least room first: a2 before a1, b2 before b1.
    assert counted == {'a': (10, ('0000:82:00.0', '0000:83:00.0')),
                       'b': (16, ('0000:84:00.0', '0000:85:00.0')),
                       'c': (10, ('0000:86:00.0',))}
    # The last candidate claimed: a2 and b2, 6 free each.
    assert one_request == (22, {'a': 6, 'b': 6, 'c': 10})
    # Placement picks a2, of another type: Nova refuses the live move.
    assert checked['a'][:2] == ('no', 'no')
    # b2 on b leaves 5: b fits best.
    assert moves == [('b', 'live')]
    for was, now in zip(before, (counted, one_request, checked, moves)):
        assert was != now


def test_pick_order():
    a, b, c = 'abc'
    room = {a: 1, b: 3, c: 3}.get
    assert fit.pick_order([a, b, c]) == [a, b, c]
    assert fit.pick_order([a, b, c], room=room) == [b, c, a]
    assert fit.pick_order([a, b, c], room=room,
                          first=lambda x: x == c) == [c, b, a]
    assert fit.pick_order([c, b, a], first=lambda x: x == a) == [a, c, b]
    assert fit.claimed([c, b]) == c
    assert fit.claimed([]) is None


def test_allocation_candidates_parse():
    found = allocation_candidates.parse(answer())
    assert [r.root for r in found.requests] == [
        'root-a', 'root-a', 'root-b', 'root-b', 'root-c']
    assert found.requests[0].allocations == {
        'a1': {'VGPU': 1},
        'root-a': {'DISK_GB': 1, 'MEMORY_MB': 512, 'VCPU': 1}}
    assert [[r.allocations.keys() for r in v]
            for v in found.by_root().values()] == [
        [{'a1', 'root-a'}, {'a2', 'root-a'}],
        [{'b1', 'root-b'}, {'b2', 'root-b'}], [{'c1', 'root-c'}]]
    assert found.summaries['a2'].resources == {'VGPU': (16, 10)}
    # A provider with no summary is its own root; no provider, no tree.
    lone = allocation_candidates.parse({'allocation_requests': [
        {'allocations': {'x': {'resources': {'VGPU': 1}}}},
        {'allocations': {}}]})
    assert [r.root for r in lone.requests] == ['x', '']
    assert list(lone.by_root()) == ['x']
    assert lone.summaries == {}


@pytest.mark.parametrize('body', [{}, {'allocation_requests': None,
                                       'provider_summaries': None}])
def test_allocation_candidates_parse_empty(body):
    found = allocation_candidates.parse(body)
    assert found.requests == () and found.summaries == {}
    assert fit.claimed(found.requests) is None
