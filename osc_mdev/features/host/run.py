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

"""``host snapshot``: the node's raw files (``local.snapshot.take``),
written as one JSON document for ``config check --snapshot`` and
``config generate --snapshot`` on the controller.
"""

from collections.abc import Sequence
import typing

from osc_mdev.base import errors
from osc_mdev.local import node
from osc_mdev.local import snapshot
from osc_mdev.local import textfile

DEFAULT_NOVA_CONF = ('/etc/nova/nova.conf',)


def check_output(output: str | None) -> None:
    """Refuse an output file that cannot be written, before reading."""
    if output:
        try:
            textfile.check_writable(output)
        except OSError as exc:
            raise errors.Invalid(
                'Cannot write %s %s (%s); give a file in an existing '
                'directory this user may write to.'
                % (errors.given('output'), output, exc.strerror or exc),
                parameter='output', path=output) from exc


def take(sysfs_root: str, files: Sequence[str], libvirt_dir: str,
         node_name: str | None = None) -> dict[str, typing.Any]:
    """The node's snapshot (``local.snapshot.take``); the nova.conf
    files are ``/etc/nova/nova.conf`` when none is given.
    """
    return snapshot.take(sysfs_root, list(files) or DEFAULT_NOVA_CONF,
                         libvirt_dir, node_name)


def text(document: typing.Mapping[str, typing.Any]) -> str:
    """The snapshot file's text."""
    return snapshot.dumps(dict(document))


def write(output: str, document: typing.Mapping[str, typing.Any]) -> None:
    """Write the snapshot to ``output`` atomically; errors.Error when it
    cannot be, with the old file left.
    """
    try:
        textfile.write_atomically(output, text(document))
    except OSError as exc:
        raise errors.Error(
            'Writing %s failed (%s); the previous file was left as it '
            'was.' % (output, exc.strerror or exc), path=output) from exc


def read(path: str) -> node.Node:
    """The node of the snapshot file ``path``; errors.Invalid (with the
    reason: unreadable, not-json, format, version) for a file that is no
    snapshot this version reads.
    """
    try:
        return node.from_snapshot(path)
    except snapshot.SnapshotError as exc:
        raise errors.Invalid(
            '%s %s is no host snapshot osc-mdev can read (%s); take it '
            "again with 'openstack mdev host snapshot'."
            % (errors.given('snapshot'), path, exc.detail),
            parameter='snapshot', path=path, reason=exc.reason) from exc
