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

"""``type change`` of a GPU whose vGPUs are SR-IOV VFs typed through
sysfs, offered through PCI in Placement: the steps (``plan``) and, once
nova-compute restarted with the new ``device_spec``, the checks
(``finish``). The node's snapshot gives the VFs and their types.
"""

from collections.abc import Callable
from collections.abc import Sequence
import dataclasses
import logging
import shlex

from osc_mdev.api import compute as compute_client
from osc_mdev.api import placement as placement_client
from osc_mdev.base import errors
from osc_mdev.features.config.generate import files as generated_files
from osc_mdev.features.config.generate import plan as generate_plan
from osc_mdev.features import nova_conf
from osc_mdev.features.type import change
from osc_mdev.features.type import reads
from osc_mdev.features.type.vf import change as vf_change
from osc_mdev.host import gpus as host_gpus
from osc_mdev.local import node as node_model
from osc_mdev.nova.pci import config as pci_rules

LOG = logging.getLogger(__name__)
Step = reads.Step
#: ``(placement, compute, gpu, compute_confs, prefix, controller_confs)``
#: -> the moves.
Moves = Callable[[placement_client.PlacementClient,
                  compute_client.ComputeClient, reads.Gpu,
                  Sequence[tuple[str, str]], str, Sequence[str]],
                 list[Step]]


@dataclasses.dataclass(frozen=True)
class VfGpu:
    """The GPU, its node and its PF in the node's snapshot."""

    gpu: reads.Gpu
    node: node_model.Node
    pf: host_gpus.Device

    @property
    def where(self) -> str:
        return '%s:%s' % (self.gpu.device.host, self.pf.address)


def _vf_gpu(gpu: reads.Gpu, node: node_model.Node | None) -> VfGpu:
    if node is None:
        raise errors.Invalid(
            '%s:%s offers VFs through PCI in Placement: give its node\'s '
            "snapshot ('openstack mdev host snapshot') with %s <file>, for "
            'its VFs and their types.' % (
                gpu.device.host, gpu.device.device,
                errors.given('snapshot')), parameter='snapshot')
    address = gpu.device.candidate.pci_address or gpu.device.device
    return VfGpu(gpu, node, vf_change.gpu_of(node.host, address.lower()))


def _pci_config(controller_confs: Sequence[str]
                ) -> pci_rules.PciConfig | None:
    return nova_conf.controller_pci(list(controller_confs)) \
        if controller_confs else None


def _reset_step(vf: VfGpu) -> Step:
    typed = vf_change.typed_vfs(vf.node.host, vf.pf)
    if not typed:
        return Step('reset VFs', 'None: the snapshot of %s shows no VF of '
                    '%s with a vGPU type' % (vf.node.name, vf.pf.address))
    return Step('reset VFs', (
        'On %s, once no server uses them, write 0 to '
        '/sys/bus/pci/devices/<VF>/nvidia/current_vgpu_type of the %d VFs '
        'of %s with a type (address, type): %s' % (
            vf.gpu.device.host, len(typed), vf.pf.address,
            vf_change.vf_list(typed))))


def _alias_step(made: vf_change.Generated,
                pci: pci_rules.PciConfig | None) -> Step:
    have = sorted(name for name, alias in (pci.aliases if pci else {}).items()
                  if alias.resource_class == made.gpu.resource_class)
    if have:
        return Step('controller alias', (
            "The controller's [pci] alias %s asks for %s already"
            % (', '.join(have), made.gpu.resource_class)))
    return Step('controller alias', (
        "Add to the controller's nova.conf (%s), then restart nova-api "
        'and nova-scheduler: [pci] %s; a flavor asks for one vGPU with '
        'pci_passthrough:alias=%s:1' % (
            generated_files.CONTROLLER_CONF, made.alias_line(),
            made.gpu.alias)))


def _script_step(vf: VfGpu, made: vf_change.Generated) -> Step:
    old = vf_change.current_script_line(vf.node.host, vf.pf)
    every = len(made.gpu.vfs) == len(vf.node.host.vfs_of(vf.pf))
    choice = '%s=%s%s' % (vf.pf.address, made.gpu.vgpu_type.name,
                          '' if every else ':%d' % len(made.gpu.vfs))
    return Step('boot script', (
        'On %s, %s (run by %s before nova-compute) types the VFs: %s%s; '
        "'openstack mdev config generate --snapshot <file> --type %s' "
        'writes it, with the line of every other GPU given; run it once '
        'now' % (vf.gpu.device.host, generated_files.SCRIPT_PATH,
                 generated_files.UNIT, '-%s +' % old if old else '+',
                 made.script_line(), shlex.quote(choice))))


def _provider_step(vf: VfGpu, made: vf_change.Generated) -> Step:
    device = vf.gpu.device
    total = device.inventory.total if device.inventory else device.capacity
    return Step('provider', (
        'Nova keeps provider %s (%s): same name, so same UUID, and '
        'replaces its inventory %s %d with %s %d (the VFs of the new '
        'device_spec) and its traits with %s; Placement refuses the new '
        'inventory while a server holds a VF, and so does nova-compute' % (
            device.candidate.name, device.uuid, device.resource_class,
            total, made.gpu.resource_class, len(made.gpu.vfs),
            ', '.join(sorted(vf_change.traits_after())))))


def plan(placement: placement_client.PlacementClient,
         compute: compute_client.ComputeClient, gpu: reads.Gpu,
         to: str, compute_confs: Sequence[tuple[str, str]], prefix: str,
         node: node_model.Node | None, controller_confs: Sequence[str],
         moves: Moves) -> list[Step]:
    """The steps that give the VF GPU another vGPU type (``to``:
    ``TYPE[:COUNT]``), in order. Writes nothing.
    """
    vf = _vf_gpu(gpu, node)
    type_name, count = vf_change.parse_to(to)
    made = vf_change.generated(vf.node.host, vf.pf, type_name, count)
    if made.gpu.resource_class == gpu.device.resource_class:
        raise errors.Refused(
            '%s already offers %s; there is nothing to change.'
            % (vf.where, made.gpu.resource_class), name=gpu.device.uuid)
    conf = vf_change.new_conf_text(vf.node.host, vf.pf, gpu.conf_path,
                                   gpu.conf_text, made)
    pci = _pci_config(controller_confs)
    steps = moves(placement, compute, gpu, compute_confs, prefix,
                  controller_confs)
    steps += [_reset_step(vf), Step('edit nova.conf', conf.diff()),
              _alias_step(made, pci), _script_step(vf, made),
              Step('restart nova-compute', (
                  'On %s, after the boot script: nova-compute reads its '
                  '[pci] device_spec only when it starts'
                  % gpu.device.host)),
              _provider_step(vf, made)]
    steps += _capacity(placement, compute, gpu, made, pci)
    return steps


def _capacity(placement: placement_client.PlacementClient,
              compute: compute_client.ComputeClient, gpu: reads.Gpu,
              made: vf_change.Generated,
              pci: pci_rules.PciConfig | None) -> list[Step]:
    """A step per flavor asking for either class: the servers that fit
    now and once the GPU offers its new VFs.
    """
    device = gpu.device
    classes = {device.resource_class, made.gpu.resource_class}
    if pci is None:
        LOG.warning("Flavors asking for a PCI alias are counted with the "
                    "controller's nova.conf (%s <file>).",
                    errors.given('controller_conf'))
    requests = reads.flavors_asking(compute, (), classes, pci)
    trees = reads.flavor_trees(placement, compute, list(requests.values()))
    now = reads.capacities(requests, trees)
    after = reads.capacities(requests, change.trees_after(
        trees, device.uuid, made.gpu.resource_class, len(made.gpu.vfs),
        vf_change.traits_after()))
    return [Step('capacity', '%s: %d servers fit now; %d after'
                 % (name, now[name], after[name])) for name in requests]


def finish(placement: placement_client.PlacementClient,
           compute: compute_client.ComputeClient, gpu: reads.Gpu,
           to: str, node: node_model.Node | None,
           controller_confs: Sequence[str]) -> list[Step]:
    """Check that nova-compute took the new ``device_spec``: the GPU's
    provider offers the new class with the file's VFs and holds no
    allocation; count the flavors asking for the class. Writes nothing;
    ``errors.Refused`` for a step not done yet.
    """
    vf = _vf_gpu(gpu, node)
    type_name, _ = vf_change.parse_to(to)
    wanted = _class_of(vf, type_name)
    refusal = _unfinished(vf, wanted)
    if refusal:
        raise errors.Refused('%s: %s.' % (vf.where, refusal),
                             name=gpu.device.uuid)
    device = gpu.device
    steps = [Step('provider', '%s (%s) offers %s %d, nothing allocated' % (
        device.candidate.name, device.uuid, device.resource_class,
        device.capacity))]
    pci = _pci_config(controller_confs)
    requests = reads.flavors_asking(compute, (), {wanted}, pci)
    trees = reads.flavor_trees(placement, compute, list(requests.values()))
    for name, fits in reads.capacities(requests, trees).items():
        steps.append(Step('capacity', '%s: %d servers fit' % (name, fits)))
    return steps


def _class_of(vf: VfGpu, type_name: str) -> str:
    """The class named after the type ``type_name`` of the GPU."""
    types = vf_change.known_types(vf.node.host, vf.pf)
    found = generate_plan.match_vgpu_type(type_name, types, vf.pf.address)
    if found is None:
        raise errors.Invalid(
            'The snapshot names no vGPU type %s of the GPU at %s.'
            % (type_name, vf.pf.address), parameter='to')
    return generate_plan.resource_class_of(found)


def _unfinished(vf: VfGpu, wanted: str) -> str | None:
    """Why the change is not finished yet, or None."""
    gpu = vf.gpu
    mine, other = vf_change.expected_total(
        vf.node.host, vf.pf, gpu.conf_path, gpu.conf_text, wanted)
    if not mine or other:
        return ('%s offers %d VFs of the GPU as %s and %d as another '
                'class: update its [pci] device_spec and restart '
                'nova-compute first' % (gpu.conf_path, mine, wanted, other))
    holders = sorted(c for c, a in gpu.allocations.items()
                     if any(a.get('resources', {}).values()))
    if holders:
        return ('it still holds allocations of %s: move those servers '
                'first' % ', '.join(holders))
    total = gpu.device.inventory.total if gpu.device.inventory else None
    if gpu.device.resource_class != wanted or total != mine:
        return ('its provider offers %s %s, not %s %d: restart '
                'nova-compute with the new nova.conf first' % (
                    gpu.device.resource_class, total, wanted, mine))
    return None
