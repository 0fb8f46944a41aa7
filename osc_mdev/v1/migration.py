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

"""``openstack mdev migration check`` / ``plan``."""

import argparse
import logging

from osc_lib.cli import format_columns
from osc_lib import exceptions

from osc_mdev.features.migration import plan as migration_plan
from osc_mdev.features.migration import reads as migration
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova import migration as migration_rules
from osc_mdev.v1 import common
from osc_mdev.v1 import options

LOG = logging.getLogger(__name__)

CHECK_COLUMNS = ('Host', 'Live', 'Cold', 'Devices', 'Reason', 'Not Checked')
PLAN_COLUMNS = ('Server', 'Name', 'Target Host', 'Kind', 'Command',
                'Reason', 'Not Checked')


def _inputs(parsed_args: argparse.Namespace) -> migration.Inputs:
    """The --compute-conf and --controller-conf files, read and judged
    before any request. A compute's file that turns the conductor's
    skip_hypervisor_version_check_on_lm on is named in a warning:
    nova-compute does not read it.
    """
    inputs = migration.read_inputs(parsed_args.compute_conf,
                                   parsed_args.controller_conf,
                                   parsed_args.trait_prefix)
    for host, where in sorted(inputs.conductor_only.items()):
        LOG.warning(
            'Warning: --compute-conf %s: %s turns [workarounds] %s on, but '
            'nova-conductor reads it, not nova-compute: give the '
            "controller's nova.conf with --controller-conf.", host, where,
            novaconf.SKIP_HYPERVISOR_VERSION_CHECK)
    return inputs


class CheckMigration(common.Lister):
    """Show where a server with vGPUs can be live- or cold-migrated, and why.

    Answers "where can this server go, and will Nova agree?" before Nova
    is asked: one row per compute node with devices of the server's
    classes (or --target) saying Live and Cold yes or no, the devices of its
    type with room, the first of Nova's rules that fails, in Nova's words,
    and what the APIs cannot show (Not Checked). Give the controller's
    nova.conf (--controller-conf) when its nova-conductor has [workarounds]
    skip_hypervisor_version_check_on_lm. Exit status 0 when some node
    takes the server, 1 when none does.
    """

    _epilog = """\
Examples:

Every node the server could go to::

    openstack mdev migration check vm-1

One target, its and the source's nova.conf checked too::

    openstack mdev migration check vm-1 --target gpu2 --compute-conf \\
        gpu1=/etc/nova/gpu1.conf --compute-conf gpu2=/etc/nova/gpu2.conf

With the settings of the controller's nova-conductor::

    openstack mdev migration check vm-1 --controller-conf \\
        /etc/nova/nova.conf
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        parser.add_argument(
            'server', metavar='<server>',
            help='Server name or ID (any project).')
        options.target(parser)
        options.nova_confs(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        inputs = _inputs(parsed_args)
        mdev = common.client(self.app)
        _, verdicts = migration.check(
            mdev.placement, mdev.compute, parsed_args.server,
            tuple(parsed_args.target), inputs, parsed_args.trait_prefix)
        rows = [(v.node, v.live, v.cold,
                 format_columns.ListColumn(list(v.devices)), v.reason,
                 format_columns.ListColumn(list(v.not_checked)))
                for v in verdicts]
        return CHECK_COLUMNS, common.Rows(rows, common.verdict(
            any(v.fits for v in verdicts)))


class PlanMigration(common.Lister):
    """Plan moving every server with vGPUs off a compute node.

    Answers "where does each server of this host go?": one row per server
    holding mdevs (or PCI-in-Placement devices) on --host, with the node
    it goes to, live or cold, and the exact 'openstack server migrate'
    command with what it leans on (Reason: warnings; Not Checked: what
    the APIs cannot show, as 'migration check' says), or why it cannot
    move and the smallest change that would let it. The plan is joint,
    biggest first; it never migrates. Exit status 1 when a server has no
    target.
    """

    _epilog = """\
Examples:

Every server of gpu1, live where Nova allows it, else cold::

    openstack mdev migration plan --host gpu1

Live migrations only, onto two nodes, the commands alone::

    openstack mdev migration plan --host gpu1 --live --target gpu2 \\
        --target gpu3 -f value -c Command
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        options.host(parser, several=False)
        kind = parser.add_mutually_exclusive_group()
        kind.add_argument(
            '--live', action='store_true',
            help='Plan live migrations only (by default a server that '
                 'cannot move live moves cold).')
        kind.add_argument(
            '--cold', action='store_true',
            help='Plan cold migrations only.')
        options.target(parser)
        options.nova_confs(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        if not parsed_args.host:
            raise exceptions.CommandError(
                'Name the compute node to drain with --host.')
        inputs = _inputs(parsed_args)
        kinds = ((migration_rules.LIVE,) if parsed_args.live else
                 (migration_rules.COLD,) if parsed_args.cold else
                 (migration_rules.LIVE, migration_rules.COLD))
        mdev = common.client(self.app)
        moves = migration.plan(
            mdev.placement, mdev.compute, parsed_args.host, kinds,
            tuple(dict.fromkeys(parsed_args.target)), inputs,
            parsed_args.trait_prefix)
        rows = []
        for move in moves:
            rows.append((
                move.server.id, move.server.name, move.node or '',
                move.kind or '',
                migration_plan.command(move.kind, move.service_host,
                                       move.server.id)
                if move.node else '', move.reason,
                format_columns.ListColumn(list(move.not_checked))))
        return PLAN_COLUMNS, common.Rows(rows, common.verdict(
            all(m.node is not None for m in moves)))
