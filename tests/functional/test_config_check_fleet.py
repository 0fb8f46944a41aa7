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

"""``config check --snapshot-dir``: many nodes from their host snapshots
against one read of a real Placement, each node's findings equal to
those of ``config check --sysfs --host`` run for that node, and the
Placement requests counted at the server, flat in the number of nodes.

The nodes are kernel-shaped sysfs trees (tests.fixtures.sysfs) with
drift: lost mdevs, a wrong type, SR-IOV vGPU VFs untyped after a reboot,
a node Placement does not know, snapshots that are no snapshot, and a
node the snapshots could not reach.
"""

import json
import uuid

from tests.fixtures import cli
from tests.fixtures import host_snapshots
from tests.fixtures.host_snapshots import by_node
from tests.fixtures.host_snapshots import check
from tests.fixtures.host_snapshots import findings
from tests.fixtures.placement_data import Gpu
from tests.fixtures.placement_data import requests_of
from tests.fixtures import sysfs

MATCHING = """
[devices]
enabled_mdev_types = nvidia-36
[mdev_nvidia-36]
device_addresses = 0000:84:00.0,0000:85:00.0

[libvirt]
live_migration_downtime = 500000
live_migration_downtime_steps = 3
live_migration_downtime_delay = 3
"""
# 0000:84:00.0 moved to another type and class: its inventory changes
# class on restart, while servers hold it.
WRONG_TYPE = MATCHING.replace(
    'device_addresses = 0000:84:00.0,0000:85:00.0',
    'device_addresses = 0000:85:00.0').replace(
    'enabled_mdev_types = nvidia-36',
    'enabled_mdev_types = nvidia-36, nvidia-35\n'
    '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'
    'mdev_class = CUSTOM_NV35')


class Fleet(host_snapshots.NodeFiles):
    """Nodes laid out for one check: each with its sysfs tree, nova.conf
    and snapshot in ``snapshots``.
    """

    def __init__(self, placement, base):
        super().__init__(base)
        self.placement = placement

    def mdev_node(self, name, used=(0, 0), mdevs=None, conf=MATCHING,
                  known=True):
        """Two GPUs of nvidia-36 (VGPU, 4 each); ``used`` vGPUs held by
        servers on each, ``mdevs`` on each in sysfs (as used when None).
        """
        gpus = [Gpu('pci_0000_84_00_0', 'VGPU', 4, ('CUSTOM_NVIDIA_36',)),
                Gpu('pci_0000_85_00_0', 'VGPU', 4, ('CUSTOM_NVIDIA_36',))]
        if known:
            root = self.placement.add_compute_node(name, gpus)
            for gpu, count in zip(gpus, used):
                for _ in range(count):
                    self.placement.boot_server(root, gpu)
        addresses = ('0000:84:00.0', '0000:85:00.0')
        self.add_node(name, conf, devices=[
            (a, {'nvidia-36': 4, 'nvidia-35': 2}, None) for a in addresses],
            mdevs=[(str(uuid.uuid4()), a, 'nvidia-36')
                   for a, n in zip(addresses, mdevs or used)
                   for _ in range(n)])

    def vf_node(self, name, used=2):
        """An SR-IOV vGPU GPU whose two VFs lost their type in a reboot,
        ``used`` of them held by servers.
        """
        root = self.placement.add_compute_node(name)
        provider = self.placement.add_pci_device(
            root, name, '0000:25:00.0', 'CUSTOM_NVIDIA_L4_8Q', total=2)
        for _ in range(used):
            self.placement.boot_server(root, provider)
        l4 = sysfs.VgpuGpu('0000:25:00.0', numvfs=2)
        self.add_node(name, '[pci]\nreport_in_placement = True\n' + ''.join(
            'device_spec = {"vendor_id": "10de", "address": "%s", '
            '"resource_class": "CUSTOM_NVIDIA_L4_8Q", "managed": "no"}\n'
            % vf for vf in l4.vfs) +
            '[filter_scheduler]\npci_in_placement = True\n',
            vgpu_gpus=[l4])


def test_every_node_as_checked_on_its_own(placement, auth, tmp_path):
    fleet = Fleet(placement, tmp_path)
    fleet.mdev_node('fl-clean.example.com', used=(1, 0))
    fleet.mdev_node('fl-lost.example.com', used=(2, 1), mdevs=(1, 1))
    fleet.mdev_node('fl-spare.example.com', used=(0, 0), mdevs=(1, 0))
    fleet.mdev_node('fl-type.example.com', used=(1, 0), conf=WRONG_TYPE)
    fleet.vf_node('fl-vf.example.com')
    fleet.mdev_node('fl-unknown.example.com', known=False)
    (fleet.snapshots / 'fl-garbage.json').write_text('{not json')
    doc = json.loads((fleet.snapshots /
                      'fl-clean.example.com.json').read_text())
    doc['version'] = 99
    (fleet.snapshots / 'fl-future.json').write_text(json.dumps(doc))
    (fleet.snapshots / 'fl-down.example.com.unreachable').write_text(
        'Failed to connect to the host via ssh: Connection refused\n')

    result = check('--snapshot-dir', str(fleet.snapshots), '-f', 'json',
                   auth=auth)
    assert result.rc == 1
    assert '4 error(s) on 4 nodes of 9' in result.stderr
    nodes = by_node(json.loads(result.stdout))
    assert sorted(nodes) == sorted(
        list(fleet.nodes) + ['fl-garbage', 'fl-future',
                             'fl-down.example.com'])

    for name, (conf, root) in fleet.nodes.items():
        alone = check(conf, '--sysfs', root, '--host', name, '-f', 'json',
                      auth=auth)
        if name == 'fl-unknown.example.com':
            cli.assert_one_line_error(
                alone, "No compute host named 'fl-unknown.example.com'")
            assert [(f['Severity'], f['Where']) for f in findings(
                nodes[name])] == [('error', 'Placement')]
            assert "No compute host named 'fl-unknown.example.com'" in \
                nodes[name][0]['Message']
            continue
        assert alone.rc in (0, 1), alone.stderr
        assert findings(nodes[name]) == findings(
            json.loads(alone.stdout)), name
        [verdict] = [r for r in nodes[name] if r['Severity'] == 'result']
        assert "Placement's view of %s" % name in verdict['Message']

    # What the drift looks like: the servers holding the lost mdevs and
    # VFs are named, as the check on the node names them.
    lost = [f['Message'] for f in findings(nodes['fl-lost.example.com'])]
    assert any(m.startswith('GPU 0000:84:00.0 has 1 mdev but Placement '
                            'holds 2 VGPU there, for servers ') for m in lost)
    assert any('has 2 CUSTOM_NVIDIA_L4_8Q in use, for servers' in f[
        'Message'] for f in findings(nodes['fl-vf.example.com']))
    assert any('changes class on restart. Placement refuses that while '
               'servers hold allocations there (' in f['Message']
               for f in findings(nodes['fl-type.example.com']))
    assert [f for f in findings(nodes['fl-clean.example.com'])
            if f['Where'].startswith('Placement')] == []
    assert [(r['Severity'], r['Where']) for r in nodes['fl-garbage']] == [
        ('error', str(fleet.snapshots / 'fl-garbage.json'))]
    assert 'version 99' in nodes['fl-future'][0]['Message']
    assert nodes['fl-down.example.com'] == [{
        'Severity': 'error',
        'Where': str(fleet.snapshots / 'fl-down.example.com.unreachable'),
        'Message': 'Node unreachable: Failed to connect to the host via '
        'ssh: Connection refused.'}]


def test_placement_requests_stay_flat_in_the_number_of_nodes(
        placement, placement_url, auth, tmp_path):
    small = Fleet(placement, tmp_path / 'small')
    for n in range(3):
        small.mdev_node('flat-%02d.example.com' % n, used=(1, 1))
    large = Fleet(placement, tmp_path / 'large')
    for n in range(3, 15):
        large.mdev_node('flat-%02d.example.com' % n, used=(1, 1))
    three, count3 = requests_of(placement_url, lambda: check(
        '--snapshot-dir', str(small.snapshots), '-f', 'json', auth=auth))
    twelve, count12 = requests_of(placement_url, lambda: check(
        '--snapshot-dir', str(large.snapshots), '-f', 'json', auth=auth))
    assert three.rc == 0, three.stderr
    assert twelve.rc == 0, twelve.stderr
    assert len(by_node(twelve.json())) == 12
    assert count3 == count12 <= 10

    # Node by node, the same twelve cost requests in proportion.
    name = 'flat-03.example.com'
    conf, root = large.nodes[name]
    alone, one = requests_of(placement_url, lambda: check(
        conf, '--sysfs', root, '--host', name, '-f', 'json', auth=auth))
    assert alone.rc == 0, alone.stderr
    assert 12 * one > count12


def test_the_servers_are_read_only_for_nodes_whose_findings_name_them(
        placement, placement_url, auth, tmp_path):
    clean = Fleet(placement, tmp_path / 'clean')
    drift = Fleet(placement, tmp_path / 'drift')
    for n in range(6):
        clean.mdev_node('join-c%d.example.com' % n, used=(1, 1))
    for n in range(6):
        drift.mdev_node('join-d%d.example.com' % n, used=(1, 1),
                        mdevs=(0, 1) if n < 2 else None)
    _, base = requests_of(placement_url, lambda: check(
        '--snapshot-dir', str(clean.snapshots), '-f', 'json', auth=auth))
    result, count = requests_of(placement_url, lambda: check(
        '--snapshot-dir', str(drift.snapshots), '-f', 'json', auth=auth))
    assert result.rc == 0, result.stderr
    # Two nodes lost an mdev: the allocations of their two devices in
    # use each are read, and Nova's servers of those two nodes (one list
    # each; this Placement answers Nova's URL too, with a 404), nothing
    # more.
    assert count == base + 2 * 2 + 2
    lost = [n for n, rows in by_node(result.json()).items()
            if findings(rows)]
    assert lost == ['join-d0.example.com', 'join-d1.example.com']


def test_snapshot_input_errors(placement, auth, tmp_path):
    empty = tmp_path / 'empty'
    empty.mkdir()
    cli.assert_one_line_error(
        check('--snapshot-dir', str(empty), auth=auth),
        '--snapshot-dir: %s holds no node snapshot' % empty)
    cli.assert_one_line_error(
        check('--snapshot-dir', str(tmp_path / 'nowhere'), auth=auth),
        '--snapshot-dir: %s is not a directory' % (tmp_path / 'nowhere'))
    cli.assert_one_line_error(
        check('nova.conf', '--snapshot-dir', str(empty), auth=auth),
        '--snapshot-dir cannot be used with <file>')
    cli.assert_one_line_error(
        check('--snapshot', 'x.json', '--host', 'h', auth=auth),
        '--snapshot cannot be used with --host')


def test_snapshot_file_of_a_node_without_credentials(tmp_path):
    fleet = Fleet(None, tmp_path)
    fleet.add_node('nocreds.example.com', MATCHING)
    cli.assert_one_line_error(
        check('--snapshot', str(fleet.snapshots /
                                'nocreds.example.com.json'),
              '--os-auth-type', 'password'),
        '--snapshot needs cloud credentials')
