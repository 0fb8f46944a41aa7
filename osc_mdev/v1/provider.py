"""``openstack mdev provider list`` / ``show``."""

from cliff import columns
from osc_lib.cli import format_columns
from osc_lib.command import command
from osc_lib import exceptions

from osc_mdev.domain import names
from osc_mdev.domain import providers as domain

COLUMNS = ('UUID', 'Host', 'Device', 'Resource Class', 'Total', 'Used',
           'Free', 'Traits')
LONG_COLUMNS = ('UUID', 'Name', 'Host', 'Device', 'Resource Class', 'Total',
                'Reserved', 'Used', 'Free', 'Max Unit', 'Allocation Ratio',
                'Generation', 'Traits')


class ConsumersColumn(columns.FormattableColumn):
    """Consumers of a device: one ``UUID: amount CLASS`` line each."""

    def human_readable(self):
        return '\n'.join('%(consumer)s: %(amount)s %(resource_class)s' % c
                         for c in self._value)

    def machine_readable(self):
        return [dict(c) for c in self._value]


def _row(device, cols):
    values = {
        'UUID': device.uuid,
        'Name': device.candidate.name,
        'Host': device.host,
        'Device': device.device,
        'Resource Class': device.resource_class,
        'Total': device.inventory.total,
        'Reserved': device.inventory.reserved,
        'Used': device.used,
        'Free': device.free,
        'Max Unit': device.inventory.max_unit,
        'Allocation Ratio': device.inventory.allocation_ratio,
        'Generation': device.generation,
        'Traits': format_columns.ListColumn(list(device.traits or ())),
    }
    return tuple(values[c] for c in cols)


def _check(func, *args):
    """Run a domain validator; its ValueError becomes a CommandError."""
    try:
        return func(*args)
    except ValueError as exc:
        raise exceptions.CommandError('%s.' % exc) from exc


def _read_devices(placement, candidates, traits=True):
    details = placement.get_provider_details(
        [c.uuid for c in candidates], traits=traits)
    devices = []
    for candidate in candidates:
        info = details.get(candidate.uuid)
        if info is None:
            continue  # deleted since it was listed
        generation, inventories = info['inventories']
        devices.extend(domain.build_devices(
            candidate, inventories, generation, info['usages'],
            info.get('traits')))
    return devices


class ListProvider(command.Lister):
    """List the physical devices (GPUs) that offer mediated devices.

    One row per mdev parent device Nova reports to Placement, across the
    whole cloud, with its resource class, capacity and traits.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            '--host', metavar='<host>', action='append', default=[],
            help='Only devices of this compute host (the root resource '
                 'provider name, usually the hypervisor hostname). '
                 'Repeat for several hosts.')
        parser.add_argument(
            '--resource-class', metavar='<resource-class>',
            help='Only devices with an inventory of this class: VGPU or '
                 'a CUSTOM_<NAME> class set by [mdev_<type>] mdev_class.')
        parser.add_argument(
            '--trait', metavar='<trait>', action='append', default=[],
            help='Only devices that have this trait (for example '
                 'CUSTOM_NVIDIA_11). Repeat to require several; a device '
                 'must have all of them. Filtered by Placement.')
        usage = parser.add_mutually_exclusive_group()
        usage.add_argument(
            '--free', action='store_true',
            help='Only devices with room for at least one more mdev.')
        usage.add_argument(
            '--full', action='store_true',
            help='Only devices with no room left.')
        parser.add_argument(
            '--long', action='store_true',
            help='Also show provider name, reserved, max unit, allocation '
                 'ratio and generation.')
        return parser

    def take_action(self, parsed_args):
        resource_class = parsed_args.resource_class and _check(
            names.validate_mdev_resource_class, parsed_args.resource_class)
        traits = tuple(_check(names.validate_trait_name, t)
                       for t in parsed_args.trait)
        wanted = domain.DeviceFilter(
            hosts=tuple(parsed_args.host), resource_class=resource_class,
            traits=traits, free=parsed_args.free, full=parsed_args.full)
        cols = LONG_COLUMNS if parsed_args.long else COLUMNS
        # Traits are read per device only when shown or filtered on.
        read_traits = 'Traits' in (parsed_args.columns or cols)

        placement = self.app.client_manager.mdev.placement
        calls = [placement.list_providers]
        if traits:
            calls.append(lambda: placement.list_providers(traits))
        if resource_class:
            calls.append(
                lambda: placement.resource_class_exists(resource_class))
        results = placement.map(lambda call: call(), calls)
        providers = results[0]
        with_traits = results[1] if traits else None
        if resource_class and not results[-1]:
            raise exceptions.CommandError(
                "Resource class %s does not exist in Placement; run "
                "'openstack resource class list' to see the classes."
                % resource_class)
        unknown = set(wanted.hosts) - domain.hosts_of(providers)
        if unknown:
            raise exceptions.CommandError(
                'No compute host named %s in Placement; hosts are named as '
                "in 'openstack hypervisor list'." % ', '.join(sorted(unknown)))

        candidates = [c for c in domain.find_candidates(providers)
                      if wanted.wants_candidate(c)]
        if with_traits is not None:
            matching = {p['uuid'] for p in with_traits}
            candidates = [c for c in candidates if c.uuid in matching]
        devices = _read_devices(placement, candidates, traits=read_traits)
        rows = [_row(d, cols) for d in sorted(
            filter(wanted.wants, devices), key=domain.sort_key)]
        return cols, rows


class ShowProvider(command.ShowOne):
    """Show one mdev parent device (GPU) and the consumers on it.

    Name the device by provider UUID, provider name or HOST:PCI_ADDRESS
    (for example compute1:0000:84:00.0); a bare PCI address works when
    only one host has it.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            'device', metavar='<device>',
            help='Provider UUID, provider name, or HOST:PCI_ADDRESS '
                 '(HOST:DEVICE for devices without a PCI address, such as '
                 'compute1:mtty_mtty).')
        return parser

    def take_action(self, parsed_args):
        placement = self.app.client_manager.mdev.placement
        providers = placement.list_providers()
        candidates = domain.find_candidates(providers)
        try:
            candidate = domain.resolve_device(parsed_args.device, candidates)
        except domain.DeviceLookupError as exc:
            raise exceptions.CommandError(
                self._not_found(parsed_args.device, providers, exc)) from exc
        except ValueError as exc:
            raise exceptions.CommandError('%s.' % exc) from exc

        details = placement.get_provider_details(
            [candidate.uuid], usages=False, allocations=True)
        info = details.get(candidate.uuid)
        if info is None:
            raise exceptions.CommandError(
                'Device %s:%s was deleted while it was being read; run the '
                'command again.' % (candidate.host, candidate.device))
        generation, inventories = info['inventories']
        allocations = info['allocations']
        devices = domain.build_devices(
            candidate, inventories, generation,
            domain.usages_from_allocations(allocations), info['traits'])
        if not devices:
            raise exceptions.CommandError(
                'Provider %s has no VGPU or CUSTOM_* inventory, so it is not '
                'an mdev device.' % candidate.name)
        device = devices[0]
        cols = LONG_COLUMNS + ('Consumers',)
        consumers = domain.consumers_of(allocations, device.resource_class)
        return cols, _row(device, LONG_COLUMNS) + (
            ConsumersColumn(consumers),)

    @staticmethod
    def _not_found(reference, providers, exc):
        for provider in providers:
            if reference in (provider['uuid'], provider['name']):
                return ('Provider %s is not an mdev device (it is not named '
                        '<host>_<libvirt device> under a compute node); see '
                        "'openstack mdev provider list'." % provider['name'])
        return str(exc)
