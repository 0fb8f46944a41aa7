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

"""What is known of a server to move and of the compute nodes, for the
migration rules.

A compute node (``Node``) is its tree in Placement (``fit.Host``),
what the Compute API says of it (``Hypervisor``), the mdev type of each
device and, when given, its nova.conf (``Conf``). The type of a device
comes from a nova.conf of its host (``--compute-conf``:
``libvirt_driver.vgpu_type_per_pgpu``) or its type trait
(``traits.mdev_type_of_traits``); room on devices of the server's type
is counted by giving each such device a marker trait that the server's
request requires (``typed``), so the fit engine counts it like any
trait. Pure logic.
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses

from osc_mdev.cloud import fit
from osc_mdev.cloud import providers
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.nova import names
from osc_mdev.nova import objects
from osc_mdev.nova.scheduler import utils as rr
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

# Marks the devices of one mdev type for the fit engine: real traits are
# upper case, so this never names one.
TYPE_MARK = 'mdev-type:'


@dataclasses.dataclass(frozen=True)
class Conf:
    """What a host's nova.conf says (``--compute-conf``): its enabled
    types (``supported_vgpu_types``, as MdevType), the type of each
    device (libvirt name -> MdevType or None), the ``[libvirt]``
    downtime values its nova-compute uses (``downtime_settings``) and
    its ``[libvirt] live_migration_permit_post_copy``
    (``post_copy_setting``: None for a value oslo.config refuses).
    """

    supported: tuple[trait_logic.MdevType, ...]
    type_of: Callable[[str], trait_logic.MdevType | None]  # by nodedev
    downtime: dict[str, int | None]
    post_copy: bool | None = False


@dataclasses.dataclass(frozen=True)
class Node:
    """A compute node: its tree in Placement (a fit.Host, None when
    Placement has none), what Nova says of it, its device types and its
    nova.conf when given.
    """

    name: str
    tree: fit.Host | None
    hypervisor: objects.Hypervisor | None
    types: dict[str, trait_logic.MdevType | None]  # by device uuid
    nodedevs: dict[str, str]     # device uuid -> libvirt name
    conf: Conf | None = None

    @property
    def service_host(self) -> str | None:
        return self.hypervisor.service_host if self.hypervisor else None

    def known_types(self) -> list[trait_logic.MdevType | None]:
        """The MdevTypes of its mdev devices, None for devices of unknown
        type among them.
        """
        return [self.types.get(d.uuid) for d in self.tree.devices
                if d.uuid in self.nodedevs] if self.tree else []


@dataclasses.dataclass(frozen=True)
class Held:
    """One device allocation of the server on its source."""

    device: str                  # HOST:ADDR
    uuid: str
    resource_class: str
    amount: int
    mdev_type: trait_logic.MdevType | None  # None for PCI too
    kind: str = providers.MDEV


@dataclasses.dataclass(frozen=True)
class Server:
    """The server to move: its state, place, request and devices."""

    id: str
    name: str
    vm_state: str | None
    task_state: str | None
    node: str | None             # the source compute node
    flavor_name: str = ''
    request: rr.Request | None = None   # the flavor's, no prefilters
    problem: str | None = None   # why the request is not known
    held: tuple[Held, ...] = ()
    pci_aliases: tuple = ()      # pci_request.Alias of its alias devices

    @property
    def mdevs(self) -> list[Held]:
        return [h for h in self.held if h.kind == providers.MDEV]

    def mdev_types(self) -> dict[str, trait_logic.MdevType | None]:
        """``{mdev: MdevType or None}``, one entry per mdev held."""
        found: dict[str, trait_logic.MdevType | None] = {}
        for held in self.mdevs:
            for n in range(held.amount):
                found['%s#%d' % (held.uuid, n)] = held.mdev_type
        return found

    @property
    def type_keys(self) -> frozenset[str]:
        """The keys of its mdev types (empty when one is unknown)."""
        types = list(self.mdev_types().values())
        if not types or any(t is None for t in types):
            return frozenset()
        return frozenset(t.key for t in types if t is not None)

    def size(self) -> tuple[int, int, int, int]:
        """What it asks, for the plan's biggest-first order."""
        if self.request is None:
            return (0, 0, 0, 0)
        roots = self.request.root_amounts()
        return (sum(self.request.device_amounts().values()),
                roots.get(rr.VCPU, 0) + roots.get(rr.PCPU, 0),
                roots.get(rr.MEMORY_MB, 0), roots.get(rr.DISK_GB, 0))


def conf_from(mdev_config: libvirt_driver.MdevConfig,
              prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX) -> Conf:
    """The Conf of a compute node's nova.conf (a libvirt_driver.MdevConfig):
    what its libvirt driver enables (``supported_vgpu_types``), the type
    it gives each device (``vgpu_type_per_pgpu``), its downtime
    settings (``downtime_settings``) and post-copy switch
    (``post_copy_setting``).
    """
    def type_of(nodedev: str) -> trait_logic.MdevType | None:
        name = mdev_config.type_for(nodedev)
        return trait_logic.mdev_type(name, prefix) if name else None

    settings = mdev_config.settings
    assert settings is not None         # parsed from the host's files
    return Conf(tuple(trait_logic.mdev_type(t, prefix)
                      for t in mdev_config.supported_types),
                type_of, libvirt_driver.downtime_settings(settings),
                libvirt_driver.post_copy_setting(settings))


def type_label(mdev_type: trait_logic.MdevType | None) -> str:
    return mdev_type.name if mdev_type is not None else 'unknown type'


def mark(key: str) -> str:
    return TYPE_MARK + key


def typed(request: rr.Request, node: Node, key: str | None
          ) -> tuple[rr.Request, fit.Host | None]:
    """``(request, tree)`` where the request's mdev groups require the
    marker of type ``key`` and the node's devices of that type (and those
    of unknown type) carry it: the fit engine then counts room on devices
    of the type only. ``key`` None: both as they are.
    """
    tree = node.tree
    if key is None or tree is None:
        return request, tree
    groups = tuple(dataclasses.replace(g, required=g.required | {mark(key)})
                   if _is_mdev_group(g) else g for g in request.groups)
    children = []
    for child in tree.children:
        mdev_type = node.types.get(child.uuid)
        if child.uuid in node.nodedevs and (
                mdev_type is None or mdev_type.key == key):
            child = dataclasses.replace(
                child, traits=child.traits | {mark(key)})
        children.append(child)
    return (dataclasses.replace(request, groups=groups),
            dataclasses.replace(tree, children=tuple(children)))


def _is_mdev_group(group: rr.Group) -> bool:
    return not group.is_pci and any(
        names.is_mdev_resource_class(rc) and rc not in rr.ROOT_CLASSES
        for rc, _ in group.resources)


def without_type(free: fit.FreeMap, node: Node,
                 key: str) -> fit.FreeMap:
    """``free`` with the devices of type ``key`` (and of unknown type)
    emptied: what Placement could still give from devices of other types.
    """
    emptied = dict(free)
    for child in node.tree.children if node.tree else ():
        mdev_type = node.types.get(child.uuid)
        if child.uuid in node.nodedevs and (
                mdev_type is None or mdev_type.key == key):
            for rc in child.inventories:
                emptied[(child.uuid, rc)] = 0
    return emptied


def other_type_devices(request: rr.Request, node: Node, key: str,
                       free: fit.FreeMap) -> list[fit.Provider]:
    """Devices of another type than ``key`` the request could take now."""
    if node.tree is None:
        return []
    return [d for d in fit.serving_devices(request, node.tree, free)
            if d.uuid in node.nodedevs
            and key_of(node.types.get(d.uuid)) not in (None, key)]


def key_of(mdev_type: trait_logic.MdevType | None) -> str | None:
    """The key of a type that may be unknown."""
    return None if mdev_type is None else mdev_type.key


def with_free(tree: fit.Host,
              free: fit.FreeMap) -> fit.Host:
    """``tree`` with usages that leave ``free`` (the plan's view)."""
    def provider(p: fit.Provider) -> fit.Provider:
        usages = dict(p.usages)
        for rc, inventory in p.inventories.items():
            if (p.uuid, rc) in free:
                usages[rc] = inventory.capacity - free[(p.uuid, rc)]
        return dataclasses.replace(p, usages=usages)
    return dataclasses.replace(
        tree, root=provider(tree.root),
        children=tuple(provider(c) for c in tree.children))


def offers(request: rr.Request, node: Node) -> bool:
    """Whether ``node`` has a device of each device class ``request``
    asks for: a node without one is no candidate at all.
    """
    have = {rc for d in (node.tree.children if node.tree else ())
            for rc in d.inventories}
    return set(request.device_amounts()) <= have
