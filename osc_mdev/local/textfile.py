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

"""Files osc-mdev writes, each written atomically: the metrics for
node_exporter, the provider config files for nova-compute, and the files
``config generate`` writes (nova.conf fragments, a systemd unit and its
script).

A reader (node_exporter's textfile collector every minute, nova-compute
when it starts) sees either the old file or the new one, never half of
one: the text goes to a hidden temporary file in the same directory (a
name neither reads: the collector reads only ``*.prom``, nova-compute
only ``*.yaml``), is flushed to disk, then renamed over the file.
On any failure the temporary file is removed and the old file is left as
it was.
"""

import os
import tempfile


def check_writable(path: str) -> None:
    """Raise OSError when a file cannot be written at ``path``: its
    directory is missing or not writable, or ``path`` is a directory.
    """
    path = os.path.abspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(21, 'Is a directory', path)
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise FileNotFoundError(2, 'No such directory', directory)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionError(13, 'Permission denied', directory)


def check_directory(directory: str) -> None:
    """Raise OSError unless ``directory`` is a directory this process can
    write in, or can be made one (its missing part made under a
    directory it can write in); nothing is created.
    """
    path = os.path.abspath(directory)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    if not os.path.isdir(path):
        raise NotADirectoryError(20, 'Not a directory', path)
    if not os.access(path, os.W_OK | os.X_OK):
        raise PermissionError(13, 'Permission denied', path)


def read_text(path: str) -> str | None:
    """The text of the file at ``path`` (bytes that are not UTF-8
    replaced), None when there is none. Raises OSError.
    """
    try:
        with open(path, encoding='utf-8', errors='replace') as current:
            return current.read()
    except FileNotFoundError:
        return None


def path_in(directory: str, name: str) -> str:
    """The path of file ``name`` of ``directory``."""
    return os.path.join(directory, name)


def write_in(directory: str, name: str, text: str,
             executable: bool = False) -> tuple[str, str]:
    """Write file ``name`` of ``directory`` (made if missing) with
    ``text``, atomically, unless it holds that text already (and is
    executable, for an ``executable`` file, which gets mode 0777 less
    the umask whatever the old file's). Answers ``(path, result)``,
    result ``created``, ``updated`` or ``unchanged``. Raises OSError,
    with the old file left as it was.
    """
    path = path_in(directory, name)
    before = read_text(path)
    if before == text and (not executable or os.access(path, os.X_OK)):
        return path, 'unchanged'
    os.makedirs(directory, exist_ok=True)
    if executable:
        write_atomically(path, text, 0o777, keep_mode=False)
    else:
        write_atomically(path, text)
    return path, 'created' if before is None else 'updated'


def write_atomically(path: str, text: str, mode: int = 0o666,
                     keep_mode: bool = True) -> None:
    """Replace the file at ``path`` by ``text`` (UTF-8) in one rename.

    The text goes to a hidden temporary file in the same directory, is
    flushed and synced, gets the old file's permission bits (or ``mode``
    less the umask when there was none, or when not ``keep_mode``:
    another user, node_exporter or nova-compute, reads it) and is
    renamed over ``path``; the directory is synced so the rename
    survives a crash. Raises OSError, with the file at ``path``
    unchanged and the temporary file removed.
    """
    path = os.path.abspath(path)
    directory, name = os.path.split(path)
    mode = _mode(path, mode, keep_mode)
    fd, temporary = tempfile.mkstemp(prefix='.%s.' % name, suffix='.tmp',
                                     dir=directory)
    try:
        with os.fdopen(fd, 'w', encoding='utf-8') as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
            os.fchmod(out.fileno(), mode)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    _sync_directory(directory)


def _mode(path: str, mode: int, keep_mode: bool) -> int:
    """The permission bits of the new file: the old file's, or ``mode``
    less the umask.
    """
    if keep_mode:
        try:
            return os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            pass
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask


def _sync_directory(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
