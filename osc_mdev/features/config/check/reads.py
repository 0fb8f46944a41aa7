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

"""``config check``: a compute node's nova.conf files, checked by Nova's
rules against the node's sysfs and what Placement has for the node.

The files and sysfs are read through ``osc_mdev.local``; Placement and
Nova are asked (through ``osc_mdev.api``) only for ``host``, the one
input that compares the files with the cloud.
"""

from collections.abc import Callable
from collections.abc import Sequence
import dataclasses
import typing

from osc_mdev.api import compute as compute_client
from osc_mdev.api import placement as placement_client
from osc_mdev.base import errors
from osc_mdev.cloud import providers
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.features.allocation import reads as allocation_reads
from osc_mdev.features.config.check import mdev as configcheck
from osc_mdev.features.config.check import pci as configcheck_pci
from osc_mdev.features.config.check import report as configreport
from osc_mdev.features.config.check import usage as configcheck_usage
from osc_mdev.features.config.check import vf as configcheck_vf
from osc_mdev.features.host import reads as lost_reads
from osc_mdev.features.trait import provider_files
from osc_mdev.host import gpus as host_gpus
from osc_mdev.local import conf_files as local_novaconf
from osc_mdev.local import sysfs
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.pci import devspec as pci_devspec
from osc_mdev.nova.pci import placement_translator as translator
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

#: What gives the Placement and Compute clients when they are first needed.
Clients = Callable[[], tuple[placement_client.PlacementClient,
                             compute_client.ComputeClient]]


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


def check(files: Sequence[str], sysfs_root: str | None = None,
          host: str | None = None,
          trait_prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX,
          clients: Clients | None = None,
          provider_configs: Sequence[tuple[str | None, str]] = (),
          libvirt_dir: str | None = None) -> Checked:
    """Check the nova.conf ``files`` (read in order, as nova-compute
    reads them), with the node's sysfs under ``sysfs_root`` and, for
    ``host``, against what Placement has for that compute node;
    ``clients`` gives ``(placement, compute)`` when they are first
    needed (the files alone need no credentials). NovaConfError for
    files nova-compute cannot read. ``provider_configs``: the ``(host or
    None, path)`` pairs of ``provider_config``, checked by
    ``check_provider_configs``. ``libvirt_dir``: the node's libvirt
    domain definitions, whose mdevs sysfs lacks are named (with
    ``sysfs_root`` and ``host``).
    """
    extra = check_provider_configs(provider_configs, host, clients)
    config_paths = tuple(p for _, p in provider_configs or ())
    if not files:
        return Checked(extra, [], config_paths, configreport.scope(
            None, host=host, provider_configs=True))
    virtual = (sysfs.sysfs_virtual_parent(sysfs_root)
               if sysfs_root else None)
    conf = local_novaconf.parse_files(files, virtual)
    settings = conf.settings
    assert settings is not None     # parsed from the files
    pci = pci_rules.pci_config(settings)
    node = sysfs.read_host(sysfs_root) if sysfs_root else None
    vfs = (configcheck_vf.vf_check(pci, node) if node is not None
           else configcheck_vf.VfCheck([]))
    findings = list(conf.findings)
    findings += configcheck.file_findings(
        conf, sysfs_checked=bool(sysfs_root))
    findings += configcheck.post_copy_findings(conf, pci.specs)
    found, effects = _mdev_half(conf, pci, node, host, trait_prefix,
                                clients)
    if node is not None and host and libvirt_dir:
        findings += lost_reads.lost_findings(
            lost_reads.domains_in(libvirt_dir), node, host, conf,
            _clients(clients), trait_prefix)
    findings += found
    placed_pci = (node_pci_providers(_asked(clients)[0], host)
                  if host and (pci.configured or vfs.gpus) else [])
    if pci.configured:
        found, pci_effects = _pci_half(pci, node, host, placed_pci,
                                       vfs.explained)
        findings += found
        effects += pci_effects
    if host and vfs.gpus:
        findings += configcheck_usage.vf_usage_findings(
            vfs, host, with_servers(clients, host, placed_pci))
    return Checked(findings + vfs.findings + extra, effects,
                   tuple(settings.files) + config_paths,
                   configreport.scope(conf, pci.configured, sysfs_root,
                                      host, bool(config_paths),
                                      vfs.scope()))


def _mdev_half(conf: libvirt_driver.MdevConfig, pci: pci_rules.PciConfig,
               node: host_gpus.Host | None, host: str | None,
               trait_prefix: str, clients: Clients | None
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
    if host:
        placement, compute = _asked(clients)
        placed = placement_devices(placement, compute, host)
        findings += configcheck.placement_findings(conf, host, placed,
                                                   trait_prefix)
        if node is not None:
            findings += configcheck_usage.mdev_usage_findings(node, host,
                                                              placed)
        known += [d.nodedev for d in placed]
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


def _clients(clients: Clients | None) -> Clients:
    """The clients, which a check of a host is always given."""
    assert clients is not None
    return clients


def _asked(clients: Clients | None
           ) -> tuple[placement_client.PlacementClient,
                      compute_client.ComputeClient]:
    """The clients, which a check of a host is always given."""
    assert clients is not None
    return clients()


def placement_devices(placement: placement_client.PlacementClient,
                      compute: compute_client.ComputeClient,
                      host: str) -> list[configcheck.PlacementDevice]:
    """The node's mdev devices in Placement, with the servers on each."""
    found = allocation_reads.node_devices_with_servers(placement, compute,
                                                       host)
    return [configcheck.PlacementDevice(
        d.candidate.nodedev, d.device, d.resource_class,
        # The devices are read with their inventories.
        typing.cast(providers.Inventory, d.inventory).total,
        tuple(d.traits or ()), tuple(servers), d.used)
        for d, servers in found]


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


def node_pci_providers(placement: placement_client.PlacementClient,
                       host: str
                       ) -> list[configcheck_pci.PlacementPciProvider]:
    """The PCI providers nova-compute made for node ``host`` (trait
    COMPUTE_MANAGED_PCI_DEVICE, in the node's tree): one listing, then
    inventories, usages and traits of each in the bounded pool. Empty when
    Placement has no such node.
    """
    roots: list[dict | None] = list(placement.find_providers(name=host))
    [root] = roots or [None]
    if root is None:
        return []
    found = placement.find_providers(
        in_tree=root['uuid'],
        required_traits=[translator.COMPUTE_MANAGED_PCI_DEVICE])
    details = placement.get_provider_details([p['uuid'] for p in found])
    result: list[configcheck_pci.PlacementPciProvider] = []
    for provider in found:
        detail = details.get(provider['uuid'])
        if detail is None:
            continue
        inventories = detail['inventories'][1]
        usages = detail.get('usages') or {}
        traits = tuple(sorted(detail.get('traits') or ()))
        for rc, inventory in sorted(inventories.items()):
            result.append(configcheck_pci.PlacementPciProvider(
                provider['name'], rc, inventory['total'],
                usages.get(rc, 0), traits, provider['uuid']))
        if not inventories:
            result.append(configcheck_pci.PlacementPciProvider(
                provider['name'], None, 0, 0, traits, provider['uuid']))
    return result


def with_servers(clients: Clients | None, host: str,
                 placed: Sequence[configcheck_pci.PlacementPciProvider]
                 ) -> list[configcheck_pci.PlacementPciProvider]:
    """The PCI providers, each in use with the servers holding its class
    there (by name): one allocations read per provider in use, the names
    from Nova in bulk.
    """
    in_use = {p.uuid: p.resource_class for p in placed
              if p.used and p.resource_class is not None}
    if not in_use:
        return list(placed)
    placement, compute = _asked(clients)
    consumers = allocation_reads.consumers_of(placement, in_use)
    labels = allocation_reads.server_labels(
        compute, host, {c for cs in consumers.values() for c in cs})
    return [dataclasses.replace(p, servers=tuple(sorted(
        labels[c] for c in consumers.get(p.uuid, ())))) for p in placed]


def check_provider_configs(values: Sequence[tuple[str | None, str]],
                           host: str | None = None,
                           clients: Clients | None = None
                           ) -> list[novaconf.Finding]:
    """Findings of nova-compute's provider config files (``(host or
    None, path)`` pairs, read together as one nova-compute reads its
    directory) by Nova's rules and, for ``host``, against the compute
    node's providers in Placement. A pair's host names the node the
    files are for: it must be ``host``, which alone reads the cloud.
    """
    if not values:
        return []
    split = list(values)
    named = {h for h, _ in split if h}
    if len(named | ({host} if host else set())) > 1:
        raise errors.Invalid(
            'The provider config files are for one compute node, not %s; '
            'check each node on its own.'
            % ', '.join(sorted(named | ({host} if host else set()))),
            parameter='provider_config', hosts=sorted(named))
    if named and not host:
        [node] = named
        raise errors.Invalid(
            '%s gives the files of compute node %s; to compare them with '
            'its providers in Placement (which needs cloud credentials) '
            'give %s %s too, or give the path alone to check the files '
            'only.' % (errors.given('provider_config'), node,
                       errors.given('host'), node),
            parameter='provider_config', host=node)
    configs, findings = provider_files.read([p for _, p in split])
    if host:
        placement, _ = _asked(clients)
        findings += provider_files.placement_findings(
            placement, host, configs)
    return findings
