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

"""``openstack mdev capacity``."""


from osc_lib.cli import format_columns
from osc_lib.command import command
from osc_lib import exceptions

from osc_mdev.usecases import capacity as reads
from osc_mdev.usecases import nova_conf
from osc_mdev.v1 import common
from osc_mdev.v1 import options

COLUMNS = ('Host', 'Fits', 'Devices', 'Free')
LONG_COLUMNS = COLUMNS + ('Limit',)
COUNT_COLUMNS = ('One Request', 'Verdict')
EXPLAIN_COLUMNS = ('Constraint', 'Devices Ruled Out', 'Hosts Ruled Out',
                   'Devices Left', 'Hosts Left')
TOTAL = 'Total'


class Capacity(command.Lister):
    """Show how many more servers fit, where, and why a request does not.

    The request is a flavor's, built from its extra specs as Nova builds
    it (unnumbered and numbered groups, group_policy, trait[N]: required
    and forbidden, the flavor's VCPU, MEMORY_MB and DISK_GB on the
    compute node unless resources:<CLASS> extra specs override them),
    with the root traits of Nova's mandatory prefilters (OWNER_NOVA once
    every compute node reports it, not COMPUTE_STATUS_DISABLED, and no
    disabled nova-compute service); or a bare mdev request given with
    --resource-class (with --amount, --spread, --trait and
    --forbid-trait; it asks nothing of the compute node: no VCPU, RAM or
    disk). Aggregates, availability zones, image properties and the
    scheduler's host filters are not considered.

    A flavor with pci_passthrough:alias (PCI-in-Placement devices, such
    as SR-IOV vGPUs) needs --controller-conf, the controller's nova.conf:
    with [filter_scheduler] pci_in_placement Nova asks one numbered group per
    device of the alias' resource class and traits (and OWNER_NOVA), next
    to the flavor's own groups, with group_policy=none unless the flavor
    sets one.

    With several --flavor, their rows follow one another, with a Flavor
    column (and no automatic --explain).

    One row per host (Fits: more servers that fit now; Devices: the
    devices they would use; Free: free mdevs of the request's class on
    the devices that match it) and a Total row; --long adds Limit, what
    stops one more server on each host (the mdev class, VCPU, MEMORY_MB
    or DISK_GB of the compute node, or a constraint).

    --explain (automatic when nothing fits, for one flavor) lists
    instead, per constraint in Placement's order, how many devices and
    hosts it rules out, then the servers that fit and the smallest change
    that lets one more fit.

    --count N answers whether one 'server create --min N --max N' would
    be placed: Nova's scheduler claims only each host's first allocation
    candidate (bug 1874664), so one request can place fewer servers than
    fit one by one. One Request shows what each host takes in one
    request; the Total row's Verdict says whether N fit and, if not, the
    request sizes that would.
    """

    def get_parser(self, prog_name):
        parser = common.one_line_errors(super().get_parser(prog_name))
        options.flavor(parser)
        options.controller_conf(parser)
        options.deprecated(parser, '--nova-conf', '--controller-conf',
                           'controller_conf')
        options.resource_class(parser)
        options.amount_and_spread(parser)
        options.trait(parser)
        options.forbid_trait(parser)
        options.host(parser)
        options.long(parser)
        parser.add_argument(
            '--count', metavar='<count>', type=int,
            help='Say whether one request for this many servers (server '
                 'create --min N --max N) would be placed, or how many it '
                 'places at least and at most when that depends on the '
                 'order Placement lists PCI candidates in.')
        parser.add_argument(
            '--explain', action='store_true',
            help='List the constraints and what each rules out instead '
                 'of the hosts, ending with the smallest change that lets '
                 'one more server fit (automatic when nothing fits).')
        return parser

    def _requests(self, parsed_args):
        bare = parsed_args.resource_class is not None
        if bare and parsed_args.flavor:
            raise exceptions.CommandError(
                'Give either --flavor or --resource-class, not both.')
        if not bare and not parsed_args.flavor:
            raise exceptions.CommandError(
                'Give --flavor <flavor> or --resource-class <class> to say '
                'what to count.')
        if not bare and (parsed_args.trait or parsed_args.forbid_trait or
                         parsed_args.spread or parsed_args.amount != 1):
            raise exceptions.CommandError(
                '--amount, --spread, --trait and --forbid-trait describe a '
                'bare request; use them with --resource-class, not '
                '--flavor.')
        if parsed_args.count is not None and parsed_args.count < 1:
            raise exceptions.CommandError(
                '--count must be at least 1, not %d.' % parsed_args.count)
        if bare and parsed_args.controller_conf:
            raise exceptions.CommandError(
                '--controller-conf gives the PCI aliases of a flavor; use it '
                'with '
                '--flavor, not --resource-class.')
        self._aliases = None
        if parsed_args.controller_conf:
            self._aliases = nova_conf.controller_aliases(
                parsed_args.controller_conf)
        if bare:
            return [(None, common.bare_request(
                parsed_args, common.trait_names(parsed_args.trait)))]
        return [(name, None) for name in parsed_args.flavor]

    def take_action(self, parsed_args):
        wanted = self._requests(parsed_args)
        mdev = self.app.client_manager.mdev
        several = len(wanted) > 1
        columns, rows = None, []
        for flavor, request in wanted:
            # Several flavors share one table: the explanation is shown
            # when asked for, never chosen for one flavor alone.
            cols, found = self._one(mdev, parsed_args, flavor, request,
                                    auto_explain=not several)
            if several:
                cols = ('Flavor',) + cols
                found = [(flavor,) + tuple(r) for r in found]
            columns = cols
            rows.extend(found)
        return columns, rows

    def _one(self, mdev, parsed_args, flavor, request, auto_explain=True):
        answer = reads.count(
            mdev.placement, mdev.compute, flavor=flavor, request=request,
            hosts=tuple(parsed_args.host), aliases=self._aliases,
            explain=parsed_args.explain, auto_explain=auto_explain,
            count=parsed_args.count)
        if answer.steps is not None:
            rows = [(s.constraint, s.devices_out, s.hosts_out,
                     s.devices_left, s.hosts_left) for s in answer.steps]
            rows.append(('Servers that fit: %d' % answer.total,
                         '', '', '', ''))
            fix = answer.fix or ('none needed' if answer.total else
                                 'none found on the devices')
            rows.append(('Smallest change: %s' % fix, '', '', '', ''))
            return EXPLAIN_COLUMNS, rows

        cols = LONG_COLUMNS if parsed_args.long else COLUMNS
        rows = []
        for h in answer.per_host:
            values = {'Host': h.host, 'Fits': h.fits,
                      'Devices': format_columns.ListColumn(
                          ['%s:%s' % (h.host, d) for d in h.devices]),
                      'Free': h.free, 'Limit': h.limit}
            rows.append([values[c] for c in cols])
        totals = {'Host': TOTAL, 'Fits': answer.total,
                  'Devices': format_columns.ListColumn(
                      [_devices_text(sum(len(h.devices)
                                         for h in answer.per_host))]),
                  'Free': sum(h.free for h in answer.per_host), 'Limit': ''}
        rows.append([totals[c] for c in cols])
        if answer.one_request is not None:
            one = answer.one_request
            cols = cols + COUNT_COLUMNS
            for row in rows[:-1]:
                row.extend([one.per_host.get(row[0], 0), ''])
            rows[-1].extend([one.placed, one.verdict])
        return cols, [tuple(r) for r in rows]


def _devices_text(n):
    return '%d device%s' % (n, '' if n == 1 else 's')
