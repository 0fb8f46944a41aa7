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

"""``openstack mdev metrics``: the cloud's GPU state for Prometheus.

The devices are read as ``mdev provider list`` reads its default view
(``device_reads.list_devices`` without inventory fields: the provider
listing and the allocation candidate summaries, a few requests at any
size); the flavors are counted by ``capacity.count_flavors``, as ``mdev
capacity --flavor`` counts one, all from the same reads, which they
share with the devices (``PlacementClient.shared_reads``: the listing
and the anchors are sent once), plus a few ``?resources=`` listings of
the units and Nova's flavors (one listing) and services; with
``allocations``, the allocations of the devices in use and the servers
holding them are read as ``mdev allocation list`` reads
them (``allocation.allocations_on``: one request per device in use, one
server listing per compute node). The devices and the flavors run at
once in the bounded pool; the text is ``features.metrics.families``'s,
the file is written by ``local.textfile``.

A run degrades instead of dying: a flavor that cannot be counted, a
device whose reads fail (``PartialReads``) or the servers of the
allocations cost their own series only, and the run says so
(``openstack_mdev_flavor_up`` and ``openstack_mdev_device_up`` 0,
``openstack_mdev_scrape_success`` 0, one warning each). Only a run that
reads no device list at all (Placement down) is a failed run, whose text
holds the run's own series only.
"""

from collections import abc
import dataclasses
import functools
import inspect
import logging
import threading
import time
import types
import typing

from osc_mdev.api import pool
from osc_mdev.base import errors
from osc_mdev.base import words
from osc_mdev.cloud import providers
from osc_mdev.cloud import reads as device_reads
from osc_mdev.features.capacity import reads as capacity
from osc_mdev.features.metrics import families as families
from osc_mdev.features.quota import reads as quota
from osc_mdev.local import textfile
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

if typing.TYPE_CHECKING:
    from osc_mdev.api import compute as compute_client
    from osc_mdev.api import identity as identity_client
    from osc_mdev.api import placement as placement_client
    from osc_mdev.nova.limit import utils as quota_rules
    from osc_mdev.nova.pci import config as pci_rules

LOG = logging.getLogger(__name__)


def _errors() -> types.ModuleType:
    # Imported on use: --help of the command does not load the HTTP
    # client.
    from osc_mdev.api import placement as placement_client
    return placement_client


class PartialReads:
    """The Placement client as ``metrics`` reads the devices with it: a
    read of one device that fails costs that device only.

    Every method is the client's own, run on this object, so the reads
    the client makes of itself come here too. Here:

    * a read of one provider (its inventories, usages, traits or
      allocations) that fails for good (after the client's retries, or
      for any other reason but a provider gone or a service too old) is
      recorded in ``unread`` and answered as Placement answers a provider
      deleted meanwhile (NotFound): the readers leave that device out;
    * an allocation candidates read limited to one tree (``in_tree=``)
      that fails answers no candidate: the readers then read that tree's
      devices one by one;
    * every provider listing read is kept in ``listed``, which names the
      devices in ``unread``.

    Any other failure (the provider listing, the summaries of the whole
    cloud) is raised as the client raises it.
    """

    def __init__(self, placement: 'placement_client.PlacementClient'
                 ) -> None:
        self._placement = placement
        self._lock = threading.Lock()
        self.listed: dict[str, dict] = {}
        self.unread: dict[str, str] = {}

    def __getattr__(self, name: str) -> object:
        found = inspect.getattr_static(type(self._placement), name, None)
        if isinstance(found, types.FunctionType):
            return types.MethodType(found, self)
        return getattr(self._placement, name)

    def _own(self, name: str) -> abc.Callable:
        return types.MethodType(getattr(type(self._placement), name), self)

    def _provider_read(self, name: str, uuid: str, *args: object,
                       **kwargs: object) -> typing.Any:
        client = _errors()
        try:
            return self._own(name)(uuid, *args, **kwargs)
        except (client.MicroversionUnsupported, client.NotFound):
            raise
        except errors.Error as exc:  # it costs this device only
            with self._lock:
                self.unread.setdefault(uuid, str(exc))
            raise client.NotFound(str(exc)) from exc

    def get_inventories(self, uuid: str, *args: object,
                        **kwargs: object) -> tuple:
        return self._provider_read('get_inventories', uuid, *args, **kwargs)

    def get_usages(self, uuid: str, *args: object, **kwargs: object) -> dict:
        return self._provider_read('get_usages', uuid, *args, **kwargs)

    def get_traits(self, uuid: str, *args: object, **kwargs: object) -> list:
        return self._provider_read('get_traits', uuid, *args, **kwargs)

    def get_traits_and_generation(self, uuid: str, *args: object,
                                  **kwargs: object) -> tuple:
        return self._provider_read('get_traits_and_generation', uuid,
                                   *args, **kwargs)

    def get_provider_allocations(self, uuid: str, *args: object,
                                 **kwargs: object) -> dict:
        return self._provider_read('get_provider_allocations', uuid,
                                   *args, **kwargs)

    def get_allocation_candidates(self, resources: str,
                                  in_tree: str | None = None,
                                  **kwargs: object) -> dict:
        read = self._own('get_allocation_candidates')
        if in_tree is None:
            return read(resources, **kwargs)
        try:
            return read(resources, in_tree=in_tree, **kwargs)
        except (_errors().MicroversionUnsupported, _errors().NotFound):
            raise
        except errors.Error as exc:  # it costs this tree only
            LOG.info('The summaries of the tree of provider %s could not '
                     'be read (%s); its devices are read one by one.',
                     in_tree, exc)
            return {'provider_summaries': {}}

    def find_providers(self, *args: object, **kwargs: object) -> list:
        found = self._own('find_providers')(*args, **kwargs)
        with self._lock:
            self.listed.update((p['uuid'], p) for p in found)
        return found

    def unread_candidates(self, kinds: abc.Sequence[str]) -> list:
        """The devices of ``kinds`` a read of which failed."""
        return [c for c in providers.find_candidates(
            list(self.listed.values()), kinds) if c.uuid in self.unread]


@dataclasses.dataclass(frozen=True)
class Scrape:
    """One run: its exposition text, what it read (None when it read no
    device list) and, then, why; ``unknown_hosts``: the hosts of
    ``confs`` Placement has no compute node of (their files were not
    used).
    """

    text: str
    reading: families.Reading | None = None
    error: str | None = None
    unknown_hosts: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return self.reading is None or not self.reading.complete


@dataclasses.dataclass(frozen=True)
class _Unread:
    error: str


def _count(placement: 'placement_client.PlacementClient',
           compute: 'compute_client.ComputeClient | None',
           flavors: abc.Sequence[str],
           pci_config: 'pci_rules.PciConfig | None' = None,
           name: abc.Callable[[str], str] = str) -> dict:
    """``{flavor: flavor_fits or why it cannot be counted}``, every
    flavor from the same reads (``capacity.count_flavors``;
    ``pci_config``: the controller's, for a flavor's PCI alias; ``name``
    names the inputs a reason points at).
    """
    assert compute is not None
    try:
        counted = capacity.count_flavors(placement, compute, flavors,
                                         pci_config=pci_config)
    except errors.Error as exc:  # it costs the flavors only
        LOG.debug('Counting the flavors failed', exc_info=True)
        return {f: _Unread(str(exc) or repr(exc)) for f in flavors}
    return {f: _Unread(_reason(n, name)) if isinstance(n, Exception)
            else n for f, n in counted.items()}


def _reason(exc: Exception, name: abc.Callable[[str], str]) -> str:
    """Why a flavor could not be counted, its inputs named by ``name``."""
    if isinstance(exc, errors.Error):
        return exc.worded(name)
    return str(exc) or repr(exc)


def _allocations(reads: PartialReads,
                 compute: 'compute_client.ComputeClient',
                 devices: list) -> tuple:
    """``(allocations, servers, unread)`` of the devices, as ``mdev
    allocation list`` reads them; a failed read of Nova's servers (or of
    Placement's consumers) leaves them out.
    """
    from osc_mdev.features.allocation import reads as allocation

    try:
        # PartialReads stands in for the client it wraps.
        found, servers = allocation.allocations_on(
            typing.cast('placement_client.PlacementClient', reads), compute,
            devices)
    except errors.Error as exc:  # it costs these series only
        LOG.debug('Reading the allocations failed', exc_info=True)
        LOG.warning('The servers holding the allocations could not be '
                    'read (%s); openstack_mdev_allocation_used is left '
                    'out.', str(exc).rstrip('.'))
        return [], {}, True
    return found, servers, False


def _quota(placement: 'placement_client.PlacementClient',
           identity: 'identity_client.IdentityClient',
           compute: 'compute_client.ComputeClient',
           strategy: 'quota_rules.Strategy | None' = None
           ) -> '_Unread | list':
    """The families of every project's GPU usage and limit, or why they
    cannot be read (``strategy``: the controller's ``[quota]``).
    """
    try:
        return quota.metric_families(placement, identity, compute,
                                     strategy)
    except errors.Error as exc:  # it costs these series only
        LOG.debug('Reading the quotas failed', exc_info=True)
        return _Unread(str(exc) or repr(exc))


def scrape(placement: 'placement_client.PlacementClient',
           compute: 'compute_client.ComputeClient | None' = None,
           flavors: abc.Sequence[str] = (),
           kinds: abc.Sequence[str] = providers.KINDS,
           confs: dict[str, libvirt_driver.MdevConfig] | None = None,
           allocations: bool = False,
           identity: 'identity_client.IdentityClient | None' = None,
           pci_config: 'pci_rules.PciConfig | None' = None,
           strategy: 'quota_rules.Strategy | None' = None,
           name: abc.Callable[[str], str] = str) -> Scrape:
    """Read the cloud and render its metrics, never raising for a failed
    read: what could be read is rendered (``Scrape.reading``), each
    flavor, device or the allocations that could not be with a warning;
    a run that could not read the devices at all gives the text of a
    failed run (``openstack_mdev_scrape_success 0`` only) and its error.

    ``confs``: ``{host: MdevConfig}`` of the computes' nova.conf, for the type
    labels; ``allocations``: also the allocations and their servers;
    ``identity`` (Keystone's client): also each project's GPU usage and
    limit (``features.quota.reads.metric_families``); ``pci_config``
    and ``strategy``: the controller's PCI aliases and ``[quota]`` (its
    nova.conf).
    """
    flavors = list(dict.fromkeys(flavors))
    stamp = time.time()
    start = time.monotonic()
    # The devices and the flavors are counted from the same reads.
    placement = placement.shared_reads()
    reads = PartialReads(placement)
    if compute is None and (flavors or allocations):
        raise ValueError('flavors and allocations are read from Nova')
    calls: dict[str, abc.Callable[[], typing.Any]] = {
        # PartialReads stands in for the client it wraps.
        'devices': lambda: device_reads.list_devices(
            typing.cast('placement_client.PlacementClient', reads),
            providers.DeviceFilter(kinds=tuple(kinds)),
            read_traits=True, read_inventory=False, read_state=True)}
    if flavors:
        calls['counts'] = functools.partial(_count, placement, compute,
                                            flavors, pci_config, name)
    if identity is not None:
        if compute is None:
            raise ValueError('quotas are read with Nova')
        calls['projects'] = functools.partial(_quota, placement, identity,
                                              compute, strategy)
    try:
        read = pool.call_named(calls, placement.max_workers)
        devices = read['devices']
        found, servers, unread = (
            _allocations(reads, compute, devices)
            if allocations and compute is not None else (None, {}, False))
    except Exception as exc:  # noqa: B902 - any failure is a failed run
        LOG.debug('Reading the cloud failed', exc_info=True)
        return Scrape(families.render(families.failed(
            time.monotonic() - start, stamp)), error=str(exc) or repr(exc))
    counts = read.get('counts', {})
    projects = read.get('projects', [])
    reading = families.Reading(
        devices=devices, unread_devices=reads.unread_candidates(kinds),
        confs=confs or {},
        fits={f: n for f, n in counts.items() if not isinstance(n, _Unread)}
        if flavors else None,
        unread_flavors=tuple(f for f, n in counts.items()
                             if isinstance(n, _Unread)),
        allocations=found, servers=servers, allocations_unread=unread,
        quotas_unread=isinstance(projects, _Unread))
    _warn(reading, counts, reads)
    if isinstance(projects, _Unread):
        LOG.warning("The projects' GPU quotas could not be read (%s); "
                    'openstack_mdev_project_used and _limit are left out.',
                    projects.error.rstrip('.'))
        projects = []
    hosts = providers.hosts_of(reads.listed.values())
    return Scrape(families.render(families.families(
        reading, time.monotonic() - start, stamp) + projects), reading,
        unknown_hosts=tuple(sorted(set(reading.confs) - hosts)))


def _warn(reading: families.Reading, counts: dict,
          reads: PartialReads) -> None:
    """One warning per flavor and device that could not be read."""
    for flavor in reading.unread_flavors:
        LOG.warning('Flavor %s could not be counted (%s); its '
                    'openstack_mdev_flavor_up is 0.', flavor,
                    counts[flavor].error.rstrip('.'))
    for candidate in reading.unread_devices:
        LOG.warning('Device %s:%s could not be read (%s); its '
                    'openstack_mdev_device_up is 0.', candidate.host,
                    candidate.device,
                    reads.unread[candidate.uuid].rstrip('.'))


def failure_message(result: Scrape, output: str | None) -> str:
    """The one line a run that failed ends with (``result.failed``)."""
    if result.reading is None:
        return 'Reading the cloud failed: %s; %s' % (
            (result.error or '').rstrip('.'),
            '%s now holds openstack_mdev_scrape_success 0 and no other '
            'series.' % output if output else
            'only openstack_mdev_scrape_success 0 was printed.')
    reading = result.reading
    parts = []
    if reading.unread_flavors:
        parts.append('%s %s' % (
            'flavor' if len(reading.unread_flavors) == 1 else 'flavors',
            words.and_list(reading.unread_flavors)))
    if reading.unread_devices:
        parts.append(words.count(len(reading.unread_devices), 'device'))
    if reading.allocations_unread:
        parts.append("the allocations' servers")
    if reading.quotas_unread:
        parts.append("the projects' quotas")
    return ('Reading the cloud failed for %s (see the warnings); every '
            'other series was %s, with openstack_mdev_scrape_success 0.'
            % (words.and_list(parts),
               'written to %s' % output if output else 'printed'))


def check_input(output: str | None,
                compute_conf: abc.Sequence[tuple[str, str]]
                ) -> dict[str, libvirt_driver.MdevConfig]:
    """Refuse bad input before any read: an ``output`` file that cannot
    be written (``errors.Invalid``), a ``compute_conf`` file that cannot
    be read or that Nova would refuse. Returns the ``{host: MdevConfig}``
    of ``compute_conf``.
    """
    from osc_mdev.features import nova_conf

    if output:
        try:
            textfile.check_writable(output)
        except OSError as exc:
            raise errors.Invalid(
                'Cannot write %s (%s); give a file in an existing directory '
                'this user may write to.' % (output, exc.strerror or exc),
                parameter='output', path=output) from exc
    return nova_conf.compute_confs(compute_conf)


def write(path: str, text: str) -> None:
    """Replace ``path`` by ``text`` atomically; on failure the old file
    stays and an ``errors.Error`` says why.
    """
    try:
        textfile.write_atomically(path, text)
    except OSError as exc:
        raise errors.Error(
            'Writing %s failed (%s); the previous file was left as it '
            'was.' % (path, exc.strerror or exc), path=path) from exc
