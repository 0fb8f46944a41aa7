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

"""``openstack mdev trait set`` / ``unset`` / ``export``."""

import logging
import sys
import threading

from osc_lib.cli import format_columns
from osc_lib.command import command
from osc_lib import exceptions

from osc_mdev.domain import traits as trait_logic
from osc_mdev.usecases import nova_conf
from osc_mdev.usecases import provider as devices
from osc_mdev.usecases import trait as traits
from osc_mdev.v1 import common
from osc_mdev.v1 import options

LOG = logging.getLogger(__name__)

COLUMNS = ('Device', 'Host', 'Traits', 'Result')
DRY_RUN_COLUMNS = ('Device', 'Host', 'Current Traits', 'Traits', 'Result')
EXPORT_COLUMNS = ('Host', 'File', 'Devices', 'Traits', 'Result')
PROGRESS_THRESHOLD = 20


class _TraitCommand(command.Lister):
    """Shared selection, validation and bulk update of trait commands."""

    def get_parser(self, prog_name):
        parser = common.one_line_errors(super().get_parser(prog_name))
        parser.add_argument(
            'device', metavar='<device>', nargs='*',
            help='Device to change: provider UUID, provider name or '
                 'HOST:PCI_ADDRESS, as in "mdev provider show"; repeat for '
                 'several (PCI-in-Placement devices are refused).')
        options.host(parser)
        options.resource_class(parser)
        parser.add_argument(
            '--all', action='store_true', dest='all_devices',
            help='Every mdev device in the cloud; not with names, --host '
                 'or --resource-class.')
        options.export_dir(parser)
        options.dry_run(parser)
        return parser

    def _selected(self, placement, parsed_args, resource_class):
        if not (parsed_args.device or parsed_args.host or resource_class
                or parsed_args.all_devices):
            raise exceptions.CommandError(
                'Name the devices to change, or select them with --host, '
                '--resource-class or --all.')
        return devices.select_devices(
            placement, references=parsed_args.device,
            hosts=tuple(parsed_args.host), resource_class=resource_class,
            all_devices=parsed_args.all_devices)

    def _write(self, placement, plans, wanted, dry_run, export_dir=None):
        """Check the traits, create custom ones, update every device (and
        with ``export_dir`` the provider config files of their hosts).
        """
        traits.check_exist(placement, wanted)
        if export_dir:
            traits.check_export_dir(export_dir, [p.device for p in plans])
        if not dry_run:
            traits.create_custom(placement, wanted)
        progress = _Progress(len(plans))
        outcomes = traits.apply(placement, plans, dry_run, progress.tick)
        progress.done()
        self.failed = [o for o in outcomes if o.failed]
        self.total = len(outcomes)
        if export_dir and not any(o.interrupted for o in outcomes):
            self.files = traits.export_changed(placement, export_dir,
                                               outcomes, dry_run)
            for written in self.files:
                LOG.warning('Provider config %s: %s (%d devices with '
                            'traits).', written.path, written.result,
                            written.file.devices)
        rows = []
        for o in outcomes:
            after = format_columns.ListColumn(sorted(o.after or ()))
            if dry_run:
                before = format_columns.ListColumn(sorted(o.before or ()))
                rows.append((o.device.device, o.device.host, before, after,
                             o.result))
            else:
                rows.append((o.device.device, o.device.host, after,
                             o.result))
        return (DRY_RUN_COLUMNS if dry_run else COLUMNS), rows

    def run(self, parsed_args):
        self.failed, self.files = [], []
        status = super().run(parsed_args)
        stopped = [o for o in self.failed if o.interrupted]
        if stopped:
            LOG.warning(
                'Interrupted: %d of %d devices were not changed (Result '
                '"not changed: interrupted"); every other device is done as '
                'shown. Run the command again to finish.',
                len(stopped), self.total)
            raise KeyboardInterrupt()
        if self.failed:
            raise exceptions.CommandError(
                '%d of the devices could not be changed; see the Result '
                'column.' % len(self.failed))
        unwritten = [f for f in self.files if f.failed]
        if unwritten:
            raise exceptions.CommandError(
                'The traits are set, but %d provider config file(s) could not '
                'be written (%s); run the command again.'
                % (len(unwritten), unwritten[0].result))
        return status


class SetTrait(_TraitCommand):
    """Add traits to GPUs (mdev devices), keeping the traits they have.

    Answers the tagging job that 'resource provider trait set' does
    badly: every trait already on a device stays (Nova's OWNER_NOVA
    included), custom traits are created, and a device another writer
    changed meanwhile is re-read and written again. --from-nova-conf tags
    each GPU of a host with the trait of the type its nova.conf gives it;
    --export-dir keeps the hosts' provider config files in step.
    """

    _epilog = """\
Examples:

Tag every GPU of a host from its nova.conf, shown first::

    openstack mdev trait set --from-nova-conf /etc/nova/nova.conf --host \\
        compute1 --dry-run

Tag one GPU by hand::

    openstack mdev trait set --trait CUSTOM_NVIDIA_12 compute1:0000:84:01.0
"""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        options.trait(parser)
        parser.add_argument(
            '--replace', action='store_true',
            help='Make the named traits the only ones, keeping OWNER_* '
                 'traits unless --force.')
        options.force(parser)
        parser.add_argument(
            '--from-nova-conf', metavar='<file>',
            help='Tag each device of --host with the trait of the mdev type '
                 'this nova.conf gives it, read as nova-compute reads it. '
                 "Traits of the file's other types are removed.")
        options.trait_prefix(parser)
        return parser

    def take_action(self, parsed_args):
        add = common.trait_names(parsed_args.trait)
        resource_class = common.resource_class(parsed_args.resource_class)
        if parsed_args.force and not parsed_args.replace:
            raise exceptions.CommandError(
                '--force only has a meaning with --replace.')
        conf = None
        if parsed_args.from_nova_conf:
            common.check(trait_logic.validate_prefix, parsed_args.trait_prefix)
            if len(parsed_args.host) != 1:
                raise exceptions.CommandError(
                    '--from-nova-conf describes one compute host: give '
                    'exactly one --host.')
            conf = nova_conf.read_nova_conf(parsed_args.from_nova_conf)
        elif not add:
            raise exceptions.CommandError(
                'Give at least one --trait (or --from-nova-conf).')

        placement = self.app.client_manager.mdev.placement
        selected = self._selected(placement, parsed_args, resource_class)
        wanted = set(add)
        if conf is None:
            plans = [trait_logic.DevicePlan(
                d, add=add, replace=parsed_args.replace,
                force=parsed_args.force) for d in selected]
        else:
            plans = trait_logic.plans_from_nova_conf(
                selected, conf, parsed_args.from_nova_conf, add,
                parsed_args.trait_prefix, parsed_args.replace,
                parsed_args.force)
            if all(p.skip for p in plans):
                raise exceptions.CommandError(
                    '%s gives no mdev type to any device of host %s.'
                    % (parsed_args.from_nova_conf, parsed_args.host[0]))
            wanted.update(trait_logic.type_traits(
                conf, parsed_args.trait_prefix).values())
        return self._write(placement, plans, wanted, parsed_args.dry_run,
                           parsed_args.export_dir)


class UnsetTrait(_TraitCommand):
    """Remove traits from GPUs (mdev devices), keeping every other trait.

    OWNER_* traits (Nova's OWNER_NOVA marks its own providers) are removed
    only with --force.
    """

    _epilog = """\
Examples:

::

    openstack mdev trait unset --trait CUSTOM_POOL_A compute1:0000:84:01.0
    openstack mdev trait unset --trait CUSTOM_POOL_A --host compute1 \\
        --dry-run
"""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        options.trait(parser, required=True)
        options.force(parser)
        return parser

    def take_action(self, parsed_args):
        remove = common.trait_names(parsed_args.trait)
        protected = trait_logic.protected_removals(remove, parsed_args.force)
        if protected:
            raise exceptions.CommandError(
                '%s marks the devices as owned by a service, which adds it '
                'back when it restarts or refreshes its provider cache (Nova '
                'does, for OWNER_NOVA); add --force to remove it anyway.'
                % ', '.join(protected))
        resource_class = common.resource_class(parsed_args.resource_class)
        placement = self.app.client_manager.mdev.placement
        selected = self._selected(placement, parsed_args, resource_class)
        plans = [trait_logic.DevicePlan(d, remove=remove,
                                        force=parsed_args.force)
                 for d in selected]
        return self._write(placement, plans, (), parsed_args.dry_run,
                           parsed_args.export_dir)


class _Progress:
    """``n/total devices`` on stderr, only on a terminal and for long runs.
    """

    def __init__(self, total):
        self.total = total
        self.count = 0
        self.lock = threading.Lock()
        self.show = total >= PROGRESS_THRESHOLD and sys.stderr.isatty()

    def tick(self):
        """One more device done."""
        with self.lock:
            self.count += 1
            if self.show:
                sys.stderr.write('\rUpdating traits: %d/%d devices'
                                 % (self.count, self.total))
                sys.stderr.flush()

    def done(self):
        if self.show:
            sys.stderr.write('\n')


class ExportTrait(command.Lister):
    """Write the provider config files that make the traits durable.

    Answers "how do my type traits survive Nova re-creating a GPU's
    provider?": per compute node, <host>.yaml with the custom traits its
    mdev devices carry now (or only type traits), identified by provider
    name, which nova-compute adds back on every update. Files Nova would
    refuse are never written; each is replaced atomically. nova-compute
    reads them at start: install them in its provider_config_location and
    restart it.
    """

    _epilog = """\
Examples:

The files of every compute node, to ship to each::

    openstack mdev trait export --output-dir exports/
    scp exports/gpu3.yaml gpu3:/etc/nova/provider_config/

One host's file, only its type traits, printed::

    openstack mdev trait export --host gpu3 --type-traits-only
"""

    def get_parser(self, prog_name):
        parser = common.one_line_errors(super().get_parser(prog_name))
        options.host(parser)
        options.output_dir(parser)
        parser.add_argument(
            '--type-traits-only', action='store_true',
            help='Keep only the traits named after mdev types, as '
                 "'trait set --from-nova-conf' names them (with "
                 '--trait-prefix).')
        options.trait_prefix(parser)
        options.dry_run(parser)
        return parser

    def take_action(self, parsed_args):
        common.check(trait_logic.validate_prefix, parsed_args.trait_prefix)
        hosts = tuple(dict.fromkeys(parsed_args.host))
        directory = parsed_args.output_dir
        if directory is None:
            if len(hosts) != 1:
                raise exceptions.CommandError(
                    'Give --output-dir for the files of several compute '
                    'nodes, or one --host to print its file.')
            if parsed_args.dry_run:
                raise exceptions.CommandError(
                    '--dry-run shows what --output-dir would change; give '
                    '--output-dir too.')
        placement = self.app.client_manager.mdev.placement
        done = traits.export(
            placement, hosts, directory, parsed_args.type_traits_only,
            parsed_args.trait_prefix, parsed_args.dry_run)
        if directory is None:
            self.text = done[0].text
            return (), []
        self.failed = [w for w in done if w.failed]
        return EXPORT_COLUMNS, [
            (w.file.host, w.path, w.file.devices, w.file.traits, w.result)
            for w in done]

    def produce_output(self, parsed_args, column_names, data):
        if self.text is not None:
            self.app.stdout.write(self.text)
            return 0
        return super().produce_output(parsed_args, column_names, data)

    def run(self, parsed_args):
        self.text, self.failed = None, []
        status = super().run(parsed_args)
        if self.failed:
            raise exceptions.CommandError(
                '%d file(s) could not be written (the old ones are kept); '
                'see the Result column.' % len(self.failed))
        return status
