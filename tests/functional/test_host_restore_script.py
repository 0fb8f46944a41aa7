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

"""The restore script run by /bin/sh on kernel-shaped sysfs trees: through
the kernel's ``create`` files (``tests.fixtures.mdev_create``) where the
node has no mdevctl, through mdevctl (a fake one on PATH that records its
arguments) where it has; idempotent, refusing a GPU with no room left.
"""

import os
import pathlib
import subprocess

from osc_mdev.features.config.check import lost as lost_logic
from osc_mdev.features.host import restore
from osc_mdev.local import sysfs as local_sysfs
from tests.fixtures import mdev_create
from tests.fixtures import sysfs

GPU, FULL = '0000:84:00.0', '0000:85:00.0'
SERVER_A = '5b2c0e8e-7f4c-4a55-9b36-1f1c3b0f6a01'
SERVER_B = '0f2a8d3e-2b9e-4c1d-8e55-9d6f1a7c2b02'
KEPT = 'c2177883-f1bb-47f0-914d-32a22e3a8804'
LOST = 'a297db4a-f4c2-11e6-90f6-d3b88d6c9525'
NO_ROOM = '8b8c1f9e-0a5d-4d27-b1a3-52f3b6a0e703'


def tree(root):
    return sysfs.build(root, devices=[
        (GPU, {'nvidia-35': 2, 'nvidia-36': 1}, None),
        (FULL, {'nvidia-35': 0}, None)],
        mdevs=[(KEPT, GPU, 'nvidia-35')])


def lost(uuid, gpu, mdev_type='nvidia-35', server=SERVER_A):
    return lost_logic.LostMdev(server, 'vm-a', uuid, gpu, mdev_type,
                               '/etc/libvirt/qemu/instance-1.xml')


def write_script(path, losts):
    text = restore.script('gpu1.example.net', '2026-01-01T00:00:00Z',
                          [restore.step(m) for m in losts])
    path.write_text(text)
    return path


def run(script, root, path_dirs=()):
    env = {'SYSFS': str(root),
           'PATH': os.pathsep.join([*map(str, path_dirs), '/usr/bin',
                                    '/bin'])}
    return subprocess.run(['/bin/sh', str(script)], env=env, text=True,
                          capture_output=True, timeout=60, check=False)


def mdevs(root):
    return {(m.uuid, m.parent, m.mdev_type)
            for m in local_sysfs.read_host(str(root)).mdevs}


def test_sysfs_form_creates_the_lost_mdev_once(tmp_path):
    root = pathlib.Path(tree(tmp_path / 'sys'))
    script = write_script(tmp_path / 'restore.sh',
                          [lost(KEPT, GPU), lost(LOST, GPU, server=SERVER_B)])
    with mdev_create.Kernel(root, [(GPU, 'nvidia-35')]) as kernel:
        first = run(script, root)
    assert first.returncode == 0, first.stderr
    assert kernel.created == [(LOST, GPU, 'nvidia-35')]
    assert mdevs(root) == {(KEPT, GPU, 'nvidia-35'),
                           (LOST, GPU, 'nvidia-35')}
    assert first.stdout.splitlines() == [
        'mdev %s (server %s): already there, left as it is' % (
            KEPT, SERVER_A),
        'mdev %s (server %s): created on %s, type nvidia-35, through '
        'sysfs' % (LOST, SERVER_B, GPU)]
    # Run again: nothing to do.
    with mdev_create.Kernel(root, [(GPU, 'nvidia-35')]) as kernel:
        again = run(script, root)
    assert again.returncode == 0 and kernel.created == []
    assert 'created' not in again.stdout


def test_a_gpu_with_no_room_left_is_refused(tmp_path):
    root = pathlib.Path(tree(tmp_path / 'sys'))
    script = write_script(tmp_path / 'restore.sh', [
        lost(NO_ROOM, FULL), lost(LOST, GPU, 'nvidia-99'),
        lost(KEPT.replace('c', 'd'), None)])
    before = mdevs(root)
    done = run(script, root)
    assert done.returncode == 1
    assert mdevs(root) == before
    assert done.stderr.splitlines() == [
        'mdev %s (server %s): not created: %s has no room left of type '
        'nvidia-35 (available_instances 0)' % (NO_ROOM, SERVER_A, FULL),
        'mdev %s (server %s): not created: %s offers no type nvidia-99'
        % (LOST, SERVER_A, GPU),
        'mdev %s (server %s): not restored: parent GPU unknown'
        % (KEPT.replace('c', 'd'), SERVER_A)]


def fake_mdevctl(directory, log):
    directory.mkdir()
    tool = directory / 'mdevctl'
    tool.write_text('#!/bin/sh\necho "$*" >> %s\n' % log)
    tool.chmod(0o755)
    return directory


def test_mdevctl_form_starts_and_defines(tmp_path):
    root = pathlib.Path(tree(tmp_path / 'sys'))
    log = tmp_path / 'mdevctl.log'
    bin_dir = fake_mdevctl(tmp_path / 'bin', log)
    script = write_script(tmp_path / 'restore.sh', [
        lost(KEPT, GPU), lost(LOST, GPU, 'nvidia-36'), lost(NO_ROOM, FULL)])
    done = run(script, root, [bin_dir])
    assert done.returncode == 1
    assert log.read_text().splitlines() == [
        'start -u %s -p %s --type nvidia-36' % (LOST, GPU),
        'define --auto -u %s' % LOST]
    assert ('mdev %s (server %s): created on %s, type nvidia-36, with '
            'mdevctl (started, defined to start at boot)'
            % (LOST, SERVER_A, GPU)) in done.stdout.splitlines()
    assert 'no room left' in done.stderr


def test_failing_mdevctl_is_reported(tmp_path):
    root = pathlib.Path(tree(tmp_path / 'sys'))
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'mdevctl').write_text('#!/bin/sh\nexit 3\n')
    (bin_dir / 'mdevctl').chmod(0o755)
    script = write_script(tmp_path / 'restore.sh', [lost(LOST, GPU)])
    done = run(script, root, [bin_dir])
    assert done.returncode == 1
    assert 'mdevctl failed on %s, type nvidia-35' % GPU in done.stderr


def test_names_sysfs_cannot_have_stay_out_of_the_script():
    bad = lost(LOST, '0000:84:00.0; rm -rf /')
    step = restore.step(bad)
    assert not step.restores
    assert 'rm -rf' not in step.line.replace(repr(bad.gpu), '')
    assert step.action.startswith('not restored: the GPU name')
