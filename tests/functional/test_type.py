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

"""``openstack mdev type list`` with the real CLI on sysfs trees laid out
as the kernel lays them out: no cloud, no credentials.
"""

import os

from tests.fixtures import cli
from tests.fixtures import sysfs

GPU_A, GPU_B = '0000:84:00.0', '0000:85:00.0'
COLUMNS = ['GPU', 'Type', 'Name', 'Available', 'Enabled']
CONF = """[devices]
enabled_mdev_types = nvidia-35, nvidia-36

[mdev_nvidia-36]
device_addresses = 0000:85:00.0
"""


def type_list(*args):
    return cli.openstack('mdev', 'type', 'list', *args)


def host(tmp_path):
    types = {'nvidia-35': 16, 'nvidia-36': 8}
    return sysfs.build(tmp_path / 'sys', devices=[
        (GPU_A, types, None), (GPU_B, types, None)],
        vgpu_gpus=[sysfs.VgpuGpu('0000:25:00.0', numvfs=2)])


def test_types_of_each_gpu_and_whether_nova_uses_them(tmp_path):
    root = host(tmp_path)
    conf = tmp_path / 'nova.conf'
    conf.write_text(CONF)
    rows = type_list(str(conf), '--sysfs', root, '-f', 'json').json()
    assert [list(r) for r in rows] == [COLUMNS] * len(rows)
    assert [(r['GPU'], r['Type'], r['Available'], r['Enabled'])
            for r in rows if r['GPU'] != '0000:25:00.0'] == [
        (GPU_A, 'nvidia-35', 16, True), (GPU_A, 'nvidia-36', 8, False),
        (GPU_B, 'nvidia-35', 16, False), (GPU_B, 'nvidia-36', 8, True)]
    l4 = [r for r in rows if r['GPU'] == '0000:25:00.0']
    assert [(r['Type'], r['Name'], r['Available'], r['Enabled'])
            for r in l4] == [(str(n), name, 2, False)
                             for n, name in sysfs.L4_TYPES]


def test_columns_depend_on_the_options_only(tmp_path):
    root = host(tmp_path)
    rows = type_list('--sysfs', root, '-f', 'json').json()
    assert {tuple(r) for r in rows} == {tuple(COLUMNS)}
    assert {r['Enabled'] for r in rows} == {None}
    long = type_list('--sysfs', root, '--long', '-f', 'json').json()
    assert list(long[0]) == COLUMNS + ['Device API', 'Description']
    first = [r for r in long if r['GPU'] == GPU_A][0]
    assert (first['Name'], first['Device API'], first['Description']) == (
        'GRID nvidia-35', 'vfio-pci', 'num_heads=4, frl_config=60')
    empty = tmp_path / 'empty'
    empty.mkdir()
    none = type_list('--sysfs', str(empty), '-f', 'csv')
    assert none.rc == 0
    assert none.stdout.splitlines() == [
        ','.join('"%s"' % c for c in COLUMNS)]
    assert type_list('--sysfs', root, '-f', 'value', '-c', 'Type').stdout \
        .splitlines()[:2] == ['1159', '1160']


def test_runs_without_credentials_as_a_process(tmp_path):
    root = host(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    result = cli.openstack_process('mdev', 'type', 'list', '--sysfs', root,
                                   '-f', 'value', '-c', 'GPU', env=env)
    assert result.rc == 0, result.stderr
    assert GPU_B in result.stdout.split()


def test_bad_input_is_one_line(tmp_path):
    root = host(tmp_path)
    cli.assert_one_line_error(
        type_list('--sysfs', str(tmp_path / 'no')), '--sysfs', 'not a '
        'directory')
    cli.assert_one_line_error(
        type_list(str(tmp_path / 'missing.conf'), '--sysfs', root),
        'missing.conf')
    conf = tmp_path / 'nova.conf'
    conf.write_text(CONF + '[mdev_nvidia-35]\ndevice_addresses = %s\n'
                    % GPU_B)
    cli.assert_one_line_error(type_list(str(conf), '--sysfs', root),
                              'nova-compute refuses to start',
                              'openstack mdev config check')
