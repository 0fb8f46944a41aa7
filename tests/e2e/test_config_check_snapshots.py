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

"""``mdev config check --snapshot-dir`` on real Nova: the host snapshots
of two nodes, one of which lost an mdev, give each node the findings
``config check --sysfs --host`` gives it, the servers on the GPU that
lost the mdev named by Nova.

The nodes' trees are laid out from the fake hypervisor's own mdevs, as
in test_config_lost_mdevs.
"""

import json
import pathlib

import pytest

from tests.e2e.helpers import mdev
from tests.fixtures import host_snapshots
from tests.fixtures.host_snapshots import findings
from tests.fixtures import sysfs
from tools import sandbox

HOSTS = {'snap1': 'snap1.dc1.example.net', 'snap2': 'snap2'}
# The module's cloud (tests/e2e/conftest.py) runs on this topology.
TOPOLOGY = {'hosts': [
    {'name': 'snap1', 'hypervisor_hostname': 'snap1.dc1.example.net',
     'gpus': 1, 'bus': '0x87', 'enabled_mdev_types': ['nvidia-11']},
    {'name': 'snap2', 'gpus': 1, 'bus': '0x88',
     'enabled_mdev_types': ['nvidia-11']},
]}


@pytest.fixture(scope='module')
def servers(cloud):
    vgpu = cloud.control('create_flavor', name='snap-vgpu',
                         extra_specs={'resources:VGPU': '1'})['id']
    booted = []
    for host in HOSTS:
        booted += cloud.control('boot', flavor=vgpu, name='on-%s' % host,
                                count=2, host=host)
    assert [s['status'] for s in booted] == ['ACTIVE'] * 4, booted
    return {s['id']: s['name'] for s in booted}


def node_files(cloud, base: pathlib.Path, host: str, lose: bool):
    """The node's nova.conf and /sys (with one mdev gone when
    ``lose``), and its snapshot in ``base/snapshots``.
    """
    node = HOSTS[host]
    mdevs = [m for m in cloud.control('mdev_truth') if m['node'] == node]
    where = base / host
    where.mkdir(parents=True)
    conf = where / 'nova.conf'
    conf.write_text(sandbox.nova_conf(cloud.hosts[host]))
    root = sysfs.build(where / 'sys', devices=[
        (gpu['pci_address'], gpu['offers'], None)
        for gpu in cloud.hosts[host]['gpus']], mdevs=[
        (m['mdev_uuid'], m['pci_address'], m['mdev_type'])
        for m in mdevs[1 if lose else 0:]])
    (base / 'snapshots').mkdir(exist_ok=True)
    host_snapshots.write(base / 'snapshots' / ('%s.json' % host), root,
                         [conf], where / 'qemu', node)
    return str(conf), root


def test_each_node_as_checked_on_the_node(cloud, servers, tmp_path):
    files = {host: node_files(cloud, tmp_path, host, host == 'snap1')
             for host in HOSTS}
    result = mdev('config', 'check', '--snapshot-dir',
                  str(tmp_path / 'snapshots'), '-f', 'json')
    assert result.rc == 0, result.stderr
    rows = json.loads(result.stdout)
    assert sorted({r['Node'] for r in rows}) == sorted(HOSTS.values())
    for host, (conf, root) in files.items():
        alone = mdev('config', 'check', conf, '--sysfs', root, '--host',
                     HOSTS[host], '-f', 'json')
        assert alone.rc == 0, alone.stderr
        assert findings([r for r in rows if r['Node'] == HOSTS[host]]) == \
            findings(json.loads(alone.stdout)), host
    [lost] = findings([r for r in rows
                       if r['Node'] == 'snap1.dc1.example.net'])
    on_snap1 = sorted('%s (%s)' % (servers[m['server']], m['server'])
                      for m in cloud.control('mdev_truth')
                      if m['node'] == 'snap1.dc1.example.net')
    assert 'for servers %s and %s: 1 of their 2 mdevs is gone' % tuple(
        on_snap1) in lost['Message']
    assert findings([r for r in rows if r['Node'] == 'snap2']) == []
