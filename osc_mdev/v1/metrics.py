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

"""``openstack mdev metrics``."""

import argparse

from osc_lib.command import command
from osc_lib import exceptions

from osc_mdev.domain import providers as domain
from osc_mdev.usecases import metrics
from osc_mdev.v1 import common
from osc_mdev.v1 import options


class Metrics(command.Command):
    """Print the cloud's GPU usage as Prometheus metrics.

    Answers "how full are the GPUs, and how many more servers of my
    flavors fit?" every minute, for Prometheus: per device and per compute
    node capacity, used and free, with --flavor the servers that still
    fit (what 'openstack mdev capacity --flavor' counts). It costs what
    'openstack mdev provider list' costs, a few requests whatever the size
    of the cloud. A flavor or device that cannot be read gets its _up
    series at 0; the rest is written all the same and the command exits
    non-zero.
    """

    _epilog = """\
Examples:

Print the metrics::

    openstack mdev metrics

For node_exporter's textfile collector, from cron every minute::

    openstack mdev metrics --flavor vgpu.small \\
        --output /var/lib/node_exporter/textfile/openstack_mdev.prom
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        options.flavor(parser)
        options.kind(parser)
        options.output(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> int:
        if parsed_args.output:
            metrics.check_output(parsed_args.output)
        mdev = self.app.client_manager.mdev
        compute = mdev.compute if parsed_args.flavor else None
        result = metrics.scrape(
            mdev.placement, compute, flavors=parsed_args.flavor,
            kinds=domain.KIND_CHOICES[parsed_args.kind])
        if parsed_args.output:
            metrics.write(parsed_args.output, result.text)
        else:
            self.app.stdout.write(result.text)
        if result.failed:
            raise exceptions.CommandError(
                metrics.failure_message(result, parsed_args.output))
        return 0
