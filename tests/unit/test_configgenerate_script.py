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

"""The script and unit ``config generate`` writes, run as on the host.

The script writes to /sys: each test binds a copy of a host's tree
(laid out as the kernel lays it out, VFs untyped as after a reboot) over
/sys in a private mount namespace (``tests.fixtures.host_shell``) and
runs the script as written,
with dash and with bash, twice: every VF gets its type back, and the
second run changes nothing and says so. A write the kernel refuses (a
read-only file, a sysfs attribute that takes no write) makes it exit 1
naming the VF. The unit is checked by ``systemd-analyze verify``. Where
mount namespaces are not permitted these tests are skipped, saying so.
"""

import os
import pathlib
import shutil
import subprocess

import pytest

from osc_mdev.features.config.generate import files as generated
from osc_mdev.features.config.generate import plan as configgenerate
from osc_mdev.features.config.generate import run as config_generate
from osc_mdev.local import sysfs as local_sysfs
from tests.fixtures import host_shell
from tests.fixtures import sysfs

L4_A = sysfs.VgpuGpu('0000:25:00.0', numvfs=4, totalvfs=4)
L4_B = sysfs.VgpuGpu('0000:26:00.0', numvfs=4, totalvfs=4, header=True)
CHOICES = ('0000:25:00.0=L4-8Q:3', '0000:26:00.0=NVIDIA L4-4Q')


def choices(*values: str) -> list[configgenerate.Choice]:
    return [configgenerate.parse_choice(v) for v in values]


#: What the script leaves in each VF's current_vgpu_type.
TYPED = {**{vf: 1162 for vf in L4_A.vfs[:3]}, L4_A.vfs[3]: 0,
         **{vf: 1161 for vf in L4_B.vfs}}
SHELLS = ['sh', 'bash']


@pytest.fixture
def host(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """A host's tree with its VFs untyped, and the generated files."""
    tree = pathlib.Path(sysfs.build(tmp_path / 'sys',
                                    vgpu_gpus=[L4_A, L4_B]))
    out = tmp_path / 'out'
    config_generate.generate(str(tree), choices(*CHOICES), str(out))
    return tree, out


def current_types(tree: pathlib.Path) -> dict[str, int | None]:
    """Each VF's current_vgpu_type, read back by the host model."""
    host = local_sysfs.read_host(str(tree))
    return {a: d.vgpu.current for a, d in host.devices.items()
            if d.vgpu is not None}


def type_files(tree: pathlib.Path) -> dict[str, int]:
    """The modification time of each VF's current_vgpu_type."""
    return {p.parent.parent.name: p.stat().st_mtime_ns for p in
            (tree / sysfs.PCI).glob('*/nvidia/current_vgpu_type')}


@pytest.mark.parametrize('shell', SHELLS)
def test_the_script_is_valid_shell(host, shell) -> None:
    _, out = host
    proc = subprocess.run([shell, '-n', str(out / generated.SCRIPT)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert os.access(out / generated.SCRIPT, os.X_OK)


@host_shell.needs_namespace
@pytest.mark.parametrize('shell', SHELLS)
def test_every_vf_gets_its_type_back_twice_in_a_row(host, shell) -> None:
    tree, out = host
    script = out / generated.SCRIPT
    first = host_shell.run(tree, script, shell)
    assert first.returncode == 0, first.stderr
    assert first.stderr == ''
    assert current_types(tree) == TYPED
    lines = first.stdout.splitlines()
    assert lines[:4] == [
        '0000:25:00.4: vGPU type 1162 (NVIDIA L4-8Q) written',
        '0000:25:00.5: vGPU type 1162 (NVIDIA L4-8Q) written',
        '0000:25:00.6: vGPU type 1162 (NVIDIA L4-8Q) written',
        '0000:25:00.0: 0 of 3 virtual functions had NVIDIA L4-8Q (1162) '
        'already']
    assert lines[-1] == ('7 change(s): the 7 virtual functions have their '
                         'vGPU types.')
    written = type_files(tree)
    second = host_shell.run(tree, script, shell)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines() == [
        '0000:25:00.0: 3 of 3 virtual functions had NVIDIA L4-8Q (1162) '
        'already',
        '0000:26:00.0: 4 of 4 virtual functions had NVIDIA L4-4Q (1161) '
        'already',
        'Nothing changed: the 7 virtual functions have their vGPU types.']
    # Nothing was written the second time.
    assert type_files(tree) == written
    assert current_types(tree) == TYPED


@host_shell.needs_namespace
def test_a_vf_of_another_type_gives_it_up_first(host) -> None:
    tree, out = host
    (tree / sysfs.PCI / L4_B.vfs[1] / 'nvidia' /
     'current_vgpu_type').write_text('1159\n')
    proc = host_shell.run(tree, out / generated.SCRIPT)
    assert proc.returncode == 0, proc.stderr
    assert '0000:26:00.5: vGPU type 1159 removed' in proc.stdout
    assert '0000:26:00.5: vGPU type 1161 (NVIDIA L4-4Q) written' in \
        proc.stdout
    assert current_types(tree) == TYPED


@host_shell.needs_namespace
def test_a_read_only_type_file_fails_loudly(host) -> None:
    tree, out = host
    refused = tree / sysfs.PCI / L4_A.vfs[1] / 'nvidia' / 'current_vgpu_type'
    proc = host_shell.run(tree, out / generated.SCRIPT, before=(
        'mount --bind %s %s && mount -o remount,ro,bind %s &&'
        % (refused, refused, refused)))
    assert proc.returncode == 1
    assert ('error: 0000:25:00.5: writing 1162 to /sys/bus/pci/devices/'
            '0000:25:00.5/nvidia/current_vgpu_type was refused'
            in proc.stderr), proc.stderr
    assert 'Read-only file system' in proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        "1 error(s): not every virtual function has its vGPU type.")
    # The other VFs got their type all the same.
    assert current_types(tree) == {**TYPED, L4_A.vfs[1]: 0}


#: A sysfs attribute of the kernel that reads a number and takes no
#: write, even from root.
KERNEL_ATTRIBUTE = pathlib.Path(
    '/sys/kernel/mm/transparent_hugepage/hpage_pmd_size')


@host_shell.needs_namespace
@pytest.mark.skipif(not KERNEL_ATTRIBUTE.exists(),
                    reason='this kernel has no %s' % KERNEL_ATTRIBUTE)
def test_a_write_the_kernel_refuses_fails_loudly(host) -> None:
    tree, out = host
    # The VF reads as typed (another type): the script must remove that
    # type first, and the kernel refuses the write.
    refused = tree / sysfs.PCI / L4_B.vfs[0] / 'nvidia' / 'current_vgpu_type'
    proc = host_shell.run(tree, out / generated.SCRIPT, before=(
        'mount --bind %s %s &&' % (KERNEL_ATTRIBUTE, refused)))
    assert proc.returncode == 1
    assert ('error: 0000:26:00.4: writing 0 to /sys/bus/pci/devices/'
            '0000:26:00.4/nvidia/current_vgpu_type was refused'
            in proc.stderr), proc.stderr
    assert '0000:26:00.0: 3 of 4 virtual functions had' not in proc.stdout
    assert '0000:26:00.0: 0 of 4 virtual functions had' in proc.stdout


@host_shell.needs_namespace
def test_vfs_gone_after_a_reboot_are_enabled_by_sriov_manage(
        tmp_path: pathlib.Path) -> None:
    """After a reboot the GPU has no VFs: the script runs NVIDIA's
    sriov-manage -e (here a stand-in that lays the VFs out as the driver
    does, and records its arguments), then types them.
    """
    enabled = sysfs.VgpuGpu('0000:27:00.0', numvfs=2, totalvfs=2)
    staging = pathlib.Path(sysfs.build(tmp_path / 'enabled',
                                       vgpu_gpus=[enabled]))
    out = tmp_path / 'out'
    config_generate.generate(str(staging), choices('0000:27:00.0=L4-2Q'),
                             str(out))
    tree = pathlib.Path(sysfs.build(tmp_path / 'sys', vgpu_gpus=[
        sysfs.VgpuGpu('0000:27:00.0', numvfs=0, totalvfs=2)]))
    log = tmp_path / 'sriov-manage.log'
    fake = tmp_path / 'sriov-manage'
    fake.write_text('#!/bin/sh\necho "$@" >> %s\ncp -a %s/. /sys/\n'
                    % (log, staging))
    fake.chmod(0o755)
    env = {'SRIOV_MANAGE': str(fake)}
    first = host_shell.run(tree, out / generated.SCRIPT, env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[0] == (
        '0000:27:00.0: no virtual functions enabled; running %s -e '
        '0000:27:00.0' % fake)
    assert log.read_text() == '-e 0000:27:00.0\n'
    assert current_types(tree) == {vf: 1160 for vf in enabled.vfs}
    second = host_shell.run(tree, out / generated.SCRIPT, env=env)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[-1].startswith('Nothing changed')
    assert log.read_text() == '-e 0000:27:00.0\n'


@host_shell.needs_namespace
def test_sriov_manage_missing_fails_loudly(tmp_path: pathlib.Path) -> None:
    staging = sysfs.build(tmp_path / 'enabled', vgpu_gpus=[
        sysfs.VgpuGpu('0000:27:00.0', numvfs=2, totalvfs=2)])
    out = tmp_path / 'out'
    config_generate.generate(staging, choices('0000:27:00.0=L4-2Q'),
                             str(out))
    tree = pathlib.Path(sysfs.build(tmp_path / 'sys', vgpu_gpus=[
        sysfs.VgpuGpu('0000:27:00.0', numvfs=0, totalvfs=2)]))
    proc = host_shell.run(tree, out / generated.SCRIPT,
                          env={'SRIOV_MANAGE': str(tmp_path / 'nowhere')})
    assert proc.returncode == 1
    assert ('error: 0000:27:00.0: %s -e 0000:27:00.0 failed'
            % (tmp_path / 'nowhere')) in proc.stderr


@host_shell.needs_namespace
@pytest.mark.skipif(shutil.which('systemd-analyze') is None,
                    reason='no systemd-analyze here; see '
                           'test_the_unit_is_structured_as_systemd_reads_it')
def test_systemd_verifies_the_unit(host) -> None:
    """``systemd-analyze verify`` reads the unit and finds its ExecStart
    (the script installed where the unit runs it from, on a tmpfs over
    /usr/local/sbin in the namespace).
    """
    _, out = host
    command = ('mount -t tmpfs tmpfs %s && install -m 0755 %s %s && '
               'systemd-analyze verify %s' % (
                   os.path.dirname(generated.SCRIPT_PATH),
                   out / generated.SCRIPT, generated.SCRIPT_PATH,
                   out / generated.UNIT))
    proc = subprocess.run(host_shell.UNSHARE + ['sh', '-e', '-c', command],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # systemd-analyze warns about what it ignores, and exits 0.
    assert proc.stdout + proc.stderr == ''


def test_the_unit_is_structured_as_systemd_reads_it(host) -> None:
    _, out = host
    sections: dict[str, dict[str, list[str]]] = {}
    section = None
    for line in (out / generated.UNIT).read_text().splitlines():
        if not line or line.startswith('#'):
            continue
        if line.startswith('['):
            section = sections.setdefault(line.strip('[]'), {})
            continue
        key, _, value = line.partition('=')
        assert section is not None, line
        section.setdefault(key, []).append(value)
    assert sections['Unit']['After'] == [
        'nvidia-vgpud.service nvidia-vgpu-mgr.service']
    assert sections['Unit']['Before'] == [
        'nova-compute.service openstack-nova-compute.service']
    assert sections['Service'] == {
        'Type': ['oneshot'], 'RemainAfterExit': ['yes'],
        'ExecStart': [generated.SCRIPT_PATH], 'TimeoutStartSec': ['240']}
    assert sections['Install'] == {
        'WantedBy': ['multi-user.target'],
        'RequiredBy': ['nova-compute.service '
                       'openstack-nova-compute.service']}
