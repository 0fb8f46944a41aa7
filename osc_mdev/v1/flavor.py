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

import argparse

from osc_lib.cli import format_columns
from osc_lib import exceptions

from osc_mdev.base import errors as library_errors
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.features.flavor import reads as flavors
from osc_mdev.features.flavor import specs as flavor_logic
from osc_mdev.features import nova_conf
from osc_mdev.nova.pci import request as pci_request
from osc_mdev.nova.scheduler import utils as rr
from osc_mdev.v1 import common
from osc_mdev.v1 import errors
from osc_mdev.v1 import options

CONFIGURE_COLUMNS = ('Property', 'Before', 'After', 'Result', 'Note')
MDEV_TYPE = ('Require the trait of this mdev type, as "trait set '
             '--compute-conf" names it (nvidia-35 is CUSTOM_NVIDIA_35).')
NO_VALIDATE = ('Skip the checks against the cloud (class, traits, some '
               'host can serve it); names are still checked.')
ISOLATE_OTHER_GROUPS = (
    'With --spread, go on although the flavor has numbered groups of '
    'other requests, which group_policy=isolate then binds too.')


def pci_aliases(value: str) -> tuple[tuple[str, int], ...]:
    """The ``(alias, count)`` pairs of a ``--pci-alias`` value:
    ``NAME[:COUNT]``, or a comma list of them as Nova's
    ``pci_passthrough:alias`` (count 1 by default).
    """
    found = []
    for part in value.split(','):
        name, sep, count = part.strip().partition(':')
        text = '%s:%s' % (name.strip(), count.strip() if sep else '1')
        try:
            [(name, number)] = pci_request.parse_alias_request(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                "'%s' is not NAME or NAME:COUNT (a [pci] alias name and a "
                'whole number of devices)' % part) from None
        if not name or number < 1:
            raise argparse.ArgumentTypeError(
                "'%s' asks for no device: give a name and a count of at "
                'least 1' % part)
        found.append((name, number))
    return tuple(found)


def _pci_request(values: list[tuple[tuple[str, int], ...]]
                 ) -> flavor_logic.PciRequest:
    """The PciRequest of every --pci-alias, each alias named once."""
    aliases: dict[str, int] = {}
    for name, count in (pair for value in values for pair in value):
        if name in aliases:
            raise exceptions.CommandError(
                '--pci-alias %s is given twice; give it once with the total '
                'count.' % name)
        aliases[name] = count
    return flavor_logic.PciRequest(tuple(aliases.items()))


class ConfigureFlavor(common.Lister):
    """Make a flavor ask for vGPUs (mdevs) or PCI devices, checked first.

    Writes the resources:<CLASS>=N and trait:<TRAIT>=required|forbidden
    extra specs (or pci_passthrough:alias), replacing the keys of an
    earlier device request and stale type traits, and keeping every other
    extra spec. Before writing, checks that the class and traits exist,
    that Nova's API accepts the result and that some host can serve it.
    Each key's result is listed; a failed write exits 1, and running the
    command again finishes the job.
    """

    _epilog = """\
Examples:

One vGPU of type nvidia-12 per server (trait CUSTOM_NVIDIA_12)::

    openstack mdev flavor configure vgpu.nvidia-12 --resource-class VGPU \\
        --mdev-type nvidia-12

Two vGPUs per server, each from a different GPU, shown first::

    openstack mdev flavor configure vgpu.2x --resource-class VGPU \\
        --amount 2 --spread --dry-run

Two SR-IOV vGPUs of a PCI alias, checked against the controller's file::

    openstack mdev flavor configure vgpu.l40s-2 --pci-alias l40s-vf:2 \\
        --controller-conf /etc/nova/nova.conf
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        parser.add_argument(
            'flavor', metavar='<flavor>', help='Flavor name or ID.')
        options.resource_class(parser)
        parser.add_argument(
            '--pci-alias', metavar='<name>[:<count>]', action='append',
            type=pci_aliases, default=[],
            help='PCI devices of a [pci] alias per server (count 1 by '
                 'default); repeat, or give a comma list as in '
                 'pci_passthrough:alias.')
        options.controller_conf(parser)
        options.amount_and_spread(parser)
        parser.add_argument('--isolate-other-groups', action='store_true',
                            help=ISOLATE_OTHER_GROUPS)
        options.required_and_forbidden_traits(parser)
        parser.add_argument('--mdev-type', metavar='<type>', action='append',
                            default=[], help=MDEV_TYPE)
        options.trait_prefix(parser)
        parser.add_argument('--no-validate', action='store_true',
                            help=NO_VALIDATE)
        options.dry_run(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        pci = pci_config = None
        if parsed_args.pci_alias:
            pci = _pci_request(parsed_args.pci_alias)
            if parsed_args.controller_conf:
                pci_config = nova_conf.controller_pci(
                    parsed_args.controller_conf)
        elif parsed_args.controller_conf:
            raise exceptions.CommandError(
                '--controller-conf is only read with --pci-alias.')
        request = _mdev_request(parsed_args, pci)
        mdev = common.client(self.app)
        outcome = flavors.configure(
            mdev.compute, mdev.placement, parsed_args.flavor, request,
            validate=not parsed_args.no_validate,
            dry_run=parsed_args.dry_run,
            isolate_others=parsed_args.isolate_other_groups, pci=pci,
            pci_config=pci_config)
        rows = []
        for change in outcome.changes:
            result = outcome.outcome(change.key)
            if parsed_args.dry_run and result != 'unchanged':
                result = 'would be ' + result
            rows.append((change.key, change.before, change.after, result,
                         library_errors.words(change.note, errors.option)))
        return CONFIGURE_COLUMNS, common.Rows(rows, _ending(outcome))


def _mdev_request(parsed_args: argparse.Namespace,
                  pci: flavor_logic.PciRequest | None) -> rr.Request | None:
    """The mdev request of --resource-class and the options of an mdev
    request, or None for a flavor of PCI devices only.
    """
    mdev_only = [o for o, v in (
        ('--amount', parsed_args.amount != 1),
        ('--spread', parsed_args.spread),
        ('--require-trait', parsed_args.require_trait),
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
        return None
    request = common.bare_request(parsed_args,
                                  _required_traits(parsed_args))
    if parsed_args.isolate_other_groups and not parsed_args.spread:
        raise exceptions.CommandError(
            '--isolate-other-groups only has a meaning with --spread.')
    return request


def _ending(outcome: flavors.Configured) -> common.Outcome:
    """A flavor partly written is a failure that says what is left."""
    if not outcome.error:
        return common.DONE
    return common.Outcome(failure=(
        'Flavor %s is only partly written: %s; written: %s; failed: %s; not '
        'written: %s; run the same command again to finish.'
        % (outcome.flavor.name, outcome.error,
           ', '.join(outcome.written) or 'nothing',
           ', '.join(outcome.failed) or 'nothing',
           ', '.join(outcome.not_written) or 'nothing')))


class ShowFlavor(common.ShowOne):
    """Show a flavor's device request as Nova reads it, and where it fits.

    Answers "what does this flavor ask for, and can it be served?": the
    request groups as written (resources, resources1, resources_GPU),
    the devices with room, how many more servers fit, and the problem
    that stops every server of it, if any.
    """

    _epilog = """\
Examples:

::

    openstack mdev flavor show vgpu.nvidia-12
    openstack mdev flavor show vgpu.nvidia-12 -f json
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        parser.add_argument(
            'flavor', metavar='<flavor>', help='Flavor name or ID.')
        return parser

    def take_action(self, parsed_args: argparse.Namespace
                    ) -> tuple[tuple[str, ...], tuple[object, ...]]:
        mdev = common.client(self.app)
        view = flavors.show(mdev.compute, mdev.placement, parsed_args.flavor)
        fields = ('Flavor', 'ID', 'Request', 'PCI Request', 'Extra Specs',
                  'Devices', 'Servers That Fit', 'Problem')
        alias = view.extra_specs.get(flavor_logic.ALIAS_KEY)
        return fields, (
            view.flavor.name, view.flavor.id,
            view.request.describe_devices() or 'no mdev resources',
            flavor_logic.describe_pci(alias) if alias else 'no PCI devices',
            format_columns.DictColumn(view.extra_specs),
            format_columns.ListColumn(
                ['%s:%s (%d free)' % d for d in view.devices]),
            view.servers_that_fit, view.problem)


def _required_traits(parsed_args: argparse.Namespace) -> tuple[str, ...]:
    required = set(parsed_args.require_trait)
    if parsed_args.mdev_type:
        required.update(
            common.check(trait_logic.trait_for_mdev_type, t,
                         parsed_args.trait_prefix)
            for t in parsed_args.mdev_type)
    return tuple(sorted(required))
