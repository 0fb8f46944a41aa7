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

"""What nova-compute makes of its provider config files on its provider
tree, and the devices no file covers.

On every update of its provider tree nova-compute adds each file's
``traits.additional`` to the provider an entry names by name or UUID
(``ResourceTracker._merge_provider_configs``,
nova/compute/resource_tracker.py), a provider it has just re-created
included: a device provider's name (``<node>_pci_0000_84_00_0``)
survives its re-creation, its UUID does not. The functions below mirror
that merge, one Nova function each, on the node's tree as Placement
shows it; ``uncovered_findings`` adds the devices whose custom traits no
file keeps. The entries are ``provider_config``'s.
"""

from collections.abc import Collection
import dataclasses

from osc_mdev.base import findings
from osc_mdev.nova.compute import provider_config
from osc_mdev.nova import names

ERROR, WARNING = findings.ERROR, findings.WARNING
Finding = findings.Finding


@dataclasses.dataclass(frozen=True)
class TreeProvider:
    """A provider of the compute node's tree in Placement.

    ``kind`` is ``root`` for the compute node, ``mdev`` or ``pci`` for a
    device (``cloud.providers`` kinds), None for anything else.
    """

    uuid: str
    name: str
    kind: str | None
    traits: tuple[str, ...] = ()


#: An entry and a provider of the tree it reaches.
Reach = tuple[provider_config.Entry, TreeProvider]


def merge_targets(entries: Collection[provider_config.Entry],
                  tree: Collection[TreeProvider]
                  ) -> tuple[list[Reach], list[provider_config.Entry]]:
    """``[(entry, TreeProvider)]``: the providers each kept entry reaches,
    and the entries that reach none.

    Mirrors ``ResourceTracker._get_providers_to_update``: ``$COMPUTE_NODE``
    reaches every compute node root not named otherwise, a name or UUID
    the provider it names in the tree (UUIDs compared as Nova's tree
    compares them, as written).
    """
    by_key: dict[str, TreeProvider] = {}
    for provider in tree:
        by_key[provider.uuid] = provider
        by_key.setdefault(provider.name, provider)
    explicit = {e.value for e in entries if e.kept}
    reached: list[Reach] = []
    absent: list[provider_config.Entry] = []
    for entry in entries:
        if not entry.kept:
            continue
        if entry.value == provider_config.COMPUTE_NODE:
            reached += [(entry, p) for p in tree if p.kind == 'root'
                        and p.name not in explicit and p.uuid not in explicit]
            continue
        named = by_key.get(entry.value)
        if named is None:
            absent.append(entry)
        else:
            reached.append((entry, named))
    return reached, absent


def merge_findings(entries: Collection[provider_config.Entry],
                   tree: Collection[TreeProvider], node: str
                   ) -> list[Finding]:
    """What nova-compute of node ``node`` makes of the entries of its
    files on its provider tree (``tree``, TreeProvider list).

    Mirrors ``ResourceTracker._merge_provider_configs``: an entry naming
    no provider of the tree is warned about and ignored; one provider
    reached by two entries (by name and by UUID) fails every update of
    the node. (Its check of traits the virt driver owns cannot fire for
    custom traits: it leaves out the custom traits the provider has.)
    """
    reached, absent = merge_targets(entries, tree)
    found = []

    def elsewhere(entry: provider_config.Entry) -> bool:
        return (entry.key == 'name' and entry.value != node
                and not entry.value.startswith(node + '_'))

    # A file all of whose entries name another node's providers is the
    # file of another host: one finding for it.
    foreign = set()
    for source in dict.fromkeys(e.source for e in absent):
        kept = [e for e in entries if e.source == source and e.kept]
        if len(kept) > 1 and all(e in absent and elsewhere(e) for e in kept):
            foreign.add(source)
            found.append(Finding(WARNING, source, (
                'None of the %d providers of this file is a provider of '
                'node %s (they are named after another compute node): it '
                "is another host's file; nova-compute logs a warning for "
                'each and ignores them.' % (len(kept), node))))
    for entry in absent:
        if entry.source in foreign:
            continue
        found.append(Finding(WARNING, entry.where, (
            'Node %s has no provider %s: nova-compute logs a warning and '
            'ignores the entry%s.' % (
                node, entry.value,
                ' (it names a provider of another compute node: is this '
                'the file of another host?)' if elsewhere(entry) else
                ', and applies it if the provider appears'))))
    first: dict[str, provider_config.Entry] = {}
    for entry, provider in reached:
        earlier = first.setdefault(provider.uuid, entry)
        if earlier is not entry:
            found.append(Finding(ERROR, entry.where, (
                'Provider %s (%s) is also identified at %s: nova-compute '
                'starts, but every update of node %s fails until one entry '
                'goes.' % (provider.name, provider.uuid, earlier.where,
                           node))))
        if provider.kind == 'pci' and entry.traits:
            found.append(Finding(WARNING, entry.where, (
                '%s is a PCI-in-Placement device: Nova sets its traits from '
                '[pci] device_spec on every update and then adds the '
                "file's, so a trait taken out of device_spec stays while "
                'the file gives it; set the traits of PCI devices in '
                '[pci] device_spec only.' % provider.name)))
    return found


def uncovered_findings(entries: Collection[provider_config.Entry],
                       tree: Collection[TreeProvider],
                       node: str) -> list[Finding]:
    """Devices of the node whose custom traits no entry keeps: they lose
    them when Nova re-creates their provider.
    """
    reached, _ = merge_targets(entries, tree)
    covered: dict[str, set[str]] = {}
    for entry, provider in reached:
        covered.setdefault(provider.uuid, set()).update(entry.traits)
    found = []
    for provider in sorted(tree, key=lambda p: p.name):
        if provider.kind != 'mdev':
            continue
        custom = sorted(t for t in provider.traits
                        if names.is_custom_name(t))
        missing = [t for t in custom
                   if t not in covered.get(provider.uuid, ())]
        if not missing:
            continue
        found.append(Finding(WARNING, 'Placement, host %s' % node, (
            'Device provider %s carries %s, which no provider config file '
            'gives it: lost when Nova re-creates the provider; export '
            "again: 'openstack mdev trait export --host %s "
            "--provider-config-dir DIR'." % (provider.name,
                                             ', '.join(missing), node))))
    return found
