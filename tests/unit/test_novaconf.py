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

"""nova.conf rules, each case cross-checked with Nova's own driver code.

For every case the same file is handed to nova 34's libvirt driver
(``_get_supported_vgpu_types``, ``_get_vgpu_type_per_pgpu``,
``_get_resource_class_for_device`` on a LibvirtDriver made without
``__init__``), so the expectations below are Nova's answers too.
"""

import ast
import logging
import pathlib
import uuid

import pytest

from osc_mdev.local import conf_files as local_novaconf
from osc_mdev.local import sysfs as local_sysfs
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver
from tests.fixtures import nova_driver

write_files = nova_driver.write_files

# Devices every case is asked about (libvirt node device names).
DEVICES = ('pci_0000_84_00_0', 'pci_0000_85_00_0', 'pci_0000_86_00_0',
           'pci_0000_3b_00_4', 'mtty_mtty', 'mtty_other')

MULTI = """
[DEFAULT]
host = compute1

[devices]
enabled_mdev_types = nvidia-35, nvidia-36 ,mlx5_core

[mdev_nvidia-35]
device_addresses = 0000:84:00.0,0000:85:00.0

[mdev_nvidia-36]
device_addresses = 0000:86:00.0
max_instances = 4
mdev_class = CUSTOM_NV36

[mdev_mlx5_core]
mdev_class = CUSTOM_MLX5
"""

D35 = '[devices]\nenabled_mdev_types = nvidia-35, nvidia-36\n'

# name: (files, {device: (type, class)} or an error fragment,
#        warnings expected)
CASES = {
    'multi type, default takes VGPU whatever its mdev_class': (
        [MULTI], {
            'pci_0000_84_00_0': ('nvidia-35', 'VGPU'),
            'pci_0000_85_00_0': ('nvidia-35', 'VGPU'),
            'pci_0000_86_00_0': ('nvidia-36', 'CUSTOM_NV36'),
            'pci_0000_3b_00_4': ('mlx5_core', 'VGPU'),
            'mtty_mtty': (None, 'VGPU')}, 0),
    'old names enabled_vgpu_types and [vgpu_<type>]': ([
        '[devices]\nenabled_vgpu_types = nvidia-11,nvidia-12\n'
        '[vgpu_nvidia-11]\ndevice_addresses = 0000:84:00.0\n'
        '[vgpu_nvidia-12]\ndevice_addresses = 0000:85:00.0\n'], {
            'pci_0000_84_00_0': ('nvidia-11', 'VGPU'),
            'pci_0000_85_00_0': ('nvidia-12', 'VGPU'),
            'pci_0000_86_00_0': (None, 'VGPU')}, 0),
    'new group wins over the old one': ([
        '[devices]\nenabled_mdev_types = nvidia-11\n'
        '[mdev_nvidia-11]\ndevice_addresses = 0000:84:00.0\n'
        '[vgpu_nvidia-11]\ndevice_addresses = 0000:85:00.0\n'], {
            'pci_0000_84_00_0': ('nvidia-11', 'VGPU'),
            'pci_0000_85_00_0': (None, 'VGPU')}, 0),
    'mdev_class in an old [vgpu_<type>] group is not read': ([
        '[devices]\nenabled_mdev_types = nvidia-11\n'
        '[vgpu_nvidia-11]\ndevice_addresses = 0000:84:00.0\n'
        'mdev_class = CUSTOM_IGNORED\n'], {
            'pci_0000_84_00_0': ('nvidia-11', 'VGPU')}, 0),
    'upper-case address parses but matches nothing': ([
        D35 + '[mdev_nvidia-35]\ndevice_addresses = 0000:3B:00.4\n'
        'mdev_class = CUSTOM_A\n'], {
            'pci_0000_3b_00_4': ('nvidia-36', 'VGPU'),
            'pci_0000_84_00_0': ('nvidia-36', 'VGPU')}, 0),
    'lower-case address matches and takes the class': ([
        D35 + '[mdev_nvidia-35]\ndevice_addresses = 0000:3b:00.4\n'
        'mdev_class = CUSTOM_A\n'], {
            'pci_0000_3b_00_4': ('nvidia-35', 'CUSTOM_A'),
            'pci_0000_84_00_0': ('nvidia-36', 'VGPU')}, 0),
    'colon before the function parses but matches nothing': ([
        D35 + '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00:0\n'], {
            'pci_0000_84_00_0': ('nvidia-36', 'VGPU')}, 0),
    'address without domain stops nova-compute': ([
        D35 + '[mdev_nvidia-35]\ndevice_addresses = 84:00.0\n'],
        "address '84:00.0' is neither a PCI address", 0),
    'libvirt name instead of address stops nova-compute': ([
        D35 + '[mdev_nvidia-35]\ndevice_addresses = pci_0000_84_00_0\n'],
        "'pci_0000_84_00_0' is neither", 0),
    'virtual parent that exists': ([
        D35 + '[mdev_nvidia-35]\ndevice_addresses = mtty_mtty\n'
        'mdev_class = CUSTOM_MTTY\n'], {
            'mtty_mtty': ('nvidia-35', 'CUSTOM_MTTY'),
            'mtty_other': (None, 'VGPU'),
            'pci_0000_84_00_0': ('nvidia-36', 'VGPU')}, 0),
    'virtual parent that does not exist stops nova-compute': ([
        D35 + '[mdev_nvidia-35]\ndevice_addresses = mtty_nothere\n'],
        "'mtty_nothere' is neither", 0),
    'same address under two types stops nova-compute': ([
        D35 + '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'
        '[mdev_nvidia-36]\ndevice_addresses = 0000:85:00.0,0000:84:00.0\n'],
        'duplicate types for PCI ID 0000:84:00.0', 0),
    'same address in two cases is two devices for Nova': ([
        D35 + '[mdev_nvidia-35]\ndevice_addresses = 0000:3b:00.4\n'
        '[mdev_nvidia-36]\ndevice_addresses = 0000:3B:00.4\n'], {
            'pci_0000_3b_00_4': ('nvidia-35', 'VGPU')}, 0),
    'a type enabled twice lists its addresses twice': ([
        '[devices]\nenabled_mdev_types = nvidia-35,nvidia-35\n'
        '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'],
        'duplicate types for PCI ID 0000:84:00.0', 0),
    'lower-case mdev_class stops nova-compute': ([
        D35 + '[mdev_nvidia-35]\nmdev_class = mlx5\n'],
        'mdev_class = mlx5 is refused by nova-compute', 0),
    'max_instances 0 stops nova-compute': ([
        D35 + '[mdev_nvidia-35]\nmax_instances = 0\n'],
        'max_instances = 0 is refused', 0),
    'max_instances not a number stops nova-compute': ([
        D35 + '[mdev_nvidia-35]\nmax_instances = many\n'],
        'max_instances = many is refused', 0),
    'second type without addresses is dropped': ([
        '[devices]\nenabled_mdev_types = nvidia-11,nvidia-12\n'], {
            'pci_0000_84_00_0': ('nvidia-11', 'VGPU')}, 1),
    'no type enabled': (['[DEFAULT]\ndebug = true\n'], {
        'pci_0000_84_00_0': (None, 'VGPU')}, 0),
    'list over continuation lines and odd spacing': ([
        D35 + '[mdev_nvidia-35]\ndevice_addresses =   0000:84:00.0 ,\n'
        '    0000:85:00.0\n'], {
            'pci_0000_84_00_0': ('nvidia-35', 'VGPU'),
            'pci_0000_85_00_0': ('nvidia-35', 'VGPU')}, 0),
    'repeated section: the last value wins': ([
        '[devices]\nenabled_mdev_types = nvidia-11\n'
        '[mdev_nvidia-12]\ndevice_addresses = 0000:84:00.0\n'
        '[devices]\nenabled_mdev_types = nvidia-12\n'], {
            'pci_0000_84_00_0': ('nvidia-12', 'VGPU'),
            'pci_0000_85_00_0': (None, 'VGPU')}, 0),
    'two files: the later one wins': ([
        D35 + '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n',
        '[mdev_nvidia-35]\ndevice_addresses = 0000:85:00.0\n'
        'mdev_class = CUSTOM_LATER\n'], {
            'pci_0000_84_00_0': ('nvidia-36', 'VGPU'),
            'pci_0000_85_00_0': ('nvidia-35', 'CUSTOM_LATER')}, 0),
}


@pytest.fixture
def sysfs(tmp_path):
    """A /sys with one virtual mdev parent, mtty/mtty."""
    root = tmp_path / 'sys'
    (root / 'devices' / 'virtual' / 'mtty' / 'mtty').mkdir(parents=True)
    return str(root)


@pytest.mark.nova
@pytest.mark.parametrize('name', sorted(CASES))
def test_rules_agree_with_nova(name, tmp_path, monkeypatch, sysfs):
    texts, expected, warnings = CASES[name]
    paths = write_files(tmp_path, texts)
    ours = local_novaconf.parse_files(
        paths,
        virtual_parent_exists=local_sysfs.sysfs_virtual_parent(sysfs))
    nova = nova_driver.run_driver(monkeypatch, paths, sysfs, DEVICES)

    if isinstance(expected, str):
        assert isinstance(nova, Exception), nova
        assert ours.errors, ours.findings
        assert expected in ' '.join(f.message for f in ours.errors)
        return
    assert not isinstance(nova, Exception), nova
    assert not ours.errors, ours.findings
    nova_supported, nova_devices = nova
    assert list(ours.supported_types) == nova_supported
    for device in DEVICES:
        answer = (ours.type_for(device), ours.resource_class_for(device))
        assert answer == nova_devices[device], device
        if device in expected:
            assert answer == expected[device], device
    assert len(ours.findings) == warnings


def test_nova_view_of_types(tmp_path):
    conf = local_novaconf.parse_files(write_files(tmp_path, [MULTI]))
    assert conf.default_type == 'mlx5_core'
    assert conf.mdev_type('nvidia-36').max_instances == 4
    assert conf.mdev_type('mlx5_core').mdev_class == 'CUSTOM_MLX5'
    assert conf.pgpu_type_mapping == {'0000:84:00.0': 'nvidia-35',
                                      '0000:85:00.0': 'nvidia-35',
                                      '0000:86:00.0': 'nvidia-36'}


def test_where_names_file_and_line(tmp_path):
    paths = write_files(tmp_path, [
        D35 + '[mdev_nvidia-35]\n# GPUs of rack 3\n'
        'device_addresses = 0000:84:00.0,\n   84:00.1\n'])
    conf = local_novaconf.parse_files(paths)
    [error] = conf.errors
    assert error.where == '[mdev_nvidia-35] device_addresses, %s:5' % (
        paths[0])
    with pytest.raises(novaconf.NovaConfError) as err:
        libvirt_driver.fatal(conf)
    assert str(err.value).startswith('[mdev_nvidia-35] device_addresses, ')
    assert "'84:00.1'" in str(err.value)


def test_unmatched_note(tmp_path):
    conf = local_novaconf.parse_files(write_files(tmp_path, [
        D35 + '[mdev_nvidia-35]\ndevice_addresses = 0000:3B:00.4\n']))
    assert libvirt_driver.unmatched_notes(conf) == [
        "0000:3B:00.4 in [mdev_nvidia-35] device_addresses matches no "
        "device: Nova compares it literally with libvirt's 0000:3b:00.4, "
        "so that device takes the default type nvidia-36; write it as "
        "0000:3b:00.4"]


def test_directory_reads_conf_files_sorted(tmp_path):
    conf_dir = tmp_path / 'nova.conf.d'
    conf_dir.mkdir()
    (conf_dir / '20-late.conf').write_text(
        '[mdev_nvidia-35]\ndevice_addresses = 0000:85:00.0\n')
    (conf_dir / '10-early.conf').write_text(
        D35 + '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n')
    (conf_dir / 'README').write_text('not read\n')
    conf = local_novaconf.parse_files([str(conf_dir)])
    assert conf.pgpu_type_mapping == {'0000:85:00.0': 'nvidia-35'}
    assert conf.settings.files == (str(conf_dir / '10-early.conf'),
                                   str(conf_dir / '20-late.conf'))


@pytest.mark.parametrize('content,problem', [
    (b'\x7fELF\x02\x01\x01\x00\x00\x00', 'is a binary file'),
    (b'[devices]\nenabled_mdev_types = nvidia-\xe9\n', 'is not UTF-8'),
    (b'', 'is empty'),
    (b'  \n\n', 'is empty'),
    (b'[devices\nx = 1\n', 'line 1 cannot be parsed'),
    (b'x = 1\n', 'line 1 cannot be parsed'),
    (b'[devices]\nenabled_mdev_types = a\n[mdev_a]\n'
     b'device_addresses = $nothing\n',
     'no such option nothing in group [DEFAULT]); nova-compute refuses'),
])
def test_files_that_are_not_nova_confs(tmp_path, content, problem):
    path = tmp_path / 'nova.conf'
    path.write_bytes(content)
    with pytest.raises(novaconf.NovaConfError) as err:
        local_novaconf.parse_files([str(path)])
    assert str(path) in str(err.value)
    assert problem in str(err.value)
    assert '\n' not in str(err.value)


def test_huge_missing_and_directory(tmp_path):
    huge = tmp_path / 'huge.conf'
    with open(huge, 'wb') as out:
        out.write(b'# x\n' * (local_novaconf.MAX_FILE_BYTES // 4 + 1))
    with pytest.raises(novaconf.NovaConfError, match='larger than 10 MB'):
        local_novaconf.read_text(str(huge))
    with pytest.raises(novaconf.NovaConfError, match='Cannot read'):
        local_novaconf.read_text(str(tmp_path / 'missing.conf'))
    with pytest.raises(novaconf.NovaConfError, match='is a directory'):
        local_novaconf.read_text(str(tmp_path))
    empty = tmp_path / 'empty.d'
    empty.mkdir()
    with pytest.raises(novaconf.NovaConfError,
                       match='directory with no .conf file'):
        local_novaconf.config_files([str(empty)])


# Sections written in two cases and repeated, a multi option over them
# and over two files, a deprecated name: the values oslo.config gathers
# depend on the order of every line.
INTERLEAVED = ["""
[pci]
alias = {"name": "a1", "vendor_id": "10de", "product_id": "1eb8"}
[PCI]
alias = {"name": "a2", "vendor_id": "10de", "product_id": "1eb8"}
[DEFAULT]
pci_alias = {"name": "a0", "vendor_id": "10de", "product_id": "1eb8"}
[pci]
alias = {"name": "a3", "vendor_id": "10de", "product_id": "1eb8"}
report_in_placement = true
[devices]
enabled_mdev_types = nvidia-35
""", """
[PCI]
report_in_placement = false
[Devices]
enabled_mdev_types = nvidia-36
"""]


@pytest.mark.nova
def test_texts_read_as_oslo_config_reads_the_files(tmp_path):
    paths = write_files(tmp_path, INTERLEAVED)
    texts = [(p, open(p).read()) for p in paths]
    settings = novaconf.parse_texts(texts)
    conf = nova_driver.nova_config(paths)
    assert [text for text, _ in settings.pci['alias']] == conf.pci.alias
    assert settings.pci['report_in_placement'].value is \
        conf.pci.report_in_placement is False
    assert settings.enabled.value == conf.devices.enabled_mdev_types == [
        'nvidia-36']


def test_parsing_leaves_logging_to_the_caller(tmp_path, caplog):
    # oslo.config's notice of a deprecated name reaches the caller's
    # logging; the command line quiets it (osc_mdev.v1), as config check
    # reports the name itself. oslo.log sends each notice once per
    # process: the type is one no other test uses.
    mdev_type = 'nvidia-%s' % uuid.uuid4().hex
    [path] = write_files(tmp_path, [
        '[devices]\nenabled_mdev_types = %s\n[vgpu_%s]\n'
        'device_addresses = 0000:84:00.0\n' % (mdev_type, mdev_type)])
    with caplog.at_level('WARNING', logger='oslo_config.cfg'):
        novaconf.parse_texts([(path, open(path).read())])
    assert '"vgpu_%s" is deprecated' % mdev_type in caplog.text
    assert logging.getLogger('oslo_config.cfg').filters == []


def test_one_private_call_of_oslo_config():
    """In the cores, the one private attribute of another object is
    oslo.config's, in ``settings._add_parsed_file`` (it says why).
    """
    package = pathlib.Path(novaconf.__file__).resolve().parents[2]
    found = []
    for layer in ('base', 'nova', 'cloud', 'host'):
        for path in sorted((package / layer).rglob('*.py')):
            tree = ast.parse(path.read_text())
            for func in ast.walk(tree):
                if not isinstance(func, ast.FunctionDef):
                    continue
                for node in ast.walk(func):
                    if isinstance(node, ast.Attribute) and \
                            node.attr.startswith('_') and \
                            not node.attr.startswith('__') and not (
                                isinstance(node.value, ast.Name) and
                                node.value.id in ('self', 'cls')):
                        found.append((path.name, func.name, node.attr))
    assert sorted(set(found)) == [
        ('settings.py', '_add_parsed_file', '_add_parsed_config_file'),
        ('settings.py', '_add_parsed_file', '_namespace')]
