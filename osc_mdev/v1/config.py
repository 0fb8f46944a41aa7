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

"""``openstack mdev config check`` and ``config generate``."""

from __future__ import annotations

import argparse
import typing

from openstackclient.common import clientmanager
from osc_lib import exceptions

from osc_mdev.api import compute
from osc_mdev.api import placement
from osc_mdev.base import errors
from osc_mdev.features.config.check import fleet
from osc_mdev.features.config.check import reads as config
from osc_mdev.features.config.check import report as configreport
from osc_mdev.features.config.generate import formats as generate_formats
from osc_mdev.features.config.generate import plan as configgenerate
from osc_mdev.features.config.generate import run as config_generate
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.v1 import common
from osc_mdev.v1 import errors as cli_errors
from osc_mdev.v1 import options

if typing.TYPE_CHECKING:
    from osc_lib import shell


FILES = ('nova.conf file, or a directory read like --config-dir. Give every '
         'file nova-compute reads, in its order: later values win, an option '
         "in none is judged at Nova's default.")

CHECK_SNAPSHOT_DIR = (
    'A directory of host snapshots, one <node>.json per node, read in name '
    'order; a <node>.unreachable file there (its text: why) reports a node '
    'that could not be snapshotted. Needs cloud credentials.')


class CheckConfig(common.Lister):
    """Check a compute node's nova.conf for mdevs and PCI devices.

    Answers "will nova-compute start with these files, and do what they
    say?", by Nova's rules: one row per finding, error where nova-compute
    refuses to start, warning where it does something else. --sysfs
    checks against the node's devices, --host against the cloud (only it
    needs credentials); with both, each lost mdev of a server's libvirt
    domain (--libvirt-dir) is named; --long adds each device's type and
    class. --snapshot/--snapshot-dir check nodes from their snapshots.
    Exit status 1 on any error.
    """

    _epilog = """\
Examples:

On the compute node, before restarting nova-compute::

    openstack mdev config check /etc/nova/nova.conf --sysfs /sys --long

What will change in Placement when it restarts::

    openstack mdev config check /etc/nova/nova.conf --host compute1

On the controller, every node whose snapshot was collected in
snapshots/ (one <node>.json each)::

    openstack mdev config check --snapshot-dir snapshots/
"""

    # Only --host talks to the cloud: a compute node checks its files with
    # no credentials at all.
    auth_required = False

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        options.nova_conf_files(parser, FILES)
        options.host(parser, several=False)
        options.provider_config(parser)
        options.sysfs(parser)
        options.libvirt_dir(parser)
        options.trait_prefix(parser)
        options.long(parser)
        snapshots = parser.add_mutually_exclusive_group()
        snapshots.add_argument(
            '--snapshot', metavar='<file>', dest='snapshots',
            type=options.printable_path, action='append', default=[],
            help=options.SNAPSHOT)
        snapshots.add_argument(
            '--snapshot-dir', metavar='<dir>', type=options.printable_path,
            help=CHECK_SNAPSHOT_DIR)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        if parsed_args.snapshots or parsed_args.snapshot_dir:
            return self._fleet(parsed_args)
        if not parsed_args.files and not parsed_args.provider_config:
            raise exceptions.CommandError(
                'The following arguments are required: <file> (nova.conf '
                'files) or --provider-config, or both.')
        try:
            checked = config.check(
                parsed_args.files, parsed_args.sysfs, parsed_args.host,
                parsed_args.trait_prefix, clients=cloud_clients(self.app),
                provider_configs=parsed_args.provider_config,
                libvirt_dir=parsed_args.libvirt_dir)
        except novaconf.NovaConfError as exc:
            raise exceptions.CommandError('%s.' % exc) from exc
        columns, rows = configreport.report(
            checked.findings, checked.effects, checked.files, checked.scope,
            parsed_args.long)
        outcome = common.DONE
        failure = configreport.failure(checked.findings)
        if failure:
            outcome = common.Outcome(failure=failure)
        return columns, common.Rows(rows, outcome)

    def _fleet(self, parsed_args: argparse.Namespace) -> common.Answer:
        """Many nodes from their snapshots, against one read of the
        cloud.
        """
        given = '--snapshot-dir' if parsed_args.snapshot_dir \
            else '--snapshot'
        mixed = [o for o, value in (
            ('<file>', parsed_args.files), ('--sysfs', parsed_args.sysfs),
            ('--host', parsed_args.host),
            ('--provider-config', parsed_args.provider_config)) if value]
        if mixed:
            raise exceptions.CommandError(
                "%s cannot be used with %s: a snapshot holds the node's "
                'files and devices, and its name in the cloud.' % (
                    given, ', '.join(mixed)))
        sources = config.snapshot_sources(parsed_args.snapshots,
                                          parsed_args.snapshot_dir)
        nodes = config.check_fleet(sources, parsed_args.trait_prefix,
                                   clients=cloud_clients(self.app, given))
        columns, rows = fleet.report(nodes, parsed_args.long)
        failure = fleet.failure(nodes)
        return columns, common.Rows(rows, common.Outcome(failure=failure)
                                    if failure else common.DONE)


def cloud_clients(app: shell.OpenStackShell,
                  option: str | None = None) -> config.Clients:
    """What gives config check's Placement and Compute clients when the
    check first needs them (``--host``), authenticated then: the command
    skips authentication (``auth_required = False``), so the cloud
    options are loaded with validation as the shell loads them for any
    other command. A one-line CommandError when the credentials are
    missing or incomplete, naming ``option`` (the input that needs
    them: --host when None).
    """
    made: list[tuple[placement.PlacementClient, compute.ComputeClient]] = []

    def clients() -> tuple[placement.PlacementClient,
                           compute.ComputeClient]:
        if not made:
            manager = _authenticated(app, option)
            mdev = common.manager_client(manager)
            made.append((mdev.placement, mdev.compute))
        return made[0]
    return clients


def _authenticated(app: shell.OpenStackShell, option: str | None = None
                   ) -> clientmanager.ClientManager:
    """The client manager of ``app`` with its cloud's credentials
    validated and its authentication set up.
    """
    try:
        cloud = app.cloud_config.get_one(
            cloud=app.options.cloud, argparse=app.options, validate=True)
        manager = clientmanager.ClientManager(
            cli_options=cloud, api_version=app.api_version)
        manager.setup_auth()
    except Exception as exc:
        if option is not None:
            raise exceptions.CommandError(
                '%s needs cloud credentials, which are missing or '
                'incomplete; give them as for any openstack command.'
                % option) from exc
        raise exceptions.CommandError(
            '--host needs cloud credentials, which are missing or '
            'incomplete; give them as for any openstack command, or leave '
            '--host out to check the files only.') from exc
    return manager


GENERATE_COLUMNS = ('File', 'Holds', 'Result')


def gpu_type(value: str) -> configgenerate.Choice:
    """A ``--type`` value: ``GPU=TYPE[:COUNT]``."""
    try:
        return configgenerate.parse_choice(value)
    except configgenerate.GenerateError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def inventory_host(value: str) -> str:
    """A ``--inventory-host`` value: a name a file can be named after."""
    try:
        return generate_formats.check_inventory_host(value)
    except configgenerate.GenerateError as exc:
        raise argparse.ArgumentTypeError(
            errors.words(str(exc), cli_errors.option)) from None


def _worded(exc: configgenerate.GenerateError) -> str:
    """The domain's refusal as one sentence naming the --type it is
    about, and the options it names.
    """
    sentence = errors.words(str(exc), cli_errors.option)
    if exc.choice is None:
        return '%s.' % sentence
    return '--type %s: %s.' % (exc.choice.text, sentence)


LAYOUT = (
    'files (default), kolla-ansible (the nova.conf overrides of its '
    '/etc/kolla/config) or openstack-ansible (host_vars and group_vars '
    'of /etc/openstack_deploy).')

INVENTORY_HOST = (
    "The node's name in the deployment tool's inventory, which names its "
    'files in the kolla-ansible and openstack-ansible layouts (needed '
    'there).')

TYPE = (
    "GPU=TYPE[:COUNT]: a GPU's PCI address (or one of its VFs') and its "
    'vGPU type by name, with or without NVIDIA, or number; COUNT VFs '
    'only. Repeat for each GPU.')


class GenerateConfig(common.Lister):
    """Write the vGPU configuration of a compute node from its devices.

    From the node's sysfs (or its snapshot) and one vGPU type per GPU: for
    SR-IOV vGPUs (NVIDIA vGPU 17 and later) the compute node's [pci]
    device_spec per VF, the controller's type-VF [pci] alias per class,
    and a systemd unit and script that give every VF its type back before
    nova-compute starts; for mdev GPUs [devices] enabled_mdev_types and
    [mdev_<type>] device_addresses. Bad input, a sysfs name that is no PCI
    address and files Nova or /bin/sh -n would read otherwise are refused
    first.
    """

    _epilog = """\
Examples:

On the compute node: three L4-8Q vGPUs on one GPU, L4-4Q on every VF of
another, written in vgpu/::

    openstack mdev config generate --sysfs /sys \\
        --type 0000:25:00.0=L4-8Q:3 --type 0000:26:00.0=L4-4Q \\
        --output-dir vgpu/

On the controller, from the node's snapshot::

    openstack mdev config generate --snapshot gpu3.json \\
        --type 0000:26:00.0=L4-4Q --output-dir gpu3/

The file of an mdev GPU, printed::

    openstack mdev config generate --sysfs /sys --type 0000:84:00.0=nvidia-35
"""

    auth_required = False

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        options.sysfs(parser)
        options.snapshot(parser)
        parser.add_argument('--type', metavar='<gpu>=<type>[:<count>]',
                            dest='types', type=gpu_type, action='append',
                            required=True, help=TYPE)
        options.output_dir(parser)
        options.dry_run(parser)
        parser.add_argument('--layout',
                            choices=generate_formats.FORMATS,
                            default=generate_formats.FILES, help=LAYOUT)
        parser.add_argument('--inventory-host', metavar='<name>',
                            type=inventory_host, help=INVENTORY_HOST)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        if (parsed_args.sysfs is None) == (parsed_args.snapshot is None):
            raise exceptions.CommandError(
                "Give the node's devices as --sysfs (on the node) or "
                '--snapshot (its snapshot), one of them.')
        directory = parsed_args.output_dir
        try:
            done = config_generate.generate(
                parsed_args.sysfs, parsed_args.types, directory,
                parsed_args.dry_run, snapshot_file=parsed_args.snapshot,
                layout=parsed_args.layout,
                inventory_host=parsed_args.inventory_host)
        except configgenerate.GenerateError as exc:
            raise exceptions.CommandError(_worded(exc)) from exc
        except config_generate.DirectoryError as exc:
            raise exceptions.CommandError('%s.' % exc) from exc
        if directory is None or parsed_args.dry_run:
            return (), common.Rows(text=''.join(
                '%s==> %s <==\n%s' % ('\n' if i else '', w.file.name,
                                      w.file.text)
                for i, w in enumerate(done)))
        return GENERATE_COLUMNS, common.Rows(
            [(str(w.path), w.file.holds, w.result) for w in done],
            common.unwritten(sum(1 for w in done if w.failed)))
