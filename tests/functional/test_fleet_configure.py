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

"""The collection's configure playbook (``ansible-playbook
osc_mdev.vgpu.configure``), run by the real ansible-playbook on an
inventory of nodes reached with Ansible's local connection, each node
with its own sysfs tree laid out as the kernel lays it out and its own
root directory to be written in (``osc_mdev_root``); the controller's
``openstack`` is this checkout's. The restart command of each node
touches a marker file in its directory.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

from osc_mdev.features.config.generate import files as generated
from tests.fixtures import cli
from tests.fixtures import sysfs

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
L4 = sysfs.VgpuGpu('0000:25:00.0', numvfs=4, totalvfs=4)
MDEV_GPU = ('0000:84:00.0', {'nvidia-35': 4, 'nvidia-36': 2}, None)
#: The nodes: SR-IOV vGPUs and an mdev GPU, mdev GPUs only (two), and a
#: node without osc_mdev_types.
TYPES = {
    'gpu-1': {L4.pf: 'L4-8Q:3', MDEV_GPU[0]: 'nvidia-35'},
    'gpu-2': {MDEV_GPU[0]: 'nvidia-36'},
    'gpu-3': {MDEV_GPU[0]: 'nvidia-35'},
    'plain': None,
}
UNIT_DIR = 'etc/systemd/system'
#: Where each file generate writes goes on the node.
NODE_PATHS = {generated.COMPUTE_CONF: 'etc/nova/nova.conf.d',
              generated.UNIT: UNIT_DIR,
              generated.SCRIPT: generated.SCRIPT_PATH.rsplit('/', 1)[0][1:]}
#: The links ``systemctl enable`` makes for the unit.
LINKS = ('multi-user.target.wants', 'nova-compute.service.requires',
         'openstack-nova-compute.service.requires')
RECAP = re.compile(r'^(\S+)\s+: ok=\d+\s+changed=(\d+)\s+unreachable=0\s+'
                   r'failed=0', re.M)


class Fleet:
    """The inventory, the controller's directory and each node's."""

    def __init__(self, base: pathlib.Path) -> None:
        self.base = base
        self.snapshots = base / 'snapshots'
        self.snapshots.mkdir(parents=True)
        collections = base / 'collections' / 'ansible_collections'
        (collections / 'osc_mdev').mkdir(parents=True)
        (collections / 'osc_mdev' / 'vgpu').symlink_to(REPO / 'ansible')
        for name in TYPES:
            vgpu = [L4] if name == 'gpu-1' else []
            sysfs.build(self.node(name) / 'sys', devices=[MDEV_GPU],
                        vgpu_gpus=vgpu)
            snapshot(self.node(name) / 'sys',
                     self.snapshots / ('%s.json' % name))
        self.write_inventory(TYPES)

    def node(self, name: str) -> pathlib.Path:
        return self.base / 'nodes' / name

    def root(self, name: str) -> pathlib.Path:
        return self.node(name) / 'root'

    def restarted(self, name: str) -> pathlib.Path:
        return self.node(name) / 'restarted'

    def write_inventory(self, types: dict) -> None:
        hosts = {}
        for name, chosen in types.items():
            hosts[name] = {'osc_mdev_root': str(self.root(name)),
                           'osc_mdev_sysfs': str(self.node(name) / 'sys'),
                           'osc_mdev_restart_command': 'touch %s'
                           % self.restarted(name)}
            if chosen:
                hosts[name]['osc_mdev_types'] = chosen
        group = {'hosts': hosts, 'vars': {
            'ansible_connection': 'local',
            'ansible_python_interpreter': sys.executable,
            'osc_mdev_snapshot_dir': str(self.snapshots)}}
        (self.base / 'inventory.yml').write_text(yaml.safe_dump(
            {'all': {'children': {'osc_mdev_gpu_nodes': group}}}))

    def configure(self, *args: str) -> tuple[str, dict[str, int]]:
        """Run the playbook; its output and the changes per node."""
        env = dict(os.environ,
                   PATH='%s%s%s' % (BIN, os.pathsep, os.environ['PATH']),
                   ANSIBLE_COLLECTIONS_PATH=str(self.base / 'collections'),
                   ANSIBLE_HOME=str(self.base / 'ansible-home'),
                   ANSIBLE_LOCAL_TEMP=str(self.base / 'ansible-tmp'),
                   ANSIBLE_NOCOLOR='1', ANSIBLE_FORCE_COLOR='0')
        proc = subprocess.run(
            [str(BIN / 'ansible-playbook'), 'osc_mdev.vgpu.configure',
             '-i', str(self.base / 'inventory.yml'), *args],
            cwd=self.base, env=env, capture_output=True, text=True,
            timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout, {m[0]: int(m[1])
                             for m in RECAP.findall(proc.stdout)}

    def written(self, name: str) -> dict[str, str]:
        """Every file and link under the node's root: its text, or where
        it links.
        """
        found = {}
        root = self.root(name)
        for path in sorted(root.rglob('*')) if root.exists() else ():
            relative = str(path.relative_to(root))
            if path.is_symlink():
                found[relative] = '-> %s' % os.readlink(path)
            elif path.is_file():
                found[relative] = path.read_text()
        return found


def snapshot(tree: pathlib.Path, path: pathlib.Path) -> None:
    """The node's snapshot, taken with ``host snapshot`` as on the
    node.
    """
    result = cli.openstack('mdev', 'host', 'snapshot', '--sysfs', str(tree),
                           '--output', str(path))
    assert result.rc == 0, result.stderr


def expected(fleet: Fleet, name: str, tmp_path: pathlib.Path
             ) -> dict[str, str]:
    """What ``config generate`` writes for the node, where the playbook
    puts it.
    """
    out = tmp_path / ('expected-%s' % name)
    result = cli.openstack(
        'mdev', 'config', 'generate', '--snapshot',
        str(fleet.snapshots / ('%s.json' % name)),
        *['--type=%s=%s' % pair for pair in TYPES[name].items()],
        '--output-dir', str(out))
    assert result.rc == 0, result.stderr
    files = {'%s/%s' % (NODE_PATHS[p.name], p.name): p.read_text()
             for p in out.iterdir() if p.name in NODE_PATHS}
    if generated.UNIT in os.listdir(out):
        files.update({'%s/%s/%s' % (UNIT_DIR, link, generated.UNIT):
                      '-> /%s/%s' % (UNIT_DIR, generated.UNIT)
                      for link in LINKS})
    return files


@pytest.fixture
def fleet(tmp_path: pathlib.Path) -> Fleet:
    return Fleet(tmp_path / 'fleet')


def test_check_shows_the_changes_and_writes_nothing(fleet: Fleet) -> None:
    out, changed = fleet.configure('--check', '--diff')
    # The directories, the files, the links' directories, the links.
    assert changed == {'gpu-1': 4, 'gpu-2': 2, 'gpu-3': 2}
    assert '+++ after: ' in out
    assert '+[mdev_nvidia-36]\n+device_addresses = 0000:84:00.0\n' in out
    assert '+device_spec = {"address": "0000:25:00.4"' in out
    assert '+ExecStart=%s\n' % generated.SCRIPT_PATH in out
    for name in TYPES:
        assert fleet.written(name) == {}
        assert not fleet.restarted(name).exists()
    assert not (fleet.snapshots / 'generated').exists()


def test_configure_writes_the_files_and_restarts_where_changed(
        fleet: Fleet, tmp_path: pathlib.Path) -> None:
    _, changed = fleet.configure()
    # The same, and the restart.
    assert changed == {'gpu-1': 5, 'gpu-2': 3, 'gpu-3': 3}
    for name in TYPES:
        if TYPES[name]:
            assert fleet.written(name) == expected(fleet, name, tmp_path)
            assert fleet.restarted(name).exists()
        else:
            assert fleet.written(name) == {}
            assert not fleet.restarted(name).exists()
    root = fleet.root('gpu-1')
    assert (root / generated.SCRIPT_PATH[1:]).stat().st_mode & 0o777 == 0o755
    assert (root / UNIT_DIR / generated.UNIT).stat().st_mode & 0o777 == 0o644

    for name in TYPES:
        fleet.restarted(name).unlink(missing_ok=True)
    _, changed = fleet.configure()
    assert changed == {'gpu-1': 0, 'gpu-2': 0, 'gpu-3': 0}
    assert not any(fleet.restarted(name).exists() for name in TYPES)

    types = dict(TYPES, **{'gpu-2': {MDEV_GPU[0]: 'nvidia-35'}})
    fleet.write_inventory(types)
    out, changed = fleet.configure('--diff')
    assert changed == {'gpu-1': 0, 'gpu-2': 2, 'gpu-3': 0}   # and restart
    assert '-enabled_mdev_types = nvidia-36\n' \
        '+enabled_mdev_types = nvidia-35\n' in out
    assert [n for n in TYPES if fleet.restarted(n).exists()] == ['gpu-2']
    assert fleet.written('gpu-2') == fleet.written('gpu-3')


def test_a_node_that_no_longer_types_vfs_loses_the_unit(
        fleet: Fleet) -> None:
    fleet.configure()
    fleet.restarted('gpu-1').unlink()
    mdev_only = {MDEV_GPU[0]: 'nvidia-35'}
    fleet.write_inventory(dict(TYPES, **{'gpu-1': mdev_only}))
    _, changed = fleet.configure()
    # The fragment, the links, the unit and script, the restart.
    assert changed == {'gpu-1': 4, 'gpu-2': 0, 'gpu-3': 0}
    assert fleet.written('gpu-1') == fleet.written('gpu-3')
    assert fleet.restarted('gpu-1').exists()


def test_a_node_without_a_snapshot_gets_one(
        fleet: Fleet, tmp_path: pathlib.Path) -> None:
    taken = fleet.snapshots / 'gpu-3.json'
    taken.unlink()
    _, changed = fleet.configure()
    assert changed['gpu-3'] == 4   # and the snapshot kept
    document = json.loads(taken.read_text())
    assert document['sysfs']['root'] == str(fleet.node('gpu-3') / 'sys')
    assert fleet.written('gpu-3') == expected(fleet, 'gpu-3', tmp_path)
