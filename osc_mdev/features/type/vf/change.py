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
sysfs (NVIDIA vGPU 17 and later), its pure logic: the VFs to reset, the
files ``config generate`` writes for the GPU's new type (``generated``),
the node's nova.conf with the GPU's ``[pci] device_spec`` lines
replaced by the generated ones (``new_conf_text``, read back with
Nova's rules) and the classes Nova then gives the node's VFs
(``vf_classes``).

What Nova does is what ``nova/compute/pci_placement_translator.py``
does when nova-compute starts: the VFs of one PF form one provider,
named ``<node>_<PF ADDRESS>``; a provider of that name that exists is
kept (same UUID) and its inventory replaced by ``{class of the new
device_spec: its VFs}`` and its traits by the spec's (plus
``COMPUTE_MANAGED_PCI_DEVICE`` and ``OWNER_NOVA``). Placement refuses
to replace an inventory that has allocations, hence the servers first.
"""

from collections.abc import Sequence
import dataclasses
import difflib
import re

from osc_mdev.base import errors
from osc_mdev.base import findings
from osc_mdev.features.config.generate import files as generated_files
from osc_mdev.features.config.generate import plan as generate_plan
from osc_mdev.features.config.generate import run as generate_run
from osc_mdev.host import gpus as host_gpus
from osc_mdev.nova.conf import settings as conf_settings
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.pci import devspec
from osc_mdev.nova.pci import placement_translator as translator

OWNER_NOVA = 'OWNER_NOVA'
_SECTION_RE = re.compile(r'^\s*\[([^\]]+)\]\s*$')
_SPEC_RE = re.compile(r'^device_spec\s*[=:]\s*(?P<value>.*)$')


def parse_to(text: str) -> tuple[str, int | None]:
    """``TYPE[:COUNT]`` as ``--to`` gives it for a VF GPU."""
    name, colon, count = text.rpartition(':')
    if colon and count.isdigit() and name:
        if int(count) < 1:
            raise errors.Invalid('%s: COUNT must be at least 1.' % text,
                                 parameter='to')
        return name, int(count)
    return text, None


def gpu_of(host: host_gpus.Host, address: str) -> host_gpus.Device:
    """The SR-IOV vGPU GPU (its PF) at ``address`` in the node's
    snapshot; ``errors.Invalid`` when the snapshot has none there.
    """
    for pf in host.vgpu_gpus():
        if pf.address == address:
            return pf
    raise errors.Invalid(
        'The snapshot shows no NVIDIA GPU whose VFs are typed through sysfs '
        'at %s; take the snapshot on its node again.' % address,
        parameter='snapshot', address=address)


def known_types(host: host_gpus.Host,
                pf: host_gpus.Device) -> list[host_gpus.VgpuType]:
    """The vGPU types of the GPU that sysfs names: those its VFs list
    or have, and those other GPUs of the node list (a type every VF of
    the GPU has is not listed on it).
    """
    found = dict(host.vgpu_type_names())
    found.update(host.vgpu_types_of(pf))
    return [t for _, t in sorted(found.items())]


def typed_vfs(host: host_gpus.Host,
              pf: host_gpus.Device) -> list[host_gpus.Device]:
    """The GPU's VFs that have a vGPU type: those to reset (0 to
    ``nvidia/current_vgpu_type``) once no server uses them.
    """
    return [vf for vf in host.vfs_of(pf) if vf.vgpu and vf.vgpu.typed]


def reset_host(host: host_gpus.Host,
               pf: host_gpus.Device) -> host_gpus.Host:
    """The node once the GPU's VFs are reset: each at type 0, able to
    take every type of the GPU sysfs names.
    """
    types = tuple(known_types(host, pf))
    devices = dict(host.devices)
    for vf in host.vfs_of(pf):
        devices[vf.address] = dataclasses.replace(
            vf, vgpu=host_gpus.VfVgpu(0, types))
    return dataclasses.replace(host, devices=devices)


@dataclasses.dataclass(frozen=True)
class Generated:
    """What ``config generate --type PF=TYPE[:COUNT]`` writes for the
    GPU once its VFs are reset: its plan and files.
    """

    gpu: generate_plan.VfGpu
    files: tuple[generated_files.GeneratedFile, ...]

    def text_of(self, name: str) -> str:
        return next(f.text for f in self.files if f.name == name)

    def spec_lines(self) -> list[str]:
        """The GPU's lines of the compute node's ``[pci]`` section: the
        comment naming the type and one ``device_spec`` per VF.
        """
        lines = self.text_of(generated_files.COMPUTE_CONF).splitlines()
        first = lines.index('# %s: %s on %d virtual functions' % (
            self.gpu.pf, generate_plan.type_words(self.gpu.vgpu_type),
            len(self.gpu.vfs)))
        return lines[first:first + 1 + len(self.gpu.vfs)]

    def alias_line(self) -> str:
        """The controller's ``[pci] alias`` of the type."""
        return next(
            line for line in self.text_of(
                generated_files.CONTROLLER_CONF).splitlines()
            if line.startswith('alias = '))

    def script_line(self) -> str:
        """The boot script's line that types the GPU's VFs."""
        return next(line for line in self.text_of(
            generated_files.SCRIPT).splitlines()
            if line.startswith('gpu %s ' % self.gpu.pf))


def generated(host: host_gpus.Host, pf: host_gpus.Device, type_name: str,
              count: int | None) -> Generated:
    """The files ``config generate`` writes for the GPU and its new type
    (read back as it reads them back), on the node once its VFs are
    reset; ``errors.Invalid`` for a type or count it refuses.
    """
    text = '%s=%s%s' % (pf.address, type_name,
                        '' if count is None else ':%d' % count)
    choice = generate_plan.Choice(pf.address, type_name, count, text)
    after = reset_host(host, pf)
    try:
        files = generate_run.plan_files(after, [choice])
        plan = generate_plan.plan(after, [choice])
    except generate_plan.GenerateError as exc:
        raise errors.Invalid('%s: %s.' % (text, str(exc).rstrip('.')),
                             parameter='to', choice=text) from exc
    return Generated(plan.vf_gpus[0], tuple(files))


def current_script_line(host: host_gpus.Host, pf: host_gpus.Device
                        ) -> str | None:
    """The boot script's line that gives the GPU's typed VFs their
    current type, as ``config generate`` writes it; None when no VF is
    typed or the type is not named in sysfs, or VFs differ.
    """
    typed = typed_vfs(host, pf)
    numbers = {vf.vgpu.current or 0 for vf in typed if vf.vgpu}
    names = {t.number: t for t in known_types(host, pf)}
    if len(numbers) != 1 or next(iter(numbers)) not in names:
        return None
    gpu = generate_plan.VfGpu(pf.address, names[numbers.pop()],
                              tuple(typed))
    text = generated_files.script(generate_plan.Plan(vf_gpus=(gpu,)))
    return next(line for line in text.splitlines()
                if line.startswith('gpu %s ' % pf.address))


# -- the compute node's nova.conf --------------------------------------------

def vf_classes(host: host_gpus.Host, path: str, text: str
               ) -> dict[str, str | None]:
    """``{PCI address: class}`` Nova gives each PCI function of the node
    with the file (``Whitelist.get_devspec``, ``_get_rc_for_dev``); None
    for a function no spec offers to Placement. ``errors.Invalid`` for a
    file nova-compute refuses.
    """
    pci = pci_rules.pci_config(conf_settings.parse_texts([(path, text)]))
    fatal = [f for f in pci.findings if f.severity == findings.ERROR]
    if fatal:
        raise errors.Invalid('%s: %s' % (fatal[0].where, fatal[0].message),
                             parameter='compute_conf', path=path)
    devices = host.pci_devices()
    pfs = devspec.physical_functions(devices)
    found: dict[str, str | None] = {}
    for device in devices:
        spec = devspec.device_spec_for(pci.specs, device, pfs)
        found[device.address] = (
            translator.device_resource_class(spec, device)
            if spec is not None and translator.in_placement(spec) else None)
    return found


def _matches(host: host_gpus.Host, value: str) -> set[str]:
    """The addresses of the node's functions one ``device_spec`` value
    matches (any of its entries).
    """
    try:
        specs = devspec.device_spec_entries(value, report_in_placement=True)
    except conf_settings.NovaConfError:
        return set()
    devices = host.pci_devices()
    pfs = devspec.physical_functions(devices)
    return {d.address for d in devices
            if any(devspec.spec_matches(s, d, pfs) for s in specs)}


def gpu_spec_lines(host: host_gpus.Host, pf: host_gpus.Device, path: str,
                   text: str) -> list[int]:
    """The indexes of the ``[pci] device_spec`` lines of ``text`` that
    match a VF of the GPU; ``errors.Invalid`` when one also matches
    another device (it cannot be replaced for this GPU alone).
    """
    vfs = {vf.address for vf in host.vfs_of(pf)}
    section, found = '', []
    for index, line in enumerate(text.splitlines()):
        header = _SECTION_RE.match(line)
        if header:
            section = header.group(1)
            continue
        spec = _SPEC_RE.match(line)
        if section != 'pci' or not spec:
            continue
        matched = _matches(host, spec.group('value'))
        if not matched & vfs:
            continue
        others = sorted(matched - vfs)
        if others:
            raise errors.Invalid(
                '%s line %d: its device_spec matches devices of other GPUs '
                'too (%s); give each VF of %s its own device_spec by '
                'address first.' % (path, index + 1, ', '.join(others[:3]),
                                    pf.address),
                parameter='compute_conf', path=path, line=index + 1)
        found.append(index)
    return found


@dataclasses.dataclass(frozen=True)
class VfConfChange:
    """The compute node's nova.conf before and after."""

    path: str
    old_text: str
    new_text: str

    def diff(self) -> str:
        """A unified diff of the two texts, no context."""
        return '\n'.join(line.rstrip('\n') for line in difflib.unified_diff(
            self.old_text.splitlines(True), self.new_text.splitlines(True),
            self.path, '%s (new)' % self.path, n=0))


def new_conf_text(host: host_gpus.Host, pf: host_gpus.Device, path: str,
                  text: str, made: Generated) -> VfConfChange:
    """The file with the GPU's ``device_spec`` lines replaced by those
    ``config generate`` writes (in the place of the first), read back:
    the chosen VFs take the new class, the GPU's others none, every
    other device keeps its own. ``errors.Invalid`` otherwise.
    """
    lines = text.splitlines()
    old = gpu_spec_lines(host, pf, path, text)
    if not old:
        raise errors.Invalid(
            '%s has no [pci] device_spec for the VFs of %s: it is not the '
            "file of the GPU's node, or Nova does not offer the GPU."
            % (path, pf.address), parameter='compute_conf', path=path)
    new_lines = made.spec_lines()
    out = lines[:old[0]] + new_lines + [
        line for i, line in enumerate(lines[old[0]:], old[0])
        if i not in old]
    new_text = '\n'.join(out) + '\n'
    before = vf_classes(host, path, text)
    after = vf_classes(host, path, new_text)
    chosen = {vf.address for vf in made.gpu.vfs}
    gpu_vfs = {vf.address for vf in host.vfs_of(pf)}
    for address, was in before.items():
        wanted = (made.gpu.resource_class if address in chosen
                  else None if address in gpu_vfs else was)
        if after.get(address) != wanted:
            raise errors.Invalid(
                '%s cannot be changed line by line for this GPU (%s would '
                'be offered as %s, not %s); edit it by hand.' % (
                    path, address, after.get(address), wanted),
                parameter='compute_conf', path=path)
    return VfConfChange(path, text, new_text)


def expected_total(host: host_gpus.Host, pf: host_gpus.Device, path: str,
                   text: str, resource_class: str) -> tuple[int, int]:
    """``(VFs of the GPU the file offers as resource_class, VFs it
    offers as another class)``.
    """
    classes = vf_classes(host, path, text)
    mine = [classes.get(vf.address) for vf in host.vfs_of(pf)]
    return (sum(1 for c in mine if c == resource_class),
            sum(1 for c in mine if c and c != resource_class))


def traits_after() -> frozenset[str]:
    """The traits Nova gives the GPU's provider with the generated specs
    (they have no ``traits``): ``_get_traits_for_dev`` of them and
    ``OWNER_NOVA``.
    """
    return frozenset(translator.device_traits({}) | {OWNER_NOVA})


def vf_list(vfs: Sequence[host_gpus.Device]) -> str:
    return ', '.join('%s (%s)' % (vf.address, vf.vgpu.current if vf.vgpu
                                  else '?') for vf in vfs)
