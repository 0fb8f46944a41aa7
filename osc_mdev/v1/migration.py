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

from osc_lib.cli import format_columns
from osc_lib.command import command
from osc_lib import exceptions

from osc_mdev.domain import migration as domain
from osc_mdev.domain import traits as trait_logic
from osc_mdev.usecases import migration
from osc_mdev.usecases import nova_conf
from osc_mdev.v1 import common
from osc_mdev.v1 import options

CHECK_COLUMNS = ('Host', 'Live', 'Cold', 'Devices', 'Reason', 'Not Checked')
PLAN_COLUMNS = ('Server', 'Name', 'Target Host', 'Kind', 'Command',
                'Reason')


def _inputs(parsed_args):
    """The --compute-conf files (as domain.Conf) and the controller's
    aliases, read and judged before any request.
    """
    common.check(trait_logic.validate_prefix, parsed_args.trait_prefix)
    confs = migration.read_confs(parsed_args.compute_conf,
                                 parsed_args.trait_prefix)
    aliases = None
    if parsed_args.controller_conf:
        aliases = nova_conf.controller_aliases(parsed_args.controller_conf)
    return confs, aliases


def _shared(parser):
    options.compute_conf(parser)
    options.controller_conf(parser)
    options.trait_prefix(parser)


class CheckMigration(command.Lister):
    """Where a server with mdevs can be live- or cold-migrated, and why not.

    One row per compute node that could take the server (one with devices
    of the classes it asks for), or only --host:
    Live and Cold say whether Nova would move it there now, Devices the
    node's devices of the server's mdev type with room for it (the one
    Placement would give first), Reason the first of Nova's rules that
    fails, in Nova's words: the server's state, the compute services
    (disabled, down), Placement's answer for the server's own request in
    that node's tree (room on devices and root), a hypervisor (QEMU)
    older than the source's or than mdev live migration needs (8.1.0), a
    type not enabled there, or devices of another type Placement would
    give ('not fully mapped'; a cold migration would change the server's
    vGPU type, which is a no here). Not Checked lists what the answer
    leans on but the APIs cannot show: libvirt's own version and the
    kernel, device types without a type trait or --compute-conf file,
    and for NVIDIA types the [libvirt] live_migration_downtime settings
    (checked in the --compute-conf files given). The server's request is
    its own copy of its flavor, read as Nova reads it; device types come
    from type traits (as 'mdev trait set --from-nova-conf' names them) or
    the --compute-conf files. Exit status 0 when some node (or --host)
    takes the server, live or cold; 1 otherwise.
    """

    def get_parser(self, prog_name):
        parser = common.one_line_errors(super().get_parser(prog_name))
        parser.add_argument(
            'server', metavar='<server>',
            help='Server name or ID (any project).')
        options.host(parser, several=False)
        _shared(parser)
        return parser

    def take_action(self, parsed_args):
        confs, aliases = _inputs(parsed_args)
        mdev = self.app.client_manager.mdev
        _, verdicts = migration.check(
            mdev.placement, mdev.compute, parsed_args.server,
            parsed_args.host, confs, aliases, parsed_args.trait_prefix)
        self.fits = any(v.fits for v in verdicts)
        rows = [(v.node, v.live, v.cold,
                 format_columns.ListColumn(v.devices), v.reason,
                 format_columns.ListColumn(v.not_checked))
                for v in verdicts]
        return CHECK_COLUMNS, rows

    def run(self, parsed_args):
        self.fits = False
        status = super().run(parsed_args)
        return status or (0 if self.fits else 1)


class PlanMigration(command.Lister):
    """Plan moving every server with devices off a compute node.

    One row per server holding mdevs (or PCI-in-Placement devices) on
    --host: the node it goes to, live or cold, the exact 'openstack
    server migrate' command (the target by its service host, as that
    command takes it; a cold migration is confirmed after it), or why it
    cannot move and what would make room. The plan is joint: biggest
    requests first, each on the node where it fits best, and the room it
    takes is not offered to the next. Each move is judged as 'mdev
    migration check' judges it; nodes where the server's flavor lets
    Placement pick a device of another type are not used, whatever
    Placement lists first today. It plans; it never migrates. Exit status
    1 when a server has no target.
    """

    def get_parser(self, prog_name):
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
        parser.add_argument(
            '--target', metavar='<host>', action='append', default=[],
            help='A compute node the servers may go to, named as --host '
                 'names them; repeat for several (default: every other '
                 'node).')
        _shared(parser)
        return parser

    def take_action(self, parsed_args):
        if not parsed_args.host:
            raise exceptions.CommandError(
                'Name the compute node to drain with --host.')
        confs, aliases = _inputs(parsed_args)
        kinds = ((domain.LIVE,) if parsed_args.live else
                 (domain.COLD,) if parsed_args.cold else
                 (domain.LIVE, domain.COLD))
        mdev = self.app.client_manager.mdev
        moves = migration.plan(
            mdev.placement, mdev.compute, parsed_args.host, kinds,
            tuple(dict.fromkeys(parsed_args.target)), confs, aliases,
            parsed_args.trait_prefix)
        self.stuck = sum(1 for m in moves if m.node is None)
        rows = []
        for move in moves:
            rows.append((
                move.server.id, move.server.name, move.node or '',
                move.kind or '',
                domain.command(move.kind, move.service_host, move.server.id)
                if move.node else '', move.reason))
        return PLAN_COLUMNS, rows

    def run(self, parsed_args):
        self.stuck = 0
        status = super().run(parsed_args)
        return status or (1 if self.stuck else 0)
