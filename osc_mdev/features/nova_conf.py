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
``osc_mdev.local`` and judged by Nova's rules; what Nova refuses is an
``errors.Invalid`` naming the input (``compute_conf``,
``controller_conf``), what it silently does otherwise a warning.
"""

from collections.abc import Iterable
import logging

from osc_mdev.base import errors
from osc_mdev.local import conf_files as local_novaconf
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.limit import utils as quota_rules
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

LOG = logging.getLogger(__name__)

#: The controller's nova.conf, as a sentence names it.
CONTROLLER = errors.given('controller_conf')


def read_nova_conf(path: str) -> libvirt_driver.MdevConfig:
    """The MdevConfig nova-compute makes of ``path``; ``errors.Invalid``
    for a file it cannot read or would refuse; notes on stderr for what
    Nova will silently do otherwise.
    """
    try:
        conf = local_novaconf.parse_files([path], directories=False)
        libvirt_driver.fatal(conf)
    except novaconf.NovaConfError as exc:
        raise errors.Invalid('%s.' % exc, parameter='compute_conf',
                             path=path) from exc
    for finding in conf.findings:
        LOG.warning('Warning: %s', finding.message)
    for note in libvirt_driver.unmatched_notes(conf):
        LOG.warning('Note: %s.', note)
    return conf


def controller_settings(paths: list[str]) -> novaconf.Settings:
    """The Settings of the controller's nova.conf (files or directories,
    read in order as oslo.config reads them); ``errors.Invalid`` for
    files that cannot be read.
    """
    try:
        return local_novaconf.load(paths)
    except novaconf.NovaConfError as exc:
        raise errors.Invalid('%s: %s.' % (CONTROLLER, exc),
                             parameter='controller_conf',
                             paths=list(paths)) from exc


def controller_pci(paths: list[str]) -> pci_rules.PciConfig:
    """The PciConfig of the controller's nova.conf (its aliases and
    ``pci_in_placement``, ``controller_settings``); ``errors.Invalid``
    for files that cannot be read or aliases Nova refuses.
    """
    return pci_of(controller_settings(paths))


def pci_of(settings: novaconf.Settings) -> pci_rules.PciConfig:
    """The PciConfig of the controller's Settings; ``errors.Invalid``
    for aliases Nova refuses (data: ``where``).
    """
    pci = pci_rules.pci_config(settings)
    error = pci.alias_error
    if error is not None:
        raise errors.Invalid(
            '%s: %s: %s' % (CONTROLLER, error.where, error.message),
            parameter='controller_conf', where=error.where)
    return pci


def controller_quota(paths: list[str]) -> quota_rules.Strategy:
    """The ``[quota]`` options of the controller's nova.conf (files or
    directories, read in order, ``quota_of``); Nova's unified limits
    with their defaults when ``paths`` is empty (the command says
    so). ``errors.Invalid`` for files that cannot be read or values Nova
    refuses.
    """
    if not paths:
        return quota_rules.Strategy()
    return quota_of(controller_settings(paths))


def quota_of(settings: novaconf.Settings) -> quota_rules.Strategy:
    """The ``[quota]`` driver and unified limits options of the
    controller's Settings; ``errors.Invalid`` for values Nova refuses.
    ``Strategy.unified`` says whether Nova uses Keystone's limits at all.
    """
    try:
        strategy = quota_rules.strategy_from(settings)
    except ValueError as exc:
        raise errors.Invalid('%s: %s.' % (CONTROLLER, exc),
                             parameter='controller_conf') from exc
    return strategy


def compute_confs(values: Iterable[tuple[str, str]]
                  ) -> dict[str, libvirt_driver.MdevConfig]:
    """``{host: MdevConfig}`` of the ``(host, file)`` pairs of
    ``compute_conf``; ``errors.Invalid`` for a host named twice or a
    file Nova would refuse.
    """
    confs: dict[str, libvirt_driver.MdevConfig] = {}
    for host, path in values:
        if host in confs:
            raise errors.Invalid(
                '%s names host %s twice; give one file per host.'
                % (errors.given('compute_conf'), host),
                parameter='compute_conf', host=host)
        confs[host] = read_nova_conf(path)
    return confs
