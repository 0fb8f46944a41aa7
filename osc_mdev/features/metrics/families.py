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

"""The cloud's mdev state as Prometheus metrics.

Pure: what one run read (a ``Reading``: device rows, the devices and
flavors whose reads failed, flavor counts, allocations and the servers
holding them) in, metric families and the text exposition format that
node_exporter's textfile collector reads out. The families and the text
are ``prometheus_client``'s own (``GaugeMetricFamily``,
``generate_latest``), which escape label values and help texts.

Every metric this module emits is named in ``FAMILIES``; the dashboard
shipped in the docs queries only those (a test holds it to that).
"""

import collections
from collections import abc
import dataclasses
import typing

from osc_mdev.cloud import allocations as alloc_logic
from osc_mdev.cloud import providers
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

if typing.TYPE_CHECKING:
    from prometheus_client import core

PREFIX = 'openstack_mdev_'

DEVICE_LABELS = ('host', 'device', 'kind', 'resource_class', 'type')
HOST_LABELS = ('host', 'resource_class')
UP_LABELS = ('host', 'device', 'kind')
ALLOCATION_LABELS = DEVICE_LABELS + (
    'pci_bus_id', 'server', 'server_name', 'project', 'flavor')

#: ``{name: (help, labels)}`` of every family, in the order printed.
FAMILIES = {
    PREFIX + 'device_capacity': (
        'What Placement can hand out on the device: (total - reserved) x '
        'allocation ratio of its resource class.', DEVICE_LABELS),
    PREFIX + 'device_used': (
        'Mdevs (or PCI devices) of the class allocated on the device.',
        DEVICE_LABELS),
    PREFIX + 'device_free': (
        'Capacity left on the device: capacity - used, at least 0.',
        DEVICE_LABELS),
    PREFIX + 'device_waiting_to_clean': (
        '1 when the device is a one-time-use device Nova reserved after its '
        'use, waiting to be cleaned and released (openstack mdev provider '
        'release), else 0.', DEVICE_LABELS),
    PREFIX + 'device_up': (
        '1 when every read of the device succeeded in this run, 0 when one '
        'failed (the series that read gives are then left out).',
        UP_LABELS),
    PREFIX + 'host_capacity': (
        'Capacity of the devices of a compute node, per resource class '
        '(left out while a device of the node cannot be read).',
        HOST_LABELS),
    PREFIX + 'host_used': (
        'Used on the devices of a compute node, per resource class.',
        HOST_LABELS),
    PREFIX + 'host_free': (
        'Free on the devices of a compute node, per resource class.',
        HOST_LABELS),
    PREFIX + 'allocation_used': (
        'What one server (consumer) holds on the device, one series per '
        'server, device and class (openstack mdev metrics --allocations); '
        'the labels join it to servers, projects, flavors and per-GPU '
        'series by PCI address.', ALLOCATION_LABELS),
    PREFIX + 'flavor_fits': (
        'How many more servers of the flavor fit now, as '
        "'openstack mdev capacity --flavor' counts them.", ('flavor',)),
    PREFIX + 'flavor_up': (
        '1 when the flavor was read and counted, 0 when it could not be '
        '(unknown, deleted, not visible, or a read failed).', ('flavor',)),
    PREFIX + 'scrape_success': (
        '1 when every read of this run succeeded, 0 when one failed (what '
        'could be read is still there; the _up series say what was not).',
        ()),
    PREFIX + 'scrape_duration_seconds': (
        'How long this run took to read the cloud.', ()),
    PREFIX + 'scrape_timestamp_seconds': (
        'When this run read the cloud (Unix time), whether its reads '
        'succeeded or not: how old a file of the textfile collector is.',
        ()),
}


@dataclasses.dataclass(frozen=True)
class Reading:
    """What one run read.

    ``devices``: ``providers.Device`` rows; ``unread_devices``: the
    ``providers.Candidate`` of each device a read of which failed (it may
    have rows too, when only its allocations could not be read);
    ``confs``: ``{host: libvirt_driver.MdevConfig}`` of the compute nodes whose
    nova.conf was given. ``fits``: ``{flavor: count}`` of the flavors
    counted, None when no flavor was asked for; ``unread_flavors``: the
    flavors that could not be. ``allocations``: the
    ``allocations.MdevAllocation`` of the devices, None when not asked
    for, with ``servers`` (``{consumer: allocations.ServerView}``);
    ``allocations_unread``: they were asked for but could not be read;
    ``quotas_unread``: the projects' quotas likewise.
    """

    devices: abc.Sequence[providers.Device] = ()
    unread_devices: abc.Sequence[providers.Candidate] = ()
    confs: abc.Mapping[str, libvirt_driver.MdevConfig] = dataclasses.field(
        default_factory=dict)
    fits: abc.Mapping[str, int] | None = None
    unread_flavors: abc.Sequence[str] = ()
    allocations: abc.Sequence[alloc_logic.MdevAllocation] | None = None
    servers: abc.Mapping[str, alloc_logic.ServerView] = dataclasses.field(
        default_factory=dict)
    allocations_unread: bool = False
    quotas_unread: bool = False

    @property
    def complete(self) -> bool:
        """Every read of the run succeeded."""
        return not (self.unread_devices or self.unread_flavors
                    or self.allocations_unread or self.quotas_unread)


def type_label(device: providers.Device,
               conf: libvirt_driver.MdevConfig | None = None) -> str:
    """The ``type`` label of a device.

    The mdev type as the compute node's nova.conf names it
    (``nvidia-35``, Nova's rule ``libvirt_driver.vgpu_type_per_pgpu``) when
    ``conf`` is that file and gives the device a type; otherwise the name
    of the device's type trait (``CUSTOM_NVIDIA_35``, see
    ``traits.type_key``), the names joined with ',' when several types'
    traits contradict each other (the audit reports it as wrong-trait);
    '' when neither says.
    """
    if conf is not None and device.kind == providers.MDEV:
        name = conf.type_for(device.candidate.nodedev)
        if name:
            return name
    found = trait_logic.mdev_type_of_traits(device.traits or ())
    if found is not None:
        return found.name
    return ','.join(sorted(t for t in device.traits or ()
                           if trait_logic.is_type_trait(t)))


def dcgm_bus_id(address: str | None) -> str:
    """A PCI address as NVML, and so DCGM exporter's ``pci_bus_id``
    label, writes it: ``0000:3b:00.0`` -> ``00000000:3B:00.0`` (an
    8-digit domain, upper case); '' for a device without one.
    """
    if not address:
        return ''
    domain, _, rest = address.partition(':')
    return ('%08x:%s' % (int(domain, 16), rest)).upper()


def _family(name: str) -> 'core.GaugeMetricFamily':
    from prometheus_client import core  # noqa: F811 - on use, for --help

    text, labels = FAMILIES[name]
    return core.GaugeMetricFamily(name, text, labels=list(labels))


#: The families of one run, by name.
Families = dict[str, 'core.GaugeMetricFamily']


def families(reading: Reading, duration: float | None = None,
             timestamp: float | None = None) -> list:
    """The metric families of a run that read the cloud, completely or
    in part (``reading``); ``duration`` and ``timestamp`` in seconds.

    A device that could not be read has ``device_up`` 0 and no other
    series; a compute node with such a device has no ``host_*`` series
    (its sums would be short). ``flavor_fits`` and ``flavor_up`` are
    there when flavors were asked for, ``allocation_used`` when
    allocations were.
    """
    found = {name: _family(name) for name in FAMILIES}
    types = {d.uuid: type_label(d, reading.confs.get(d.host))
             for d in reading.devices}
    _device_series(found, reading, types)
    _host_series(found, reading)
    if reading.allocations is None:
        del found[PREFIX + 'allocation_used']
    else:
        _allocation_series(found, reading, types)
    if reading.fits is None and not reading.unread_flavors:
        del found[PREFIX + 'flavor_fits']
        del found[PREFIX + 'flavor_up']
    else:
        fits = reading.fits or {}
        for flavor, count in sorted(fits.items()):
            found[PREFIX + 'flavor_fits'].add_metric([flavor], count)
        for flavor in sorted(set(fits) | set(reading.unread_flavors)):
            found[PREFIX + 'flavor_up'].add_metric(
                [flavor], 0 if flavor in reading.unread_flavors else 1)
    found[PREFIX + 'scrape_success'].add_metric(
        [], 1 if reading.complete else 0)
    _run(found, duration, timestamp)
    return list(found.values())


def _device_series(found: 'Families', reading: Reading,
                   types: abc.Mapping[str, str]) -> None:
    unread = {c.uuid for c in reading.unread_devices}
    up = {}
    for device in sorted(reading.devices, key=providers.sort_key):
        labels = [device.host, device.device, device.kind,
                  device.resource_class, types[device.uuid]]
        found[PREFIX + 'device_capacity'].add_metric(labels, device.capacity)
        found[PREFIX + 'device_used'].add_metric(labels, device.used)
        found[PREFIX + 'device_free'].add_metric(labels, device.free)
        found[PREFIX + 'device_waiting_to_clean'].add_metric(
            labels, 1 if device.waiting else 0)
        up[(device.host, device.device, device.kind)] = (
            device.uuid not in unread)
    for candidate in reading.unread_devices:
        up[(candidate.host, candidate.device, candidate.kind)] = False
    for key, read in sorted(up.items()):
        found[PREFIX + 'device_up'].add_metric(list(key), 1 if read else 0)


def _host_series(found: 'Families', reading: Reading) -> None:
    with_rows = {d.uuid for d in reading.devices}
    short = {c.host for c in reading.unread_devices
             if c.uuid not in with_rows}
    per_host: collections.defaultdict[tuple[str, str], list[int]] = \
        collections.defaultdict(lambda: [0, 0, 0])
    for device in reading.devices:
        if device.host in short:
            continue
        total = per_host[(device.host, device.resource_class)]
        total[0] += device.capacity
        total[1] += device.used
        total[2] += device.free
    for key, (capacity, used, free) in sorted(per_host.items()):
        found[PREFIX + 'host_capacity'].add_metric(list(key), capacity)
        found[PREFIX + 'host_used'].add_metric(list(key), used)
        found[PREFIX + 'host_free'].add_metric(list(key), free)


def _allocation_series(found: 'Families', reading: Reading,
                       types: abc.Mapping[str, str]) -> None:
    unread = {c.uuid for c in reading.unread_devices}
    for allocation in sorted(reading.allocations or (),
                             key=alloc_logic.sort_key):
        candidate = allocation.candidate
        if candidate.uuid in unread:
            continue
        server = reading.servers.get(allocation.consumer)
        found[PREFIX + 'allocation_used'].add_metric([
            allocation.host, allocation.device, allocation.kind,
            allocation.resource_class, types.get(candidate.uuid, ''),
            dcgm_bus_id(candidate.pci_address), allocation.consumer,
            server.name if server else '',
            (server.project if server else None) or '',
            (server.flavor if server else None) or ''], allocation.amount)


def failed(duration: float | None = None,
           timestamp: float | None = None) -> list:
    """The families of a run that read nothing: only the run's own."""
    found = {name: _family(name) for name in (
        PREFIX + 'scrape_success', PREFIX + 'scrape_duration_seconds',
        PREFIX + 'scrape_timestamp_seconds')}
    found[PREFIX + 'scrape_success'].add_metric([], 0)
    _run(found, duration, timestamp)
    return list(found.values())


def _run(found: 'Families', duration: float | None,
         timestamp: float | None) -> None:
    for name, value in ((PREFIX + 'scrape_duration_seconds', duration),
                        (PREFIX + 'scrape_timestamp_seconds', timestamp)):
        if value is None:
            del found[name]
        else:
            found[name].add_metric([], round(value, 3))


class _Families:
    """What ``generate_latest`` reads: an object that ``collect()``s."""

    def __init__(self, found: abc.Iterable) -> None:
        self._found = found

    def collect(self) -> abc.Iterable:
        return iter(self._found)


def render(found: abc.Iterable) -> str:
    """The text exposition format (version 0.0.4) of ``found``."""
    from prometheus_client import exposition

    return exposition.generate_latest(_Families(found)).decode('utf-8')
