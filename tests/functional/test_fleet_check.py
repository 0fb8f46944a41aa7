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

"""The Ansible collection osc_mdev.vgpu on a fleet of 50 GPU nodes.

The collection is built with ``ansible-galaxy collection build`` and
installed with ``ansible-galaxy collection install``; ``ansible-playbook
osc_mdev.vgpu.check`` runs it by name on the fleet of
tests/fixtures/fleet.py (Ansible's local connection, each node with its
own sysfs tree and nova.conf, a real Placement), with the real
``openstack`` on PATH. Its findings are held to those of ``config check
--sysfs --host`` run on each node in turn.
"""

import json
import pathlib
import subprocess
import sys
import tarfile

import pytest

from osc_mdev.local import snapshot
from tests.fixtures import cli
from tests.fixtures import fleet as fleet_fixture

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
NODES = 50
SEVERITIES = ('error', 'warning', 'info')


def run(*argv, env=None, cwd=None, timeout=900):
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], env=env,
                          cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def build_collection(output: pathlib.Path) -> pathlib.Path:
    """``ansible-galaxy collection build ansible/``; the tarball's path."""
    result = run('ansible-galaxy', 'collection', 'build', 'ansible/',
                 '--output-path', str(output), cwd=REPO)
    assert result.returncode == 0, result.stderr
    [tarball] = output.glob('osc_mdev-vgpu-*.tar.gz')
    return tarball


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    """The built collection, installed: (tarball, collections path)."""
    work = tmp_path_factory.mktemp('collection')
    tarball = build_collection(work)
    result = run('ansible-galaxy', 'collection', 'install', str(tarball),
                 '-p', str(work / 'collections'))
    assert result.returncode == 0, result.stderr
    return tarball, work / 'collections'


@pytest.fixture(scope='module')
def fleet(placement_url, tmp_path_factory):
    return fleet_fixture.build(tmp_path_factory.mktemp('fleet'),
                               placement_url, NODES)


@pytest.fixture(scope='module')
def played(installed, fleet, placement_url, tmp_path_factory):
    """``ansible-playbook osc_mdev.vgpu.check`` on the fleet: (result,
    snapshot directory, the check's rows or None).
    """
    work = tmp_path_factory.mktemp('check')
    env = fleet_fixture.ansible_env(installed[1], work)
    env.update(fleet_fixture.write_clouds_yaml(work / 'clouds.yaml',
                                               placement_url))
    snapshots, report = work / 'snapshots', work / 'report'
    # A snapshot and a marker of an earlier run: the playbook clears them.
    snapshots.mkdir()
    (snapshots / 'gone-node.json').write_text('{}')
    (snapshots / 'gone-node.unreachable').write_text('old\n')
    result = run('ansible-playbook', 'osc_mdev.vgpu.check',
                 '-i', str(fleet.inventory),
                 '-e', 'osc_mdev_snapshot_dir=%s' % snapshots,
                 '-e', 'osc_mdev_check_report=%s' % report, env=env)
    rows = json.loads(report.read_text()) if report.exists() else None
    return result, snapshots, rows


def test_the_built_collection_holds_the_snapshot_code(installed):
    tarball, collections = installed
    code = (REPO / 'osc_mdev' / 'local' / 'snapshot.py').read_bytes()
    with tarfile.open(tarball) as tar:
        member = tar.getmember('plugins/module_utils/snapshot.py')
        assert member.isfile()
        assert tar.extractfile(member).read() == code
        assert {'galaxy.yml', 'MANIFEST.json'} & set(tar.getnames()) == {
            'MANIFEST.json'}
        manifest = json.load(tar.extractfile('MANIFEST.json'))
    assert (manifest['collection_info']['namespace'],
            manifest['collection_info']['name']) == ('osc_mdev', 'vgpu')
    installed_code = (collections / 'ansible_collections' / 'osc_mdev' /
                      'vgpu' / 'plugins' / 'module_utils' / 'snapshot.py')
    assert not installed_code.is_symlink()
    assert installed_code.read_bytes() == code


def without_time(document: dict) -> dict:
    return {k: v for k, v in document.items() if k != 'taken'}


def test_every_node_snapshotted_as_host_snapshot_takes_it(fleet, played):
    result, snapshots, _ = played
    assert sorted(p.name for p in snapshots.iterdir()) == sorted(
        '%s.%s' % (n.host, 'json' if n.reachable else 'unreachable')
        for n in fleet.nodes), result.stdout
    [lost] = [n for n in fleet.nodes if not n.reachable]
    assert 'connect' in (snapshots / (lost.host + '.unreachable')
                         ).read_text()
    for node in fleet.reachable():
        document = snapshot.load(str(snapshots / (node.host + '.json')))
        assert without_time(document) == without_time(snapshot.take(
            node.sysfs, (node.nova_conf,), node.libvirt_dir, node.name))


def test_the_module_runs_from_the_source_tree(fleet, tmp_path):
    # The repository's ansible/ as the collection osc_mdev.vgpu, its
    # module_utils a link into osc_mdev/.
    collection = tmp_path / 'ansible_collections' / 'osc_mdev' / 'vgpu'
    collection.parent.mkdir(parents=True)
    collection.symlink_to(REPO / 'ansible')
    node = fleet.nodes[0]
    args = json.dumps({'sysfs': node.sysfs,
                       'nova_conf_files': [node.nova_conf],
                       'libvirt_dir': node.libvirt_dir,
                       'node_name': node.name})
    result = run('ansible', 'localhost', '-m', 'osc_mdev.vgpu.snapshot',
                 '-a', args, '--check', '-o',
                 env=fleet_fixture.ansible_env(tmp_path, tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    answer = json.loads(result.stdout.split(' => ', 1)[1])
    assert answer['changed'] is False
    assert without_time(answer['snapshot']) == without_time(snapshot.take(
        node.sysfs, (node.nova_conf,), node.libvirt_dir, node.name))


def node_by_node(fleet, placement_url):
    """``config check --sysfs --host`` on each reachable node Placement
    knows: ``{(node name, severity, where, message)}``.
    """
    findings = set()
    for node in fleet.reachable():
        if not node.in_placement:
            continue
        result = cli.openstack(
            *cli.admin_token_args(placement_url), 'mdev', 'config',
            'check', node.nova_conf, '--sysfs', node.sysfs, '--host',
            node.name, '-f', 'json')
        findings |= {(node.name, r['Severity'], r['Where'], r['Message'])
                     for r in result.json() if r['Severity'] in SEVERITIES}
    return findings


def node_of(fleet, row):
    """The fleet node a row's Node cell names (inventory or Nova name)."""
    [node] = [n for n in fleet.nodes if row['Node'] in (n.host, n.name)]
    return node


def test_findings_equal_the_node_by_node_checks(fleet, played,
                                                placement_url):
    result, _, rows = played
    assert rows is not None, result.stdout
    central = {(node_of(fleet, r).name, r['Severity'], r['Where'],
                r['Message']) for r in rows if r['Severity'] in SEVERITIES}
    special = {n.name for n in fleet.nodes
               if not (n.reachable and n.in_placement)}
    assert {f for f in central if f[0] not in special} == node_by_node(
        fleet, placement_url)
    # The node Placement does not know, and the one not snapshotted: one
    # error each, naming it.
    for node in fleet.nodes:
        if node.name in special:
            [(_, severity, _, message)] = [f for f in central
                                           if f[0] == node.name]
            assert severity == 'error'
            assert node.name in message or not node.reachable, message


def test_the_play_fails_naming_every_drifted_node(fleet, played):
    result, _, _ = played
    assert result.returncode != 0
    [failure] = [line for line in result.stdout.splitlines()
                 if line.startswith('fatal: [localhost]: FAILED!')]
    lines = json.loads(failure.split(' => ', 1)[1])['msg']
    named = {n.host for n in fleet.nodes if any(
        line.startswith((n.host + ':', n.name + ':')) for line in lines)}
    assert named == {n.host for n in fleet.nodes if n.drifted}
    assert len(named) >= NODES // 2


@pytest.mark.parametrize('kind, plugin', [
    ('module', 'osc_mdev.vgpu.snapshot'),
    ('filter', 'osc_mdev.vgpu.finding_lines')])
def test_the_plugins_document_themselves(installed, tmp_path, kind, plugin):
    env = fleet_fixture.ansible_env(installed[1], tmp_path)
    result = run('ansible-doc', '-t', kind, '--json', plugin, env=env)
    assert result.returncode == 0, result.stderr
    assert 'ERROR' not in result.stderr, result.stderr
    [doc] = json.loads(result.stdout).values()
    assert doc['doc']['short_description']
