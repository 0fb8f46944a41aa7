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

"""What Placement has for a compute node's PCI devices (``config check
--host``).
"""

from osc_mdev.domain import configcheck
from osc_mdev.domain import novaconf


def node_pci_providers(placement, host):
    """The PCI providers nova-compute made for node ``host`` (trait
    COMPUTE_MANAGED_PCI_DEVICE, in the node's tree): one listing, then
    inventories, usages and traits of each in the bounded pool. Empty when
    Placement has no such node.
    """
    [root] = placement.find_providers(name=host) or [None]
    if root is None:
        return []
    found = placement.find_providers(
        in_tree=root['uuid'],
        required_traits=[novaconf.COMPUTE_MANAGED_PCI_DEVICE])
    details = placement.get_provider_details([p['uuid'] for p in found])
    result = []
    for provider in found:
        detail = details.get(provider['uuid'])
        if detail is None:
            continue
        inventories = detail['inventories'][1]
        usages = detail.get('usages') or {}
        for rc, inventory in sorted(inventories.items()):
            result.append(configcheck.PlacementPciProvider(
                provider['name'], rc, inventory['total'],
                usages.get(rc, 0), tuple(sorted(detail.get('traits') or ()))))
        if not inventories:
            result.append(configcheck.PlacementPciProvider(
                provider['name'], None, 0, 0,
                tuple(sorted(detail.get('traits') or ()))))
    return result
