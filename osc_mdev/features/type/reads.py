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

"""What the type commands read. ``type list``: the node's sysfs
(``local.sysfs``) and the nova.conf files nova-compute reads
(``local.conf_files``); no cloud. ``type change``: the GPU's provider
and consumers (``read_gpu``), its node's nova.conf, the flavors asking
for either type (``flavors_asking``) and the trees they are counted on
(``flavor_trees``).
"""

from collections.abc import Iterable
from collections.abc import Sequence
import dataclasses
import logging
import os

from osc_mdev.api import compute as compute_client
from osc_mdev.api import placement as placement_client
from osc_mdev.api import pool
from osc_mdev.base import errors
from osc_mdev.base import findings
from osc_mdev.cloud import fit
from osc_mdev.cloud import payloads as nova_payloads
from osc_mdev.cloud import providers
from osc_mdev.cloud import reads as device_reads
from osc_mdev.features.capacity import reads as capacity_reads
from osc_mdev.features.type import change
from osc_mdev.features.type import gpu_types as gpu_type_model
from osc_mdev.local import conf_files
from osc_mdev.local import sysfs
from osc_mdev.nova.conf import settings as conf_settings
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.scheduler import request_filter
from osc_mdev.nova.scheduler import utils as rr
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

LOG = logging.getLogger(__name__)


def gpu_types(files: Sequence[str] = (), sysfs_root: str = '/sys'
              ) -> list[gpu_type_model.GpuType]:
    """The types each GPU of the node whose sysfs is under
    ``sysfs_root`` can serve; with the nova.conf ``files`` (read in
    order, as nova-compute reads them), whether Nova uses each.

    Raises ``errors.Invalid`` for a root that is no directory, and for
    files nova-compute cannot read or refuses to start with (it then
    uses no type at all).
    """
    if not os.path.isdir(sysfs_root):
        raise errors.Invalid(
            "%s is not a directory; give the root of the node's sysfs (/sys "
            'on the compute node) as %s.' % (sysfs_root,
                                             errors.given('sysfs')),
            parameter='sysfs', path=sysfs_root)
    # The files are judged before the node is read: bad input is one
    # error, with nothing said of the node before it.
    configured = _read_files(files, sysfs_root) if files else None
    host = sysfs.read_host(sysfs_root)
    if not host.mdev_bus and not host.vgpu_gpus():
        LOG.warning('%s has no mdev parent (no class/mdev_bus: no mdev '
                    'driver is loaded) and no NVIDIA GPU whose VFs are '
                    'typed through sysfs.', sysfs_root)
    if configured is None:
        return gpu_type_model.gpu_types(host)
    return gpu_type_model.gpu_types(host, *configured)


def _read_files(files: Sequence[str], sysfs_root: str
                ) -> tuple[libvirt_driver.MdevConfig, pci_rules.PciConfig]:
    """The mdev and PCI configuration of the files, or ``errors.Invalid``
    for files nova-compute cannot read or refuses to start with.
    """
    try:
        conf = conf_files.parse_files(
            files, sysfs.sysfs_virtual_parent(sysfs_root))
    except conf_settings.NovaConfError as exc:
        raise errors.Invalid('%s.' % str(exc).rstrip('.'),
                             parameter='files', files=list(files)) from exc
    assert conf.settings is not None    # parsed from the files
    pci = pci_rules.pci_config(conf.settings)
    fatal = [f for f in list(conf.findings) + list(pci.findings)
             if f.severity == findings.ERROR]
    if fatal:
        raise errors.Invalid(
            'nova-compute refuses to start with these files (%s: %s), so '
            'it uses no type; openstack mdev config check %s shows every '
            'error.' % (fatal[0].where, fatal[0].message.rstrip('.'),
                        ' '.join(files)),
            parameter='files', files=list(files), where=fatal[0].where)
    return conf, pci


# -- type change -------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Step:
    """One row of a type change: what to do (or what was done) and the
    details.
    """

    action: str
    detail: str


@dataclasses.dataclass(frozen=True)
class Gpu:
    """The GPU a type change is about, as Placement shows it now."""

    device: providers.Device
    allocations: dict
    conf_path: str
    conf_text: str

    @property
    def candidate(self) -> providers.Candidate:
        return self.device.candidate


def read_gpu(placement: placement_client.PlacementClient, reference: str,
             compute_confs: Sequence[tuple[str, str]]) -> Gpu:
    """The GPU ``reference`` names (as ``provider show`` names one: an
    mdev GPU, or the provider of a GPU's VFs), its consumers'
    allocations, and the nova.conf file of its host among
    ``compute_confs`` (``(host, file)``).
    """
    files = dict(compute_confs)
    if len(files) != len(compute_confs):
        raise errors.Invalid('%s names a host twice; give one file per '
                             'host.' % errors.given('compute_conf'),
                             parameter='compute_conf')
    texts = {host: _conf_text(path) for host, path in files.items()}
    device, allocations = device_reads.show_device(placement, reference)
    if device.host not in files:
        raise errors.Invalid(
            "Give the nova.conf of %s, the GPU's compute node, with %s "
            '%s=<file>.' % (device.host, errors.given('compute_conf'),
                            device.host), parameter='compute_conf',
            host=device.host)
    return Gpu(device, allocations, files[device.host], texts[device.host])


def _conf_text(path: str) -> str:
    """The text of a ``--compute-conf`` file as nova-compute reads it;
    ``errors.Invalid`` for a file it would refuse, before any request.
    """
    try:
        return conf_files.read_text(path)
    except conf_settings.NovaConfError as exc:
        raise errors.Invalid('%s.' % exc, parameter='compute_conf',
                             path=path) from exc


def root_name(device: providers.Device) -> str:
    """The name of the GPU's compute node (its root provider), from the
    provider's name, ``<root>_<nodedev>`` or ``<root>_<PCI ADDRESS>``.
    """
    name, suffix = device.candidate.name, device.candidate.nodedev
    if name.lower().endswith('_' + suffix.lower()):
        return name[:-len(suffix) - 1]
    return name.rsplit('_', 1)[0]


def flavors_asking(compute: compute_client.ComputeClient,
                   traits: Iterable[str], classes: Iterable[str],
                   pci_config: pci_rules.PciConfig | None = None
                   ) -> dict[str, rr.Request]:
    """``{flavor name: request}`` of the flavors whose request asks for
    one of the type ``traits`` or ``classes`` (``change.asks_type``);
    flavors Nova cannot build a request of without the controller's
    nova.conf (``pci_config``: its PCI aliases) are left out.
    """
    found = {}
    for payload in compute.list_flavors():
        flavor = nova_payloads.flavor(payload)
        try:
            request = capacity_reads.request_of(flavor, pci_config)
        except errors.Error:
            continue
        if change.asks_type(request, traits, classes):
            found[flavor.name or flavor.id] = request
    return dict(sorted(found.items()))


def flavor_trees(placement: placement_client.PlacementClient,
                 compute: compute_client.ComputeClient,
                 requests: Sequence[rr.Request]) -> list[fit.Host]:
    """The compute node trees the flavors' ``requests`` are counted on,
    as ``capacity --flavor`` reads them.
    """
    if not requests:
        return []
    listing, services = pool.call_all(
        [placement.list_providers, compute.compute_services],
        placement.max_workers)
    return capacity_reads.read_hosts(placement, list(requests), listing,
                                     services)


def capacities(requests: dict[str, rr.Request],
               trees: Sequence[fit.Host]) -> dict[str, int]:
    """``{flavor: servers that fit}`` on ``trees``, with Nova's
    prefilters, as ``capacity --flavor`` counts.
    """
    owner_nova = fit.owner_nova_in_effect(trees)
    return {name: sum(h.fits for h in fit.capacity(
        request_filter.process_reqspec(r, owner_nova=owner_nova), trees))
        for name, r in requests.items()}
