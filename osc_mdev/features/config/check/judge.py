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

"""One compute node judged: its parsed nova.conf files against its
devices (a ``host.gpus.Host``) and what Placement has for it (a
``NodePlacement``), with no reads of its own.

``NodePlacement`` is what Placement has for one node: its mdev devices
(``mdev.PlacementDevice``) and its PCI providers
(``pci.PlacementPciProvider``), each with the servers holding it. Two
kinds answer it: the reads of one host
(``features.config.check.reads.HostPlacement``) and a share of the
whole cloud read once (``features.config.check.fleet``).
"""

from collections.abc import Sequence
import dataclasses
import typing

from osc_mdev.cloud import traits as trait_logic
from osc_mdev.features.config.check import mdev as configcheck
from osc_mdev.features.config.check import pci as configcheck_pci
from osc_mdev.features.config.check import report as configreport
from osc_mdev.features.config.check import usage as configcheck_usage
from osc_mdev.features.config.check import vf as configcheck_vf
from osc_mdev.host import gpus as host_gpus
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.pci import devspec as pci_devspec
from osc_mdev.nova.pci import placement_translator as translator
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver


class NodePlacement(typing.Protocol):
    """What Placement has for one compute node, read when first asked."""

    @property
    def host(self) -> str:
        """The node's name: its root provider's."""

    def devices(self) -> list[configcheck.PlacementDevice]:
        """The node's mdev devices, with the servers on each."""

    def pci_providers(self, servers: bool = False
                      ) -> list[configcheck_pci.PlacementPciProvider]:
        """The node's PCI providers; with ``servers``, each in use with
        the servers holding its class there.
        """


@dataclasses.dataclass
class Checked:
    """The findings of the files, the effective result, and what was
    checked.
    """

    findings: list[novaconf.Finding]
    effects: list[configreport.Effect]  # devices, [pci] parts
    files: tuple[str, ...]              # the files read, in order
    scope: list[str]                    # what was checked, in words

    @property
    def errors(self) -> list[novaconf.Finding]:
        return [f for f in self.findings if f.severity == novaconf.ERROR]


def judge(conf: libvirt_driver.MdevConfig, node: host_gpus.Host | None,
          placed: NodePlacement | None = None,
          trait_prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX,
          sysfs_root: str | None = None,
          provider_configs: bool = False) -> Checked:
    """The findings of the parsed files ``conf`` (``libvirt_driver.
    supported_vgpu_types``) against the node's devices ``node`` (read
    under ``sysfs_root``, named in the scope) and, with ``placed``, what
    Placement has for the node; ``provider_configs``: provider config
    files were checked too (for the scope).
    """
    settings = conf.settings
    assert settings is not None     # parsed from the files
    pci = pci_rules.pci_config(settings)
    host = placed.host if placed is not None else None
    vfs = (configcheck_vf.vf_check(pci, node) if node is not None
           else configcheck_vf.VfCheck([]))
    findings = list(conf.findings)
    findings += configcheck.file_findings(conf, sysfs_checked=node is not None)
    findings += configcheck.post_copy_findings(conf, pci.specs)
    found, effects = _mdev_half(conf, pci, node, placed, trait_prefix)
    findings += found
    placed_pci = (placed.pci_providers()
                  if placed is not None and (pci.configured or vfs.gpus)
                  else [])
    if pci.configured:
        found, pci_effects = _pci_half(pci, node, host, placed_pci,
                                       vfs.explained)
        findings += found
        effects += pci_effects
    if placed is not None and vfs.gpus:
        findings += configcheck_usage.vf_usage_findings(
            vfs, placed.host, placed.pci_providers(servers=True))
    return Checked(findings + vfs.findings, effects, tuple(settings.files),
                   configreport.scope(conf, pci.configured, sysfs_root,
                                      host, provider_configs,
                                      vfs.scope()))


def _mdev_half(conf: libvirt_driver.MdevConfig, pci: pci_rules.PciConfig,
               node: host_gpus.Host | None, placed: NodePlacement | None,
               trait_prefix: str
               ) -> tuple[list[novaconf.Finding], list[configreport.Effect]]:
    """The mdev options against the node's devices and Placement, with
    the node's mdevs against the vGPUs Placement holds in use there.
    """
    findings: list[novaconf.Finding] = []
    known: list[str] = []
    if node is not None and (conf.supported_types or not pci.configured):
        parents = node.mdev_parents()
        findings += configcheck.sysfs_findings(conf, parents, node.devices)
        known += [configcheck.nodedev_of(a) for a in parents or ()]
    if placed is not None:
        devices = placed.devices()
        findings += configcheck.placement_findings(conf, placed.host,
                                                   devices, trait_prefix)
        if node is not None:
            findings += configcheck_usage.mdev_usage_findings(
                node, placed.host, devices)
        known += [d.nodedev for d in devices]
    return findings, configreport.device_effects(
        conf, list(dict.fromkeys(known)))


def _pci_half(pci: pci_rules.PciConfig, node: host_gpus.Host | None,
              host: str | None,
              placed: Sequence[configcheck_pci.PlacementPciProvider],
              explained: Sequence[pci_devspec.DeviceSpec]
              ) -> tuple[list[novaconf.Finding], list[configreport.Effect]]:
    """``[pci]`` against the node's PCI functions and (for ``host``) its
    PCI providers in Placement, ``placed``; ``explained``: specs naming
    VFs not enabled.
    """
    pci_devices = node.pci_devices() if node is not None else None
    root_name = host or '<node>'
    findings = configcheck_pci.pci_findings(pci, pci_devices, root_name,
                                            explained)
    if host:
        findings += pci_placement(pci, placed, pci_devices, root_name)
    return findings, configreport.pci_effects(pci, pci_devices, root_name)


def pci_placement(pci: pci_rules.PciConfig,
                  placed: Sequence[configcheck_pci.PlacementPciProvider],
                  devices: Sequence[pci_devspec.PciDevice] | None,
                  host: str) -> list[novaconf.Finding]:
    """What happens to the node's PCI providers in Placement (``placed``)
    when nova-compute restarts with the files.
    """
    predicted = None
    if devices is not None:
        predicted, _ = translator.pci_providers(
            host, devices, pci.specs,
            pci_devspec.physical_functions(devices))
    return configcheck_pci.pci_placement_findings(pci, host, placed,
                                                  predicted)
