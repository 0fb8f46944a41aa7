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

Per GPU, the mdevs of ``bus/mdev/devices`` (``host_gpus.Host``) against
the VGPU (or custom class) Placement holds in use on its provider: a GPU
with fewer mdevs than allocated vGPUs has lost some, as after a reboot
that did not keep them, and the servers holding it are named (all of
them: the mdev UUIDs are libvirt's, not the servers', so the tree cannot
tell which lost its mdev). More mdevs than allocations is a note: Nova
reuses them.
"""

from collections.abc import Sequence

from osc_mdev.domain import configcheck
from osc_mdev.domain import findings
from osc_mdev.domain import host_gpus
from osc_mdev.domain import words

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
