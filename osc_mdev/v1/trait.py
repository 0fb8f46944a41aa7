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

import argparse
import logging
import sys
import threading

from osc_lib.cli import format_columns

from osc_mdev.base import errors
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.features.trait import provider_files
from osc_mdev.features.trait import writes as trait_writes
from osc_mdev.v1 import common
from osc_mdev.v1 import options

LOG = logging.getLogger(__name__)

COLUMNS = ('Device', 'Host', 'Traits', 'Result')
DRY_RUN_COLUMNS = ('Device', 'Host', 'Current Traits', 'Traits', 'Result')
EXPORT_COLUMNS = ('Host', 'File', 'Devices', 'Traits', 'Result')
PROGRESS_THRESHOLD = 20
REPLACE = ('Make the named traits the only ones, keeping OWNER_* traits '
           'unless --force.')
TYPE_TRAITS_ONLY = ('Keep only the traits named after mdev types, as '
                    "'trait set --compute-conf' names them (with "
                    '--trait-prefix).')


class _TraitCommand(common.Lister):
    """Shared selection, validation and rows of trait set and unset."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        parser.add_argument(
            'device', metavar='<device>', nargs='*',
            help='Device to change: provider UUID, provider name or '
                 'HOST:PCI_ADDRESS, as in "mdev provider show"; repeat for '
                 'several (PCI-in-Placement devices are refused).')
        options.host(parser)
        options.resource_class(parser)
        options.all_devices(parser)
        options.provider_config_dir(parser)
        options.dry_run(parser)
        return parser

    def _selection(self, parsed_args: argparse.Namespace,
                   by_nova_conf: bool = False) -> trait_writes.Selection:
        """The devices the options select; ``by_nova_conf``: the hosts of
        --compute-conf select them when nothing else does.
        """
        resource_class = parsed_args.resource_class
        if not (parsed_args.device or parsed_args.host or resource_class
                or parsed_args.all_devices or by_nova_conf):
            raise errors.Invalid(
                'Name the devices to change, or select them with %s, %s or '
                '%s.' % (errors.given('host'), errors.given('resource_class'),
                         errors.given('all_devices')))
        return trait_writes.Selection(tuple(parsed_args.device),
                                      tuple(parsed_args.host),
                                      resource_class,
                                      parsed_args.all_devices)

    def _rows(self, writes: trait_writes.Writes, dry_run: bool
              ) -> tuple[tuple[str, ...], common.Rows]:
        """A row per device; the command fails when a device or a
        provider config file failed.
        """
        for written in writes.files:
            LOG.warning('Provider config %s: %s (%d devices with traits).',
                        written.path, written.result, written.file.devices)
        rows: list[tuple[object, ...]] = []
        for o in writes.outcomes:
            after = format_columns.ListColumn(sorted(o.after or ()))
            if dry_run:
                before = format_columns.ListColumn(sorted(o.before or ()))
                rows.append((o.device.device, o.device.host, before, after,
                             o.result))
            else:
                rows.append((o.device.device, o.device.host, after,
                             o.result))
        return (DRY_RUN_COLUMNS if dry_run else COLUMNS,
                common.Rows(rows, _ending(writes)))


def _ending(writes: trait_writes.Writes) -> common.Outcome:
    """Interrupted, failed for a device or a file, or done."""
    if writes.interrupted:
        return common.Outcome(interrupted=(
            'Interrupted: %d of %d devices were not changed (Result "not '
            'changed: interrupted"); every other device is done as shown. '
            'Run the command again to finish.'
            % (len(writes.interrupted), len(writes.outcomes))))
    if writes.failed:
        return common.Outcome(failure=(
            '%d of the devices could not be changed; see the Result column.'
            % len(writes.failed)))
    if writes.unwritten:
        return common.Outcome(failure=(
            'The traits are set, but %d provider config file(s) could not '
            'be written (%s); run the command again.'
            % (len(writes.unwritten), writes.unwritten[0].result)))
    return common.DONE


class SetTrait(_TraitCommand):
    """Add traits to GPUs (mdev devices), keeping the traits they have.

    Answers the tagging job that 'resource provider trait set' does
    badly: every trait already on a device stays (Nova's OWNER_NOVA
    included), custom traits are created, and a device another writer
    changed meanwhile is re-read and written again. --compute-conf tags
    each GPU of a host with the trait of the type its nova.conf gives it;
    --provider-config-dir rewrites the hosts' provider config files there
    in the same run.
    """

    _epilog = """\
Examples:

Tag every GPU of a host from its nova.conf, shown first::

    openstack mdev trait set --compute-conf \\
        compute1=/etc/nova/nova.conf --dry-run

Tag one GPU by hand::

    openstack mdev trait set --trait CUSTOM_NVIDIA_12 compute1:0000:84:01.0
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        options.trait(parser)
        parser.add_argument('--replace', action='store_true', help=REPLACE)
        options.force(parser)
        options.compute_conf(parser)
        options.trait_prefix(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        add = tuple(parsed_args.trait)
        if parsed_args.force and not parsed_args.replace:
            raise errors.Invalid(
                '%s only has a meaning with %s.'
                % (errors.given('force'), errors.given('replace')),
                parameter='force')
        pairs = list(parsed_args.compute_conf)
        if not pairs and not add:
            raise errors.Invalid(
                'Give at least one %s (or %s).'
                % (errors.given('trait'), errors.given('compute_conf')),
                parameter='trait')
        selection = self._selection(parsed_args, by_nova_conf=bool(pairs))
        writes = trait_writes.set_traits(
            common.client(self.app).placement, selection, add,
            replace=parsed_args.replace, force=parsed_args.force,
            compute_confs=pairs, prefix=parsed_args.trait_prefix,
            dry_run=parsed_args.dry_run,
            directory=parsed_args.provider_config_dir,
            progress=_Progress)
        return self._rows(writes, parsed_args.dry_run)


class UnsetTrait(_TraitCommand):
    """Remove traits from GPUs (mdev devices), keeping every other trait.

    OWNER_* traits (Nova's OWNER_NOVA marks its own providers) are removed
    only with --force. --provider-config-dir rewrites the hosts' provider
    config files there in the same run.
    """

    _epilog = """\
Examples:

::

    openstack mdev trait unset --trait CUSTOM_POOL_A compute1:0000:84:01.0
    openstack mdev trait unset --trait CUSTOM_POOL_A --host compute1 \\
        --dry-run
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        options.trait(parser, required=True)
        options.force(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        remove = tuple(parsed_args.trait)
        protected = trait_logic.protected_removals(remove, parsed_args.force)
        if protected:
            raise errors.Refused(
                '%s marks the devices as owned by a service, which adds it '
                'back when it restarts or refreshes its provider cache (Nova '
                'does, for OWNER_NOVA); add %s to remove it anyway.'
                % (', '.join(protected), errors.given('force')),
                parameter='force', traits=protected)
        selection = self._selection(parsed_args)
        writes = trait_writes.unset_traits(
            common.client(self.app).placement, selection, remove,
            force=parsed_args.force, dry_run=parsed_args.dry_run,
            directory=parsed_args.provider_config_dir,
            progress=_Progress)
        return self._rows(writes, parsed_args.dry_run)


class _Progress:
    """``n/total devices`` on stderr, only on a terminal and for long runs.
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self.count = 0
        self.lock = threading.Lock()
        self.show = total >= PROGRESS_THRESHOLD and sys.stderr.isatty()

    def tick(self) -> None:
        """One more device done."""
        with self.lock:
            self.count += 1
            if self.show:
                sys.stderr.write('\rUpdating traits: %d/%d devices'
                                 % (self.count, self.total))
                sys.stderr.flush()

    def done(self) -> None:
        if self.show:
            sys.stderr.write('\n')


class ExportTrait(common.Lister):
    """Write the provider config files that make the traits durable.

    Answers "how do my type traits survive Nova re-creating a GPU's
    provider?": per compute node, <host>.yaml with the custom traits its
    mdev devices carry now (or only type traits), identified by provider
    name, which nova-compute adds back on every update, written in
    --provider-config-dir (created if missing), or one --host's printed.
    Files Nova would refuse are never written; each is replaced
    atomically. nova-compute reads them at start: install them in its
    provider_config_location and restart it.
    """

    _epilog = """\
Examples:

The files of every compute node, to ship to each::

    openstack mdev trait export --provider-config-dir exports/
    scp exports/gpu3.yaml gpu3:/etc/nova/provider_config/

One host's file, only its type traits, printed::

    openstack mdev trait export --host gpu3 --type-traits-only
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        options.host(parser)
        options.provider_config_dir(parser)
        parser.add_argument('--type-traits-only', action='store_true',
                            help=TYPE_TRAITS_ONLY)
        options.trait_prefix(parser)
        options.dry_run(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        hosts = tuple(dict.fromkeys(parsed_args.host))
        directory = parsed_args.provider_config_dir
        given = errors.given('provider_config_dir')
        if directory is None:
            if len(hosts) != 1:
                raise errors.Invalid(
                    'Give %s for the files of several compute nodes, or one '
                    '%s to print its file.' % (given, errors.given('host')),
                    parameter='provider_config_dir')
            if parsed_args.dry_run:
                raise errors.Invalid(
                    '%s shows what %s would change; give %s too.'
                    % (errors.given('dry_run'), given, given),
                    parameter='dry_run')
        placement = common.client(self.app).placement
        done = trait_writes.export(
            placement, hosts, directory, parsed_args.type_traits_only,
            parsed_args.trait_prefix, parsed_args.dry_run)
        if directory is None:
            [printed] = done
            assert isinstance(printed, provider_files.HostFile)
            return (), common.Rows(text=printed.text)
        written = [w for w in done if isinstance(w, provider_files.Written)]
        return EXPORT_COLUMNS, common.Rows(
            [(w.file.host, w.path, w.file.devices, w.file.traits, w.result)
             for w in written],
            common.unwritten(sum(1 for w in written if w.failed)))
