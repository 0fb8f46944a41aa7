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

"""``openstack mdev quota list``."""

import argparse
import logging

from osc_mdev.base import errors
from osc_mdev.features import nova_conf
from osc_mdev.features.quota import reads
from osc_mdev.nova.limit import utils as quota_rules
from osc_mdev.v1 import common
from osc_mdev.v1 import options

LOG = logging.getLogger(__name__)

COLUMNS = ('Project', 'Resource', 'Used', 'Limit', 'Free', 'Rule')
LONG_COLUMNS = ('Project', 'Project Name', 'Resource', 'Used', 'Limit',
                'Free', 'Rule')
FLAVOR_COLUMNS = ('Project', 'Fits', 'Quota Allows', 'Capacity Allows',
                  'Bound By')
PROJECT = 'Project name or ID; repeat for several.'


class ListQuota(common.Lister):
    """List GPU usage per project against the limits Nova enforces.

    Answers "who holds the GPUs, and who is about to hit the limit?": a
    row per project and GPU class for each project with GPU usage or a GPU
    limit of its own, with Used as Nova counts it, Limit as Nova's [quota]
    driver enforces it (-1: unlimited) and the Rule that decided it, least
    free first; without the admin role, the user's own project. With
    --flavor: how many more servers each project can boot, and what binds.
    """

    _epilog = """\
Examples:

Every project's GPU quota, least free first (as a project member or
reader: your own project's)::

    openstack mdev quota list --long

Two projects, with the strategy of the controller's nova.conf::

    openstack mdev quota list --project ml-team --project render \\
        --controller-conf /etc/nova/nova.conf

How many more servers of a flavor each project can boot::

    openstack mdev quota list --flavor vgpu.nvidia-12
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        parser.add_argument('--project', metavar='<project>',
                            action='append', default=[], help=PROJECT)
        options.resource_class(parser)
        options.flavors(parser)
        options.long(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        strategy = nova_conf.controller_quota(parsed_args.controller_conf)
        common.warn_quota_driver(strategy)
        pci_config = None
        if parsed_args.flavor and parsed_args.controller_conf:
            pci_config = nova_conf.controller_pci(
                parsed_args.controller_conf)
        mdev = common.client(self.app)
        token = reads.viewer(mdev.identity)
        if parsed_args.flavor and not reads.sees_every_project(token):
            raise reads.admin_refusal(
                token, "%s counts the cloud's capacity from Placement's "
                'resource providers, which' % errors.given('flavor'),
                parameter='flavor')
        report = reads.quota_list(
            mdev.placement, mdev.identity, mdev.compute,
            projects=tuple(parsed_args.project),
            resource_class=parsed_args.resource_class, strategy=strategy,
            names=parsed_args.long, token=token)
        if not parsed_args.controller_conf:
            LOG.warning('Note: without --controller-conf, Nova is assumed to '
                        'use %s with its default [quota] options (under '
                        "Nova's default driver, %s, none of these limits "
                        'applies).', quota_rules.UNIFIED_LIMITS_DRIVER,
                        quota_rules.DB_QUOTA_DRIVER)
        if parsed_args.flavor:
            fits = reads.flavor_fits(mdev.placement, mdev.compute, report,
                                     parsed_args.flavor, pci_config)
            return _fit_rows(parsed_args, report, fits)
        cols = LONG_COLUMNS if parsed_args.long else COLUMNS
        rows = []
        for row in report.rows:
            values = {'Project': row.project_id,
                      'Project Name': report.names.get(row.project_id, ''),
                      'Resource': row.resource, 'Used': row.used,
                      'Limit': row.limit, 'Free': row.free,
                      'Rule': row.effective.rule}
            rows.append(tuple(values[c] for c in cols))
        return cols, common.Rows(rows)


def _fit_rows(parsed_args: argparse.Namespace, report: reads.QuotaReport,
              fits: list) -> tuple[tuple[str, ...], common.Rows]:
    """The columns and rows of ``quota list --flavor``."""
    cols: tuple[str, ...] = FLAVOR_COLUMNS
    if parsed_args.long:
        cols = cols[:1] + ('Project Name',) + cols[1:]
    if len(parsed_args.flavor) > 1:
        cols = ('Flavor',) + cols
    rows = []
    for fit in fits:
        values = {'Flavor': fit.flavor, 'Project': fit.project_id,
                  'Project Name': report.names.get(fit.project_id, ''),
                  'Fits': fit.fits, 'Quota Allows': fit.quota.servers,
                  'Capacity Allows': fit.capacity,
                  'Bound By': fit.bound_by}
        rows.append(tuple(values[c] for c in cols))
    return cols, common.Rows(rows)
