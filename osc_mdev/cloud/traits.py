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

"""Trait changes on mdev devices, planned without touching Placement."""

from collections.abc import Collection
from collections.abc import Container
from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses
import re

from osc_mdev.base import errors
from osc_mdev.cloud import providers
from osc_mdev.nova import names
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

OWNER_PREFIX = 'OWNER_'
DEFAULT_TRAIT_PREFIX = 'CUSTOM_'
# The kernel names an mdev type ``<parent driver>-<type>`` (nvidia-35,
# i915-GVTg_V5_4, mtty-1); osc-mdev's naming (trait_for_mdev_type)
# makes it CUSTOM_[<prefix>]<DRIVER>_<TYPE>.
TYPE_DRIVERS = ('NVIDIA', 'I915', 'MTTY', 'MDPY', 'MBOCHS', 'MLX5')
_TYPE_TRAIT_RE = re.compile(
    r'^CUSTOM_(?:[A-Z0-9_]*_)?((?:%s)_[A-Z0-9_]+)$' % '|'.join(TYPE_DRIVERS))


def type_key(trait: str, known: Container[str] = (),
             prefix: str = DEFAULT_TRAIT_PREFIX) -> str | None:
    """The mdev type a trait names, or None when it is no type trait.

    A type trait is a trait that osc-mdev's type naming gives
    (``trait_for_mdev_type``: ``nvidia-35`` -> ``CUSTOM_NVIDIA_35``, or
    ``<prefix>NVIDIA_35`` with ``--trait-prefix``), or one in ``known``
    (the traits of the types a nova.conf enables). With the default
    prefix, a ``CUSTOM_`` trait whose name ends in ``<DRIVER>_<TYPE>`` for
    a known mdev parent driver (``TYPE_DRIVERS``), whatever comes between;
    with another prefix, any trait that starts with it, and only those.
    Two traits with the same key name one type.
    """
    if trait in known:
        return trait
    if prefix != DEFAULT_TRAIT_PREFIX:
        rest = trait[len(prefix):] if trait.startswith(prefix) else ''
        return rest or None
    match = _TYPE_TRAIT_RE.match(trait)
    return match.group(1) if match else None


def is_owner_trait(trait: str) -> bool:
    """Traits a service (Nova, Cyborg) sets to claim a provider."""
    return trait.startswith(OWNER_PREFIX)


def plan(current: Iterable[str], add: Iterable[str] = (),
         remove: Iterable[str] = (), replace: bool = False,
         force: bool = False) -> frozenset[str]:
    """Return the trait set a device should have after a change.

    * default: ``current`` plus ``add`` minus ``remove``; other writers'
      traits (Nova's ``OWNER_NOVA``, another operator's) stay.
    * ``replace``: exactly ``add``, except that ``OWNER_*`` traits already
      there stay unless ``force`` is given.
    * removing an ``OWNER_*`` trait needs ``force`` too.
    """
    current = set(current)
    if replace:
        kept = set() if force else {t for t in current if is_owner_trait(t)}
        new = set(add) | kept
    else:
        new = current | set(add)
    for trait in remove:
        if is_owner_trait(trait) and not force:
            continue
        new.discard(trait)
    return frozenset(new)


def protected_removals(remove: Iterable[str], force: bool) -> list[str]:
    """The ``OWNER_*`` traits in ``remove`` that ``force`` does not allow."""
    return sorted(t for t in remove if is_owner_trait(t)) if not force else []


def trait_for_mdev_type(mdev_type: str,
                        prefix: str = DEFAULT_TRAIT_PREFIX) -> str:
    """``nvidia-35`` -> ``CUSTOM_NVIDIA_35`` (the default naming).

    The name is os-traits' ``normalize_name`` of the type (each run of
    characters other than ASCII letters and digits becomes one ``_``, then
    upper case), with ``prefix`` (a ``CUSTOM_...`` string) in place of its
    ``CUSTOM_``.
    """
    import os_traits

    validate_prefix(prefix)
    body = os_traits.normalize_name(mdev_type)[
        len(os_traits.CUSTOM_NAMESPACE):]
    return names.validate_trait_name(prefix + body)


def is_type_trait(trait: str, prefix: str = DEFAULT_TRAIT_PREFIX) -> bool:
    """True when ``trait`` names an mdev type (``type_key``)."""
    return type_key(trait, prefix=prefix) is not None


def validate_prefix(prefix: str) -> str:
    if not re.match(r'^CUSTOM_[A-Z0-9_]*$', prefix):
        raise ValueError(
            "'%s' is not a valid trait prefix: it must start with CUSTOM_ "
            "and hold only upper-case letters, digits and _" % prefix)
    return prefix


def describe_change(before: Collection[str], after: Collection[str],
                    dry_run: bool = False) -> str:
    """``added CUSTOM_A; removed CUSTOM_B``, ``would add ...`` or
    ``unchanged``.
    """
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    verbs = ('would add', 'would remove') if dry_run else ('added', 'removed')
    parts = ['%s %s' % (verb, ', '.join(group))
             for verb, group in zip(verbs, (added, removed)) if group]
    return '; '.join(parts) if parts else 'unchanged'


@dataclasses.dataclass(frozen=True)
class DevicePlan:
    """The trait change one device gets, or why it is skipped."""

    device: providers.Device
    add: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()
    replace: bool = False
    force: bool = False
    skip: str | None = None

    def apply(self, current: Iterable[str]) -> frozenset[str]:
        return plan(current, self.add, self.remove, self.replace, self.force)


def type_traits(conf: libvirt_driver.MdevConfig,
                prefix: str = DEFAULT_TRAIT_PREFIX) -> dict[str, str]:
    """``{mdev type: trait}`` for every type nova-compute uses from a
    nova.conf (a libvirt_driver.MdevConfig).
    """
    return {t.name: trait_for_mdev_type(t.name, prefix) for t in conf.types}


def plans_from_nova_conf(devices: Iterable[providers.Device],
                         conf: libvirt_driver.MdevConfig, source: str,
                         add: Iterable[str] = (),
                         prefix: str = DEFAULT_TRAIT_PREFIX,
                         replace: bool = False,
                         force: bool = False) -> list[DevicePlan]:
    """Each device gets the trait of the type Nova gives it (the
    ``libvirt_driver.vgpu_type_per_pgpu`` rule on its libvirt name, plus
    ``add``) and loses the traits of the file's other types; a device Nova
    gives no type is skipped.
    """
    by_type = type_traits(conf, prefix)
    plans = []
    for device in devices:
        mdev_type = conf.type_for(device.candidate.nodedev)
        if mdev_type is None:
            plans.append(DevicePlan(
                device, skip='no mdev type for it in %s' % source))
            continue
        own = by_type[mdev_type]
        plans.append(DevicePlan(
            device, add=tuple(add) + (own,),
            remove=tuple(t for t in by_type.values() if t != own),
            replace=replace, force=force))
    return plans


class NoNovaConf(errors.Invalid):
    """A device to tag by its host's nova.conf, on a host whose nova.conf
    is not given.
    """

    def __init__(self, device: providers.Candidate | providers.Device
                 ) -> None:
        given = errors.given('compute_conf')
        super().__init__(
            'Device %s:%s is on host %s, which no %s describes; give %s '
            '%s=FILE or leave the device out.'
            % (device.host, device.device, device.host, given, given,
               device.host),
            parameter='compute_conf', host=device.host,
            device=device.device)
        self.device = device


class NoTypeGiven(errors.Refused):
    """No nova.conf given gives a type to any of the devices of its host
    (``sources``: ``{host: file}``).
    """

    def __init__(self, sources: dict[str, str]) -> None:
        super().__init__(
            '%s gives no mdev type to any device of host %s.'
            % (', '.join(sources.values()), ', '.join(sources)),
            sources=sources)
        self.sources = sources


def plans_from_nova_confs(devices: Iterable[providers.Device],
                          confs: Mapping[str, libvirt_driver.MdevConfig],
                          sources: Mapping[str, str],
                          add: tuple[str, ...] = (),
                          prefix: str = DEFAULT_TRAIT_PREFIX,
                          replace: bool = False,
                          force: bool = False) -> list[DevicePlan]:
    """``plans_from_nova_conf`` for devices of several hosts, each by its
    host's nova.conf (``confs``: ``{host: MdevConfig}``, read from
    ``sources``: ``{host: file}``). NoNovaConf for a device of another
    host, NoTypeGiven when no device gets a type.
    """
    devices = list(devices)
    plans: list[DevicePlan] = []
    for device in devices:
        if device.host not in confs:
            raise NoNovaConf(device)
        plans += plans_from_nova_conf(
            [device], confs[device.host], sources[device.host], add, prefix,
            replace, force)
    if all(p.skip for p in plans):
        hosts = sorted({d.host for d in devices})
        raise NoTypeGiven({h: sources[h] for h in hosts})
    return plans


@dataclasses.dataclass(frozen=True)
class MdevType:
    """An mdev type as far as it is known: ``key`` is the part of its
    trait after the prefix (``NVIDIA_35`` for ``nvidia-35``), the same
    whether the type was read from a nova.conf or from a trait; ``name``
    is how it is shown: the type itself (``nvidia-35``) when a nova.conf
    named it, else its trait.

    The one model of an mdev type across the cloud's sources; what a
    parent's sysfs offers of a type is ``host.gpus.SupportedType``, what
    a nova.conf enables ``nova.virt.libvirt.driver.EnabledType``.
    """

    key: str
    name: str

    @property
    def is_nvidia(self) -> bool:
        return self.key.startswith('NVIDIA_')


def mdev_type(name: str, prefix: str = DEFAULT_TRAIT_PREFIX) -> MdevType:
    """The MdevType of a type named in a nova.conf (``nvidia-35``)."""
    return MdevType(trait_for_mdev_type(name, prefix)[len(prefix):], name)


def mdev_type_of_traits(traits: Iterable[str],
                        prefix: str = DEFAULT_TRAIT_PREFIX
                        ) -> MdevType | None:
    """The type a device's traits name, as the traits of a nova.conf's
    types are named (``type_key``): an MdevType, or None when its traits
    name no type or two.
    """
    found = {}
    for trait in traits:
        key = type_key(trait, prefix=prefix)
        if key:
            found[key] = trait
    if len(found) != 1:
        return None
    (key, trait), = found.items()
    return MdevType(key, trait)
