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

"""``openstack mdev flavor configure`` / ``show``."""

from osc_lib.cli import format_columns
from osc_lib.command import command
from osc_lib import exceptions

from osc_mdev.domain import flavors as flavor_logic
from osc_mdev.domain import traits as trait_logic
from osc_mdev.usecases import flavor as flavors
from osc_mdev.usecases import nova_conf
from osc_mdev.v1 import common
from osc_mdev.v1 import options

CONFIGURE_COLUMNS = ('Property', 'Before', 'After', 'Result', 'Note')


class ConfigureFlavor(command.Lister):
    """Make a flavor ask for mediated devices (vGPUs) or PCI devices.

    Sets resources:<CLASS>=N and trait:<TRAIT>=required|forbidden extra
    specs. Keys of an earlier mdev request on the flavor are replaced
    wherever they are written (unnumbered, numbered or named group such as
    resources_GPU), not added to, and unnumbered trait:CUSTOM_<X>=required
    keys whose trait no resource provider has any more (stale type tags)
    are removed; other extra specs are left alone. Before writing, checks
    that the class and traits exist, that no resulting extra spec is one
    Nova's API refuses, and that the flavor's resulting request, read as
    Nova reads it, can be served by some host ('mdev capacity' judges it).
    Each key's result is listed (added, changed, removed, unchanged,
    failed, not written); if a write fails the command exits 1 and running
    it again finishes the job.

    One device or several: by default all N mdevs of a server come from
    one physical device (resources:VGPU=N), which needs a device whose
    max_unit is at least N. With --spread each mdev comes from a different
    device of the same host (resources1:VGPU=1, resources2:VGPU=1, ... with
    group_policy=isolate), as Nova documents for servers with several
    vGPUs; use it when one device cannot give more than one mdev to a
    server (most vGPU types) or to spread load over devices. Several vGPUs
    per server need computes at Nova 33.0.0 (2026.1) or later; older
    computes give the server only the first one.

    PCI devices (vGPUs as SR-IOV virtual functions, whole GPUs): --pci-alias
    NAME[:COUNT] writes pci_passthrough:alias, checked against the
    controller's [pci] alias (--controller-conf) and, with [filter_scheduler]
    pci_in_placement, against Placement: some host has COUNT free devices
    of the alias' resource class and traits now. The options give the
    flavor's whole device request: mdev options, --pci-alias, or both (a
    server with a vGPU and a PCI device); the keys of an earlier request
    of the kind not given again are removed.
    """

    def get_parser(self, prog_name):
        parser = common.one_line_errors(super().get_parser(prog_name))
        parser.add_argument(
            'flavor', metavar='<flavor>', help='Flavor name or ID.')
        options.resource_class(parser)
        parser.add_argument(
            '--pci-alias', metavar='<name>[:<count>]', action='append',
            default=[],
            help='PCI devices of a [pci] alias per server (count 1 by '
                 'default); repeat or give a comma list (a16:1,nic:2) as in '
                 'Nova\'s pci_passthrough:alias.')
        options.controller_conf(parser)
        options.deprecated(parser, '--nova-conf', '--controller-conf',
                           'controller_conf')
        options.amount_and_spread(parser)
        parser.add_argument(
            '--isolate-other-groups', action='store_true',
            help='With --spread, go on when the flavor has numbered '
                 'request groups of other requests: Nova applies '
                 'group_policy=isolate to them too, so each must then '
                 'come from a provider of its own.')
        options.deprecated(parser, '--force', '--isolate-other-groups',
                           'isolate_other_groups', flag=True)
        options.trait(parser)
        options.forbid_trait(parser)
        parser.add_argument(
            '--mdev-type', metavar='<type>', action='append', default=[],
            help='Shortcut for --trait with the trait "mdev trait set '
                 '--from-nova-conf" gives this type: nvidia-35 means '
                 'CUSTOM_NVIDIA_35 (see --trait-prefix).')
        options.trait_prefix(parser)
        parser.add_argument(
            '--no-validate', action='store_true',
            help='Skip the checks against the cloud (class, traits and '
                 'devices exist, and some host can serve the resulting '
                 'flavor); names are still checked, and Placement is still '
                 'read to find stale keys.')
        options.dry_run(parser)
        return parser

    def take_action(self, parsed_args):
        pci = aliases = None
        pci_in_placement = True
        if parsed_args.pci_alias:
            pci = common.check(flavor_logic.parse_pci_aliases,
                               parsed_args.pci_alias)
            if parsed_args.controller_conf:
                aliases, pci_in_placement = nova_conf.controller_aliases(
                    parsed_args.controller_conf)
        elif parsed_args.controller_conf:
            raise exceptions.CommandError(
                '--controller-conf is only read with --pci-alias.')
        mdev_only = [o for o, v in (
            ('--amount', parsed_args.amount != 1),
            ('--spread', parsed_args.spread),
            ('--trait', parsed_args.trait),
            ('--forbid-trait', parsed_args.forbid_trait),
            ('--mdev-type', parsed_args.mdev_type),
            ('--isolate-other-groups', parsed_args.isolate_other_groups))
            if v]
        if parsed_args.resource_class is None:
            if not pci:
                raise exceptions.CommandError(
                    'Give --resource-class (mdev devices), --pci-alias (PCI '
                    'devices) or both.')
            if mdev_only:
                raise exceptions.CommandError(
                    '%s describe an mdev request and need --resource-class.'
                    % ', '.join(mdev_only))
            mdev = self.app.client_manager.mdev
            self.outcome = flavors.configure(
                mdev.compute, mdev.placement, parsed_args.flavor, None,
                validate=not parsed_args.no_validate,
                dry_run=parsed_args.dry_run, pci=pci, aliases=aliases,
                pci_in_placement=pci_in_placement)
            return CONFIGURE_COLUMNS, self._rows(parsed_args)
        request = common.bare_request(parsed_args,
                                      _required_traits(parsed_args))

        if parsed_args.isolate_other_groups and not parsed_args.spread:
            raise exceptions.CommandError(
                '--isolate-other-groups only has a meaning with --spread.')

        mdev = self.app.client_manager.mdev
        self.outcome = flavors.configure(
            mdev.compute, mdev.placement, parsed_args.flavor, request,
            validate=not parsed_args.no_validate,
            dry_run=parsed_args.dry_run,
            isolate_others=parsed_args.isolate_other_groups, pci=pci,
            aliases=aliases, pci_in_placement=pci_in_placement)
        return CONFIGURE_COLUMNS, self._rows(parsed_args)

    def _rows(self, parsed_args):
        rows = []
        for change in self.outcome.changes:
            result = self.outcome.results[change.key]
            if parsed_args.dry_run and result != 'unchanged':
                result = 'would be ' + result
            rows.append((change.key, change.before, change.after, result,
                         change.note))
        return rows

    def run(self, parsed_args):
        self.outcome = None
        status = super().run(parsed_args)
        outcome = self.outcome
        if outcome is not None and outcome.error:
            raise exceptions.CommandError(
                'Flavor %s is only partly written: %s; written: %s; '
                'failed: %s; not written: %s; run the same command again '
                'to finish.'
                % (outcome.flavor['name'], outcome.error,
                   ', '.join(outcome.written) or 'nothing',
                   ', '.join(outcome.failed) or 'nothing',
                   ', '.join(outcome.not_written) or 'nothing'))
        return status


class ShowFlavor(command.ShowOne):
    """Show a flavor's device request as Nova reads it, and where it fits.

    Request names each group as the flavor writes it (resources,
    resources1, resources_GPU). Devices and Servers That Fit are counted
    as 'mdev capacity --flavor' counts them (the flavor's VCPU, MEMORY_MB
    and DISK_GB included); Problem says why no server of the flavor can
    ever be placed, or which extra spec Nova's API refuses.
    """

    def get_parser(self, prog_name):
        parser = common.one_line_errors(super().get_parser(prog_name))
        parser.add_argument(
            'flavor', metavar='<flavor>', help='Flavor name or ID.')
        return parser

    def take_action(self, parsed_args):
        mdev = self.app.client_manager.mdev
        view = flavors.show(mdev.compute, mdev.placement, parsed_args.flavor)
        fields = ('Flavor', 'ID', 'Request', 'PCI Request', 'Extra Specs',
                  'Devices', 'Servers That Fit', 'Problem')
        alias = view.extra_specs.get(flavor_logic.ALIAS_KEY)
        return fields, (
            view.flavor['name'], view.flavor['id'],
            view.request.describe_devices() or 'no mdev resources',
            flavor_logic.describe_pci(alias) if alias else 'no PCI devices',
            format_columns.DictColumn(view.extra_specs),
            format_columns.ListColumn(
                ['%s:%s (%d free)' % d for d in view.devices]),
            view.servers_that_fit, view.problem)


def _required_traits(parsed_args):
    required = set(common.trait_names(parsed_args.trait))
    if parsed_args.mdev_type:
        common.check(trait_logic.validate_prefix, parsed_args.trait_prefix)
        required.update(
            common.check(trait_logic.trait_for_mdev_type, t,
                         parsed_args.trait_prefix)
            for t in parsed_args.mdev_type)
    return tuple(sorted(required))
