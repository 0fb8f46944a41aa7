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
    node capacity, used and free, with --flavor the servers that still fit
    (what 'openstack mdev capacity --flavor' counts), and
    openstack_mdev_scrape_success. It costs what 'openstack mdev provider
    list' costs, a few requests whatever the size of the cloud. With
    --output the file is replaced atomically and kept on any failure.
    """

    _epilog = """\
Examples:

Print the metrics::

    openstack mdev metrics

For node_exporter's textfile collector, from cron every minute::

    openstack mdev metrics --flavor vgpu.small \\
        --output /var/lib/node_exporter/textfile/openstack_mdev.prom
"""

    def get_parser(self, prog_name):
        parser = common.one_line_errors(super().get_parser(prog_name))
        options.flavor(parser)
        options.kind(parser)
        options.output(parser)
        parser.add_argument(
            '--quota', action='store_true',
            help="Also each project's GPU used and limit "
                 "(openstack_mdev_project_used, _limit), read as 'openstack "
                 "mdev quota list' reads them: Keystone's admin role needed.")
        return parser

    def take_action(self, parsed_args):
        if parsed_args.output:
            metrics.check_output(parsed_args.output)
        mdev = self.app.client_manager.mdev
        compute = mdev.compute if parsed_args.flavor or parsed_args.quota \
            else None
        result = metrics.scrape(
            mdev.placement, compute, flavors=parsed_args.flavor,
            kinds=domain.KIND_CHOICES[parsed_args.kind],
            identity=mdev.identity if parsed_args.quota else None)
        if result.error is not None:
            if not parsed_args.output:
                self.app.stdout.write(result.text)
            raise exceptions.CommandError(
                'Reading the cloud failed: %s%s' % (
                    result.error.rstrip('.'),
                    '; %s was left as it was.' % parsed_args.output
                    if parsed_args.output else '.'))
        if parsed_args.output:
            metrics.write(parsed_args.output, result.text)
        else:
            self.app.stdout.write(result.text)
        return 0
