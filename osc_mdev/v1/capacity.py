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

import argparse
import dataclasses
import logging
import typing

from osc_lib.cli import format_columns
from osc_lib import exceptions

from osc_mdev import api
from osc_mdev.base import words
from osc_mdev.features.capacity import reads
from osc_mdev.features import nova_conf
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.scheduler import utils as rr
from osc_mdev.v1 import common
from osc_mdev.v1 import options

COLUMNS = ('Host', 'Fits', 'Devices', 'Free')
LONG_COLUMNS = COLUMNS + ('Limit',)
COUNT_COLUMNS = ('One Request', 'Verdict')
EXPLAIN_COLUMNS = ('Constraint', 'Devices Ruled Out', 'Hosts Ruled Out',
                   'Devices Left', 'Hosts Left')
# The explainer's Step attributes behind EXPLAIN_COLUMNS.
STEP_FIELDS = ('Constraint', 'Devices Out', 'Hosts Out', 'Devices Left',
               'Hosts Left')
TOTAL = 'Total'

LOG = logging.getLogger(__name__)


class Counting(typing.NamedTuple):
    """What a capacity command counts: each flavor (name or ID, no
    request) or the one bare request (no flavor), and the controller's
    PciConfig (None: not given).
    """

    wanted: list[tuple[str | None, rr.Request | None]]
    pci_config: pci_rules.PciConfig | None


class Capacity(common.Lister):
    """Show how many more servers of a flavor fit, where, and why none does.

    Answers "how many more can I boot?" and "why NoValidHost?": one row per
    host with the servers that still fit and the devices they would use,
    counted from the flavor's request as Nova builds it, Fits 0 where none
    fits. --explain lists instead each constraint with the devices and
    hosts it rules out, and the smallest change that lets one server fit.
    --count N says whether one 'server create --min N --max N' is placed.
    The columns depend on the options only, never on what the cloud holds.
    """

    _epilog = """\
Examples:

Room left for a flavor, with what limits each host::

    openstack mdev capacity --flavor vgpu.nvidia-12 --long

Why a flavor gets NoValidHost::

    openstack mdev capacity --flavor vgpu.gold --explain

Room for a bare request of two vGPUs with a trait::

    openstack mdev capacity --resource-class VGPU --amount 2 \\
        --require-trait CUSTOM_NVIDIA_12
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        options.flavors(parser)
        options.resource_class(parser)
        options.amount_and_spread(parser)
        options.required_and_forbidden_traits(parser)
        options.host(parser)
        options.long(parser)
        parser.add_argument(
            '--count', metavar='<count>', type=options.at_least_one,
            help='Say whether one request for this many servers (server '
                 'create --min N --max N) is placed.')
        parser.add_argument(
            '--explain', action='store_true',
            help='List the constraints and what each rules out, and the '
                 'smallest change that lets one server fit, instead of the '
                 'hosts.')
        return parser

    @staticmethod
    def _requests(parsed_args: argparse.Namespace) -> Counting:
        bare = parsed_args.resource_class is not None
        if bare and parsed_args.flavor:
            raise exceptions.CommandError(
                'Give either --flavor or --resource-class, not both.')
        if not bare and not parsed_args.flavor:
            raise exceptions.CommandError(
                'Give --flavor <flavor> or --resource-class <class> to say '
                'what to count.')
        if not bare and (parsed_args.require_trait or
                         parsed_args.forbid_trait or
                         parsed_args.spread or parsed_args.amount != 1):
            raise exceptions.CommandError(
                '--amount, --spread, --require-trait and --forbid-trait '
                'describe a bare request; use them with --resource-class, '
                'not --flavor.')
        if bare and parsed_args.controller_conf:
            raise exceptions.CommandError(
                '--controller-conf gives the PCI aliases of a flavor; use it '
                'with '
                '--flavor, not --resource-class.')
        pci_config = None
        if parsed_args.controller_conf:
            pci_config = nova_conf.controller_pci(
                parsed_args.controller_conf)
        if bare:
            return Counting([(None, common.bare_request(
                parsed_args, parsed_args.require_trait))], pci_config)
        return Counting([(name, None) for name in parsed_args.flavor],
                        pci_config)

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        counting = self._requests(parsed_args)
        mdev = common.client(self.app)
        several = len(counting.wanted) > 1
        rows: list[tuple[object, ...]] = []
        for flavor, request in counting.wanted:
            found = _one(mdev, parsed_args, flavor, request,
                         counting.pci_config)
            if several:
                found = [(flavor,) + tuple(r) for r in found]
            rows.extend(found)
        return columns(parsed_args), common.Rows(rows)


def _one(mdev: api.MdevClient, parsed_args: argparse.Namespace,
         flavor: str | None, request: rr.Request | None,
         pci_config: pci_rules.PciConfig | None) -> list:
    """The rows of one flavor or bare request; the summary rows (the
    Total row, the servers that fit and the smallest change of an
    explanation, the verdict on --count) in the table format only.
    """
    summary = parsed_args.formatter == 'table'
    answer = reads.count(
        mdev.placement, mdev.compute, flavor=flavor, request=request,
        hosts=tuple(parsed_args.host), pci_config=pci_config,
        explain=parsed_args.explain, count=parsed_args.count)
    if parsed_args.explain:
        rows = [common.properties(s, STEP_FIELDS)
                for s in answer.steps or ()]
        if summary:
            fix = answer.fix or ('none needed' if answer.total else
                                 'none found on the devices')
            rows.append(('Servers that fit: %d' % answer.total,
                         '', '', '', ''))
            rows.append(('Smallest change: %s' % fix, '', '', '', ''))
        return rows
    if summary and not answer.total:
        LOG.warning(
            'Note: no server of %s fits; run the same command with '
            '--explain to see which constraint rules out which hosts.',
            'flavor %s' % flavor if flavor else 'this request')
    cols = LONG_COLUMNS if parsed_args.long else COLUMNS
    one = answer.one_request
    rows = []
    for h in answer.per_host:
        named = dataclasses.replace(h, devices=tuple(
            '%s:%s' % (h.host, d) for d in h.devices))
        row = common.properties(
            named, cols, formatters={'Devices': format_columns.ListColumn})
        if one is not None:
            row += (one.per_host.get(h.host, 0),) + (
                ('',) if summary else ())
        rows.append(row)
    if summary:
        total = {'Host': TOTAL, 'Fits': answer.total,
                 'Devices': format_columns.ListColumn([words.count(
                     sum(len(h.devices) for h in answer.per_host),
                     'device')]),
                 'Free': sum(h.free for h in answer.per_host),
                 'Limit': ''}
        if one is not None:
            total.update({'One Request': one.placed,
                          'Verdict': one.verdict})
        rows.append(tuple(total.get(c, '') for c in
                          _host_columns(parsed_args)))
    return rows


def _host_columns(parsed_args: argparse.Namespace) -> tuple[str, ...]:
    """The columns of the hosts view: --long's Limit, --count's One
    Request and, in the table, its Verdict.
    """
    cols = LONG_COLUMNS if parsed_args.long else COLUMNS
    if parsed_args.count is not None:
        cols += (COUNT_COLUMNS if parsed_args.formatter == 'table'
                 else COUNT_COLUMNS[:1])
    return cols


def columns(parsed_args: argparse.Namespace) -> tuple[str, ...]:
    """The columns, from the options alone: the constraints with
    --explain, else the hosts; Flavor first when --flavor is repeated.
    """
    cols = EXPLAIN_COLUMNS if parsed_args.explain else _host_columns(
        parsed_args)
    if len(parsed_args.flavor or ()) > 1:
        cols = ('Flavor',) + cols
    return cols
