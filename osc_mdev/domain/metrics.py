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

Pure: device rows (``providers.Device``) and flavor counts in, metric
families and the text exposition format that node_exporter's textfile
collector reads out. The families and the text are
``prometheus_client``'s own (``GaugeMetricFamily``,
``generate_latest``), which escape label values and help texts.

Every metric this module emits is named in ``FAMILIES``; the dashboard
shipped in the docs queries only those (a test holds it to that).
"""

from osc_mdev.domain import traits as trait_logic

PREFIX = 'openstack_mdev_'

DEVICE_LABELS = ('host', 'device', 'kind', 'resource_class', 'type')
HOST_LABELS = ('host', 'resource_class')

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
    PREFIX + 'host_capacity': (
        'Capacity of the devices of a compute node, per resource class.',
        HOST_LABELS),
    PREFIX + 'host_used': (
        'Used on the devices of a compute node, per resource class.',
        HOST_LABELS),
    PREFIX + 'host_free': (
        'Free on the devices of a compute node, per resource class.',
        HOST_LABELS),
    PREFIX + 'flavor_fits': (
        'How many more servers of the flavor fit now, as '
        "'openstack mdev capacity --flavor' counts them.", ('flavor',)),
    PREFIX + 'scrape_success': (
        '1 when every read of this run succeeded, 0 when one failed (the '
        'other families are then left out).', ()),
    PREFIX + 'scrape_duration_seconds': (
        'How long this run took to read the cloud.', ()),
    PREFIX + 'scrape_timestamp_seconds': (
        'When this run read the cloud (Unix time): how old a file of the '
        'textfile collector is.', ()),
}


def device_type(traits):
    """The mdev type the device's type traits name (``NVIDIA_35`` for
    ``CUSTOM_NVIDIA_35``, see ``traits.type_key``): '' when none does,
    the types joined with ',' when several do (a contradiction the audit
    reports as wrong-trait).
    """
    keys = sorted({k for k in (trait_logic.type_key(t) for t in traits or ())
                   if k})
    return ','.join(keys)


def _family(name):
    from prometheus_client import core

    text, labels = FAMILIES[name]
    return core.GaugeMetricFamily(name, text, labels=list(labels))


def families(devices, fits=None, duration=None, timestamp=None):
    """The metric families of a successful run.

    ``devices``: ``providers.Device`` rows; ``fits``: ``{flavor: count}``
    (``openstack mdev capacity``'s Total), or None when no flavor was
    asked for; ``duration`` and ``timestamp`` in seconds.
    """
    found = {name: _family(name) for name in FAMILIES}
    per_host = {}
    for device in sorted(devices, key=lambda d: (
            d.host, d.device, d.resource_class)):
        labels = [device.host, device.device, device.kind,
                  device.resource_class, device_type(device.traits)]
        capacity, used = device.capacity, device.used
        found[PREFIX + 'device_capacity'].add_metric(labels, capacity)
        found[PREFIX + 'device_used'].add_metric(labels, used)
        found[PREFIX + 'device_free'].add_metric(labels, device.free)
        key = (device.host, device.resource_class)
        total = per_host.setdefault(key, [0, 0, 0])
        total[0] += capacity
        total[1] += used
        total[2] += device.free
    for key, (capacity, used, free) in sorted(per_host.items()):
        found[PREFIX + 'host_capacity'].add_metric(list(key), capacity)
        found[PREFIX + 'host_used'].add_metric(list(key), used)
        found[PREFIX + 'host_free'].add_metric(list(key), free)
    for flavor, count in sorted((fits or {}).items()):
        found[PREFIX + 'flavor_fits'].add_metric([flavor], count)
    found[PREFIX + 'scrape_success'].add_metric([], 1)
    _run(found, duration, timestamp)
    if fits is None:
        del found[PREFIX + 'flavor_fits']
    return list(found.values())


def failed(duration=None, timestamp=None):
    """The families of a run whose reads failed: only the run's own."""
    found = {name: _family(name) for name in (
        PREFIX + 'scrape_success', PREFIX + 'scrape_duration_seconds',
        PREFIX + 'scrape_timestamp_seconds')}
    found[PREFIX + 'scrape_success'].add_metric([], 0)
    _run(found, duration, timestamp)
    return list(found.values())


def _run(found, duration, timestamp):
    for name, value in ((PREFIX + 'scrape_duration_seconds', duration),
                        (PREFIX + 'scrape_timestamp_seconds', timestamp)):
        if value is None:
            del found[name]
        else:
            found[name].add_metric([], round(value, 3))


class _Families:
    """What ``generate_latest`` reads: an object that ``collect()``s."""

    def __init__(self, found):
        self._found = found

    def collect(self):
        return iter(self._found)


def render(found):
    """The text exposition format (version 0.0.4) of ``found``."""
    from prometheus_client import exposition

    return exposition.generate_latest(_Families(found)).decode('utf-8')
