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

"""``type change``: the steps that give an mdev GPU another type
(``plan``, read-only) and, once nova-compute restarted with the new
nova.conf, the checks and the type trait's move that finish it
(``finish``).
"""

from collections.abc import Sequence
import logging

from osc_mdev.api import compute as compute_client
from osc_mdev.api import placement as placement_client
from osc_mdev.base import errors
from osc_mdev.cloud import providers
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.features.host import run as host_snapshot
from osc_mdev.features.migration import plan as migration_plan
from osc_mdev.features.migration import reads as migration_reads
from osc_mdev.features.trait import writes as trait_writes
from osc_mdev.features.type import change
from osc_mdev.features.type import reads
from osc_mdev.features.type.vf import run as vf_run
from osc_mdev.local import node as node_model
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

LOG = logging.getLogger(__name__)
Step = reads.Step


def _holders(gpu: reads.Gpu) -> list[str]:
    """The consumers holding anything on the GPU."""
    return sorted(c for c, a in gpu.allocations.items()
                  if any(a.get('resources', {}).values()))


def _where(gpu: reads.Gpu) -> str:
    return '%s:%s' % (gpu.device.host, gpu.device.device)


def _moves(placement: placement_client.PlacementClient,
           compute: compute_client.ComputeClient, gpu: reads.Gpu,
           compute_confs: Sequence[tuple[str, str]], prefix: str,
           controller_confs: Sequence[str] = ()) -> list[Step]:
    """A step per server on the GPU, with ``migration plan``'s command;
    ``errors.Refused`` naming the servers that cannot move.
    """
    if not _holders(gpu):
        return []
    moves = migration_reads.plan(
        placement, compute, gpu.device.host,
        inputs=migration_reads.read_inputs(
            list(compute_confs), list(controller_confs), prefix),
        prefix=prefix, devices=(gpu.device.uuid,))
    stuck = [m for m in moves if m.node is None]
    if stuck:
        raise errors.Refused(
            'GPU %s holds servers that cannot move: %s; free it first.'
            % (_where(gpu), '; '.join(
                '%s (%s): %s' % (m.server.name, m.server.id, m.reason)
                for m in stuck)),
            servers=[m.server.id for m in stuck])
    return [Step('move server', '%s (%s) to %s, %s: %s' % (
        m.server.name, m.server.id, m.node, m.kind,
        migration_plan.command(m.kind, m.service_host, m.server.id)))
        for m in moves]


def read_node(path: str | None, gpu: reads.Gpu) -> node_model.Node | None:
    """The node of the snapshot file ``path`` (None without one);
    ``errors.Invalid`` for a snapshot of another node than the GPU's.
    """
    if path is None:
        return None
    node = host_snapshot.read(path)
    root = reads.root_name(gpu.device)
    if node.name != root:
        raise errors.Invalid(
            '%s %s is the snapshot of %s, not of %s, the node of GPU %s; '
            "give that node's snapshot." % (
                errors.given('snapshot'), path, node.name, root,
                _where(gpu)), parameter='snapshot', path=path)
    return node


def _remove_mdevs(gpu: reads.Gpu, conf: change.ConfChange,
                  node: node_model.Node | None) -> Step:
    device = gpu.device
    old = conf.old_type or 'its old type'
    how = ('mdevctl stop and undefine each, or echo 1 > '
           '/sys/bus/mdev/devices/<uuid>/remove')
    if node is None:
        return Step('remove mdevs', (
            'On %s, remove the mdevs of %s left on %s (%s): Nova counts '
            'only mdevs of the enabled type, and a GPU with mdevs of one '
            'type can create none of another'
            % (device.host, old, device.device, how)))
    assert device.candidate.pci_address is not None    # an mdev GPU
    mdevs = change.mdevs_to_remove(node.host, device.candidate.pci_address,
                                   conf.new_type)
    if not mdevs:
        return Step('remove mdevs', 'None: the snapshot of %s shows no mdev '
                    'of another type than %s on %s' % (
                        node.name, conf.new_type, device.device))
    return Step('remove mdevs', 'On %s, the %d mdevs on %s (%s): %s' % (
        device.host, len(mdevs), device.device, how, ', '.join(
            '%s (%s)' % (m.uuid, m.mdev_type) for m in mdevs)))


def plan(placement: placement_client.PlacementClient,
         compute: compute_client.ComputeClient, reference: str,
         new_type: str, compute_confs: Sequence[tuple[str, str]],
         prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX,
         snapshot: str | None = None,
         controller_confs: Sequence[str] = ()) -> list[Step]:
    """The steps that give the GPU ``reference`` names the type
    ``new_type``, in order; with the node's ``snapshot``, the mdevs to
    remove by UUID and the GPU's capacity after. A GPU whose VFs are
    offered through PCI in Placement needs the snapshot
    (``vf_run.plan``). Writes nothing.
    """
    gpu = reads.read_gpu(placement, reference, compute_confs)
    node = read_node(snapshot, gpu)
    if gpu.device.kind == providers.PCI:
        return vf_run.plan(placement, compute, gpu, new_type, compute_confs,
                           prefix, node, controller_confs, _moves)
    device = gpu.device
    if node is not None:
        assert device.candidate.pci_address is not None
        change.check_offered(node.host, device.candidate.pci_address,
                             new_type)
    conf = change.new_conf_text(gpu.conf_path, gpu.conf_text,
                                device.candidate.nodedev, new_type)
    steps = _moves(placement, compute, gpu, compute_confs, prefix,
                   controller_confs)
    steps.append(_remove_mdevs(gpu, conf, node))
    steps.append(Step('edit nova.conf', conf.diff()))
    steps.append(Step('restart nova-compute', (
        'On %s: nova-compute reads its mdev types only when it starts'
        % device.host)))
    steps.append(Step('provider', change.provider_outcome(
        device.candidate.name, device.uuid, device.resource_class,
        device.inventory.total if device.inventory else device.capacity,
        conf)))
    remove, add = change.trait_move(device.traits or (), new_type, prefix)
    steps.append(Step('traits', (
        "'openstack mdev type change %s --to %s --finish' removes %s and "
        "adds %s; where a provider config file names the GPU, run "
        "'openstack mdev trait export' again for %s, or Nova gives a "
        're-created provider the old traits back'
        % (device.candidate.name, new_type, ', '.join(remove) or 'nothing',
           add, device.host))))
    total = None
    if node is not None:
        assert device.candidate.pci_address is not None
        total = change.total_after(node.host, device.candidate.pci_address,
                                   new_type)
    steps += _capacity_plan(placement, compute, gpu, conf, remove, add,
                            total)
    return steps


def _capacity_plan(placement: placement_client.PlacementClient,
                   compute: compute_client.ComputeClient, gpu: reads.Gpu,
                   conf: change.ConfChange, remove: tuple[str, ...],
                   add: str, total: int | None = None) -> list[Step]:
    """A step per flavor asking for either type: the servers that fit
    now and after (after counts the GPU with ``total``, what its sysfs
    says it gives of the new type; without it, the GPU counts for
    nothing and the row says so).
    """
    device = gpu.device
    new_traits = {add} | ({conf.resource_class} - {device.resource_class})
    requests = reads.flavors_asking(
        compute, set(remove) | {add},
        {device.resource_class, conf.resource_class})
    trees = reads.flavor_trees(placement, compute, list(requests.values()))
    now = reads.capacities(requests, trees)
    traits = frozenset(set(device.traits or ()) - set(remove) | {add})
    after = reads.capacities(requests, change.trees_after(
        trees, device.uuid, conf.resource_class, total, traits))
    steps = []
    for name, request in requests.items():
        gains = change.asks_type(request, new_traits, ())
        steps.append(Step('capacity', '%s: %d servers fit now; %d after%s' % (
            name, now[name], after[name],
            ' plus those the GPU holds of %s' % conf.new_type
            if gains and total is None else '')))
    return steps


def finish(placement: placement_client.PlacementClient,
           compute: compute_client.ComputeClient, reference: str,
           new_type: str, compute_confs: Sequence[tuple[str, str]],
           prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX,
           dry_run: bool = False, snapshot: str | None = None,
           controller_confs: Sequence[str] = ()) -> list[Step]:
    """Check that nova-compute took the GPU's new type (nova.conf,
    inventory, no allocation), move the type trait (generation-safe)
    and count the flavors asking for the new type; for a GPU whose VFs
    are offered through PCI in Placement, ``vf_run.finish`` (no trait to
    move). ``errors.Refused`` (nothing written) for a step not done yet.
    """
    gpu = reads.read_gpu(placement, reference, compute_confs)
    node = read_node(snapshot, gpu)
    if gpu.device.kind == providers.PCI:
        return vf_run.finish(placement, compute, gpu, new_type, node,
                             controller_confs)
    device = gpu.device
    nodedev = device.candidate.nodedev
    conf = change.mdev_config(gpu.conf_path, gpu.conf_text)
    refusal = _unfinished(gpu, conf, new_type)
    if refusal:
        raise errors.Refused('%s: %s.' % (_where(gpu), refusal),
                             name=reference)
    remove, add = change.trait_move(device.traits or (), new_type, prefix)
    written = trait_writes.write(
        placement, [trait_logic.DevicePlan(device, add=(add,),
                                           remove=remove)],
        (add,), dry_run)
    outcome = written.outcomes[0]
    if outcome.failed:
        raise errors.Failed('%s: traits %s.' % (_where(gpu), outcome.result),
                            name=reference)
    steps = [Step('provider', '%s (%s) offers %s %d, nothing allocated' % (
        device.candidate.name, device.uuid, device.resource_class,
        device.capacity)), Step('traits', outcome.result)]
    requests = reads.flavors_asking(
        compute, {add}, {conf.resource_class_for(nodedev)})
    trees = reads.flavor_trees(placement, compute, list(requests.values()))
    for name, count in reads.capacities(requests, trees).items():
        steps.append(Step('capacity', '%s: %d servers fit' % (name, count)))
    return steps


def _unfinished(gpu: reads.Gpu, conf: libvirt_driver.MdevConfig,
                new_type: str) -> str | None:
    """Why the change is not finished yet, or None."""
    nodedev = gpu.device.candidate.nodedev
    if conf.errors or conf.type_for(nodedev) != new_type:
        return ('%s gives the GPU type %s, not %s: update nova.conf and '
                'restart nova-compute first'
                % (gpu.conf_path, conf.type_for(nodedev), new_type))
    holders = _holders(gpu)
    if holders:
        return ('it still holds allocations of %s: move those servers '
                'first' % ', '.join(holders))
    wanted = conf.resource_class_for(nodedev)
    if gpu.device.resource_class != wanted:
        return ('its provider offers %s, not %s: restart nova-compute with '
                'the new nova.conf first' % (gpu.device.resource_class,
                                             wanted))
    most = conf.max_instances.get(new_type)
    total = gpu.device.inventory.total if gpu.device.inventory else None
    if most and total and total > most:
        return ('its provider offers %d, more than max_instances %d of %s: '
                'restart nova-compute with the new nova.conf first'
                % (total, most, new_type))
    return None
