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

"""``openstack mdev config generate`` with the real CLI, on host trees
laid out as the kernel lays them out (no cloud: it runs on the compute
node without credentials). The files it writes pass ``config check
--sysfs`` on the host once its VFs are typed.
"""

import json
import os
import pathlib

import pytest

from osc_mdev.features.config.generate import files as generated
from tests.fixtures import cli
from tests.fixtures import host_shell
from tests.fixtures import sysfs

L4_A = sysfs.VgpuGpu('0000:25:00.0', numvfs=4, totalvfs=4)
L4_B = sysfs.VgpuGpu('0000:26:00.0', numvfs=4, totalvfs=4, header=True)
TYPES = ('--type', '0000:25:00.0=L4-8Q:3', '--type',
         '0000:26:00.0=NVIDIA L4-4Q')
FILES = [generated.COMPUTE_CONF, generated.CONTROLLER_CONF, generated.UNIT,
         generated.SCRIPT]


def generate(*args: str) -> cli.Result:
    return cli.openstack('mdev', 'config', 'generate', *args)


def check(*args: str) -> cli.Result:
    return cli.openstack('mdev', 'config', 'check', *args)


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> str:
    """The host after a reboot: VFs enabled, none typed; an mdev GPU."""
    return sysfs.build(tmp_path / 'sys', devices=[
        ('0000:84:00.0', {'nvidia-35': 4, 'nvidia-36': 2}, None)],
        vgpu_gpus=[L4_A, L4_B])


def typed_tree(root: pathlib.Path) -> str:
    """The same host once the unit gave the VFs their types."""
    return sysfs.build(root, vgpu_gpus=[
        sysfs.VgpuGpu(L4_A.pf, numvfs=4, totalvfs=4,
                      current={0: 1162, 1: 1162, 2: 1162}),
        sysfs.VgpuGpu(L4_B.pf, numvfs=4, totalvfs=4, header=True,
                      current={i: 1161 for i in range(4)})])


def test_writes_the_files_then_leaves_them(tree: str,
                                           tmp_path: pathlib.Path) -> None:
    out = tmp_path / 'vgpu'
    result = generate('--sysfs', tree, *TYPES, '--output-dir', str(out),
                      '-f', 'json')
    assert result.rc == 0, result.stderr
    rows = result.json()
    assert [(r['File'], r['Result']) for r in rows] == [
        (str(out / name), 'created') for name in FILES]
    assert rows[0]['Holds'] == (
        "nova-compute's options: [pci] report_in_placement, device_spec of "
        '7 VFs (CUSTOM_NVIDIA_L4_4Q, CUSTOM_NVIDIA_L4_8Q)')
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)
    assert (out / generated.SCRIPT).stat().st_mode & 0o777 == 0o755
    assert (out / generated.UNIT).stat().st_mode & 0o777 == 0o644
    again = generate('--sysfs', tree, *TYPES, '--output-dir', str(out),
                     '-f', 'value', '-c', 'Result')
    assert again.stdout.split() == ['unchanged'] * 4
    other = generate('--sysfs', tree, '--type', '0000:25:00.0=L4-8Q:2',
                     '--type', '0000:26:00.0=1161', '--output-dir', str(out),
                     '-f', 'value', '-c', 'Result')
    assert other.stdout.split() == ['updated'] * 4


def test_mdev_gpus_get_one_file(tree: str, tmp_path: pathlib.Path) -> None:
    out = tmp_path / 'vgpu'
    result = generate('--sysfs', tree, '--type', '0000:84:00.0=nvidia-36',
                      '--output-dir', str(out), '-f', 'json')
    assert result.rc == 0, result.stderr
    assert [r['File'] for r in result.json()] == [
        str(out / generated.COMPUTE_CONF)]
    text = (out / generated.COMPUTE_CONF).read_text()
    assert '[devices]\nenabled_mdev_types = nvidia-36\n\n[mdev_nvidia-36]\n' \
        'device_addresses = 0000:84:00.0\n' in text


def test_dry_run_prints_the_files_and_writes_nothing(
        tree: str, tmp_path: pathlib.Path) -> None:
    out = tmp_path / 'vgpu'
    result = generate('--sysfs', tree, *TYPES, '--output-dir', str(out),
                      '--dry-run')
    assert result.rc == 0, result.stderr
    assert not out.exists()
    headers = [line for line in result.stdout.splitlines()
               if line.startswith('==> ')]
    assert headers == ['==> %s <==' % name for name in FILES]
    assert '\n[filter_scheduler]\npci_in_placement = True\n' in \
        result.stdout
    # Without --output-dir the files are printed the same way.
    assert generate('--sysfs', tree, *TYPES).stdout == result.stdout


@pytest.mark.parametrize('types, fragment', [
    (['0000:25:00.0=A16-8Q'], 'cannot create vGPU type A16-8Q'),
    (['0000:99:00.0=L4-8Q'], 'there is no device 0000:99:00.0'),
    (['0000:25:00.0=L4-8Q', '0000:25:00.0=L4-4Q'], 'is given two types'),
    (['0000:25:00.4=L4-8Q', '0000:25:00.5=L4-4Q'],
     'PlacementPciMixedResourceClassException'),
    (['0000:25:00.0'], 'is not GPU=TYPE'),
])
def test_bad_input_is_one_line_and_writes_nothing(
        tree: str, tmp_path: pathlib.Path, types: list[str],
        fragment: str) -> None:
    out = tmp_path / 'vgpu'
    args = [a for t in types for a in ('--type', t)]
    result = generate('--sysfs', tree, *args, '--output-dir', str(out))
    cli.assert_one_line_error(result, fragment)
    assert not out.exists()


def test_a_directory_that_cannot_be_written_is_refused_first(
        tree: str, tmp_path: pathlib.Path) -> None:
    blocker = tmp_path / 'file'
    blocker.write_text('')
    # The type is bad too: the directory is refused before the host is
    # read.
    result = generate('--sysfs', tree, '--type', '0000:99:00.0=x',
                      '--output-dir', str(blocker / 'vgpu'))
    cli.assert_one_line_error(result, '%s: Not a directory' % blocker)


@pytest.mark.parametrize('args, fragment', [
    (['--type', '0000:25:00.0=L4-8Q', '--sysfs', '/nonexistent',
      '--dry-run'], '--sysfs: /nonexistent is not a directory'),
    (['--dry-run'], 'The following arguments are required: --type'),
])
def test_bad_arguments(tree: str, args: list[str], fragment: str) -> None:
    if '--sysfs' not in args:
        args = ['--sysfs', tree] + args
    cli.assert_one_line_error(generate(*args), fragment)


def test_a_file_that_cannot_be_written_fails_alone(
        tree: str, tmp_path: pathlib.Path) -> None:
    out = tmp_path / 'vgpu'
    (out / generated.SCRIPT).mkdir(parents=True)
    result = generate('--sysfs', tree, *TYPES, '--output-dir', str(out),
                      '-f', 'json')
    assert result.rc == 1
    assert [r['Result'] for r in json.loads(result.stdout)] == [
        'created', 'created', 'created', 'failed: Is a directory']
    assert result.stderr.strip() == (
        '1 file(s) could not be written (the old ones are kept); see the '
        'Result column.')


def _wrong(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r['Severity'] in ('error', 'warning')]


def test_the_files_pass_config_check_on_the_typed_host(
        tree: str, tmp_path: pathlib.Path) -> None:
    out = tmp_path / 'vgpu'
    assert generate('--sysfs', tree, *TYPES, '--output-dir',
                    str(out)).rc == 0
    typed = typed_tree(tmp_path / 'typed')
    result = check(str(out / generated.COMPUTE_CONF),
                   str(out / generated.CONTROLLER_CONF), '--sysfs', typed,
                   '--long', '-f', 'json')
    assert result.rc == 0, result.stderr
    rows = result.json()
    assert _wrong(rows) == []
    providers = [(r['Device'], r['Resource Class']) for r in rows
                 if r['Message'].startswith('PCI provider')]
    assert providers == [('<node>_0000:25:00.0', 'CUSTOM_NVIDIA_L4_8Q'),
                         ('<node>_0000:26:00.0', 'CUSTOM_NVIDIA_L4_4Q')]


def test_config_check_names_the_vfs_without_their_type(
        tree: str, tmp_path: pathlib.Path) -> None:
    out = tmp_path / 'vgpu'
    assert generate('--sysfs', tree, *TYPES, '--output-dir',
                    str(out)).rc == 0
    # The host after a reboot, before the unit ran: every VF at 0.
    result = check(str(out / generated.COMPUTE_CONF),
                   str(out / generated.CONTROLLER_CONF), '--sysfs', tree,
                   '-f', 'json')
    rows = json.loads(result.stdout)
    for vf in L4_A.vfs[:3] + L4_B.vfs:
        assert [r for r in _wrong(rows) if vf in r['Where'] + r['Message']]


# -- Crafted trees and values: refused, nothing written ----------------------

#: Names the kernel never gives a PCI function, each given to a VF.
CRAFTED_NAMES = [
    '0000:25:00.5;touch${IFS}X',
    '0000:25:00.5$(touch X)',
    '0000:25:00.5`touch X`',
    "0000:25:00.5'X'",
    '0000:25:00.5"X"',
    '0000:25:00.5 X',
    '0000:25:00.5\ntouch X',
    # Nova's parse_address takes any character for the "."
    '0000:25:00;5',
    '0000:25:00.5\\',
]


def _escaped(text: str) -> str:
    return text.replace('\\', '\\\\').replace('\n', '\\n')


def _refused(result: cli.Result, out: pathlib.Path, *fragments: str) -> None:
    cli.assert_one_line_error(result, *fragments)
    assert not out.exists()


@host_shell.needs_namespace
def test_a_vf_named_to_run_a_command_runs_nothing(
        tmp_path: pathlib.Path) -> None:
    """The VF's name is not a PCI address: refused. Were the script
    written, run as root at boot it must not run the command in the name.
    """
    root = pathlib.Path(sysfs.build(tmp_path / 'sys', vgpu_gpus=[L4_A]))
    crafted = '0000:25:00.7;touch${IFS}X'
    sysfs.rename_function(root, L4_A.vfs[3], crafted)
    # The VF is found at its address too, so that the script need not
    # wait for it.
    os.symlink('../../../%s/%s' % (sysfs.PCI, crafted),
               root / 'bus' / 'pci' / 'devices' / L4_A.vfs[3])
    out = tmp_path / 'vgpu'
    result = generate('--sysfs', str(root), '--type', '0000:25:00.0=L4-8Q',
                      '--output-dir', str(out))
    cwd = tmp_path / 'cwd'
    cwd.mkdir()
    if (out / generated.SCRIPT).exists():
        host_shell.run(root, out / generated.SCRIPT, cwd=cwd)
    assert list(cwd.iterdir()) == []
    _refused(result, out, '--type 0000:25:00.0=L4-8Q: %s: the name is not '
             'a PCI address' % (root / 'bus' / 'pci' / 'devices' / crafted))


@pytest.mark.parametrize('name', CRAFTED_NAMES)
def test_a_vf_whose_name_is_no_pci_address_is_refused(
        tmp_path: pathlib.Path, name: str) -> None:
    root = sysfs.build(tmp_path / 'sys', vgpu_gpus=[L4_A])
    sysfs.rename_function(root, L4_A.vfs[1], name)
    out = tmp_path / 'vgpu'
    _refused(generate('--sysfs', root, '--type', '0000:25:00.0=L4-8Q:3',
                      '--output-dir', str(out)),
             out, '/bus/pci/devices/%s: the name is not a PCI address'
             % _escaped(name))


def test_an_mdev_parent_whose_name_is_no_pci_address_is_refused(
        tmp_path: pathlib.Path) -> None:
    """The VFs of a GPU are mdev parents (vGPU 16 and earlier)."""
    pf = '0000:84:00.0'
    root = sysfs.build(tmp_path / 'sys', devices=[
        (pf, {}, None), ('0000:84:00.4', {'nvidia-35': 1}, pf),
        ('0000:84:00.5', {'nvidia-35': 1}, pf)])
    sysfs.rename_function(root, '0000:84:00.5', '0000:84:00.5$(touch X)')
    out = tmp_path / 'vgpu'
    _refused(generate('--sysfs', root, '--type', pf + '=nvidia-35',
                      '--output-dir', str(out)),
             out, '0000:84:00.5$(touch X): the name is not a PCI address')


@pytest.mark.parametrize('name', ['NVIDIA L4-8Q\x1b[2J', 'NVIDIA L4-8Q\x07',
                                  'NVIDIA\x00L4-8Q'])
def test_a_vgpu_type_name_with_a_control_character_is_refused(
        tmp_path: pathlib.Path, name: str) -> None:
    root = sysfs.build(tmp_path / 'sys', vgpu_gpus=[sysfs.VgpuGpu(
        L4_A.pf, numvfs=2, totalvfs=2, creatable=[(1162, name)])])
    out = tmp_path / 'vgpu'
    _refused(generate('--sysfs', root, '--type', '0000:25:00.0=1162',
                      '--output-dir', str(out)),
             out, '/bus/pci/devices/0000:25:00.4/nvidia/creatable_vgpu_types: '
             "the vGPU type 'NVIDIA", 'holds the control character')


@pytest.mark.parametrize('file, text, fragment', [
    ('name', 'GRID M60-2Q\n$(touch X)\n',
     "nvidia-35/name: the name 'GRID M60-2Q\\n$(touch X)' holds the "
     'control character \\n'),
    ('name', 'GRID M60-2Q\x1b]0;X\x07\n', 'holds the control character'),
])
def test_an_mdev_type_name_with_a_control_character_is_refused(
        tree: str, tmp_path: pathlib.Path, file: str, text: str,
        fragment: str) -> None:
    (pathlib.Path(tree) / sysfs.PCI / '0000:84:00.0' /
     'mdev_supported_types' / 'nvidia-35' / file).write_text(text)
    out = tmp_path / 'vgpu'
    _refused(generate('--sysfs', tree, '--type', '0000:84:00.0=nvidia-35',
                      '--output-dir', str(out)), out, fragment)


@pytest.mark.parametrize('directory, fragment', [
    ('nvidia-35\nx', "the mdev type 'nvidia-35\\nx' holds the control "
     'character \\n'),
    # Nova would read two types, nvidia-35 and nvidia-36.
    ('nvidia-35,nvidia-36', 'Nova would not read nova-compute-vgpu.conf as '
     'it is written ([devices] enabled_mdev_types reads'),
])
def test_an_mdev_type_nova_cannot_read_is_refused(
        tmp_path: pathlib.Path, directory: str, fragment: str) -> None:
    root = sysfs.build(tmp_path / 'sys', devices=[
        ('0000:84:00.0', {directory: 4}, None)])
    out = tmp_path / 'vgpu'
    _refused(generate('--sysfs', root, '--type',
                      '0000:84:00.0=' + directory.split('\n')[0],
                      '--output-dir', str(out)), out, fragment)


@host_shell.needs_namespace
def test_a_vgpu_type_name_is_written_as_data(
        tmp_path: pathlib.Path) -> None:
    """A type name with quotes and a command substitution: the script
    prints it and runs nothing of it.
    """
    name = "NVIDIA L4-8Q'$(touch X)`touch Y`"
    gpu = sysfs.VgpuGpu(L4_A.pf, numvfs=2, totalvfs=2,
                        creatable=[(1162, name)])
    root = pathlib.Path(sysfs.build(tmp_path / 'sys', vgpu_gpus=[gpu]))
    out = tmp_path / 'vgpu'
    result = generate('--sysfs', str(root), '--type', '0000:25:00.0=1162',
                      '--output-dir', str(out))
    assert result.rc == 0, result.stderr
    cwd = tmp_path / 'cwd'
    cwd.mkdir()
    proc = host_shell.run(root, out / generated.SCRIPT, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert list(cwd.iterdir()) == []
    assert '0000:25:00.4: vGPU type 1162 (%s) written' % name in \
        proc.stdout.splitlines()


@pytest.mark.parametrize('value', [
    '0000:25:00.0=L4\n-8Q', '0000:25:00.0=L4-8Q\n:3', '0000:25:00.0=L4\t-8Q',
    '0000:25:00.0=L4-8Q\x1b[2J'])
def test_a_type_with_a_control_character_is_refused(
        tree: str, tmp_path: pathlib.Path, value: str) -> None:
    out = tmp_path / 'vgpu'
    _refused(generate('--sysfs', tree, '--type', value, '--output-dir',
                      str(out)), out, 'Argument --type:',
             'holds the control character')


def test_paths_with_a_control_character_are_refused(
        tree: str, tmp_path: pathlib.Path) -> None:
    out = tmp_path / 'vgpu\nx'
    _refused(generate('--sysfs', tree, *TYPES, '--output-dir', str(out)),
             out, "Argument --output-dir: '%s' holds the control character "
             '\\n' % _escaped(str(out)))
    copy = tmp_path / 'sys\ncopy'
    os.rename(tree, copy)
    _refused(generate('--sysfs', str(copy), *TYPES, '--output-dir',
                      str(tmp_path / 'vgpu')),
             tmp_path / 'vgpu', 'Argument --sysfs:',
             'holds the control character')
