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

"""A compute node's files as osc-mdev reads them, raw: the host snapshot.

``take`` reads, read-only, what the host checks need from a node: the
PCI functions of ``ROOT/bus/pci/devices`` (the files and links of each
that ``osc_mdev.local.sysfs`` interprets), the mdev parents of
``ROOT/class/mdev_bus`` and the mdevs of ``ROOT/bus/mdev/devices``, the
virtual devices (``ROOT/devices/virtual/<class>/<name>``), the nova.conf
files (a directory stands for its ``*.conf`` files, as with
``--config-dir``), the libvirt domain definitions and the names the node
has. Nothing is judged here: a file's text is kept as read, a missing
file is left out and a path that cannot be read is listed under
``unreadable``. ``sysfs.host_of``, ``conf_files`` and ``node`` interpret
the document, whether it was taken just now (``--sysfs``) or on another
machine (``--snapshot``).

This module is also the Ansible collection's module_utils: it imports
the standard library only and runs on the Python of any compute node.
"""

from __future__ import annotations

import base64
import datetime
import errno
import glob
import json
import os
import re
import socket
import typing

FORMAT = 'osc-mdev-host-snapshot'
#: The version of the document; a reader refuses any other.
VERSION = 1
#: A nova.conf is read up to this size (and one byte more, to tell).
MAX_FILE_BYTES = 10 * 1024 * 1024

#: The files of a PCI function or mdev parent that are kept.
DEVICE_FILES = ('vendor', 'device', 'class', 'sriov_numvfs',
                'sriov_totalvfs', 'sriov_offset', 'sriov_stride')
DEVICE_LINKS = ('driver', 'physfn')
VGPU_FILES = ('current_vgpu_type', 'creatable_vgpu_types')
TYPE_FILES = ('available_instances', 'name', 'device_api', 'description')

Document = typing.Dict[str, typing.Any]


class SnapshotError(Exception):
    """A file that is no snapshot this version reads: ``reason`` is
    'unreadable', 'not-json', 'format' or 'version'.
    """

    def __init__(self, path: str, reason: str, detail: str) -> None:
        super().__init__('%s: %s' % (path, detail))
        self.path = path
        self.reason = reason
        self.detail = detail


class _Reader:
    """Reads under a root, noting what could not be read."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.unreadable: list[dict[str, str]] = []

    def _failed(self, path: str, exc: OSError) -> None:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            self.unreadable.append({'path': path,
                                    'error': exc.strerror or str(exc)})

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except OSError as exc:
            self._failed(path, exc)
            return []

    def text(self, path: str) -> str | None:
        try:
            with open(path, 'rb') as opened:
                data = opened.read(64 * 1024)
        except OSError as exc:
            if exc.errno != errno.EISDIR:
                self._failed(path, exc)
            return None
        try:
            return data.decode('utf-8')
        except UnicodeDecodeError:
            self.unreadable.append({'path': path, 'error': 'not UTF-8'})
            return None

    def link(self, path: str) -> str | None:
        """The name of what ``path`` leads to, None when it is absent."""
        if not os.path.islink(path) and not os.path.exists(path):
            return None
        return os.path.basename(os.path.realpath(path))

    def real(self, path: str) -> str:
        """Where ``path`` leads, relative to the root."""
        return os.path.relpath(os.path.realpath(path),
                               os.path.realpath(self.root))


def _files(reader: _Reader, path: str,
           names: typing.Iterable[str]) -> dict[str, str]:
    found = {}
    for name in names:
        text = reader.text(os.path.join(path, name))
        if text is not None:
            found[name] = text
    return found


def _device(reader: _Reader, path: str) -> Document:
    """One PCI function's or mdev parent's files, at ``path``."""
    links = {}
    for name in reader.listdir(path):
        if name in DEVICE_LINKS or re.match(r'^virtfn\d+$', name):
            target = reader.link(os.path.join(path, name))
            if target is not None:
                links[name] = target
    device: Document = {'files': _files(reader, path, DEVICE_FILES),
                        'links': links}
    vgpu = os.path.join(path, 'nvidia')
    if os.path.isdir(vgpu):
        device['nvidia'] = _files(reader, vgpu, VGPU_FILES)
    types_dir = os.path.join(path, 'mdev_supported_types')
    types = {name: _files(reader, os.path.join(types_dir, name), TYPE_FILES)
             for name in reader.listdir(types_dir)}
    if types:
        device['mdev_supported_types'] = types
    return device


def take_sysfs(root: str = '/sys') -> Document:
    """The sysfs part of a snapshot: what is under ROOT (``/sys``)."""
    reader = _Reader(root)
    base = os.path.join(root, 'bus', 'pci', 'devices')
    pci = {address: _device(reader, os.path.join(base, address))
           for address in reader.listdir(base)}
    bus_dir = os.path.join(root, 'class', 'mdev_bus')
    bus: dict[str, Document] | None = None
    if os.path.isdir(bus_dir):
        bus = {}
        for entry in reader.listdir(bus_dir):
            path = os.path.join(bus_dir, entry)
            bus[entry] = {'path': reader.real(path)}
            if entry not in pci:
                bus[entry]['device'] = _device(reader, path)
    mdev_dir = os.path.join(root, 'bus', 'mdev', 'devices')
    mdevs = {}
    for uuid in reader.listdir(mdev_dir):
        path = os.path.join(mdev_dir, uuid)
        mdevs[uuid] = {'parent': os.path.dirname(reader.real(path)),
                       'mdev_type': reader.link(os.path.join(path,
                                                             'mdev_type'))}
    virtual_dir = os.path.join(root, 'devices', 'virtual')
    virtual = ['%s/%s' % (kind, name)
               for kind in reader.listdir(virtual_dir)
               if os.path.isdir(os.path.join(virtual_dir, kind))
               for name in reader.listdir(os.path.join(virtual_dir, kind))]
    return {'root': root, 'pci_devices': pci, 'mdev_bus': bus,
            'mdevs': mdevs, 'virtual_devices': virtual,
            'unreadable': reader.unreadable}


# -- nova.conf files --------------------------------------------------------

def conf_paths(paths: typing.Iterable[str],
               directories: bool = True) -> list[tuple[str, bool]]:
    """The files ``paths`` stand for, in the order oslo.config reads them,
    each as ``(path, False)``; a directory (with ``directories``) is its
    ``*.conf`` files in sorted order, as ``--config-dir`` reads it, or
    ``(directory, True)`` when it has none.
    """
    found = []
    for path in paths:
        if directories and os.path.isdir(path):
            files = sorted(glob.glob(os.path.join(path, '*.conf')))
            found += [(f, False) for f in files] or [(path, True)]
        else:
            found.append((path, False))
    return found


def read_conf(path: str) -> Document:
    """One nova.conf as read: ``text`` (UTF-8), ``base64`` (other bytes,
    ``truncated`` past MAX_FILE_BYTES), ``directory`` or ``error`` (with
    ``errno``).
    """
    if os.path.isdir(path):
        return {'path': path, 'directory': True}
    try:
        with open(path, 'rb') as conf_file:
            data = conf_file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        return {'path': path, 'error': exc.strerror or str(exc),
                'errno': exc.errno}
    if len(data) <= MAX_FILE_BYTES:
        try:
            return {'path': path, 'text': data.decode('utf-8')}
        except UnicodeDecodeError:
            pass
    return {'path': path,
            'base64': base64.b64encode(data[:MAX_FILE_BYTES + 1]).decode(),
            'truncated': len(data) > MAX_FILE_BYTES}


def take_conf(paths: typing.Iterable[str]) -> Document:
    """The nova.conf part of a snapshot: the files ``paths`` stand for,
    each read; an empty directory is kept as ``empty_directory``.
    """
    given = list(paths)
    files = [{'path': path, 'empty_directory': True} if empty
             else read_conf(path) for path, empty in conf_paths(given)]
    return {'given': given, 'files': files}


# -- libvirt domains and names ----------------------------------------------

def take_domains(directory: str) -> Document:
    """The libvirt domain definitions (``*.xml``) of ``directory``."""
    domains, unreadable = [], []
    for path in sorted(glob.glob(os.path.join(directory, '*.xml'))):
        try:
            with open(path, 'rb') as xml:
                domains.append({'path': path,
                                'text': xml.read().decode('utf-8')})
        except (OSError, UnicodeDecodeError) as exc:
            unreadable.append({'path': path, 'error': getattr(
                exc, 'strerror', None) or str(exc)})
    return {'dir': directory, 'exists': os.path.isdir(directory),
            'domains': domains, 'unreadable': unreadable}


def take_names(given: str | None = None) -> Document:
    """The node's host name and the canonical name it resolves to (as
    libvirt looks it up); ``given`` when the operator names the node.
    """
    hostname = socket.gethostname()
    canonical = None
    if given is None and '.' not in hostname:
        try:
            found = socket.getaddrinfo(hostname, None,
                                       flags=socket.AI_CANONNAME)
            canonical = found[0][3] or None if found else None
        except (OSError, UnicodeError):
            canonical = None
    return {'hostname': hostname, 'canonical': canonical, 'given': given}


def take(sysfs_root: str = '/sys',
         nova_conf: typing.Iterable[str] = ('/etc/nova/nova.conf',),
         libvirt_dir: str = '/etc/libvirt/qemu',
         node_name: str | None = None) -> Document:
    """The snapshot of the node this runs on: a JSON-able document."""
    sysfs = take_sysfs(sysfs_root)
    domains = take_domains(libvirt_dir)
    return {
        'format': FORMAT, 'version': VERSION,
        'taken': datetime.datetime.now(datetime.timezone.utc).strftime(
            '%Y-%m-%dT%H:%M:%SZ'),
        'node': take_names(node_name),
        'sysfs': sysfs,
        'nova_conf': take_conf(nova_conf),
        'libvirt': domains,
        'unreadable': sysfs.pop('unreadable') + domains.pop('unreadable'),
    }


def dumps(document: Document) -> str:
    """The document as the text of a snapshot file."""
    return json.dumps(document, indent=1, sort_keys=True) + '\n'


def load(path: str) -> Document:
    """The document of a snapshot file; SnapshotError for a file that
    cannot be read, is not JSON, or is no snapshot of this version.
    """
    try:
        with open(path, 'rb') as snapshot:
            text = snapshot.read().decode('utf-8')
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotError(path, 'unreadable', getattr(
            exc, 'strerror', None) or str(exc)) from exc
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SnapshotError(path, 'not-json', 'not JSON at line %d, column '
                            '%d' % (exc.lineno, exc.colno)) from exc
    if not isinstance(document, dict) or document.get('format') != FORMAT:
        raise SnapshotError(path, 'format', 'not an osc-mdev host snapshot')
    if document.get('version') != VERSION:
        raise SnapshotError(path, 'version', 'snapshot format version %s, '
                            'this osc-mdev reads version %d'
                            % (document.get('version'), VERSION))
    return document
