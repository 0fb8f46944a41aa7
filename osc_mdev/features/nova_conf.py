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

"""The nova.conf files a command is given: a compute node's (its mdev
types) and the controller's (its PCI aliases and quota options), read
through
``osc_mdev.local`` and judged by Nova's rules; what Nova refuses is a
one-line CommandError, what it silently does otherwise a warning.
"""

from collections.abc import Iterable
import logging

from osc_lib import exceptions

from osc_mdev.local import conf_files as local_novaconf
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.limit import utils as quota
from osc_mdev.nova.pci import config as pci_rules

LOG = logging.getLogger(__name__)


def read_nova_conf(path: str) -> novaconf.MdevConfig:
    """The MdevConfig nova-compute makes of ``path``; a CommandError for a
    file it cannot read or would refuse; notes on stderr for what Nova
    will silently do otherwise.
    """
    try:
        conf = local_novaconf.parse_files([path], directories=False)
        novaconf.fatal(conf)
    except novaconf.NovaConfError as exc:
        raise exceptions.CommandError('%s.' % exc) from exc
    for finding in conf.findings:
        LOG.warning('Warning: %s', finding.message)
    for note in novaconf.unmatched_notes(conf):
        LOG.warning('Note: %s.', note)
    return conf


def controller_settings(paths: list[str],
                        option: str = '--controller-conf'
                        ) -> novaconf.Settings:
    """The Settings of the controller's nova.conf (files or directories,
    read in order as oslo.config reads them); a CommandError (one line)
    for files that cannot be read.
    """
    try:
        return local_novaconf.load(paths)
    except novaconf.NovaConfError as exc:
        raise exceptions.CommandError('%s: %s.' % (option, exc)) from exc


def controller_pci(paths: list[str], option: str = '--controller-conf'
                   ) -> pci_rules.PciConfig:
    """The PciConfig of the controller's nova.conf (its aliases and
    ``pci_in_placement``, ``controller_settings``); a CommandError (one
    line) for files that cannot be read or aliases Nova refuses.
    """
    return pci_of(controller_settings(paths, option), option)


def pci_of(settings: novaconf.Settings,
           option: str = '--controller-conf') -> pci_rules.PciConfig:
    """The PciConfig of the controller's Settings; a CommandError (one
    line) for aliases Nova refuses.
    """
    pci = pci_rules.pci_config(settings)
    error = pci.alias_error
    if error is not None:
        raise exceptions.CommandError('%s: %s: %s' % (
            option, error.where, error.message))
    return pci


def controller_quota(paths: list[str],
                     option: str = '--controller-conf') -> quota.Strategy:
    """The ``[quota]`` options of the controller's nova.conf (files or
    directories, read in order, ``quota_of``); Nova's unified limits
    with their defaults when ``paths`` is empty (``assumed_note`` says
    so). A CommandError (one line) for files that cannot be read or values
    Nova refuses.
    """
    if not paths:
        return quota.Strategy()
    return quota_of(controller_settings(paths, option), option)


def quota_of(settings: novaconf.Settings,
             option: str = '--controller-conf') -> quota.Strategy:
    """The ``[quota]`` driver and unified limits options of the
    controller's Settings; a CommandError (one line) for values Nova
    refuses, a warning when its driver is not the unified limits driver
    (Nova then uses none of Keystone's limits).
    """
    try:
        strategy = quota.strategy_from(settings)
    except ValueError as exc:
        raise exceptions.CommandError('%s: %s.' % (option, exc)) from exc
    if not strategy.unified:
        LOG.warning("Warning: [quota] driver is %s in %s: Nova uses none "
                    "of Keystone's limits (only %s does), so no GPU class "
                    'has a limit.', strategy.driver, option,
                    quota.UNIFIED_LIMITS_DRIVER)
    return strategy


def assumed_note() -> None:
    """The one line saying what is assumed without the controller's
    ``[quota]`` options.
    """
    LOG.warning('Note: without --controller-conf, Nova is assumed to use '
                '%s with its default [quota] options (under Nova\'s '
                'default driver, %s, none of these limits applies).',
                quota.UNIFIED_LIMITS_DRIVER, quota.DB_QUOTA_DRIVER)


def compute_confs(values: Iterable[tuple[str, str]]
                  ) -> dict[str, novaconf.MdevConfig]:
    """``{host: MdevConfig}`` of the ``(host, file)`` pairs of
    --compute-conf; a CommandError for a host named twice or a file Nova
    would refuse.
    """
    confs: dict[str, novaconf.MdevConfig] = {}
    for host, path in values:
        if host in confs:
            raise exceptions.CommandError(
                '--compute-conf names host %s twice; give one file per '
                'host.' % host)
        confs[host] = read_nova_conf(path)
    return confs
