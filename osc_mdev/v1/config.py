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

import json
import os

from osc_lib.command import command
from osc_lib import exceptions

from osc_mdev import api
from osc_mdev.domain import configcheck
from osc_mdev.domain import novaconf
from osc_mdev.domain import traits as trait_logic
from osc_mdev.usecases import config
from osc_mdev.v1 import common
from osc_mdev.v1 import options

COLUMNS = ('Severity', 'Where', 'Message')
DEVICE_COLUMNS = ('Device', 'Mdev Type', 'Resource Class', 'Why')
# The [pci] parts of the effective result, each shown when it has rows.
PCI_TABLES = (
    ('PCI Device Specs', configcheck.PCI_SPEC_COLUMNS),
    ('PCI Providers', configcheck.PCI_PROVIDER_COLUMNS),
    ('PCI Aliases', configcheck.PCI_ALIAS_COLUMNS),
)


class CheckConfig(command.Lister):
    """Check a compute node's mdev configuration before nova-compute does.

    Reads nova.conf files as nova-compute does (oslo.config; several files
    in order, the later winning; a directory as --config-dir) and applies
    Nova's rules: one row per finding, 'error' where nova-compute will
    refuse to start, 'warning' where Nova will silently do something other
    than what is written. [pci] device_spec, alias and report_in_placement
    (PCI devices in Placement) are checked too: JSON, the resource classes
    and traits Nova makes of them, aliases no device spec serves, and with
    --sysfs virtual functions of one physical function that Nova refuses.
    With --sysfs, the file is compared with the node's devices; with
    --host, with what Placement has for the node (what changes when
    nova-compute restarts): devices the file assigns but Placement lacks,
    resource class changes, devices the file no longer covers (with the
    servers on them) and type traits (named as --trait-prefix says) that
    will be wrong after a restart; for PCI devices in Placement, turning
    report_in_placement off (fatal) and, with --sysfs, providers that
    change class, lose hand-set traits or go. --long adds the effective
    result: each device with the type and resource class Nova will give
    it, and each PCI device spec, PCI provider (with --sysfs) and alias
    request (always part of -f json and -f yaml). Exit status 1 on any
    error. --provider-config checks nova-compute's provider config files
    (with or without nova.conf files) as nova-compute reads them, and with
    --host against the node's providers in Placement: entries naming no
    provider of the node, devices whose custom traits no file keeps.
    """

    # Only --host talks to the cloud: a compute node can check its files
    # with no credentials at all.
    auth_required = False

    def get_parser(self, prog_name):
        parser = common.one_line_errors(super().get_parser(prog_name))
        parser.add_argument(
            'files', metavar='<file>', nargs='*',
            help='nova.conf file, or a directory whose .conf files are read '
                 'in sorted order like --config-dir. Give them in the order '
                 'nova-compute gets them: later values win.')
        options.host(parser, several=False)
        options.provider_config(parser)
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
        self.devices = checked.devices
        self.pci = checked.pci
        return COLUMNS, [(f.severity, f.where, f.message)
                         for f in checked.findings]

    def _clients(self):
        mdev = api.authenticated(self.app).mdev
        return mdev.placement, mdev.compute

    def produce_output(self, parsed_args, column_names, data):
        data = list(data)
        if parsed_args.formatter in ('json', 'yaml'):
            doc = {'Findings': [dict(zip(column_names, row))
                                for row in data],
                   'Devices': [dict(zip(DEVICE_COLUMNS, row))
                               for row in self.devices]}
            for title, columns in PCI_TABLES:
                if title in self.pci:
                    doc[title] = [dict(zip(columns, row))
                                  for row in self.pci[title]]
            if parsed_args.formatter == 'json':
                self.app.stdout.write(json.dumps(doc, indent=2) + '\n')
            else:
                import yaml
                self.app.stdout.write(yaml.safe_dump(doc, sort_keys=False))
            return 0
        status = super().produce_output(parsed_args, column_names, data)
        if parsed_args.long:
            parsed_args.columns = []
            tables = []
            if self.devices or not self.pci:
                tables.append((None, DEVICE_COLUMNS, self.devices))
            tables += [(title, columns, self.pci[title])
                       for title, columns in PCI_TABLES
                       if self.pci.get(title)]
            printed = bool(data)
            for title, columns, rows in tables:
                if printed:
                    self.app.stdout.write('\n')
                if title:
                    self.app.stdout.write('%s:\n' % title)
                super().produce_output(parsed_args, columns, rows)
                printed = True
        return status

    def run(self, parsed_args):
        self.errors, self.devices, self.pci = [], [], {}
        status = super().run(parsed_args)
        if self.errors:
            raise exceptions.CommandError(
                '%d error(s): nova-compute will refuse to start with this '
                'configuration.' % len(self.errors))
        return status
