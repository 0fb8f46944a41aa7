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

"""``openstack mdev config check``."""

import os

from osc_lib.command import command
from osc_lib import exceptions

from osc_mdev import api
from osc_mdev.domain import configreport
from osc_mdev.domain import novaconf
from osc_mdev.domain import traits as trait_logic
from osc_mdev.usecases import config
from osc_mdev.v1 import common
from osc_mdev.v1 import options


class CheckConfig(command.Lister):
    """Check a compute node's mdev configuration before nova-compute does.

    Reads nova.conf files as nova-compute does (oslo.config; several files
    in order, the later winning; a directory as --config-dir) and applies
    Nova's rules: one row per finding, 'error' where nova-compute will
    refuse to start, 'warning' where Nova will silently do something other
    than what is written (a section or option name Nova does not read,
    with the closest valid one; an address that never matches), 'info'
    otherwise, and a last 'result' row saying what was checked and
    whether anything is wrong. [pci] device_spec, alias and
    report_in_placement are checked too. With --sysfs, the file is
    compared with the node's devices; with --host, with what Placement
    has for the node (what changes when nova-compute restarts). --long
    adds 'effective' rows, with Device, Mdev Type, Resource Class and
    Traits columns: each device with the type and resource class Nova
    will give it, each PCI device spec, PCI provider (with --sysfs) and
    alias request. Exit status 1 on any error.
    """

    # Only --host talks to the cloud: a compute node can check its files
    # with no credentials at all.
    auth_required = False

    def get_parser(self, prog_name):
        parser = common.one_line_errors(super().get_parser(prog_name))
        parser.add_argument(
            'files', metavar='<file>', nargs='+',
            help='nova.conf file, or a directory whose .conf files are read '
                 'in sorted order like --config-dir. Give them in the order '
                 'nova-compute gets them: later values win.')
        options.host(parser, several=False)
        parser.add_argument(
            '--sysfs', metavar='<root>',
            help='Root of the node\'s sysfs (/sys on the compute node): '
                 'check that each address is an mdev parent offering its '
                 'type, max_instances against available_instances, SR-IOV '
                 'virtual functions, and virtual parents such as '
                 'mtty_mtty.')
        options.trait_prefix(parser)
        options.long(parser)
        return parser

    def take_action(self, parsed_args):
        common.check(trait_logic.validate_prefix, parsed_args.trait_prefix)
        if parsed_args.sysfs and not os.path.isdir(parsed_args.sysfs):
            raise exceptions.CommandError(
                '--sysfs %s is not a directory; give the root of the '
                "node's sysfs, /sys on the compute node." % parsed_args.sysfs)
        try:
            checked = config.check(
                parsed_args.files, parsed_args.sysfs, parsed_args.host,
                parsed_args.trait_prefix, clients=self._clients)
        except novaconf.NovaConfError as exc:
            raise exceptions.CommandError('%s.' % exc) from exc
        self.errors = checked.errors
        return configreport.report(checked.findings, checked.effects,
                                   checked.files, checked.scope,
                                   parsed_args.long)

    def _clients(self):
        mdev = api.authenticated(self.app).mdev
        return mdev.placement, mdev.compute

    def run(self, parsed_args):
        self.errors = []
        status = super().run(parsed_args)
        if self.errors:
            raise exceptions.CommandError(
                '%d error(s): nova-compute will refuse to start with this '
                'configuration.' % len(self.errors))
        return status
