"""``openstack mdev trait set`` / ``unset``."""

import sys
import threading

from osc_lib.cli import format_columns
from osc_lib.command import command
from osc_lib import exceptions

from osc_mdev.client import devices
from osc_mdev.client import placement as placement_client
from osc_mdev.domain import names
from osc_mdev.domain import novaconf
from osc_mdev.domain import traits as trait_logic
from osc_mdev.v1.provider import check

COLUMNS = ('Device', 'Host', 'Traits', 'Result')
DRY_RUN_COLUMNS = ('Device', 'Host', 'Current Traits', 'Traits', 'Result')
PROGRESS_THRESHOLD = 20


class _TraitCommand(command.Lister):
    """Shared selection, validation and bulk update of trait commands."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            'device', metavar='<device>', nargs='*',
            help='Device to change: provider UUID, provider name or '
                 'HOST:PCI_ADDRESS, as in "mdev provider show". Repeat for '
                 'several.')
        parser.add_argument(
            '--host', metavar='<host>', action='append', default=[],
            help='Every mdev device of this compute host. Repeat for '
                 'several hosts.')
        parser.add_argument(
            '--resource-class', metavar='<resource-class>',
            help='Every mdev device with this resource class (VGPU or '
                 'CUSTOM_<NAME>); with --host, only on those hosts.')
        parser.add_argument(
            '--all', action='store_true', dest='all_devices',
            help='Every mdev device in the cloud.')
        parser.add_argument(
            '--dry-run', action='store_true',
            help='Show each device\'s traits before and after and change '
                 'nothing (custom traits are not created either).')
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

    def _check_traits_exist(self, placement, wanted):
        """Standard (non-CUSTOM_) traits must already exist."""
        import os_traits

        known = set(os_traits.get_traits())
        unknown = [t for t in wanted
                   if not t.startswith('CUSTOM_') and t not in known]
        missing = [t for t, exists in zip(
            unknown, placement.map(placement.trait_exists, unknown))
            if not exists]
        if missing:
            raise exceptions.CommandError(
                'Trait %s is neither a standard trait nor known to '
                'Placement; custom traits must start with CUSTOM_.'
                % ', '.join(missing))

    def _apply(self, placement, plans, dry_run):
        """Run every device's update at once (bounded); one row each.

        ``plans`` is a list of ``(device, change)``; ``change`` maps the
        current traits to the wanted ones, or is a string saying why the
        device is skipped.
        """
        progress = _Progress(len(plans))

        def update(plan):
            device, change = plan
            try:
                if isinstance(change, str):
                    return device, None, None, 'skipped: %s' % change
                before, after = placement.update_traits(
                    device.uuid, change, dry_run=dry_run)
                return device, before, after, trait_logic.describe_change(
                    before, after, dry_run)
            except placement_client.NotFound:
                return (device, None, None,
                        'failed: the device was deleted meanwhile')
            except exceptions.CommandError as exc:
                return device, None, None, 'failed: %s' % exc
            finally:
                progress.tick()

        results = placement.map(update, plans)
        progress.done()
        self.failed = [r for r in results if r[3].startswith('failed')]
        cols = DRY_RUN_COLUMNS if dry_run else COLUMNS
        rows = []
        for device, before, after, result in results:
            shown = format_columns.ListColumn(sorted(after or ()))
            if dry_run:
                rows.append((device.device, device.host,
                             format_columns.ListColumn(sorted(before or ())),
                             shown, result))
            else:
                rows.append((device.device, device.host, shown, result))
        return cols, rows

    def run(self, parsed_args):
        self.failed = []
        status = super().run(parsed_args)
        if self.failed:
            raise exceptions.CommandError(
                '%d of the devices could not be changed; see the Result '
                'column.' % len(self.failed))
        return status


class SetTrait(_TraitCommand):
    """Add traits to mdev devices, keeping the traits they have.

    Custom traits that do not exist yet are created. A provider changed by
    another writer meanwhile (nova-compute, another operator) is re-read
    and the change applied again, so no one's traits are lost.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            '--trait', metavar='<trait>', action='append', default=[],
            help='Trait to add, e.g. CUSTOM_NVIDIA_11. Repeat for several.')
        parser.add_argument(
            '--replace', action='store_true',
            help='Make the named traits the only ones, as "openstack '
                 'resource provider trait set" does, but keep OWNER_* '
                 'traits (such as Nova\'s OWNER_NOVA) unless --force.')
        parser.add_argument(
            '--force', action='store_true',
            help='With --replace, drop OWNER_* traits as well.')
        parser.add_argument(
            '--from-nova-conf', metavar='<file>',
            help='Tag each device of --host with the trait of the mdev type '
                 'this nova.conf gives it ([devices] enabled_mdev_types, '
                 '[mdev_<type>] device_addresses; old vgpu_ names too). '
                 'Devices not listed get the default type, as in Nova. Traits '
                 'of the file\'s other types are removed from each device.')
        parser.add_argument(
            '--trait-prefix', metavar='<prefix>',
            default=trait_logic.DEFAULT_TRAIT_PREFIX,
            help='Prefix of the traits --from-nova-conf names: type '
                 'nvidia-35 becomes <prefix>NVIDIA_35 (default: CUSTOM_).')
        return parser

    def take_action(self, parsed_args):
        add = tuple(check(names.validate_trait_name, t)
                    for t in parsed_args.trait)
        resource_class = parsed_args.resource_class and check(
            names.validate_mdev_resource_class, parsed_args.resource_class)
        if parsed_args.force and not parsed_args.replace:
            raise exceptions.CommandError(
                '--force only has a meaning with --replace.')
        conf = None
        if parsed_args.from_nova_conf:
            check(trait_logic.validate_prefix, parsed_args.trait_prefix)
            if len(parsed_args.host) != 1:
                raise exceptions.CommandError(
                    '--from-nova-conf describes one compute host: give '
                    'exactly one --host.')
            conf = _read_nova_conf(parsed_args.from_nova_conf)
        elif not add:
            raise exceptions.CommandError(
                'Give at least one --trait (or --from-nova-conf).')

        placement = self.app.client_manager.mdev.placement
        selected = self._selected(placement, parsed_args, resource_class)
        plans = []
        type_traits = {}
        if conf:
            type_traits = {
                t.name: trait_logic.trait_for_mdev_type(
                    t.name, parsed_args.trait_prefix) for t in conf.types}
        for device in selected:
            if conf is None:
                own, others = add, ()
            else:
                mdev_type = conf.type_for(device.device)
                if mdev_type is None:
                    plans.append((device, 'no mdev type for it in %s'
                                  % parsed_args.from_nova_conf))
                    continue
                own = add + (type_traits[mdev_type],)
                others = tuple(t for t in type_traits.values()
                               if t != type_traits[mdev_type])
            plans.append((device, _changer(
                own, others, parsed_args.replace, parsed_args.force)))
        if conf and all(isinstance(c, str) for _, c in plans):
            raise exceptions.CommandError(
                '%s gives no mdev type to any device of host %s.'
                % (parsed_args.from_nova_conf, parsed_args.host[0]))

        wanted = set(add) | set(type_traits.values())
        self._check_traits_exist(placement, wanted)
        if not parsed_args.dry_run:
            custom = sorted(t for t in wanted if t.startswith('CUSTOM_'))
            placement.map(placement.ensure_trait, custom)
        return self._apply(placement, plans, parsed_args.dry_run)


class UnsetTrait(_TraitCommand):
    """Remove traits from mdev devices, keeping every other trait."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            '--trait', metavar='<trait>', action='append', default=[],
            required=True,
            help='Trait to remove. Repeat for several.')
        parser.add_argument(
            '--force', action='store_true',
            help='Allow removing OWNER_* traits such as OWNER_NOVA (Nova '
                 'needs it to schedule to the device).')
        return parser

    def take_action(self, parsed_args):
        remove = tuple(check(names.validate_trait_name, t)
                       for t in parsed_args.trait)
        protected = trait_logic.protected_removals(remove, parsed_args.force)
        if protected:
            raise exceptions.CommandError(
                'Removing %s would stop Nova scheduling to the devices; '
                'add --force if that is what you want.'
                % ', '.join(protected))
        resource_class = parsed_args.resource_class and check(
            names.validate_mdev_resource_class, parsed_args.resource_class)
        placement = self.app.client_manager.mdev.placement
        selected = self._selected(placement, parsed_args, resource_class)
        change = _changer((), remove, False, parsed_args.force)
        return self._apply(placement, [(d, change) for d in selected],
                           parsed_args.dry_run)


def _changer(add, remove, replace, force):
    def change(current):
        return trait_logic.plan(current, add=add, remove=remove,
                                replace=replace, force=force)
    return change


def _read_nova_conf(path):
    try:
        with open(path) as conf_file:
            text = conf_file.read()
    except OSError as exc:
        raise exceptions.CommandError(
            'Cannot read %s: %s.' % (path, exc.strerror)) from exc
    try:
        conf = novaconf.parse(text, source=path)
    except novaconf.NovaConfError as exc:
        raise exceptions.CommandError('%s.' % exc) from exc
    for warning in conf.warnings:
        sys.stderr.write('Warning: %s.\n' % warning)
    return conf


class _Progress:
    """``n/total devices`` on stderr, only on a terminal and for long runs.
    """

    def __init__(self, total):
        self.total = total
        self.count = 0
        self.lock = threading.Lock()
        self.show = total >= PROGRESS_THRESHOLD and sys.stderr.isatty()

    def tick(self):
        with self.lock:
            self.count += 1
            if self.show:
                sys.stderr.write('\rUpdating traits: %d/%d devices'
                                 % (self.count, self.total))
                sys.stderr.flush()

    def done(self):
        if self.show:
            sys.stderr.write('\n')
