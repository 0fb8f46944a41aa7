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

import argparse
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
    """Check a compute node's nova.conf for mdevs and PCI devices.

    Answers "will nova-compute start with these files, and do what they
    say?": nova.conf files (and nova-compute's provider config files,
    --provider-config) are read as nova-compute reads them and judged by
    Nova's rules; one row per finding, error where nova-compute refuses to
    start, warning where it silently does something else. --sysfs checks
    against the node's devices, --host against what Placement has for the
    node; a last result row says what was checked, and --long adds the
    effective type and class of each device. Exit status 1 on any error.
    """

    _epilog = """\
Examples:

On the compute node, before restarting nova-compute::

    openstack mdev config check /etc/nova/nova.conf --sysfs /sys --long

What will change in Placement when it restarts::

    openstack mdev config check /etc/nova/nova.conf --host compute1
"""

    # Only --host talks to the cloud: a compute node can check its files
    # with no credentials at all.
    auth_required = False

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        parser.add_argument(
            'files', metavar='<file>', nargs='*',
            help='nova.conf file, or a directory read like --config-dir. '
                 'Give every file nova-compute reads, in its order: later '
                 "values win, an option in none is judged at Nova's "
                 'default.')
        options.host(parser, several=False)
        options.provider_config(parser)
        parser.add_argument(
            '--sysfs', metavar='<root>',
            help="Root of the compute node's sysfs (/sys there): also check "
                 'the file against the devices and types the kernel '
                 "offers and, with --host, the node's vGPUs against those "
                 'Placement holds in use there.')
        options.trait_prefix(parser)
        options.long(parser)
        return parser

    def take_action(self, parsed_args):
        common.check(trait_logic.validate_prefix, parsed_args.trait_prefix)
        if not parsed_args.files and not parsed_args.provider_config:
            raise exceptions.CommandError(
                'The following arguments are required: <file> (nova.conf '
                'files) or --provider-config, or both.')
        if parsed_args.sysfs and not os.path.isdir(parsed_args.sysfs):
            raise exceptions.CommandError(
                '--sysfs %s is not a directory; give the root of the '
                "node's sysfs, /sys on the compute node." % parsed_args.sysfs)
        try:
            checked = config.check(
                parsed_args.files, parsed_args.sysfs, parsed_args.host,
                parsed_args.trait_prefix, clients=self._clients,
                provider_configs=parsed_args.provider_config)
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
