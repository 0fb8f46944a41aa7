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

"""``ansible-playbook osc_mdev.vgpu.restore``: a node that lost an mdev
after a reboot gets it back, through mdevctl on the node (a stand-in on
PATH that records its arguments), from its snapshot and its servers'
allocations in a real Placement; ``--check`` runs nothing on the node;
a node that lost nothing runs no script.
"""

import json
import os
import pathlib
import stat
import subprocess
import sys

from tests.fixtures import fleet as fleet_fixture
from tests.fixtures import placement_data
from tests.fixtures import sysfs

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
GPU = '0000:84:00.0'
KEPT = 'c2177883-f1bb-47f0-914d-32a22e3a8804'
LOST = 'a297db4a-f4c2-11e6-90f6-d3b88d6c9525'
DOMAIN = """<domain type='kvm'>
  <name>instance-%(n)d</name>
  <uuid>%(server)s</uuid>
  <devices>
    <hostdev mode='subsystem' type='mdev' model='vfio-pci'>
      <source><address uuid='%(mdev)s'/></source>
    </hostdev>
  </devices>
</domain>
"""
CONF = """[devices]
enabled_mdev_types = nvidia-36
"""


def node(base, placement, host, lose):
    """A node whose two servers each hold one mdev of its GPU; with
    ``lose`` the second server's mdev is gone from its sysfs.
    """
    directory = base / host
    gpu = placement_data.Gpu('pci_0000_84_00_0', 'VGPU', 4,
                             ('CUSTOM_NVIDIA_36',))
    root = placement.add_compute_node(host + '.example', [gpu])
    servers = [placement.boot_server(root, gpu) for _ in range(2)]
    mdevs = [(KEPT, GPU, 'nvidia-36')]
    if not lose:
        mdevs.append((LOST, GPU, 'nvidia-36'))
    root_dir = sysfs.build(directory / 'sys', devices=[
        (GPU, {'nvidia-36': 2}, None)], mdevs=mdevs)
    qemu = directory / 'qemu'
    qemu.mkdir()
    for n, (server, mdev) in enumerate(zip(servers, (KEPT, LOST))):
        (qemu / ('instance-%d.xml' % n)).write_text(DOMAIN % {
            'n': n, 'server': server, 'mdev': mdev})
    conf = directory / 'nova.conf'
    conf.write_text(CONF)
    return {'osc_mdev_sysfs': root_dir,
            'osc_mdev_nova_conf_files': [str(conf)],
            'osc_mdev_libvirt_dir': str(qemu),
            'osc_mdev_node_name': host + '.example',
            'ansible_connection': 'local',
            'ansible_python_interpreter': sys.executable}


def fake_mdevctl(directory, log):
    directory.mkdir()
    tool = directory / 'mdevctl'
    tool.write_text('#!/bin/sh\necho "$@" >> %s\n' % log)
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return directory


def playbook(name, inventory, snapshots, env, *args):
    return subprocess.run(
        [str(BIN / 'ansible-playbook'), 'osc_mdev.vgpu.%s' % name,
         '-i', str(inventory), '-e', 'osc_mdev_snapshot_dir=%s' % snapshots,
         *args], env=env, capture_output=True, text=True, timeout=900)


def test_a_node_gets_its_lost_mdev_back(placement_url, tmp_path):
    placement = placement_data.Placement(placement_url)
    hosts = {'lost-1': node(tmp_path, placement, 'lost-1', True),
             'fine-1': node(tmp_path, placement, 'fine-1', False)}
    inventory = tmp_path / 'inventory.yml'
    inventory.write_text(json.dumps(
        {fleet_fixture.GROUP: {'hosts': hosts}}))
    collections = tmp_path / 'collections' / 'ansible_collections'
    (collections / 'osc_mdev').mkdir(parents=True)
    (collections / 'osc_mdev' / 'vgpu').symlink_to(REPO / 'ansible')
    env = fleet_fixture.ansible_env(tmp_path / 'collections', tmp_path)
    env.update(fleet_fixture.write_clouds_yaml(tmp_path / 'clouds.yaml',
                                               placement_url))
    log = tmp_path / 'mdevctl.log'
    env['PATH'] = '%s%s%s' % (fake_mdevctl(tmp_path / 'tools', log),
                              os.pathsep, env['PATH'])
    snapshots = tmp_path / 'snapshots'
    checked = playbook('check', inventory, snapshots, env)
    assert 'lost-1' in checked.stdout and LOST in checked.stdout, (
        checked.stdout)

    dry = playbook('restore', inventory, snapshots, env, '--check')
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert LOST in dry.stdout
    assert not log.exists()

    done = playbook('restore', inventory, snapshots, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert log.read_text().splitlines() == [
        'start -u %s -p %s --type nvidia-36' % (LOST, GPU),
        'define --auto -u %s' % LOST]
    recap = {line.split()[0]: line for line in done.stdout.splitlines()
             if 'ok=' in line}
    assert 'changed=1' in recap['lost-1']
    assert 'changed=0' in recap['fine-1']
