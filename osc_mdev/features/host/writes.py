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

"""``host restore``: a node's lost mdevs (``features.host.reads``) from
its snapshot and the cloud, and the restore script
(``features.host.restore``), read back by the host's ``/bin/sh -n`` and
written atomically.
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
import re

from osc_mdev.api import compute as compute_client
from osc_mdev.api import placement as placement_client
from osc_mdev.base import errors
from osc_mdev.base import findings as findings_model
from osc_mdev.base import words
from osc_mdev.features.host import reads as host_reads
from osc_mdev.features.host import restore as restore_script
from osc_mdev.features.host import run as host_run
from osc_mdev.local import node as local_node
from osc_mdev.local import shell
from osc_mdev.local import textfile
from osc_mdev.nova.conf import settings as conf_settings
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

Clients = Callable[[], tuple[placement_client.PlacementClient,
                             compute_client.ComputeClient]]


@dataclasses.dataclass(frozen=True)
class Restored:
    """The steps of the script, its text, and where it was written
    (``path`` and ``result``: created, updated, unchanged; None when it
    was not), with the findings of domain definitions not read.
    """

    steps: tuple[restore_script.Step, ...]
    text: str
    path: str | None = None
    result: str | None = None
    findings: tuple[findings_model.Finding, ...] = ()


def script_name(node: str) -> str:
    """The script's file name: ``restore-mdevs-<node>.sh``."""
    safe = re.sub(r'[^A-Za-z0-9_.-]', '_', node)
    return 'restore-mdevs-%s.sh' % safe


def mdev_config(node: local_node.Node) -> libvirt_driver.MdevConfig | None:
    """What nova-compute makes of the node's nova.conf, None when it
    cannot read them (the types then come from the traits).
    """
    try:
        settings = conf_settings.parse_texts(node.conf_texts())
    except conf_settings.NovaConfError:
        return None
    return libvirt_driver.supported_vgpu_types(
        settings, node.virtual_parent_exists)


def _check_directory(directory: str) -> None:
    try:
        textfile.check_directory(directory)
    except OSError as exc:
        raise errors.Invalid(
            'Cannot write in %s %s (%s); give a directory this user may '
            'write in.' % (errors.given('output_dir'), directory,
                           exc.strerror or exc),
            parameter='output_dir', path=directory) from exc


def _read_back(text: str) -> None:
    try:
        error = shell.syntax_error(text)
    except OSError as exc:
        raise errors.Error(
            'Cannot check the restore script with %s -n (%s); nothing is '
            'written.' % (shell.SHELL, exc.strerror or exc)) from exc
    if error is not None:
        raise errors.Error('%s -n refuses the restore script (%s); nothing '
                           'is written.' % (shell.SHELL,
                                            words.escaped(error)))


def restore(snapshot: str, directory: str | None, dry_run: bool,
            clients: Clients) -> Restored:
    """The restore script of the node of ``snapshot``, written in
    ``directory`` unless ``dry_run`` (or no directory is given).
    errors.Invalid for a snapshot or directory that cannot be used,
    before the cloud is read.
    """
    node = host_run.read(snapshot)
    writes = directory is not None and not dry_run
    if writes:
        assert directory is not None
        _check_directory(directory)
    lost, found = host_reads.find(node.domains, node.host, node.name,
                                  mdev_config(node), clients)
    steps = tuple(restore_script.step(m) for m in lost)
    text = restore_script.script(node.name, node.taken, steps)
    _read_back(text)
    if not writes:
        return Restored(steps, text, findings=tuple(found))
    assert directory is not None
    name = script_name(node.name)
    try:
        path, result = textfile.write_in(directory, name, text,
                                         executable=True)
    except OSError as exc:
        raise errors.Error(
            'Writing %s failed (%s); the previous file was left as it was.'
            % (textfile.path_in(directory, name), exc.strerror or exc),
            path=textfile.path_in(directory, name)) from exc
    return Restored(steps, text, path, result, tuple(found))
