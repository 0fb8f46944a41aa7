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

"""``openstack mdev provider list`` / ``show``."""

import argparse
import logging

from cliff import columns
from osc_lib.cli import format_columns

from osc_mdev.cloud import providers as domain
from osc_mdev.cloud import reads as devices
from osc_mdev.features.provider import writes as release
from osc_mdev.v1 import common
from osc_mdev.v1 import options

LOG = logging.getLogger(__name__)

# The default views: what the bulk reads give (the provider listing and
# the allocation candidate summaries), in a number of requests that does
# not grow with the cloud.
# Kind is shown where devices of several kinds can be listed (--kind pci
# or all, --long): the mdev-only default would repeat 'mdev' on each row.
COLUMNS = ('UUID', 'Host', 'Device', 'Resource Class', 'Capacity', 'Used',
           'Free', 'Traits')
# With PCI-in-Placement devices (--kind pci or all).
# State (in use, free, used once and waiting to be cleaned, reserved)
# is shown where devices of several kinds are (one-time-use devices are
# PCI-in-Placement devices) and with --long.
PCI_COLUMNS = ('UUID', 'Host', 'Device', 'Kind', 'Vendor ID', 'Product ID',
               'VFs of PF', 'Resource Class', 'Capacity', 'Used', 'Free',
               'State', 'Traits')
# Columns only an inventories read per device can fill (--long).
INVENTORY_COLUMNS = ('Total', 'Reserved', 'Allocation Ratio', 'Max Unit',
                     'Min Unit', 'Step Size')
LONG_COLUMNS = ('UUID', 'Name', 'Host', 'Device', 'Kind', 'Resource Class',
                'Capacity', 'Used', 'Free', 'State') + INVENTORY_COLUMNS + (
                'Generation', 'Traits')
LONG_PCI_COLUMNS = ('UUID', 'Name', 'Host', 'Device', 'Kind', 'Vendor ID',
                    'Product ID', 'VFs of PF', 'Resource Class', 'Capacity',
                    'Used', 'Free', 'State') + INVENTORY_COLUMNS + (
                    'Generation', 'Traits')


def kinds(parsed_args):
    return domain.KIND_CHOICES[parsed_args.kind]


class ConsumersColumn(columns.FormattableColumn):
    """Consumers of a device: one ``UUID: amount CLASS`` line each."""

    def human_readable(self):
        return '\n'.join('%(consumer)s: %(amount)s %(resource_class)s' % c
                         for c in self._value)

    def machine_readable(self):
        return [dict(c) for c in self._value]


def row(device, cols):
    inventory = device.inventory
    ids = device.pci_ids or (None, None)
    values = {
        'Kind': device.kind,
        'Vendor ID': ids[0],
        'Product ID': ids[1],
        'VFs of PF': device.device if device.holds_vfs else None,
        'UUID': device.uuid,
        'Name': device.candidate.name,
        'Host': device.host,
        'Device': device.device,
        'Resource Class': device.resource_class,
        'Capacity': device.capacity,
        'Total': inventory.total if inventory else None,
        'Reserved': inventory.reserved if inventory else None,
        'Used': device.used,
        'Free': device.free,
        'State': device.state,
        'Max Unit': inventory.max_unit if inventory else None,
        'Min Unit': inventory.min_unit if inventory else None,
        'Step Size': inventory.step_size if inventory else None,
        'Allocation Ratio': (inventory.allocation_ratio if inventory
                             else None),
        'Generation': device.generation,
        'Traits': format_columns.ListColumn(list(device.traits or ())),
    }
    return tuple(values[c] for c in cols)


class ListProvider(common.Lister):
    """List the GPUs (mdev parent devices) of the cloud, with usage and traits.

    Answers which GPUs Nova reports, how full each is and which traits
    (such as its type's) it carries: one row per device, Host being the
    compute node and Device the PCI address. Capacity is what Placement
    can hand out; the default view costs a few requests whatever the size
    of the cloud, --long adds the inventory's fields at one request per
    device. --kind pci or all adds the GPUs Nova reports through PCI in
    Placement (SR-IOV vGPUs, whole GPUs).
    """

    _epilog = """\
Examples:

GPUs of one compute node with room for one more vGPU::

    openstack mdev provider list --host compute1 --free

GPUs tagged with a type's trait, as JSON::

    openstack mdev provider list --require-trait CUSTOM_NVIDIA_12 -f json

Every GPU, mdev and PCI-in-Placement alike::

    openstack mdev provider list --kind all
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        options.host(parser)
        options.resource_class(parser)
        options.require_trait(parser)
        usage = parser.add_mutually_exclusive_group()
        usage.add_argument(
            '--free', action='store_true',
            help='Only devices with room for at least one more mdev.')
        usage.add_argument(
            '--full', action='store_true',
            help='Only devices with no room left.')
        options.long_and_kind(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        wanted = domain.DeviceFilter(
            hosts=tuple(parsed_args.host),
            resource_class=parsed_args.resource_class,
            traits=tuple(parsed_args.require_trait), free=parsed_args.free,
            full=parsed_args.full,
            kinds=kinds(parsed_args))
        # A column of --long named with -c brings the long view: -c Total
        # works without --long.
        long_view = parsed_args.long or bool(
            set(parsed_args.columns or ()) - set(PCI_COLUMNS))
        if parsed_args.kind == domain.MDEV:
            cols = LONG_COLUMNS if long_view else COLUMNS
        else:
            cols = LONG_PCI_COLUMNS if long_view else PCI_COLUMNS
        # Traits and inventory fields cost requests per device: read only
        # when shown (Placement filters on traits itself). VFs of PF needs
        # the total, which the summaries' capacity stands for.
        shown = parsed_args.columns or cols
        found, hidden = devices.list_devices_and_hidden(
            common.client(self.app).placement, wanted,
            read_traits='Traits' in shown,
            read_inventory=bool(set(INVENTORY_COLUMNS) & set(shown)),
            read_state='State' in shown)
        if hidden and parsed_args.kind == domain.MDEV:
            LOG.warning(
                'Note: no mdev device matches, but %d PCI-in-Placement '
                "device%s do%s; run 'openstack mdev provider list --kind "
                "pci' to see %s.", hidden, '' if hidden == 1 else 's',
                'es' if hidden == 1 else '', 'it' if hidden == 1 else 'them')
        return cols, common.Rows(row(d, cols) for d in found)


class ShowProvider(common.ShowOne):
    """Show one GPU (mdev parent or PCI-in-Placement device) and its consumers.

    Answers everything Placement knows of one device: inventory, usage,
    traits, and the servers holding part of it. Name it by provider UUID,
    provider name or HOST:PCI_ADDRESS; a bare PCI address works when only
    one host has it.
    """

    _epilog = """\
Examples:

One GPU by compute node and PCI address::

    openstack mdev provider show compute1:0000:84:00.0

The VFs of a PF reported through PCI in Placement::

    openstack mdev provider show sriov1:0000:c1:00.0
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        parser.add_argument(
            'device', metavar='<device>',
            help='Provider UUID, provider name, or HOST:PCI_ADDRESS '
                 '(HOST:DEVICE for devices without a PCI address, such as '
                 'compute1:mtty_mtty).')
        return parser

    def take_action(self, parsed_args: argparse.Namespace
                    ) -> tuple[tuple[str, ...], tuple]:
        device, allocations = devices.show_device(
            common.client(self.app).placement, parsed_args.device)
        consumers = domain.consumers_of(allocations, device.resource_class)
        # The same fields whatever the device: an mdev parent has no PCI
        # IDs of its own and no VFs (None).
        return LONG_PCI_COLUMNS + ('Consumers',), row(
            device, LONG_PCI_COLUMNS) + (ConsumersColumn(consumers),)


RELEASE_COLUMNS = ('Device', 'Host', 'UUID', 'State', 'Result')


class ReleaseProvider(common.Lister):
    """Give one-time-use devices back once cleaned: reserved set to 0.

    Nova leaves a one-time-use device reserved after its server is gone.
    Once it is cleaned, this sets reserved back to 0, only where Nova
    reserved it after one use (HW_PCI_ONE_TIME_USE, reserved = total)
    and no allocation remains; a provider that changes meanwhile is read
    and decided again. One row per device; fails when a named device is
    in use or reserved by someone else, or a write fails.
    """

    _epilog = """\
Examples:

Release one device after cleaning it::

    openstack mdev provider release compute3:0000:85:00.0

What --all would release, writing nothing::

    openstack mdev provider release --all --dry-run
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        parser.add_argument(
            'device', metavar='<device>', nargs='*',
            help='One-time-use device to release: provider UUID, provider '
                 'name or HOST:PCI_ADDRESS, as in "mdev provider show"; '
                 'repeat for several.')
        options.all_devices(parser)
        options.dry_run(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        done = release.release(
            common.client(self.app).placement, tuple(parsed_args.device),
            all_devices=parsed_args.all_devices,
            dry_run=parsed_args.dry_run)
        rows = [(o.device.device, o.device.host, o.device.uuid, o.state,
                 o.result) for o in done.outcomes]
        outcome = common.DONE
        if done.failed:
            outcome = common.Outcome(failure=(
                '%d of the devices were not released; see the Result '
                'column.' % len(done.failed)))
        return RELEASE_COLUMNS, common.Rows(rows, outcome)
