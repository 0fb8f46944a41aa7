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

"""``openstack mdev type list``."""

import argparse

from osc_lib import exceptions

from osc_mdev.features.type import gpu_types as gpu_type_model
from osc_mdev.features.type import reads as type_reads
from osc_mdev.features.type import run as type_run
from osc_mdev.v1 import common
from osc_mdev.v1 import options

COLUMNS = ('GPU', 'Type', 'Name', 'Available', 'Enabled')
LONG_COLUMNS = COLUMNS + ('Device API', 'Description')
FILES = ('nova.conf file, or a directory read like --config-dir, for the '
         'Enabled column. Give every file nova-compute reads, in its order: '
         'later values win.')


def row(found: gpu_type_model.GpuType,
        columns: tuple[str, ...]) -> tuple[object, ...]:
    values = {'GPU': found.gpu, 'Type': found.name,
              'Name': found.readable_name, 'Available': found.available,
              'Enabled': found.enabled, 'Device API': found.device_api,
              'Description': found.description}
    return tuple(values[column] for column in columns)


class ListType(common.Lister):
    """List the mdev and vGPU types each GPU of a compute node can serve.

    Read from the node's sysfs (--sysfs, /sys unless given), no cloud
    credentials needed: one row per GPU and type, the types of every mdev
    parent and those of NVIDIA GPUs whose VFs are typed through sysfs
    (vGPU 17 and later). With the node's nova.conf files, Enabled says
    whether Nova uses the type on that GPU (None without files); --long
    adds the type's device API and description.
    """

    _epilog = """\
Examples:

On the compute node, which types each GPU can serve::

    openstack mdev type list

Which of them nova-compute uses with its files, from a copy of sysfs::

    openstack mdev type list /etc/nova/nova.conf --sysfs node1-sys/ --long
"""

    auth_required = False

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        options.node_files(parser, FILES)
        options.long(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        # A column of --long named with -c brings the long view.
        long_view = parsed_args.long or bool(
            set(parsed_args.columns or ()) - set(COLUMNS))
        columns = LONG_COLUMNS if long_view else COLUMNS
        found = type_reads.gpu_types(parsed_args.files, parsed_args.sysfs)
        return columns, common.Rows(row(t, columns) for t in found)


CHANGE_COLUMNS = ('Step', 'Action', 'Detail')


class ChangeType(common.Lister):
    """Plan or finish giving an mdev GPU another type.

    Without --finish, the steps in order, nothing written: servers to
    move off the GPU (refused, naming them, when one cannot move), mdevs
    to remove, the nova.conf diff, the restart, what Nova does to the
    provider and traits, and the flavors' capacity now and after. With
    --finish, after the restart: checks the provider, moves the type
    trait and counts the flavors; a step not done is refused.
    """

    _epilog = """\
Examples:

The steps to give GPU 0000:84:00.0 of gpu1 the type nvidia-12::

    openstack mdev type change gpu1:0000:84:00.0 --to nvidia-12 \\
        --compute-conf gpu1=gpu1-nova.conf

Once nova-compute restarted with the new file::

    openstack mdev type change gpu1:0000:84:00.0 --to nvidia-12 \\
        --compute-conf gpu1=gpu1-nova.conf --finish
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        parser.add_argument(
            'gpu', metavar='<gpu>',
            help='The GPU: provider name or UUID, or HOST:PCI_ADDRESS, as '
                 "'openstack mdev provider list' shows it.")
        parser.add_argument(
            '--to', metavar='<type>', required=True,
            help='The mdev type the GPU takes (nvidia-12).')
        options.compute_conf(parser)
        options.trait_prefix(parser)
        parser.add_argument(
            '--finish', action='store_true',
            help='After nova-compute restarted with the new nova.conf: '
                 'check the provider and move the type trait.')
        options.dry_run(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        if not parsed_args.compute_conf:
            raise exceptions.CommandError(
                "Give the nova.conf of the GPU's compute node with "
                '--compute-conf HOST=FILE.')
        mdev = common.client(self.app)
        run = type_run.finish if parsed_args.finish else type_run.plan
        kwargs = {'dry_run': parsed_args.dry_run} if parsed_args.finish \
            else {}
        found = run(mdev.placement, mdev.compute, parsed_args.gpu,
                    parsed_args.to, parsed_args.compute_conf,
                    parsed_args.trait_prefix, **kwargs)
        return CHANGE_COLUMNS, common.Rows(
            (i, s.action, s.detail) for i, s in enumerate(found, 1))
