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

"""``type change``, its pure logic: the compute node's nova.conf with one
mdev GPU given another type (``new_conf_text``, read back with the
libvirt driver's rules), what Nova then does to the GPU's provider
(``provider_outcome``), which flavors ask for either type
(``asks_type``) and the trees the flavors are counted on once the GPU
serves the new type (``trees_after``).

What Nova does is what its libvirt driver's ``_ensure_pgpu_providers``
does when nova-compute starts: a GPU that still offers instances of its
type keeps its provider (same name and UUID) and gets the inventory
``{class of the type: existing mdevs + available_instances}``; a GPU
that offers none (its old mdevs are still there, so it can create none
of the new type) loses its provider, and when it offers instances again
Nova creates a new one: a new UUID, only ``OWNER_NOVA``. Placement
refuses to replace an inventory that has allocations, hence the servers
first.
"""

from collections.abc import Iterable
from collections.abc import Sequence
import dataclasses
import difflib
import re

from osc_mdev.base import errors
from osc_mdev.cloud import fit
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.host import gpus as host_gpus
from osc_mdev.nova.conf import settings as conf_settings
from osc_mdev.nova import names
from osc_mdev.nova.scheduler import utils as rr
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

_SECTION_RE = re.compile(r'^\s*\[([^\]]+)\]\s*$')
_OPTION_RE = re.compile(r'^([A-Za-z0-9_.-]+)\s*[=:]')


@dataclasses.dataclass(frozen=True)
class ConfChange:
    """The compute node's nova.conf before and after, and the types."""

    path: str
    old_text: str
    new_text: str
    old_type: str | None          # what Nova gives the GPU now
    new_type: str
    resource_class: str           # what Nova reports the new type as

    def diff(self) -> str:
        """A unified diff of the two texts, one line of context."""
        return '\n'.join(line.rstrip('\n') for line in difflib.unified_diff(
            self.old_text.splitlines(True), self.new_text.splitlines(True),
            self.path, '%s (new)' % self.path, n=1))


def mdev_config(path: str, text: str) -> libvirt_driver.MdevConfig:
    """The MdevConfig nova-compute makes of one file's ``text``."""
    return libvirt_driver.supported_vgpu_types(
        conf_settings.parse_texts([(path, text)]))


def _assignment(conf: libvirt_driver.MdevConfig, address: str,
                new_type: str) -> tuple[list[str], dict[str, list[str]]]:
    """``(enabled types, {type: addresses})`` once the GPU at ``address``
    takes ``new_type``: listed under it (unless it is the default type,
    which takes every unlisted GPU), out of its old type's list; a type
    left with no address leaves ``enabled_mdev_types`` (it would become
    the default type).
    """
    listed = {t.name: list(t.device_addresses) for t in conf.types
              if t.device_addresses}
    enabled = list(conf.supported_types)
    for mdev_type, addresses in listed.items():
        if address in addresses:
            addresses.remove(address)
            if not addresses:
                enabled.remove(mdev_type)
    if new_type != conf.default_type:
        listed.setdefault(new_type, []).append(address)
        if new_type not in enabled:
            enabled.append(new_type)
    return enabled, {t: a for t, a in listed.items() if a}


def _rewrite(text: str, enabled: Sequence[str],
             listed: dict[str, list[str]]) -> str:
    """``text`` with ``[devices] enabled_mdev_types`` and each
    ``[mdev_<type>] device_addresses`` set as given (an option's
    continuation lines go with it); sections it lacks are added at the
    end; every other line is kept as it is.
    """
    out: list[str] = []
    section = ''
    seen: set[str] = set()
    skipping = False
    for line in text.splitlines():
        if skipping and line[:1] in (' ', '\t') and line.strip():
            continue
        skipping = False
        header = _SECTION_RE.match(line)
        if header:
            section = header.group(1)
            seen.add(section)
            out.append(line)
            continue
        option = _OPTION_RE.match(line)
        name = option.group(1) if option else None
        if section == 'devices' and name == 'enabled_mdev_types':
            out.append('enabled_mdev_types = %s' % ', '.join(enabled))
            skipping = True
            continue
        if section.startswith('mdev_') and name == 'device_addresses':
            skipping = True
            addresses = listed.get(section[len('mdev_'):])
            if addresses:
                out.append('device_addresses = %s' % ', '.join(addresses))
            continue
        out.append(line)
    _add_missing(out, seen, enabled, listed)
    return '\n'.join(out) + '\n'


def _section_of(line: str) -> str | None:
    header = _SECTION_RE.match(line)
    return header.group(1) if header else None


def _add_missing(out: list[str], seen: set[str], enabled: Sequence[str],
                 listed: dict[str, list[str]]) -> None:
    """Sections (and lines) ``_rewrite`` found no place for."""
    text = '\n'.join(out)
    if 'devices' not in seen:
        out += ['', '[devices]', 'enabled_mdev_types = %s'
                % ', '.join(enabled)]
    for mdev_type, addresses in listed.items():
        section = 'mdev_%s' % mdev_type
        line = 'device_addresses = %s' % ', '.join(addresses)
        if section not in seen:
            out += ['', '[%s]' % section, line]
        elif line not in text:
            index = next(i for i, x in enumerate(out)
                         if _section_of(x) == section)
            out.insert(index + 1, line)


def new_conf_text(path: str, text: str, nodedev: str,
                  new_type: str) -> ConfChange:
    """The file ``text`` (at ``path``) once the GPU ``nodedev``
    (``pci_0000_84_00_0``) takes ``new_type``, read back with Nova's
    rules (``supported_vgpu_types``, ``vgpu_type_per_pgpu``): the GPU
    gets the new type and every other device keeps its own.

    ``errors.Invalid`` for a file Nova refuses or one that gives the GPU
    no type; ``errors.Refused`` when the GPU already has ``new_type``.
    """
    old = mdev_config(path, text)
    if old.errors:
        raise errors.Invalid('%s: %s' % (path, old.errors[0].message),
                             parameter='compute_conf', path=path)
    old_type = old.type_for(nodedev)
    address = libvirt_driver.device_address(old, nodedev)
    if address is None:
        raise errors.Invalid('%s is no PCI device: its type cannot be '
                             'changed in nova.conf.' % nodedev, name=nodedev)
    if old_type == new_type:
        raise errors.Refused(
            '%s already gives %s type %s; there is nothing to change.'
            % (path, address, new_type), path=path, mdev_type=new_type)
    enabled, listed = _assignment(old, address, new_type)
    new_text = _rewrite(text, enabled, listed)
    new = mdev_config(path, new_text)
    _check_read_back(old, new, nodedev, new_type, path)
    return ConfChange(path, text, new_text, old_type, new_type,
                      new.resource_class_for(nodedev))


def _check_read_back(old: libvirt_driver.MdevConfig,
                     new: libvirt_driver.MdevConfig, nodedev: str,
                     new_type: str, path: str) -> None:
    """Refuse a new file Nova would read otherwise than meant."""
    problems = [f.message for f in new.errors]
    if new.type_for(nodedev) != new_type:
        problems.append('the GPU would take %s' % new.type_for(nodedev))
    for address, mdev_type in old.pgpu_type_mapping.items():
        if address != libvirt_driver.device_address(old, nodedev) and \
                new.pgpu_type_mapping.get(address) != mdev_type:
            problems.append('%s would lose type %s' % (address, mdev_type))
    if old.default_type != new.default_type and \
            old.default_type != new_type:
        problems.append('the default type would change')
    if problems:
        raise errors.Invalid(
            '%s cannot be changed line by line for this GPU (%s); edit '
            'it by hand.' % (path, '; '.join(problems)),
            parameter='compute_conf', path=path)


# -- the provider ------------------------------------------------------------

def provider_outcome(name: str, uuid: str, old_class: str,
                     old_total: int, change: ConfChange) -> str:
    """What Nova does to the GPU's provider when nova-compute restarts
    with the new file (``_ensure_pgpu_providers``).
    """
    if old_class == change.resource_class:
        inventory = '%s, total' % old_class
    else:
        inventory = 'class %s -> %s, total' % (old_class,
                                               change.resource_class)
    return (
        'Nova keeps provider %s (%s) and sets its inventory (%s %d -> the '
        "GPU's %s mdevs plus its available_instances of %s) if the GPU "
        'offers %s when nova-compute starts; if it offers none (old mdevs '
        'left), Nova deletes the provider and creates it anew, with a new '
        'UUID and only OWNER_NOVA, once it offers them'
        % (name, uuid, inventory, old_total, change.new_type,
           change.new_type, change.new_type))


def trait_move(old_traits: Iterable[str], new_type: str,
               prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX
               ) -> tuple[tuple[str, ...], str]:
    """``(type traits to remove, trait to add)``: every type trait of
    the provider but the new type's goes.
    """
    new_trait = trait_logic.trait_for_mdev_type(new_type, prefix)
    remove = tuple(sorted(
        t for t in old_traits if t != new_trait
        and trait_logic.is_type_trait(t, prefix)))
    return remove, new_trait


def mdevs_to_remove(host: host_gpus.Host, address: str,
                    new_type: str) -> list[host_gpus.Mdev]:
    """The node's mdevs on the GPU at ``address`` that are not of
    ``new_type``, by UUID.
    """
    return sorted((m for m in host.mdevs_of(address)
                   if m.mdev_type != new_type), key=lambda m: m.uuid)


def check_offered(host: host_gpus.Host, address: str,
                  new_type: str) -> None:
    """``errors.Invalid`` when the node's sysfs has no mdev-capable GPU
    at ``address`` or the GPU lists no ``new_type`` in its
    ``mdev_supported_types``: nova-compute would give it no inventory of
    that type.
    """
    device = host.devices.get(address)
    if device is None or not device.types:
        raise errors.Invalid(
            'The snapshot shows no GPU offering mdev types at %s; take the '
            "snapshot of the GPU's node again." % address, parameter='to')
    if new_type not in device.types:
        raise errors.Invalid(
            'The GPU at %s offers no mdev type %s; its sysfs offers %s.'
            % (address, new_type, ', '.join(sorted(device.types))),
            parameter='to', choices=sorted(device.types))


def total_after(host: host_gpus.Host, address: str,
                new_type: str) -> int | None:
    """What Nova reports for the GPU at ``address`` once it serves
    ``new_type`` (``_get_vgpu_total`` of ``_ensure_pgpu_providers``:
    the GPU's mdevs of the type plus its ``available_instances`` of
    it), as its sysfs says now; None when sysfs cannot tell: the GPU or
    the type is not there, or mdevs of another type hold the GPU and it
    offers none of the new type (most GPUs offer a type only once they
    hold no mdev of another).
    """
    device = host.devices.get(address)
    offered = device.types.get(new_type) if device else None
    if offered is None or offered.available_instances is None:
        return None
    mdevs = host.mdevs_of(address)
    kept = sum(1 for m in mdevs if m.mdev_type == new_type)
    if len(mdevs) > kept and not offered.available_instances:
        return None
    return offered.available_instances + kept


# -- flavors and capacity ----------------------------------------------------

def asks_type(request: rr.Request, traits: Iterable[str],
              classes: Iterable[str]) -> bool:
    """Whether a flavor's request asks for one of the type ``traits``
    (required) or, for a class other than VGPU, one of ``classes``.
    """
    traits, custom = set(traits), {c for c in classes if c != names.VGPU}
    return any(g.required & traits or {rc for rc, _ in g.resources} & custom
               for g in request.groups) or bool(request.root_required
                                                & traits)


def trees_after(trees: Sequence[fit.Host], uuid: str, resource_class: str,
                total: int | None, traits: frozenset[str]
                ) -> list[fit.Host]:
    """The trees once the GPU ``uuid`` offers ``total`` of
    ``resource_class`` with ``traits`` and holds nothing (``total``
    None: not known, the GPU counts for nothing).
    """
    def changed(p: fit.Provider) -> fit.Provider:
        if p.uuid != uuid:
            return p
        inventories = {} if not total else {
            resource_class: fit.Inventory(total=total, max_unit=total)}
        return dataclasses.replace(p, inventories=inventories, usages={},
                                   traits=traits)
    return [dataclasses.replace(h, children=tuple(
        changed(c) for c in h.children)) for h in trees]
