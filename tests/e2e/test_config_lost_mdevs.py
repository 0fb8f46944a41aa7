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

"""``mdev config check --sysfs --host`` names a GPU that lost an mdev,
and with the node's libvirt domains each lost mdev; ``host restore``
gives exactly those back.

Servers boot on a host whose node is not its service host; the host's
tree is laid out from the fake hypervisor's own mdevs (which parent each
sits on, its type and UUID), as the kernel lays them out. The check is
quiet on it; with one mdev removed, as after a reboot that did not keep
it, it names that GPU, both counts and the servers Placement has there,
the one that lost its mdev among them. Placement is read for the node's
tree only. With the domain definitions of the fake hypervisor's guests
(``XMLDesc``, written as ``/etc/libvirt/qemu`` holds them) the check
names the server and the mdev UUID, and the restore script written from
the node's snapshot, run against the tree (bind-mounted on ``/sys`` in a
private mount namespace where the test may), re-creates exactly that
UUID on that parent.
"""

import os
import pathlib
import shutil
import subprocess
import urllib.parse

import pytest

from tests.e2e.helpers import mdev
from tests.e2e.helpers import mdev_json
from tests.e2e.helpers import placement_request
from tests.fixtures import mdev_create
from tests.fixtures import sysfs
from tools import sandbox

HOST, NODE = 'gpu9', 'gpu9.dc1.example.net'
GPU_11, GPU_12 = '0000:87:00.0', '0000:87:01.0'
# The module's cloud (tests/e2e/conftest.py) runs on this topology.
TOPOLOGY = {'hosts': [
    {'name': HOST, 'hypervisor_hostname': NODE, 'gpus': 2, 'bus': '0x87',
     'enabled_mdev_types': ['nvidia-11', 'nvidia-12'],
     'mdev': {'nvidia-11': {'device_addresses': [GPU_11]},
              'nvidia-12': {'device_addresses': [GPU_12],
                            'mdev_class': 'CUSTOM_NV12'}}},
    {'name': 'gpu10', 'gpus': 1, 'bus': '0x88',
     'enabled_mdev_types': ['nvidia-12']},
]}


@pytest.fixture(scope='module')
def servers(cloud):
    """Two servers with one vGPU on each GPU of the host (VGPU on the
    nvidia-11 GPU, CUSTOM_NV12 on the other), one on the other host.
    """
    vgpu = cloud.control('create_flavor', name='lost-vgpu',
                         extra_specs={'resources:VGPU': '1'})['id']
    nv12 = cloud.control('create_flavor', name='lost-nv12',
                         extra_specs={'resources:CUSTOM_NV12': '1'})['id']
    booted = cloud.control('boot', flavor=vgpu, name='vgpu', count=2,
                           host=HOST)
    booted += cloud.control('boot', flavor=nv12, name='nv12', count=2,
                            host=HOST)
    booted += cloud.control('boot', flavor=vgpu, name='elsewhere',
                            host='gpu10')
    assert [s['status'] for s in booted] == ['ACTIVE'] * 5, booted
    return {s['id']: s['name'] for s in booted}


def host_tree(cloud, root: pathlib.Path, leave_out: str | None = None
              ) -> str:
    """The host's /sys as the fake hypervisor has it: its GPUs with the
    types they offer, and every mdev a guest uses on its parent, but
    ``leave_out``.
    """
    mdevs = [m for m in cloud.control('mdev_truth') if m['node'] == NODE]
    if root.exists():
        shutil.rmtree(root)
    return sysfs.build(root, devices=[
        (gpu['pci_address'], gpu['offers'], None)
        for gpu in cloud.hosts[HOST]['gpus']], mdevs=[
        (m['mdev_uuid'], m['pci_address'], m['mdev_type'])
        for m in mdevs if m['mdev_uuid'] != leave_out])


def test_a_gpu_that_lost_an_mdev_is_named_with_its_servers(
        cloud, servers, tmp_path):
    truth = [m for m in cloud.control('mdev_truth') if m['node'] == NODE]
    assert len(truth) == 4
    conf = tmp_path / 'nova.conf'
    conf.write_text(sandbox.nova_conf(cloud.hosts[HOST]).replace(
        'device_addresses = %s\n' % GPU_12,
        'device_addresses = %s\nmdev_class = CUSTOM_NV12\n' % GPU_12))

    whole = host_tree(cloud, tmp_path / 'sys')
    rows = mdev_json('config', 'check', str(conf), '--sysfs', whole,
                     '--host', NODE)
    assert [r for r in rows if r['Severity'] != 'result'] == [], rows

    assert sorted(m['pci_address'] for m in truth) == [GPU_11] * 2 + [
        GPU_12] * 2
    lost = next(m for m in truth if m['pci_address'] == GPU_12)
    on_gpu = sorted(m['server'] for m in truth if m['pci_address'] == GPU_12)
    before = cloud.control('placement_requests')['count']
    tree = host_tree(cloud, tmp_path / 'sys', leave_out=lost['mdev_uuid'])
    rows = mdev_json('config', 'check', str(conf), '--sysfs', tree,
                     '--host', NODE)
    [finding] = [r for r in rows if r['Severity'] != 'result']
    assert finding['Severity'] == 'warning'
    assert finding['Where'] == 'Placement, host %s' % NODE
    assert finding['Message'].startswith(
        'GPU %s has 1 mdev but Placement holds 2 CUSTOM_NV12 there, for '
        'servers %s and %s: 1 of their 2 mdevs is gone' % (
            GPU_12, *sorted('%s (%s)' % (servers[s], s) for s in on_gpu)))
    assert lost['server'] in on_gpu
    [result] = [r for r in rows if r['Severity'] == 'result']
    assert result['Message'].endswith(
        '1 warning: nova-compute will start but do something other than '
        'written.')
    # Placement is read for the node's tree only.
    requests = cloud.control('placement_requests')['requests'][before:]
    tree_uuids = {p['uuid'] for p in tree_providers(cloud)}
    for request in requests:
        method, _, target = request.partition(' ')
        url = urllib.parse.urlsplit(target)
        query = urllib.parse.parse_qs(url.query)
        parts = url.path.strip('/').split('/')
        if parts[:1] == ['resource_providers'] and len(parts) > 1:
            assert parts[1] in tree_uuids, request
        elif parts == ['resource_providers']:
            assert {'name', 'in_tree'} & set(query), request
        else:
            assert parts[:1] in (['allocation_candidates'], ['traits'],
                                 ['resource_classes'], ['']), request
    assert len(requests) < 40, requests


def tree_providers(cloud):
    """The providers of the node's tree, read directly from Placement."""
    [root] = placement_request(cloud, 'GET', '/resource_providers?name=%s'
                               % NODE)['resource_providers']
    return placement_request(cloud, 'GET', '/resource_providers?in_tree=%s'
                             % root['uuid'])['resource_providers']


def domain_dir(cloud, directory: pathlib.Path) -> str:
    """The host's guests' definitions as libvirt keeps them."""
    directory.mkdir()
    for domain in cloud.control('domains', host=HOST):
        (directory / ('%s.xml' % domain['name'])).write_text(domain['xml'])
    return str(directory)


def nova_conf(cloud, tmp_path):
    conf = tmp_path / 'nova.conf'
    conf.write_text(sandbox.nova_conf(cloud.hosts[HOST]).replace(
        'device_addresses = %s\n' % GPU_12,
        'device_addresses = %s\nmdev_class = CUSTOM_NV12\n' % GPU_12))
    return str(conf)


def test_each_lost_mdev_is_named_with_its_server(cloud, servers, tmp_path):
    truth = [m for m in cloud.control('mdev_truth') if m['node'] == NODE]
    lost = next(m for m in truth if m['pci_address'] == GPU_12)
    conf = nova_conf(cloud, tmp_path)
    domains = domain_dir(cloud, tmp_path / 'qemu')
    whole = host_tree(cloud, tmp_path / 'sys')
    rows = mdev_json('config', 'check', conf, '--sysfs', whole, '--host',
                     NODE, '--libvirt-dir', domains)
    assert [r for r in rows if r['Severity'] != 'result'] == [], rows

    tree = host_tree(cloud, tmp_path / 'sys', leave_out=lost['mdev_uuid'])
    rows = mdev_json('config', 'check', conf, '--sysfs', tree, '--host',
                     NODE, '--libvirt-dir', domains)
    named = [r for r in rows if r['Message'].startswith('Server ')]
    assert [r['Message'].split(':')[0] for r in named] == [
        'Server %s (%s) lost mdev %s' % (
            servers[lost['server']], lost['server'], lost['mdev_uuid'])]
    assert ('its parent is GPU %s, type %s' % (GPU_12, lost['mdev_type'])
            in named[0]['Message'])


def test_the_restore_script_gives_back_exactly_the_lost_mdev(
        cloud, servers, tmp_path):
    truth = [m for m in cloud.control('mdev_truth') if m['node'] == NODE]
    lost = next(m for m in truth if m['pci_address'] == GPU_11)
    conf = nova_conf(cloud, tmp_path)
    domains = domain_dir(cloud, tmp_path / 'qemu')
    tree = pathlib.Path(host_tree(cloud, tmp_path / 'sys',
                                  leave_out=lost['mdev_uuid']))
    snapshot = tmp_path / 'node.json'
    mdev('host', 'snapshot', conf, '--sysfs', str(tree), '--libvirt-dir',
         domains, '--node-name', NODE, '--output', str(snapshot))

    rows = mdev_json('config', 'check', '--snapshot', str(snapshot))
    named = [r for r in rows if r['Message'].startswith('Server ')]
    assert [(r['Node'], r['Message'].split(':')[0]) for r in named] == [
        (NODE, 'Server %s (%s) lost mdev %s' % (
            servers[lost['server']], lost['server'], lost['mdev_uuid']))]

    out = tmp_path / 'restore'
    rows = mdev_json('host', 'restore', '--snapshot', str(snapshot),
                     '--dry-run', '--output-dir', str(out))
    assert not out.exists()
    script = out / ('restore-mdevs-%s.sh' % NODE)
    rows = mdev_json('host', 'restore', '--snapshot', str(snapshot),
                     '--output-dir', str(out))
    assert rows == [{
        'Server': '%s (%s)' % (servers[lost['server']], lost['server']),
        'Mdev': lost['mdev_uuid'], 'GPU': GPU_11,
        'Type': lost['mdev_type'], 'Action': 'create (in %s)' % script}]
    assert os.access(script, os.X_OK)

    before = {m['mdev_uuid'] for m in truth} - {lost['mdev_uuid']}
    with mdev_create.Kernel(tree, [(GPU_11, lost['mdev_type'])]) as kernel:
        done = run_on(tree, script)
    assert done.returncode == 0, done.stderr
    assert kernel.created == [(lost['mdev_uuid'], GPU_11,
                               lost['mdev_type'])]
    assert {p.name for p in (tree / 'bus/mdev/devices').iterdir()} == (
        before | {lost['mdev_uuid']})
    assert done.stdout.endswith('created on %s, type %s, through sysfs\n'
                                % (GPU_11, lost['mdev_type']))
    rows = mdev_json('config', 'check', conf, '--sysfs', str(tree),
                     '--host', NODE, '--libvirt-dir', domains)
    assert [r for r in rows if r['Severity'] != 'result'] == [], rows


def run_on(tree: pathlib.Path, script: pathlib.Path
           ) -> subprocess.CompletedProcess:
    """The script run with the tree as the node's /sys: bind-mounted on
    /sys in a private mount namespace where this may (root, unshare),
    else named by SYSFS. No mdevctl on its PATH.
    """
    env = {'PATH': '/usr/sbin:/usr/bin:/sbin:/bin'}
    if os.geteuid() == 0 and shutil.which('unshare'):
        command = ['unshare', '-m', '--propagation', 'private', 'sh', '-c',
                   'mount --bind "$1" /sys && exec /bin/sh "$2"', 'sh',
                   str(tree), str(script)]
    else:
        command, env['SYSFS'] = ['/bin/sh', str(script)], str(tree)
    assert not shutil.which('mdevctl', path=env['PATH'])
    return subprocess.run(command, env=env, text=True, capture_output=True,
                          timeout=120, check=False)
