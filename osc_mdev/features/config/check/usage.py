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

"""``mdev config check --sysfs --host``: the vGPUs a compute node has
against those Placement holds allocated there.

Per GPU, the mdevs of ``bus/mdev/devices`` (``host.gpus.Host``) against
the VGPU (or custom class) Placement holds in use on its provider: a GPU
with fewer mdevs than allocated vGPUs has lost some, as after a reboot
that did not keep them, and the servers holding it are named (all of
them: the mdev UUIDs are libvirt's, not the servers', so the tree cannot
tell which lost its mdev). More mdevs than allocations is a note: Nova
reuses them. The same for the GPUs whose vGPUs are VFs typed through
sysfs (``features.config.check.vf``): the VFs of the class's type against the
inventory and usage of the GPU's PCI provider.
"""

from collections.abc import Sequence

from osc_mdev.base import findings
from osc_mdev.base import words
from osc_mdev.features.config.check import mdev as configcheck
from osc_mdev.features.config.check import pci as configcheck_pci
from osc_mdev.features.config.check import vf as configcheck_vf
from osc_mdev.host import gpus as host_gpus

WARNING, INFO = findings.WARNING, findings.INFO


def _placement_where(node: str) -> str:
    return 'Placement, host %s' % node


def _holders(servers: Sequence[str], lost: int, used: int) -> str:
    """Who holds the vGPUs, and how many of their mdevs are gone."""
    if not servers:
        return ': %s gone' % _of_mdevs(lost, used, 'the')
    if len(servers) == 1:
        return ', for server %s: %s gone' % (
            servers[0], 'its mdev is' if used == 1 else
            _of_mdevs(lost, used, 'its'))
    return ', for servers %s: %s gone' % (
        words.and_list(servers), _of_mdevs(lost, used, 'their'))


def _of_mdevs(lost: int, used: int, whose: str) -> str:
    return '%d of %s %d mdevs %s' % (lost, whose, used,
                                     'is' if lost == 1 else 'are')


def lost_mdev(node: str, device: configcheck.PlacementDevice,
              mdevs: int, parent: bool) -> findings.Finding:
    """A GPU with fewer mdevs than Placement holds vGPUs there."""
    where = '' if parent else (
        ' (it is not an mdev parent on this host: is its driver loaded?)')
    return findings.Finding(
        WARNING, _placement_where(node),
        'GPU %s has %s%s but Placement holds %d %s there%s, as after a '
        'reboot that did not keep the mdevs; a server without its mdev '
        'does not start: create it again with the UUID of the server\'s '
        "libvirt domain (its <hostdev type='mdev'>)." % (
            device.address, words.count(mdevs, 'mdev'), where, device.used,
            device.resource_class, _holders(device.servers,
                                            device.used - mdevs,
                                            device.used)),
        host=node, device=device.address,
        resource_class=device.resource_class)


def spare_mdevs(node: str, device: configcheck.PlacementDevice,
                mdevs: int) -> findings.Finding:
    """A GPU with more mdevs than Placement holds vGPUs there."""
    return findings.Finding(
        INFO, _placement_where(node),
        'GPU %s has %s and Placement holds %d %s there: Nova gives the '
        '%d no server uses to the next servers.' % (
            device.address, words.count(mdevs, 'mdev'), device.used,
            device.resource_class, mdevs - device.used),
        host=node, device=device.address,
        resource_class=device.resource_class)


def mdev_usage_findings(host: host_gpus.Host, node: str,
                        devices: Sequence[configcheck.PlacementDevice]
                        ) -> list[findings.Finding]:
    """Each mdev GPU Placement has for ``node``: its mdevs in the host's
    tree against the vGPUs Placement holds in use there.
    """
    found = []
    parents = host.mdev_parents() or {}
    for device in sorted(devices, key=lambda d: d.address):
        mdevs = len(host.mdevs_of(device.address))
        if mdevs < device.used:
            found.append(lost_mdev(node, device, mdevs,
                                   device.address in parents))
        elif mdevs > device.used:
            found.append(spare_mdevs(node, device, mdevs))
    return found


def _typed_as_class(vfs: Sequence[configcheck_vf.Vf], resource_class: str,
                    names: configcheck_vf.Names
                    ) -> tuple[list[configcheck_vf.Vf], str]:
    """The VFs of a PCI provider's GPU that have the type its class is
    named after (any type when sysfs names none), and that type in words.
    """
    named = configcheck_vf.named_type(resource_class, names)
    if named is not None:
        return ([v for v in vfs if v.current == named.number],
                configcheck_vf.type_label(named.number, names))
    return [v for v in vfs if v.current], 'a vGPU type'


def vf_usage_findings(vfs: configcheck_vf.VfCheck, node: str,
                      providers: Sequence[configcheck_pci.PlacementPciProvider]
                      ) -> list[findings.Finding]:
    """Each PCI provider of an SR-IOV vGPU GPU of ``node``: its VFs of the
    class's type against the VFs Placement offers (total) and holds in use
    there. The VFs are the ones the files offer, or all of the GPU's.
    """
    found = []
    for gpu in vfs.gpus:
        name = '%s_%s' % (node, gpu.upper())
        of_gpu = [v for v in vfs.vfs if v.pf == gpu]
        offered = [v for v in of_gpu if v.spec is not None] or of_gpu
        for provider in providers:
            if provider.name != name or not provider.resource_class:
                continue
            typed, what = _typed_as_class(offered, provider.resource_class,
                                          vfs.names)
            if len(typed) < provider.used:
                found.append(_untyped_in_use(node, gpu, provider,
                                             len(typed), what))
            elif len(typed) < provider.total:
                found.append(_untyped_offered(node, gpu, provider,
                                              len(typed), what))
    return found


def _untyped_in_use(node: str, gpu: str,
                    provider: configcheck_pci.PlacementPciProvider,
                    typed: int, what: str) -> findings.Finding:
    servers = (', for %s %s' % ('server' if len(provider.servers) == 1
                                else 'servers',
                                words.and_list(list(provider.servers)))
               if provider.servers else '')
    return findings.Finding(
        WARNING, _placement_where(node),
        'Provider %s (GPU %s) has %d %s in use%s, but only %s of its VFs '
        '%s %s, as after a reboot: a server given a VF without it does '
        'not start. Re-apply the types before nova-compute starts.' % (
            provider.name, gpu, provider.used, provider.resource_class,
            servers, typed, 'has' if typed == 1 else 'have', what),
        host=node, device=gpu, resource_class=provider.resource_class or '')


def _untyped_offered(node: str, gpu: str,
                     provider: configcheck_pci.PlacementPciProvider,
                     typed: int, what: str) -> findings.Finding:
    return findings.Finding(
        WARNING, _placement_where(node),
        'Placement offers %d %s on provider %s (GPU %s, %d in use), but '
        'only %d of its VFs %s %s: the scheduler can give a server one '
        'without it, which does not start.' % (
            provider.total, provider.resource_class, provider.name, gpu,
            provider.used, typed, 'has' if typed == 1 else 'have', what),
        host=node, device=gpu, resource_class=provider.resource_class or '')
