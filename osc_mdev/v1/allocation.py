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

"""``openstack mdev allocation show`` / ``list``."""

import argparse
import logging

from osc_lib.cli import format_columns

from osc_mdev.cloud import allocations as domain
from osc_mdev.cloud import providers
from osc_mdev.features.allocation import reads as allocation_reads
from osc_mdev.v1 import common
from osc_mdev.v1 import options

LOG = logging.getLogger(__name__)

SHOW_COLUMNS = ('Server', 'Server Name', 'Host', 'Device', 'Resource Class',
                'Amount', 'Provider UUID', 'Traits')
LIST_COLUMNS = ('Server', 'Server Name', 'Host', 'Device', 'Resource Class',
                'Amount', 'Provider UUID')
LONG_EXTRA = ('Server Status', 'Nova Host', 'Nova Node')
SERVER = ('Server name or ID (any project). A name that several servers '
          'share is an error listing their IDs.')
DEVICE = ('Only this device: HOST:PCI_ADDRESS, provider name or UUID; '
          'repeat for several.')


def _columns(cols, parsed_args):
    """``cols`` with Kind after Device when PCI devices may appear;
    --long's columns at the end.
    """
    if parsed_args.kind != providers.MDEV:
        at = cols.index('Device') + 1
        cols = cols[:at] + ('Kind',) + cols[at:]
    return cols + (LONG_EXTRA if parsed_args.long else ())


def _row(allocation, server, cols, traits=None):
    values = {
        'Server': allocation.consumer,
        'Server Name': server.name,
        'Host': allocation.host,
        'Device': allocation.device,
        'Kind': allocation.kind,
        'Resource Class': allocation.resource_class,
        'Amount': allocation.amount,
        'Provider UUID': allocation.candidate.uuid,
        'Traits': format_columns.ListColumn(sorted(traits or ())),
        'Server Status': server.status,
        'Nova Host': server.nova_host,
        'Nova Node': server.nova_node,
    }
    return tuple(values[c] for c in cols)


def _warn_node_mismatches(found, views):
    """One stderr line per server Nova has on another compute node than
    Placement.
    """
    for mismatch in domain.node_mismatches(found, views):
        LOG.warning(
            'Warning: Nova has server %s on compute node %s (host %s), but '
            'Placement holds its mdev allocation on %s.', mismatch.consumer,
            mismatch.nova_node, mismatch.nova_host, mismatch.placement_node)


class ShowAllocation(common.Lister):
    """Show which physical GPU backs a server's vGPUs.

    Answers "which GPU is this server on?": one row per mdev allocation of
    the server, with the compute node (Host) and PCI address (Device)
    Placement holds it on. --long adds where Nova has the server, to see
    a disagreement; --kind pci shows PCI-in-Placement devices (SR-IOV
    vGPUs) instead.
    """

    _epilog = """\
Examples:

The GPU of a server, by name or ID::

    openstack mdev allocation show vm1

With the server's status, service host and node in Nova::

    openstack mdev allocation show vm1 --long

The SR-IOV VFs of a server, by their PF::

    openstack mdev allocation show vm1 --kind pci
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        parser.add_argument('server', metavar='<server>', help=SERVER)
        options.long_and_kind(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        mdev = common.client(self.app)
        result = allocation_reads.server_allocations(
            mdev.placement, mdev.compute, parsed_args.server,
            kinds=providers.KIND_CHOICES[parsed_args.kind])
        cols = _columns(SHOW_COLUMNS, parsed_args)
        if not result.allocations:
            what = {'mdev': 'mdev', 'pci': 'PCI-in-Placement',
                    'all': 'mdev or PCI-in-Placement'}[parsed_args.kind]
            hint = ''
            if result.hidden:
                hint = (" but it holds %d on PCI-in-Placement devices; see "
                        "them with --kind pci" % result.hidden)
            LOG.warning('Server %s has no %s allocations%s.',
                        parsed_args.server, what, hint)
        _warn_node_mismatches(
            result.allocations,
            {a.consumer: result.server for a in result.allocations})
        return cols, common.Rows(
            _row(a, result.server, cols, result.traits.get(a.candidate.uuid))
            for a in result.allocations)


class ListAllocation(common.Lister):
    """List the servers on the GPUs of the cloud, of a host or of one GPU.

    Answers "which servers must move before this GPU or host is
    serviced?": one row per server and device, with the server names Nova
    knows; consumers Nova has no server for are marked.
    """

    _epilog = """\
Examples:

The servers on one GPU::

    openstack mdev allocation list --device compute1:0000:84:00.0

Every server on a compute node's GPUs, with its status in Nova::

    openstack mdev allocation list --host compute1 --long
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        options.host(parser)
        parser.add_argument('--device', metavar='<device>', action='append',
                            default=[], help=DEVICE)
        options.resource_class(parser)
        options.long_and_kind(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        mdev = common.client(self.app)
        found, servers = allocation_reads.list_allocations(
            mdev.placement, mdev.compute, hosts=tuple(parsed_args.host),
            references=tuple(parsed_args.device),
            resource_class=parsed_args.resource_class,
            kinds=providers.KIND_CHOICES[parsed_args.kind])
        cols = _columns(LIST_COLUMNS, parsed_args)
        _warn_node_mismatches(found, servers)
        return cols, common.Rows(_row(a, servers[a.consumer], cols)
                                 for a in found)
