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

"""nova.conf files, read as nova-compute and nova-api read them.

The files a path stands for (a ``--config-dir`` directory is its
``*.conf`` files in sorted order), in the order oslo.config reads them,
and their text; ``osc_mdev.nova.conf.settings`` parses the text with
oslo.config's parser and applies Nova's rules.
"""

import base64
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
import typing

from osc_mdev.local import snapshot
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

MAX_FILE_BYTES = snapshot.MAX_FILE_BYTES


def config_files(paths: Iterable[str],
                 directories: bool = True) -> list[str]:
    """The files ``paths`` stand for, in the order oslo.config reads them.

    A directory is read like ``--config-dir``: its ``*.conf`` files in
    sorted order (only with ``directories``). Raises NovaConfError for a
    directory with no ``.conf`` file.
    """
    files = []
    for path, empty in snapshot.conf_paths(paths, directories):
        if empty:
            raise _empty_directory(path)
        files.append(path)
    return files


def _empty_directory(path: str) -> novaconf.NovaConfError:
    return novaconf.NovaConfError(
        '%s is a directory with no .conf file; give the nova.conf file or '
        'the --config-dir directory nova-compute reads' % path)


def read_text(path: str) -> str:
    """The text of a nova.conf, or NovaConfError naming the file and what
    is wrong: missing, unreadable, a directory, huge, binary, not UTF-8 or
    empty.
    """
    return text_of(snapshot.read_conf(path))


def text_of(read: Mapping[str, typing.Any]) -> str:
    """The text of a nova.conf as ``snapshot.read_conf`` read it, or
    NovaConfError as ``read_text``.
    """
    path = read['path']
    if read.get('empty_directory'):
        raise _empty_directory(path)
    if read.get('directory'):
        raise novaconf.NovaConfError(
            '%s is a directory, not a nova.conf file' % path)
    if 'error' in read:
        raise novaconf.NovaConfError('Cannot read %s: %s' % (
            path, read['error']))
    if 'text' in read:
        text = read['text']
        if '\0' in text:
            raise novaconf.NovaConfError(
                '%s is a binary file, not a nova.conf' % path)
        if not text.strip():
            raise novaconf.NovaConfError('%s is empty' % path)
        return text
    data = base64.b64decode(read['base64'])
    if read.get('truncated') or len(data) > MAX_FILE_BYTES:
        raise novaconf.NovaConfError(
            '%s is larger than %d MB, too large to be a nova.conf'
            % (path, MAX_FILE_BYTES // (1024 * 1024)))
    if b'\0' in data:
        raise novaconf.NovaConfError(
            '%s is a binary file, not a nova.conf' % path)
    try:
        data.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise novaconf.NovaConfError(
            '%s is not UTF-8 text (invalid byte at offset %d), so it is not '
            'a nova.conf' % (path, exc.start)) from exc
    raise novaconf.NovaConfError('%s could not be read' % path)


def texts_of(part: Mapping[str, typing.Any]) -> Iterator[tuple[str, str]]:
    """``(path, text)`` of each nova.conf of a snapshot's nova.conf part,
    in reading order; NovaConfError for one nova-compute cannot read.
    """
    for read in part['files']:
        yield read['path'], text_of(read)


def read_files(paths: Iterable[str],
               directories: bool = True) -> Iterator[tuple[str, str]]:
    """``(path, text)`` of each file ``paths`` stand for, in reading order
    (``config_files``), each read when it is asked for; NovaConfError for
    one that cannot be read.
    """
    for path, empty in snapshot.conf_paths(paths, directories):
        if empty:
            raise _empty_directory(path)
        yield path, read_text(path)


def load(paths: Iterable[str],
         directories: bool = True) -> novaconf.Settings:
    """The ``nova.conf.settings.Settings`` of nova.conf files (and
    directories), parsed as nova-compute parses them
    (``nova.conf.settings.parse_texts``).

    Raises NovaConfError (one line) for a file that cannot be read or
    parsed; values oslo.config refuses are kept as ``Value.error``.
    """
    return novaconf.parse_texts(read_files(paths, directories))


def parse_files(paths: Iterable[str],
                virtual_parent_exists: Callable[[str], bool] | None = None,
                directories: bool = True) -> libvirt_driver.MdevConfig:
    """``load`` + ``libvirt_driver.supported_vgpu_types``: the MdevConfig of
    the files.
    """
    return libvirt_driver.supported_vgpu_types(load(paths, directories),
                                               virtual_parent_exists)
