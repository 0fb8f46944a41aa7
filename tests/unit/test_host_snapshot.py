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

"""The host snapshot: the one reader of a node's raw files.

A snapshot of a kernel-shaped tree, written and read back as JSON after
the tree is gone, gives the host the tree gives; its nova.conf files
give the texts and refusals the files give; it imports the standard
library only (it runs on compute nodes as an Ansible module_utils).
"""

import ast
import json
import pathlib
import shutil
import sys

import pytest

from osc_mdev.local import conf_files
from osc_mdev.local import node
from osc_mdev.local import snapshot
from osc_mdev.local import sysfs as local_sysfs
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.virt.libvirt import host as libvirt_host
from tests.fixtures import sysfs

UUID_A = '4b20d080-1b54-4048-85b3-a6a62d165c01'
UUID_M = '8c11c5c0-5ea2-4f56-9c6f-34e0c7f57e22'
DOMAIN = """<domain type='kvm'>
  <name>instance-00000001</name>
  <uuid>0b2cbb6b-19c8-4e8f-9a0c-8a6a4b8a0f51</uuid>
  <devices>
    <hostdev mode='subsystem' type='mdev' model='vfio-pci'>
      <source><address uuid='%s'/></source>
    </hostdev>
  </devices>
</domain>
""" % UUID_A


def tree(root):
    return sysfs.build(
        root, devices=[('0000:84:00.0', {'nvidia-35': 3, 'nvidia-36': 1},
                        None),
                       ('0000:85:00.0', {}, None)],
        virtual=[('mtty/mtty', {'mtty-1': 2})],
        vgpu_gpus=[sysfs.VgpuGpu('0000:25:00.0', numvfs=3,
                                 current={1: 1162}, header=True)],
        mdevs=[(UUID_A, '0000:84:00.0', 'nvidia-35'),
               (UUID_M, 'mtty/mtty', 'mtty-1')])


def test_a_snapshot_gives_the_host_its_tree_gives(tmp_path):
    root = tree(tmp_path / 'sys')
    live = local_sysfs.read_host(root)
    document = json.loads(snapshot.dumps(snapshot.take(root, [])))
    shutil.rmtree(root)
    from_snapshot = node.from_document(document, 'x.json').host
    assert from_snapshot == live
    assert from_snapshot.root == root
    # What the checks take from the host is all there.
    assert sorted(from_snapshot.mdev_parents()) == [
        '0000:84:00.0', 'mtty_mtty']
    assert [m.parent for m in from_snapshot.mdevs] == [
        '0000:84:00.0', 'mtty_mtty']
    [gpu] = from_snapshot.vgpu_gpus()
    assert [vf.vgpu.current for vf in from_snapshot.vfs_of(gpu)] == [
        0, 1162, 0]
    exists = node.from_document(document, 'x.json').virtual_parent_exists
    assert exists('mtty_mtty') and not exists('mtty_other')


def test_the_document_is_raw_and_versioned(tmp_path):
    root = tree(tmp_path / 'sys')
    document = snapshot.take(root, [], node_name='gpu3.example.net')
    assert (document['format'], document['version']) == (
        'osc-mdev-host-snapshot', 1)
    vf = document['sysfs']['pci_devices']['0000:25:00.5']
    assert vf['nvidia']['current_vgpu_type'] == '1162\n'
    assert vf['links']['physfn'] == '0000:25:00.0'
    assert document['sysfs']['mdevs'][UUID_A] == {
        'parent': 'devices/pci0000:00/0000:84:00.0',
        'mdev_type': 'nvidia-35'}
    assert document['unreadable'] == []
    assert node.from_document(document, 's').name == 'gpu3.example.net'


def test_a_file_that_is_not_text_is_listed_as_unreadable(tmp_path):
    root = tree(tmp_path / 'sys')
    vendor = pathlib.Path(root, 'bus/pci/devices/0000:85:00.0/vendor')
    vendor.write_bytes(b'\xff\xfe')
    document = snapshot.take(root, [])
    assert document['unreadable'] == [
        {'path': str(vendor), 'error': 'not UTF-8'}]
    assert local_sysfs.host_of(document['sysfs']).devices[
        '0000:85:00.0'].vendor_id == ''


@pytest.mark.parametrize('content', [
    None, b'', b'  \n', b'[DEFAULT]\n\0', b'[DEFAULT]\nhost = \xff\n',
    b'[devices]\nenabled_mdev_types = nvidia-35\n', 'dir', 'empty-dir'])
def test_nova_conf_files_read_as_nova_compute_reads_them(
        tmp_path, content):
    path = tmp_path / 'nova.conf'
    if content == 'dir':
        path.mkdir()
        (path / 'a.conf').write_text('[DEFAULT]\nhost = a\n')
        (path / 'b.conf').write_text('')
    elif content == 'empty-dir':
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)

    def outcome(read):
        try:
            return list(read())
        except novaconf.NovaConfError as exc:
            return str(exc)
    live = outcome(lambda: conf_files.read_files([str(path)]))
    taken = snapshot.take(str(tmp_path / 'sys'), [str(path)])
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    assert outcome(lambda: node.from_document(
        json.loads(snapshot.dumps(taken)), 's').conf_texts()) == live
    assert live


def test_a_bad_file_is_no_snapshot(tmp_path):
    cases = {'missing': ('unreadable', None), 'text': ('not-json', 'x'),
             'other': ('format', '{"format": "other"}'),
             'v2': ('version', json.dumps(
                 {'format': snapshot.FORMAT, 'version': 2}))}
    for name, (reason, text) in cases.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        with pytest.raises(snapshot.SnapshotError) as caught:
            node.from_snapshot(str(path))
        assert caught.value.reason == reason


def test_domains_are_kept_with_their_text(tmp_path):
    libvirt = tmp_path / 'qemu'
    libvirt.mkdir()
    (libvirt / 'instance-00000001.xml').write_text(DOMAIN)
    (libvirt / 'autostart').mkdir()
    found = node.from_document(snapshot.take(
        tree(tmp_path / 'sys'), [], str(libvirt)), 's').domains
    assert found == (node.Domain(str(libvirt / 'instance-00000001.xml'),
                                 DOMAIN),)


@pytest.mark.parametrize('hostname, canonical, name', [
    ('gpu3.dc2.example.net', None, 'gpu3.dc2.example.net'),
    ('gpu3', 'gpu3.dc2.example.net', 'gpu3.dc2.example.net'),
    ('gpu3', None, 'gpu3'),
    ('gpu3', 'localhost', 'gpu3'),
    ('localhost', 'localhost.localdomain', 'localhost'),
])
def test_the_node_is_named_as_libvirt_names_it(hostname, canonical, name):
    assert libvirt_host.get_hostname(hostname, canonical) == name


def test_the_snapshot_reader_needs_the_standard_library_only():
    source = pathlib.Path(snapshot.__file__).read_text()
    imported = set()
    for statement in ast.walk(ast.parse(source)):
        if isinstance(statement, ast.Import):
            imported |= {a.name.split('.')[0] for a in statement.names}
        elif isinstance(statement, ast.ImportFrom):
            imported.add((statement.module or '').split('.')[0])
    assert imported and imported <= set(sys.stdlib_module_names)
