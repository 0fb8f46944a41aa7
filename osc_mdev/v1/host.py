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

"""``openstack mdev host snapshot`` and ``host restore``."""

import argparse
import logging

from osc_mdev.api import compute
from osc_mdev.api import placement
from osc_mdev.features.host import restore as restore_script
from osc_mdev.features.host import run as host_run
from osc_mdev.features.host import writes as host_writes
from osc_mdev.v1 import common
from osc_mdev.v1 import options

LOG = logging.getLogger(__name__)

FILES = ('nova.conf file, or a directory read like --config-dir, to keep '
         'in the snapshot; give every file nova-compute reads, in its '
         'order (default: /etc/nova/nova.conf).')


class SnapshotHost(common.Command):
    """Take a compute node's snapshot for the checks run on the controller.

    On the compute node, with no cloud credentials and no network: one
    JSON document with what the host checks read (the GPUs' and VFs'
    sysfs files and links, the mdevs, the nova.conf files as read, the
    libvirt domains' definitions, the node's names), raw, with a format
    version. Read-only; a path that cannot be read is listed in the
    document. 'openstack mdev config check --snapshot' judges it on the
    controller.
    """

    _epilog = """\
Examples:

On the compute node::

    openstack mdev host snapshot --output /tmp/gpu3.json

With nova.conf and its directory, on a copy of sysfs::

    openstack mdev host snapshot /etc/nova/nova.conf /etc/nova/nova.conf.d \\
        --sysfs node1-sys/ --output node1.json
"""

    auth_required = False

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        options.node_files(parser, FILES)
        options.libvirt_dir(parser)
        options.node_name(parser)
        options.output(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> int:
        host_run.check_output(parsed_args.output)
        document = host_run.take(parsed_args.sysfs, parsed_args.files,
                                 parsed_args.libvirt_dir,
                                 parsed_args.node_name)
        if parsed_args.output:
            host_run.write(parsed_args.output, document)
        else:
            self.app.stdout.write(host_run.text(document))
        return 0


class RestoreHost(common.Lister):
    """Write the script that gives a compute node its lost mdevs back.

    From the node's snapshot: each mdev a server's libvirt domain holds
    that the node no longer has, with its parent GPU (the server's
    allocation in Placement) and type (nova.conf, else the type trait).
    The script, run on the node, creates each with its UUID (mdevctl
    where the node has it, else sysfs), skips one already there, refuses
    a GPU with no room left of the type. One row per lost mdev.
    """

    _epilog = """\
Examples:

On the controller, from the snapshot taken on the node after its reboot::

    openstack mdev host restore --snapshot gpu3.json --output-dir restore/

The script, printed::

    openstack mdev host restore --snapshot gpu3.json
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        options.snapshot(parser, required=True)
        options.output_dir(parser)
        options.dry_run(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        def clients() -> tuple[placement.PlacementClient,
                               compute.ComputeClient]:
            mdev = common.manager_client(self.app.client_manager)
            return mdev.placement, mdev.compute

        done = host_writes.restore(parsed_args.snapshot,
                                   parsed_args.output_dir,
                                   parsed_args.dry_run, clients)
        for finding in done.findings:
            LOG.warning('%s: %s', finding.where, finding.message)
        if parsed_args.output_dir is None:
            return (), common.Rows(text=done.text)
        rows = restore_script.rows(done.steps)
        if done.path is not None:
            rows = [row[:4] + ('%s (in %s)' % (row[4], done.path),)
                    for row in rows]
        unrestored = sum(1 for s in done.steps if not s.restores)
        outcome = common.DONE if not unrestored else common.Outcome(
            failure='%d lost mdev(s) cannot be restored by the script; see '
            'the Action column.' % unrestored)
        return restore_script.COLUMNS, common.Rows(rows, outcome)
