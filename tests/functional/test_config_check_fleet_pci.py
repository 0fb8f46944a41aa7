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

"""``config check --snapshot-dir`` on nodes with PCI-in-Placement devices
whose inventory is not what nova-compute makes by default: one-time-use
devices Nova reserved (in use, and waiting to be cleaned), a reserved
count an operator set by hand, an allocation ratio other than 1, and a
provider without inventory. The provider summaries give only (total -
reserved) x ratio; each node's findings still equal those of ``config
check --sysfs --host`` for that node, and only the devices whose summary
differs from what the node's files predict cost a request.
"""

import json

import pytest

from tests.fixtures import host_snapshots
from tests.fixtures.host_snapshots import by_node
from tests.fixtures.host_snapshots import check
from tests.fixtures.host_snapshots import findings
from tests.fixtures.placement_data import requests_of
from tests.fixtures import sysfs

OTU = 'HW_PCI_ONE_TIME_USE'
H100 = 'CUSTOM_PCI_10DE_2330'
A16 = 'CUSTOM_A16_16A'
GPUS = ('0000:41:00.0', '0000:42:00.0', '0000:43:00.0', '0000:44:00.0')
PF, VFS = '0000:25:00.0', ('0000:25:00.4', '0000:25:00.5')


def conf(*specs, one_time_use=()):
    """nova.conf with PCI in Placement and a device spec per address of
    ``specs`` (``one_time_use`` among them), the VFs of PF 0000:25:00.0
    as CUSTOM_A16_16A when it is one.
    """
    lines = ['[pci]', 'report_in_placement = True']
    for address in specs:
        if address == PF:
            lines.append('device_spec = {"address": "0000:25:00.*", '
                         '"product_id": "25b6", "resource_class": '
                         '"%s"}' % A16)
        else:
            lines.append('device_spec = {"address": "%s"%s}' % (
                address, ', "one_time_use": "true"'
                if address in one_time_use else ''))
    return '\n'.join(lines + ['[filter_scheduler]',
                              'pci_in_placement = True', ''])


class Fleet(host_snapshots.NodeFiles):
    """Nodes with four whole GPUs (10de:2330) and an SR-IOV PF with two
    VFs (10de:25b6) in sysfs, each with its nova.conf and snapshot.
    """

    def __init__(self, placement, base, prefix):
        super().__init__(base)
        self.placement = placement
        self.prefix = prefix
        self.roots = {}

    def name(self, kind):
        return '%s-%s.example.com' % (self.prefix, kind)

    def node(self, name, conf_text, vgpu_gpus=()):
        self.roots[name] = self.placement.add_compute_node(name)
        ids = {a: ('10de', '2330') for a in GPUS}
        ids[PF] = ('10de', '2236')
        ids.update({v: ('10de', '25b6') for v in VFS})
        self.add_node(
            name, conf_text, devices=[(a, {}, None) for a in GPUS] + [
                (PF, {}, None)] + [(v, {}, PF) for v in VFS],
            ids=ids, vgpu_gpus=vgpu_gpus)

    def device(self, name, address, resource_class=H100, total=1,
               traits=(), reserved=0, ratio=1.0, used=0):
        """A PCI provider of node ``name`` as nova-compute makes it, then
        its inventory's ``reserved`` and ``ratio`` changed, ``used`` held
        by servers.
        """
        p = self.placement
        gpu = p.add_pci_device(self.roots[name], name, address,
                               resource_class, total, traits)
        for _ in range(used):
            p.boot_server(self.roots[name], gpu)
        if reserved or ratio != 1.0:
            p.set_inventory(gpu.uuid, {resource_class: {
                'total': total, 'max_unit': total, 'reserved': reserved,
                'allocation_ratio': ratio}})
        return gpu

    def used_once(self, name, address):
        """A one-time-use device whose server came and went: Nova
        reserved it while the server held it, and it stays so.
        """
        gpu = self.device(name, address, traits=(OTU,), used=1, reserved=1)
        for consumer in self.placement.request(
                'GET', '/resource_providers/%s/allocations'
                % gpu.uuid)['allocations']:
            self.placement.request('DELETE', '/allocations/%s' % consumer)
        return gpu

    def empty(self, name, address):
        """A PCI provider nova-compute made, with no inventory."""
        rp = self.placement.create_provider(
            '%s_%s' % (name, address.upper()), parent=self.roots[name])
        self.placement.set_traits(rp, ['COMPUTE_MANAGED_PCI_DEVICE',
                                       'OWNER_NOVA'])


@pytest.fixture(scope='module')
def one_time_use(placement):
    placement.require_trait(OTU)


def build(placement, base, prefix, clean=1, odd=True):
    """The odd nodes (``<prefix>-otu.example.com`` etc.) unless not
    ``odd``, and ``clean`` nodes as Nova makes them: every device
    matching a spec, reserved 0, ratio 1.
    """
    fleet = Fleet(placement, base, prefix)
    if odd:
        _odd_nodes(fleet)
    for n in range(clean):
        name = fleet.name('clean%d' % n)
        fleet.node(name, conf(GPUS[0], PF))
        fleet.device(name, GPUS[0], used=1)
        fleet.device(name, PF, A16, total=2, used=1)
    return fleet


def _odd_nodes(fleet):
    # One-time-use: 41 in use and 42 waiting, no longer in the specs;
    # 43 in use and 44 waiting, in them.
    fleet.node(fleet.name('otu'),
               conf(GPUS[2], GPUS[3], one_time_use=GPUS[2:]))
    fleet.device(fleet.name('otu'), GPUS[0], traits=(OTU,), used=1,
                 reserved=1)
    fleet.used_once(fleet.name('otu'), GPUS[1])
    fleet.device(fleet.name('otu'), GPUS[2], traits=(OTU,), used=1,
                 reserved=1)
    fleet.used_once(fleet.name('otu'), GPUS[3])
    # Reserved by an operator, no longer in the specs: the PF's VFs (1
    # of 2) and the whole GPU 41.
    fleet.node(fleet.name('hand'), conf(GPUS[1]))
    fleet.device(fleet.name('hand'), PF, A16, total=2, reserved=1)
    fleet.device(fleet.name('hand'), GPUS[0], reserved=1)
    fleet.device(fleet.name('hand'), GPUS[1], used=1)
    # Overcommitted: 41 (ratio 2, no longer in the specs) and the VFs
    # (ratio 1.5, in them).
    fleet.node(fleet.name('ratio'), conf(GPUS[1], PF))
    fleet.device(fleet.name('ratio'), GPUS[0], ratio=2.0)
    fleet.device(fleet.name('ratio'), PF, A16, total=2, ratio=1.5)
    fleet.device(fleet.name('ratio'), GPUS[1])
    # An SR-IOV vGPU GPU whose VFs lost their type, one of its two
    # reserved by hand.
    l4 = sysfs.VgpuGpu('0000:61:00.0', numvfs=2)
    fleet.node(fleet.name('vf'), conf(GPUS[0]).replace(
        '[filter_scheduler]', ''.join(
            'device_spec = {"vendor_id": "10de", "address": "%s", '
            '"resource_class": "CUSTOM_NVIDIA_L4_8Q", "managed": "no"}\n'
            % vf for vf in l4.vfs) + '[filter_scheduler]'),
        vgpu_gpus=[l4])
    fleet.device(fleet.name('vf'), '0000:61:00.0', 'CUSTOM_NVIDIA_L4_8Q',
                 total=2, reserved=1)
    fleet.device(fleet.name('vf'), GPUS[0])
    # A provider without inventory, one matching a spec and one not.
    fleet.node(fleet.name('empty'), conf(GPUS[0], GPUS[2]))
    fleet.empty(fleet.name('empty'), GPUS[0])
    fleet.empty(fleet.name('empty'), GPUS[1])
    fleet.device(fleet.name('empty'), GPUS[2])


def test_every_pci_node_as_checked_on_its_own(
        placement, placement_url, auth, tmp_path, one_time_use):
    fleet = build(placement, tmp_path, 'fp')
    result = check('--snapshot-dir', str(fleet.snapshots), '-f', 'json',
                   auth=auth)
    assert result.rc in (0, 1), result.stderr
    nodes = by_node(json.loads(result.stdout))
    assert sorted(nodes) == sorted(fleet.nodes)
    for name, (path, root) in fleet.nodes.items():
        alone = check(path, '--sysfs', root, '--host', name, '-f', 'json',
                      auth=auth)
        assert alone.rc in (0, 1), alone.stderr
        assert findings(nodes[name]) == findings(
            json.loads(alone.stdout)), name

    def messages(node):
        return [f['Message'] for f in findings(nodes[node])]
    otu = messages('fp-otu.example.com')
    assert ('Provider fp-otu.example.com_%s (%s, total 1) matches no '
            'device spec any more: nova-compute removes it on restart (it '
            'keeps it while 1 server device(s) use it).' % (GPUS[0], H100)
            ) in otu
    assert ('Provider fp-otu.example.com_%s (%s, total 1) matches no '
            'device spec any more: nova-compute removes it on restart.'
            % (GPUS[1], H100)) in otu
    hand = messages('fp-hand.example.com')
    assert any('fp-hand.example.com_%s (%s, total 2)' % (PF, A16) in m
               for m in hand)
    assert any('fp-hand.example.com_%s (%s, total 1)' % (GPUS[0], H100)
               in m for m in hand)
    assert any('fp-ratio.example.com_%s (%s, total 1)' % (GPUS[0], H100)
               in m for m in messages('fp-ratio.example.com'))
    assert any(m.startswith('Placement offers 2 CUSTOM_NVIDIA_L4_8Q on '
                            'provider fp-vf.example.com_0000:61:00.0')
               for m in messages('fp-vf.example.com'))
    assert any('fp-empty.example.com_%s' % GPUS[1] in m
               for m in messages('fp-empty.example.com'))
    assert [f for f in findings(nodes['fp-clean0.example.com'])
            if f['Where'].startswith('Placement')] == []


def test_only_devices_unlike_their_files_cost_a_request(
        placement, placement_url, auth, tmp_path, one_time_use):
    clean = build(placement, tmp_path / 'clean', 'fc', clean=3, odd=False)
    odd = build(placement, tmp_path / 'odd', 'fo', clean=12)
    _, base = requests_of(placement_url, lambda: check(
        '--snapshot-dir', str(clean.snapshots), '-f', 'json', auth=auth))
    result, count = requests_of(placement_url, lambda: check(
        '--snapshot-dir', str(odd.snapshots), '-f', 'json', auth=auth))
    assert result.rc in (0, 1), result.stderr
    assert len(by_node(result.json())) == 17
    assert base <= 10
    # One inventory read for each device whose summary is not what the
    # node's files predict: the four one-time-use devices Nova reserved,
    # the two reserved by hand, the two overcommitted and the VFs
    # reserved by hand.
    assert count == base + 9
