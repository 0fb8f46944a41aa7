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

"""``config generate``: a compute node's sysfs and the type chosen per
GPU, made into nova.conf fragments, a systemd unit and its script.

The directory is checked first, then the host is read once
(``local.sysfs``, or the node's snapshot), planned and rendered by the
pure modules beside this one (``plan``, ``files``), and the files are
read back before any is written: the nova.conf fragments as Nova reads
them (``readback``), the script by the host's ``/bin/sh -n``
(``local.shell``). Only then is a file written, each atomically
(``local.textfile``). Bad input, or a file that does not read back,
raises ``plan.GenerateError`` with nothing written.
"""

from collections.abc import Sequence
import dataclasses
import posixpath

from osc_mdev.base import words
from osc_mdev.features.config.generate import files as generated
from osc_mdev.features.config.generate import formats
from osc_mdev.features.config.generate import plan as configgenerate
from osc_mdev.features.config.generate import readback
from osc_mdev.features.host import run as host_snapshot
from osc_mdev.host import gpus as host_gpus
from osc_mdev.local import shell
from osc_mdev.local import sysfs
from osc_mdev.local import textfile


class DirectoryError(ValueError):
    """The directory to write the files in cannot be written."""


@dataclasses.dataclass(frozen=True)
class Written:
    """One file and what became of it: created, updated, unchanged,
    or failed with the reason (the old file stays); ``path`` is None
    when the files are only shown.
    """

    file: generated.GeneratedFile
    path: str | None
    result: str

    @property
    def failed(self) -> bool:
        return self.result.startswith('failed')


def check_directory(directory: str) -> None:
    """DirectoryError unless the files can be written in ``directory``
    (made if missing).
    """
    try:
        textfile.check_directory(directory)
    except OSError as exc:
        raise DirectoryError('%s: %s' % (exc.filename, exc.strerror)) from exc


def read_host(sysfs_root: str | None,
              snapshot_file: str | None = None) -> host_gpus.Host:
    """The devices of the node: from its snapshot file when given, else
    from the sysfs under ``sysfs_root``.
    """
    if snapshot_file is not None:
        return host_snapshot.read(snapshot_file).host
    assert sysfs_root is not None   # the command asks for one of them
    return sysfs.read_host(sysfs_root)


def plan_files(host: host_gpus.Host,
               choices: Sequence[configgenerate.Choice],
               layout: str = formats.FILES, inventory_host: str | None = None
               ) -> list[generated.GeneratedFile]:
    """The files for ``host`` and the choices of a type per GPU, each
    read back, in ``layout`` (``formats.FORMATS``) for the node
    ``inventory_host``; GenerateError for bad input.
    """
    formats.check(layout, inventory_host)
    plan = configgenerate.plan(host, choices)
    files = generated.files(plan)
    readback.check(plan, files)
    for file in files:
        if file.executable:
            check_script(file)
    return formats.files(layout, plan, inventory_host)


def check_script(file: generated.GeneratedFile) -> None:
    """GenerateError unless the host's shell reads the script."""
    try:
        error = shell.syntax_error(file.text)
    except OSError as exc:
        raise configgenerate.GenerateError(
            'Cannot check the script %s with %s -n (%s); no file is '
            'written' % (file.name, shell.SHELL, exc.strerror or exc)
        ) from exc
    if error is not None:
        raise configgenerate.GenerateError(
            '%s -n refuses the script %s (%s); no file is written'
            % (shell.SHELL, file.name, words.escaped(error)))


def _write_one(directory: str, file: generated.GeneratedFile) -> Written:
    folder, name = posixpath.split(file.name)
    try:
        path, result = textfile.write_in(
            textfile.path_in(directory, folder) if folder else directory,
            name, file.text, file.executable)
    except OSError as exc:
        return Written(file, textfile.path_in(directory, file.name),
                       'failed: %s' % (exc.strerror or exc))
    return Written(file, path, result)


def generate(sysfs_root: str | None,
             choices: Sequence[configgenerate.Choice],
             directory: str | None = None, dry_run: bool = False,
             snapshot_file: str | None = None, layout: str = formats.FILES,
             inventory_host: str | None = None) -> list[Written]:
    """Check ``directory``, plan the files for the node (its sysfs under
    ``sysfs_root``, or its ``snapshot_file``) in ``layout`` for the node
    named ``inventory_host`` in the deployment tool's inventory, then
    write each
    in it (none with ``dry_run``; a file named with a folder in that
    folder): one Written each.
    """
    if directory is not None:
        check_directory(directory)
    formats.check(layout, inventory_host)
    host = read_host(sysfs_root, snapshot_file)
    files = plan_files(host, choices, layout, inventory_host)
    if directory is None or dry_run:
        return [Written(f, None, 'shown') for f in files]
    return [_write_one(directory, f) for f in files]
