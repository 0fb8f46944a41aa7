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
node_exporter and the provider config files for nova-compute.

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


def write_atomically(path: str, text: str, mode: int = 0o666) -> None:
    """Replace the file at ``path`` by ``text`` (UTF-8) in one rename.

    The text goes to a hidden temporary file in the same directory, is
    flushed and synced, gets the old file's permission bits (or ``mode``
    less the umask when there was none: another user, node_exporter or
    nova-compute, reads it) and is renamed over ``path``; the directory
    is synced so the rename survives a crash. Raises OSError, with the
    file at ``path`` unchanged and the temporary file removed.
    """
    path = os.path.abspath(path)
    directory, name = os.path.split(path)
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode &= ~umask
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
