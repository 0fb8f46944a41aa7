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

"""nova-compute's provider config files: read (``osc_mdev.local``), judged
by Nova's rules and compared with a compute node's providers in Placement
(``nova.compute.provider_config`` and ``nova.compute.resource_tracker``),
and written by ``trait export`` (``features.trait.export_files``).
"""

from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses

from osc_mdev.api import placement as placement_client
from osc_mdev.base import errors
from osc_mdev.base import words
from osc_mdev.cloud import providers
from osc_mdev.cloud import reads as device_reads
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.features.trait import export_files as export
from osc_mdev.local import provider_config as local
from osc_mdev.nova.compute import provider_config as domain
from osc_mdev.nova.compute import resource_tracker as merge


def _failed(exc: Exception) -> errors.Invalid:
    """A path or a host name that cannot be read or written as asked."""
    return errors.Invalid(words.sentence(str(exc)))


def read(paths: Iterable[str]
         ) -> tuple[list[domain.ConfigFile], list[domain.Finding]]:
    """``(configs, findings)`` of the files ``paths`` stand for, read as
    one nova-compute reads its directory: each file's ConfigFile, and
    every finding of Nova's file rules (each file's, the duplicates
    across them, files a directory holds that Nova skips). A path that
    cannot be read is an errors.Invalid.
    """
    try:
        found = local.read(paths)
    except local.FileError as exc:
        raise _failed(exc) from exc
    configs = [domain.parse(text, path) for path, text in found.files]
    findings = domain.check_files(configs)
    findings += domain.ignored_file_findings(found.ignored)
    return configs, findings


def entries(configs: Iterable[domain.ConfigFile]) -> list[domain.Entry]:
    """The entries of the files nova-compute would accept."""
    return [e for c in configs if not c.refused for e in c.entries]


def node_tree(placement: placement_client.PlacementClient,
              host: str) -> list[merge.TreeProvider]:
    """The compute node's providers as TreeProvider: its root, its mdev
    and PCI devices (with their traits) and any other provider of its
    tree.
    """
    devices, listed = device_reads.node_devices(placement, [host])
    traits = {d.uuid: tuple(d.traits or ()) for d in devices}
    kinds = {d.uuid: d.kind for d in devices}
    tree: list[merge.TreeProvider] = []
    for provider in listed:
        root = (provider.get('root_provider_uuid')
                or provider['uuid']) == provider['uuid']
        tree.append(merge.TreeProvider(
            provider['uuid'], provider['name'],
            'root' if root else kinds.get(provider['uuid']),
            traits.get(provider['uuid'], ())))
    return tree


def placement_findings(placement: placement_client.PlacementClient,
                       host: str, configs: Iterable[domain.ConfigFile]
                       ) -> list[domain.Finding]:
    """What nova-compute of ``host`` makes of the files on its providers
    in Placement, and the devices whose traits no file keeps.
    """
    kept = entries(configs)
    tree = node_tree(placement, host)
    return (merge.merge_findings(kept, tree, host)
            + merge.uncovered_findings(kept, tree, host))


# -- trait export ------------------------------------------------------------

#: Named hosts read tree by tree; beyond, the whole cloud is read once.
PER_HOST_READS = 4


@dataclasses.dataclass(frozen=True)
class HostFile:
    """The provider config file of one compute node."""

    host: str
    name: str
    text: str
    devices: int                 # devices with traits in the file
    traits: int
    pci_left_out: int = 0        # PCI-in-Placement devices of the host
    providers: tuple[str, ...] = ()   # the provider names the file defines


def build(placement: placement_client.PlacementClient,
          hosts: Iterable[str] = (), type_traits_only: bool = False,
          prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX,
          existing: Iterable[str] = (),
          overrides: Mapping[str, Iterable[str]] | None = None
          ) -> list[HostFile]:
    """The files of ``hosts`` (every node with mdev devices, and the
    nodes of ``existing`` files, when none), from the devices' traits in
    Placement (``overrides``: ``{provider uuid: traits}`` to use instead,
    for a dry run). Returns ``[HostFile]`` sorted by host.

    Up to PER_HOST_READS named hosts are read tree by tree (three
    requests each); more, or none, cost the two requests of the whole
    cloud.
    """
    hosts = sorted(set(hosts))
    whole = not hosts or len(hosts) > PER_HOST_READS
    devices, listed = device_reads.node_devices(
        placement, () if whole else hosts)
    nodes = providers.hosts_of(listed)
    if hosts and whole:
        device_reads.check_hosts(listed, hosts)
    if hosts:
        chosen = set(hosts)
    else:
        chosen = {d.host for d in devices if d.kind == providers.MDEV}
        chosen |= nodes & set(existing)
    pci: dict[str, set[str]] = {}
    for d in devices:
        if d.kind == providers.PCI and d.host in chosen:
            pci.setdefault(d.host, set()).add(d.uuid)
    per_host: dict[str, dict[str, set[str]]] = {host: {} for host in chosen}
    for device in devices:
        if device.kind != providers.MDEV or device.host not in chosen:
            continue
        traits = (overrides or {}).get(device.uuid, device.traits or ())
        kept = export.exported_traits(traits, type_traits_only, prefix)
        mine = per_host[device.host].setdefault(device.candidate.name, set())
        mine.update(kept)
    files = []
    for host in sorted(chosen):
        try:
            name = export.file_name(host)
            text = export.render(host, {n: sorted(t) for n, t
                                        in per_host[host].items()})
        except ValueError as exc:
            raise _failed(exc) from exc
        with_traits = {n: t for n, t in per_host[host].items() if t}
        files.append(HostFile(host, name, text, len(with_traits),
                              sum(len(t) for t in with_traits.values()),
                              len(pci.get(host, ())),
                              tuple(sorted(with_traits))))
    return files


@dataclasses.dataclass(frozen=True)
class Written:
    """What became of one file: its path and the result (created,
    updated, unchanged, or why it failed).
    """

    file: HostFile
    path: str
    result: str
    failed: bool = False


def existing_hosts(directory: str) -> list[str]:
    """The hosts whose ``<host>.yaml`` is in ``directory`` already."""
    try:
        return local.existing_hosts(directory)
    except local.FileError as exc:
        raise _failed(exc) from exc


def check_directory(directory: str, names: Iterable[str],
                    provider_names: Iterable[str]) -> None:
    """Refuse, before anything is written, a directory that cannot be
    written, or whose files other than ``names`` (the files to be
    written) define a provider of ``provider_names`` (nova-compute
    refuses a provider defined twice).
    """
    try:
        local.check_writable(directory)
        others = local.other_files(directory, names)
    except local.FileError as exc:
        raise _failed(exc) from exc
    if not others:
        return
    configs, _ = read(others)
    wanted = set(provider_names)
    for config in configs:
        for entry in config.entries:
            if entry.kept and entry.value in wanted:
                raise errors.Refused(
                    '%s already defines provider %s, which the file of its '
                    'host would define too: nova-compute refuses a provider '
                    'defined twice; remove it from %s or write the files to '
                    'another directory.' % (entry.where, entry.value,
                                            entry.source),
                    parameter='provider_config_dir', path=entry.source,
                    provider=entry.value)


def write(directory: str, files: Sequence[HostFile],
          dry_run: bool = False) -> list[Written]:
    """Write each file as ``<directory>/<host>.yaml``, atomically; one
    Written each: created, updated, unchanged (or what would be, with
    ``dry_run``), or failed with the reason (the old file stays).
    """
    check_directory(directory, [f.name for f in files],
                    [p for f in files for p in f.providers])
    done = []
    for f in files:
        path = local.path_of(directory, f.name)
        try:
            before = local.current_text(path)
        except local.FileError as exc:
            done.append(Written(f, path, 'failed: %s' % exc, True))
            continue
        if before == f.text:
            done.append(Written(f, path, 'unchanged'))
            continue
        verb = 'created' if before is None else 'updated'
        if dry_run:
            done.append(Written(f, path, 'would be %s' % verb))
            continue
        try:
            local.write_atomic(path, f.text)
        except OSError as exc:
            done.append(Written(f, path, 'failed: %s' % (
                exc.strerror or exc), True))
            continue
        done.append(Written(f, path, verb))
    return done
