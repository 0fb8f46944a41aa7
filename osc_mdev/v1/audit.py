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

"""``openstack mdev audit``."""

import argparse

from osc_lib import exceptions

from osc_mdev.features.audit import checks as domain
from osc_mdev.features.audit import reads as audit
from osc_mdev.features import nova_conf
from osc_mdev.v1 import common
from osc_mdev.v1 import options


def fix_checks(value: str) -> tuple[str, ...]:
    """The checks a ``--fix`` value names (``CHECK[,CHECK]``), each one
    that has a repair, in order and once.
    """
    wanted = tuple(dict.fromkeys(
        c.strip() for c in value.split(',') if c.strip()))
    if not wanted:
        raise argparse.ArgumentTypeError(
            'give at least one check, such as %s'
            % domain.ORPHANED_ALLOCATION)
    for check in wanted:
        if check not in domain.CHECKS:
            raise argparse.ArgumentTypeError(
                "'%s' is not a check; the checks are %s"
                % (check, ', '.join(domain.CHECKS)))
        if check not in domain.FIXABLE:
            raise argparse.ArgumentTypeError(
                'check %s has no automatic fix (only %s do); its findings '
                'say the command that fixes them'
                % (check, ' and '.join(domain.FIXABLE)))
    return wanted


COLUMNS = ('Severity', 'Check', 'Host', 'Device', 'Server', 'Message')
REPAIR_COLUMNS = ('Repair',)
LONG_COLUMNS = ('Resource Class', 'Provider UUID')


class Audit(common.Lister):
    """Find what Nova, Placement and the flavors disagree on, and repair it.

    Answers "is the GPU accounting of this cloud sound?": orphaned and
    missing allocations, servers on another node than their vGPU, usage
    above capacity, lost or wrong type traits, devices whose traits differ
    from their host's provider config file, and flavors no host can serve.
    One row per finding, whose message says the command that fixes it;
    --fix repairs orphaned allocations and lost traits. Exit status 1
    while an error-level finding remains.
    """

    _epilog = """\
Examples:

The whole cloud (fits a monitoring job)::

    openstack mdev audit

One host, its GPUs' types taken from its nova.conf::

    openstack mdev audit --host compute1 --compute-conf \\
        compute1=/etc/nova/nova.conf

Repair what is safe to repair, shown first::

    openstack mdev audit --fix orphaned-allocation,lost-trait --dry-run
"""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = common.one_line_errors(super().get_parser(prog_name))
        options.host(parser)
        options.nova_confs(parser)
        options.provider_config(parser)
        options.long(parser)
        parser.add_argument(
            '--fix', metavar='<check>[,<check>]', type=fix_checks,
            help='Repair the findings of these checks, the two that have a '
                 'repair: %s and %s; a Repair column reports each.'
                 % domain.FIXABLE)
        options.dry_run(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> common.Answer:
        checks = parsed_args.fix or ()
        if parsed_args.fix is None and parsed_args.dry_run:
            raise exceptions.CommandError(
                '--dry-run shows what --fix would do; give --fix too.')
        hosts = tuple(dict.fromkeys(parsed_args.host))
        confs = nova_conf.compute_confs(parsed_args.compute_conf)
        files = audit.provider_config_files(parsed_args.provider_config,
                                            hosts)
        pci_config = None
        if parsed_args.controller_conf:
            pci_config = nova_conf.controller_pci(parsed_args.controller_conf)
        mdev = common.client(self.app)
        placement = mdev.placement
        flavors = not hosts
        snapshot = audit.read(placement, mdev.compute, hosts, flavors,
                              conf_hosts=tuple(confs) + tuple(files),
                              pci_config=pci_config)
        findings = audit.audit(snapshot, confs, flavors, pci_config,
                               parsed_args.trait_prefix, files)
        outcomes = {}
        if checks:
            outcomes = audit.fix(placement, domain.repairs(findings, checks),
                                 parsed_args.dry_run)
        return report(findings, checks, outcomes, parsed_args.dry_run,
                      parsed_args.long)


def report(findings: list[domain.Finding], checks: tuple[str, ...],
           outcomes: dict[tuple[str, ...], audit.Outcome], dry_run: bool,
           long: bool) -> tuple[tuple[str, ...], common.Rows]:
    """The rows of ``findings``, each with the Repair of ``checks`` (its
    outcome), and the exit status: 1 while an error-level finding is
    left unrepaired, or a CommandError when a repair failed.
    """
    long_cols = LONG_COLUMNS if long else ()
    rows = []
    errors = 0
    for finding in findings:
        done = None
        if finding.repair is not None and finding.check in checks:
            done = outcomes.get(domain.repair_key(finding.repair))
        repaired = done is not None and not done.failed and not dry_run
        if finding.severity == domain.ERROR and not repaired:
            errors += 1
        repair = ()
        if checks:
            repair = (done.result if done else
                      '' if finding.check not in checks else
                      'no automatic repair',)
        rows.append(common.properties(finding, COLUMNS) + repair
                    + common.properties(finding, long_cols))
    cols = COLUMNS + (REPAIR_COLUMNS if checks else ()) + long_cols
    failures = sum(1 for o in outcomes.values() if o.failed)
    outcome = common.verdict(not errors)
    if failures:
        outcome = common.Outcome(failure=(
            '%d repair%s failed; see the Repair column and run the '
            'audit again.' % (failures, '' if failures == 1 else 's')))
    return cols, common.Rows(rows, outcome)
