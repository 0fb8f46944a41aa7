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

"""One compute node as the host checks see it, from a host snapshot
(``from_snapshot``, on the controller) or from the files of the machine
this runs on (``from_files``, ``--sysfs``): both read through
``local.snapshot``, so a node gives the same ``Node`` either way.
"""

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses
import typing

from osc_mdev.host import gpus as host_gpus
from osc_mdev.local import conf_files
from osc_mdev.local import snapshot
from osc_mdev.local import sysfs
from osc_mdev.nova.virt.libvirt import host as libvirt_host


@dataclasses.dataclass(frozen=True)
class ConfFile:
    """A nova.conf file as read: ``read`` as ``snapshot.read_conf``
    gives it.
    """

    path: str
    read: Mapping[str, typing.Any] = dataclasses.field(compare=False)

    @property
    def text(self) -> str:
        """Its text; NovaConfError when nova-compute cannot read it."""
        return conf_files.text_of(self.read)


@dataclasses.dataclass(frozen=True)
class Domain:
    """A libvirt domain definition (``/etc/libvirt/qemu/<name>.xml``)."""

    path: str
    text: str


@dataclasses.dataclass(frozen=True)
class Node:
    """A compute node: its name as Nova reports it (the hypervisor
    hostname, its root provider's name), where it was read from (a
    snapshot file, or the sysfs root), its devices, its nova.conf files
    in reading order and its libvirt domains.
    """

    name: str
    source: str
    host: host_gpus.Host
    virtual_parent_exists: Callable[[str], bool] = dataclasses.field(
        compare=False)
    conf_files: tuple[ConfFile, ...] = ()
    domains: tuple[Domain, ...] = ()
    #: Paths the snapshot could not read, with why.
    unreadable: tuple[tuple[str, str], ...] = ()
    #: When the snapshot was taken (ISO 8601, UTC).
    taken: str | None = None

    def conf_texts(self) -> list[tuple[str, str]]:
        """``(path, text)`` of each nova.conf in reading order;
        NovaConfError for the first that nova-compute cannot read.
        """
        return [(f.path, f.text) for f in self.conf_files]


def node_name(names: Mapping[str, typing.Any]) -> str:
    """The node's name from a snapshot's ``node`` part: the name given
    when the snapshot was taken, else the one libvirt reports.
    """
    if names.get('given'):
        return str(names['given'])
    return libvirt_host.get_hostname(names['hostname'],
                                     names.get('canonical'))


def from_document(document: Mapping[str, typing.Any], source: str) -> Node:
    """The node of a snapshot document (``snapshot.take``/``load``)."""
    raw = document['sysfs']
    return Node(
        node_name(document['node']), source, sysfs.host_of(raw),
        sysfs.virtual_parent_in(raw),
        tuple(ConfFile(f['path'], f)
              for f in document['nova_conf']['files']),
        tuple(Domain(d['path'], d['text'])
              for d in document['libvirt']['domains']),
        tuple((u['path'], u['error']) for u in document['unreadable']),
        document.get('taken'))


def from_snapshot(path: str) -> Node:
    """The node of a snapshot file; snapshot.SnapshotError for a file
    that is no snapshot of this version.
    """
    return from_document(snapshot.load(path), path)


def from_files(sysfs_root: str, conf_paths: Iterable[str] = (),
               libvirt_dir: str = '/etc/libvirt/qemu',
               node: str | None = None) -> Node:
    """The node this runs on, read now (``snapshot.take``)."""
    return from_document(snapshot.take(sysfs_root, list(conf_paths),
                                       libvirt_dir, node), sysfs_root)
