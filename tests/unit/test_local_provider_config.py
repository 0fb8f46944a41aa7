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

"""Provider config files on disk: found as nova-compute finds them, and
written whole or not at all.
"""

import os
import stat

import pytest

from osc_mdev.local import provider_config as local


@pytest.fixture
def workdir(tmp_path):
    """An empty directory of the test's own."""
    path = tmp_path / 'work'
    path.mkdir()
    return path


def test_a_directory_is_its_yaml_files_in_nova_order(workdir):
    for name in ('b.yaml', 'a.yaml', 'c.yml', '.hidden.yaml', 'README'):
        (workdir / name).write_text(name)
    found = local.read([str(workdir)])
    assert [os.path.basename(p) for p, _ in found.files] == [
        'a.yaml', 'b.yaml']
    assert [t for _, t in found.files] == ['a.yaml', 'b.yaml']
    assert sorted(os.path.basename(p) for p in found.ignored) == [
        '.hidden.yaml', 'README', 'c.yml']


def test_a_directory_named_like_a_file_nova_reads(workdir):
    # Nova's glob finds it and nova-compute cannot read it.
    (workdir / 'sub.yaml').mkdir()
    with pytest.raises(local.FileError, match='Is a directory'):
        local.read([str(workdir)])


def test_files_are_read_in_the_order_given(workdir):
    (workdir / 'z.yaml').write_text('z')
    (workdir / 'a.txt').write_text('a')
    found = local.read([str(workdir / 'z.yaml'), str(workdir / 'a.txt')])
    assert [t for _, t in found.files] == ['z', 'a']


@pytest.mark.parametrize('content, fragment', [
    (None, 'does not exist'),
    (b'\xff\xfe', 'is not UTF-8 text'),
])
def test_unreadable_paths(workdir, content, fragment):
    path = workdir / 'x.yaml'
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(local.FileError, match=fragment):
        local.read([str(path)])


def test_write_creates_replaces_and_keeps_the_mode(workdir):
    path = workdir / 'new' / 'gpu3.yaml'
    local.write_atomic(str(path), 'one\n')
    assert path.read_text() == 'one\n'
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    os.chmod(path, 0o640)
    local.write_atomic(str(path), 'two\n')
    assert path.read_text() == 'two\n'
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert os.listdir(path.parent) == ['gpu3.yaml']


@pytest.mark.parametrize('failing', ['fsync', 'replace'])
def test_a_failed_write_leaves_the_old_file(workdir, monkeypatch, failing):
    path = workdir / 'gpu3.yaml'
    path.write_text('old\n')

    def fail(*args, **kwargs):
        raise OSError(28, 'No space left on device')

    monkeypatch.setattr(local.os, failing, fail)
    with pytest.raises(OSError, match='No space left'):
        local.write_atomic(str(path), 'new\n')
    monkeypatch.undo()
    assert path.read_text() == 'old\n'
    assert os.listdir(workdir) == ['gpu3.yaml']


def test_the_temporary_file_is_one_nova_never_reads(workdir, monkeypatch):
    seen = []
    real = os.replace

    def spy(source, target):
        seen.append(os.path.basename(source))
        real(source, target)

    monkeypatch.setattr(local.os, 'replace', spy)
    local.write_atomic(str(workdir / 'gpu3.yaml'), 'x\n')
    [name] = seen
    assert name.startswith('.gpu3.yaml.') and not name.endswith('.yaml')


def test_check_writable(workdir):
    local.check_writable(str(workdir / 'does' / 'not' / 'exist'))
    blocker = workdir / 'file'
    blocker.write_text('x')
    with pytest.raises(local.FileError, match='is not a directory'):
        local.check_writable(str(blocker / 'sub'))
    assert not (workdir / 'does').exists()


def test_existing_hosts(workdir):
    assert local.existing_hosts(str(workdir / 'none')) == []
    for name in ('gpu3.dc2.example.net.yaml', 'gpu4.yaml', 'x.yml'):
        (workdir / name).write_text('')
    assert local.existing_hosts(str(workdir)) == [
        'gpu3.dc2.example.net', 'gpu4']
