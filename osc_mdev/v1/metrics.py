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
import logging

from osc_lib import exceptions

from osc_mdev.cloud import providers as domain
from osc_mdev.features.metrics import reads as metrics
from osc_mdev.features import nova_conf
from osc_mdev.v1 import common
from osc_mdev.v1 import errors
from osc_mdev.v1 import options

LOG = logging.getLogger(__name__)

ALLOCATIONS = (
    'Also a series per server and GPU (openstack_mdev_allocation_used), '
    'with its project, flavor and PCI address. Costs one request per GPU '
    'in use and per compute node with servers.')


class Metrics(common.Command):
    """Print the cloud's GPU usage as Prometheus metrics.

    Answers "how full are the GPUs, and how many more servers of my
    flavors fit?" every minute, for Prometheus: capacity, used and free
    per GPU (mdev and PCI-in-Placement) and compute node, with --flavor
    the servers that still fit, with --allocations the servers on each
    GPU. A flavor or device that cannot be read gets its _up series at 0;
    the rest is written all the same and the command exits non-zero.
    """

    _epilog = """\
Examples:

Print the metrics::

    openstack mdev metrics

For node_exporter's textfile collector, from cron every minute, with
the projects' quotas and a PCI alias flavor as the controller's nova.conf
defines them::

    openstack mdev metrics --flavor vgpu.small --flavor l40s.vf --quota \\
        --controller-conf /etc/nova/nova.conf \\
        --output /var/lib/node_exporter/textfile/openstack_mdev.prom

With the servers on each GPU, and types as compute1's nova.conf names
them::

    openstack mdev metrics --allocations \\
        --compute-conf compute1=/etc/nova/compute1.conf
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        options.flavor(parser)
        options.kind(parser, default='all')
        options.compute_conf(parser)
        options.controller_conf(parser)
        parser.add_argument('--allocations', action='store_true',
                            help=ALLOCATIONS)
        options.output(parser)
        parser.add_argument(
            '--quota', action='store_true',
            help="Also each project's GPU used and limit "
                 "(openstack_mdev_project_used, _limit), read as 'openstack "
                 "mdev quota list' reads them: Keystone's admin role needed.")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> int:
        confs = metrics.check_input(parsed_args.output,
                                    parsed_args.compute_conf)
        pci_config, strategy = _controller(parsed_args)
        mdev = common.client(self.app)
        compute = mdev.compute if (
            parsed_args.flavor or parsed_args.allocations
            or parsed_args.quota) else None
        result = metrics.scrape(
            mdev.placement, compute, flavors=parsed_args.flavor,
            kinds=domain.KIND_CHOICES[parsed_args.kind], confs=confs,
            allocations=parsed_args.allocations,
            identity=mdev.identity if parsed_args.quota else None,
            pci_config=pci_config, strategy=strategy, name=errors.option)
        for host in result.unknown_hosts:
            LOG.warning("--compute-conf names %s, which is no compute node "
                        "in Placement; its file was not used (hosts are "
                        "named as in 'openstack hypervisor list').", host)
        if parsed_args.output:
            metrics.write(parsed_args.output, result.text)
        else:
            self.app.stdout.write(result.text)
        outcome = common.DONE
        if result.failed:
            outcome = common.Outcome(failure=metrics.failure_message(
                result, parsed_args.output))
        return outcome.exit_status()


def _controller(parsed_args: argparse.Namespace) -> tuple:
    """``(PciConfig, Strategy)`` of --controller-conf, each None when not
    given or not asked for (--flavor, --quota).
    """
    paths = parsed_args.controller_conf
    if not paths:
        return None, None
    if not (parsed_args.flavor or parsed_args.quota):
        raise exceptions.CommandError(
            '--controller-conf gives the PCI aliases of --flavor and the '
            '[quota] options of --quota; use it with one of them.')
    settings = nova_conf.controller_settings(paths)
    strategy = nova_conf.quota_of(settings) if parsed_args.quota else None
    if strategy is not None:
        common.warn_quota_driver(strategy)
    return (nova_conf.pci_of(settings) if parsed_args.flavor else None,
            strategy)
