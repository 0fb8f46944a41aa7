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

"""Provider config files on disk: read as nova-compute finds them, written
atomically.

A directory stands for what nova-compute reads from its ``[compute]
provider_config_location``: its ``*.yaml`` files in sorted order. A file is
written whole or not at all: the text goes to a hidden temporary file in
the same directory (which nova-compute never reads: it does not end in
``.yaml``), is flushed to disk, then renamed over the old file; a failure
leaves the old file as it was. ``osc_mdev.nova.compute.provider_config`` parses
the texts, ``features.trait.export_files`` renders them.
"""

from collections.abc import Iterable
import dataclasses
import glob
import os

from osc_mdev.local import textfile
from osc_mdev.nova.compute import provider_config as nova_provider_config

MAX_FILE_BYTES = 10 * 1024 * 1024


class FileError(ValueError):
    """A path that cannot be read or written as asked."""


@dataclasses.dataclass(frozen=True)
class Found:
    """What a list of paths stands for: ``files`` as ``(path, text)`` in
    the order nova-compute reads them, and the files of the directories
    it skips (``ignored``).
    """

    files: tuple[tuple[str, str], ...]
    ignored: tuple[str, ...]


def _read_text(path: str) -> str:
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise FileError('%s is %d bytes: not a provider config file'
                            % (path, size))
        with open(path, encoding='utf-8') as handle:
            return handle.read()
    except UnicodeDecodeError as exc:
        raise FileError('%s is not UTF-8 text: %s' % (path, exc.reason))
    except OSError as exc:
        raise FileError('cannot read %s: %s' % (path, exc.strerror or exc))


def yaml_files(directory: str) -> tuple[list[str], list[str]]:
    """``(files, ignored)`` of a directory: the paths nova-compute reads
    (``glob('*.yaml')``, sorted, as ``get_provider_configs``) and the
    other file names in it.
    """
    files = sorted(glob.glob(os.path.join(directory, '*' +
                                          nova_provider_config.FILE_SUFFIX)))
    taken = {os.path.basename(p) for p in files}
    try:
        others = sorted(n for n in os.listdir(directory) if n not in taken
                        and os.path.isfile(os.path.join(directory, n)))
    except OSError as exc:
        raise FileError('cannot read directory %s: %s'
                        % (directory, exc.strerror or exc))
    return files, others


def read(paths: Iterable[str]) -> Found:
    """The provider config files ``paths`` stand for (files, or
    directories read as nova-compute reads them); FileError for a path
    that does not exist or cannot be read.
    """
    files: list[tuple[str, str]] = []
    ignored: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            found, others = yaml_files(path)
            files.extend((p, _read_text(p)) for p in found)
            ignored.extend(os.path.join(path, n) for n in others)
        elif os.path.exists(path):
            files.append((path, _read_text(path)))
        else:
            raise FileError('%s does not exist' % path)
    return Found(tuple(files), tuple(ignored))


def path_of(directory: str, name: str) -> str:
    """The path of file ``name`` in ``directory``."""
    return os.path.join(directory, name)


def other_files(directory: str, names: Iterable[str]) -> list[str]:
    """The ``*.yaml`` files of ``directory`` (none when it does not
    exist) other than ``names``, in nova-compute's order.
    """
    if not os.path.isdir(directory):
        return []
    files, _ = yaml_files(directory)
    return [p for p in files if os.path.basename(p) not in set(names)]


def existing_hosts(directory: str) -> list[str]:
    """The host names of the ``<host>.yaml`` files of ``directory`` (none
    when it does not exist).
    """
    if not os.path.isdir(directory):
        return []
    files, _ = yaml_files(directory)
    suffix = nova_provider_config.FILE_SUFFIX
    return [os.path.basename(p)[:-len(suffix)] for p in files]


def check_writable(directory: str) -> None:
    """FileError unless ``directory`` is (or can be made) a directory
    this process can write in; nothing is created.
    """
    try:
        textfile.check_directory(directory)
    except NotADirectoryError as exc:
        raise FileError('%s is not a directory' % exc.filename) from exc
    except OSError as exc:
        raise FileError('cannot write in %s' % exc.filename) from exc


def current_text(path: str) -> str | None:
    """The text of ``path``, or None when there is no such file."""
    if not os.path.exists(path):
        return None
    return _read_text(path)


def write_atomic(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` whole, or leave it as it was
    (``textfile.write_atomically``), making its directory first.
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    textfile.write_atomically(path, text)
