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
from osc_mdev.features.config.check import reads as config
from osc_mdev.features.config.check import report as configreport
from osc_mdev.features.config.generate import plan as configgenerate
from osc_mdev.features.config.generate import run as config_generate
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.v1 import common
from osc_mdev.v1 import options

if typing.TYPE_CHECKING:
    from osc_lib import shell


FILES = ('nova.conf file, or a directory read like --config-dir. Give every '
         'file nova-compute reads, in its order: later values win, an option '
         "in none is judged at Nova's default.")


class CheckConfig(common.Lister):
    """Check a compute node's nova.conf for mdevs and PCI devices.

    Answers "will nova-compute start with these files, and do what they
    say?": nova.conf files (and --provider-config files) are judged by
    Nova's rules; one row per finding. --sysfs checks against the node's
    devices, --host against the cloud (only it needs credentials); with
    both, each mdev a server's libvirt domain (--libvirt-dir) holds and
    sysfs lacks is named with its server, parent GPU and type. A last row
    says what was checked, --long adds each device's type and class.
    Exit status 1 on any error.
    """

    _epilog = """\
Examples:

On the compute node, before restarting nova-compute::

    openstack mdev config check /etc/nova/nova.conf --sysfs /sys --long

What will change in Placement when it restarts::

    openstack mdev config check /etc/nova/nova.conf --host compute1
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
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
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


def cloud_clients(app: shell.OpenStackShell) -> config.Clients:
    """What gives config check's Placement and Compute clients when the
    check first needs them (``--host``), authenticated then: the command
    skips authentication (``auth_required = False``), so the cloud
    options are loaded with validation as the shell loads them for any
    other command. A one-line CommandError when the credentials are
    missing or incomplete.
    """
    made: list[tuple[placement.PlacementClient, compute.ComputeClient]] = []

    def clients() -> tuple[placement.PlacementClient,
                           compute.ComputeClient]:
        if not made:
            manager = _authenticated(app)
            mdev = common.manager_client(manager)
            made.append((mdev.placement, mdev.compute))
        return made[0]
    return clients


def _authenticated(app: shell.OpenStackShell
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


def _worded(exc: configgenerate.GenerateError) -> str:
    """The domain's refusal as one sentence naming the --type it is
    about.
    """
    if exc.choice is None:
        return '%s.' % exc
    return '--type %s: %s.' % (exc.choice.text, exc)


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
                parsed_args.dry_run, snapshot_file=parsed_args.snapshot)
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
