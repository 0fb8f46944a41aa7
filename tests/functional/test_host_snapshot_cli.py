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

"""``openstack mdev host snapshot`` on a node and ``config generate
--snapshot`` on the controller, with the real CLI and no cloud: the files
made from the snapshot are those made on the node from its sysfs.
"""

import json
import os
import shutil

from tests.fixtures import cli
from tests.fixtures import sysfs

GPU = sysfs.VgpuGpu('0000:25:00.0', numvfs=4)
MDEV_GPU = '0000:84:00.0'
TYPES = ('--type', '0000:25:00.0=L4-4Q:2', '--type',
         '%s=nvidia-35' % MDEV_GPU)


def node(tmp_path):
    root = sysfs.build(tmp_path / 'sys', devices=[
        (MDEV_GPU, {'nvidia-35': 4}, None)], vgpu_gpus=[GPU])
    conf = tmp_path / 'nova.conf'
    conf.write_text('[DEFAULT]\nhost = gpu3\n')
    return root, conf


def test_the_files_made_from_a_snapshot_are_those_made_on_the_node(
        tmp_path):
    root, conf = node(tmp_path)
    out = tmp_path / 'gpu3.json'
    taken = cli.openstack('mdev', 'host', 'snapshot', str(conf),
                          '--sysfs', root, '--node-name', 'gpu3.example.net',
                          '--output', str(out))
    assert (taken.rc, taken.stdout, taken.stderr) == (0, '', '')
    document = json.loads(out.read_text())
    assert document['node']['given'] == 'gpu3.example.net'
    assert [f['path'] for f in document['nova_conf']['files']] == [str(conf)]
    on_node = cli.openstack('mdev', 'config', 'generate', '--sysfs', root,
                            *TYPES)
    assert on_node.rc == 0, on_node.stderr
    shutil.rmtree(root)
    central = cli.openstack('mdev', 'config', 'generate', '--snapshot',
                            str(out), *TYPES)
    assert (central.rc, central.stderr) == (0, '')
    assert central.stdout == on_node.stdout
    assert 'device_spec' in central.stdout


def test_printed_without_output_and_read_only(tmp_path):
    root, conf = node(tmp_path)
    before = sorted(os.walk(root))
    taken = cli.openstack('mdev', 'host', 'snapshot', str(conf), '--sysfs',
                          root)
    assert taken.rc == 0, taken.stderr
    assert json.loads(taken.stdout)['version'] == 1
    assert sorted(os.walk(root)) == before


def test_bad_input_is_one_line(tmp_path):
    root, conf = node(tmp_path)
    bad = cli.openstack('mdev', 'host', 'snapshot', '--sysfs', root,
                        '--output', str(tmp_path / 'no' / 'x.json'))
    cli.assert_one_line_error(bad, 'Cannot write', '--output')
    not_json = tmp_path / 'x.json'
    not_json.write_text('{')
    bad = cli.openstack('mdev', 'config', 'generate', '--snapshot',
                        str(not_json), *TYPES)
    cli.assert_one_line_error(bad, '--snapshot', 'no host snapshot',
                              'not JSON')
    both = cli.openstack('mdev', 'config', 'generate', '--snapshot',
                         str(not_json), '--sysfs', root, *TYPES)
    cli.assert_one_line_error(both, '--sysfs', '--snapshot')
