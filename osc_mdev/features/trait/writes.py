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

"""Trait writes on many devices: selected, checked first, then run at
once (``trait set`` / ``unset``); and the provider config files that make
the traits durable (``trait export``, and ``trait set`` / ``unset`` with
a directory of them).

Every device is read and written in the bounded pool; a device that
fails does not stop the others.
"""

from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Sequence
import dataclasses
import logging
import typing

from osc_mdev.api import placement as placement_client
from osc_mdev.api import pool
from osc_mdev.base import errors
from osc_mdev.cloud import providers
from osc_mdev.cloud import reads as device_reads
from osc_mdev.cloud import traits as domain
from osc_mdev.features import nova_conf
from osc_mdev.features.trait import export_files
from osc_mdev.features.trait import provider_files

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Outcome:
    device: providers.Device
    before: frozenset[str] | None
    after: frozenset[str] | None
    result: str
    failed: bool = False
    interrupted: bool = False


@dataclasses.dataclass(frozen=True)
class Selection:
    """The devices a write acts on: those named (``references``), of
    ``hosts``, of ``resource_class``, or all of them; selectors narrow
    one another.
    """

    references: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    resource_class: str | None = None
    all_devices: bool = False

    def __post_init__(self) -> None:
        """Refuse selectors that contradict each other: ``all_devices``
        means every device, and with names, hosts or a resource class it
        would silently mean less, so it stands alone.
        """
        others = [what for what, given in (
            ('device names', self.references),
            (errors.given('host'), self.hosts),
            (errors.given('resource_class'), self.resource_class)) if given]
        if self.all_devices and others:
            raise errors.Invalid(
                '%s selects every device and cannot be combined with %s; '
                'drop %s to select by %s.'
                % (errors.given('all_devices'), ' or '.join(others),
                   errors.given('all_devices'), ' and '.join(others)),
                parameter='all_devices')


@dataclasses.dataclass(frozen=True)
class Writes:
    """What a trait write did: an Outcome per device, in the selection's
    order, and with a directory of provider config files, what became of
    each file (``provider_files.Written``).
    """

    outcomes: list[Outcome]
    files: list[provider_files.Written] = dataclasses.field(
        default_factory=list)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.failed]

    @property
    def interrupted(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.interrupted]

    @property
    def unwritten(self) -> list[provider_files.Written]:
        return [f for f in self.files if f.failed]


class Progress(typing.Protocol):
    """What follows a long write: ``tick`` once per device, ``done`` at
    the end.
    """

    def tick(self) -> None: ...

    def done(self) -> None: ...


def set_traits(placement: placement_client.PlacementClient,
               selection: Selection,
               add: tuple[str, ...] = (), replace: bool = False,
               force: bool = False,
               compute_confs: Sequence[tuple[str, str]] = (),
               prefix: str = domain.DEFAULT_TRAIT_PREFIX,
               dry_run: bool = False, directory: str | None = None,
               progress: Callable[[int], Progress] | None = None
               ) -> Writes:
    """``trait set``: ``add`` the traits to the selected devices (with
    ``replace``, make them the only ones) and, with ``compute_confs``
    (``(host, file)`` pairs, read first), give each device of those
    hosts the trait of the type its host's nova.conf gives it. Without
    device names, hosts or ``all_devices``, the devices are those of the
    hosts of ``compute_confs``.
    """
    confs = nova_conf.compute_confs(compute_confs)
    if confs and not (selection.references or selection.hosts
                      or selection.all_devices):
        selection = dataclasses.replace(selection, hosts=tuple(confs))
    selected = _select(placement, selection)
    wanted = set(add)
    if not confs:
        plans = [domain.DevicePlan(d, add=add, replace=replace, force=force)
                 for d in selected]
    else:
        plans = domain.plans_from_nova_confs(selected, confs,
                                             dict(compute_confs), add,
                                             prefix, replace, force)
        for conf in confs.values():
            wanted.update(domain.type_traits(conf, prefix).values())
    return write(placement, plans, wanted, dry_run, directory, progress)


def unset_traits(placement: placement_client.PlacementClient,
                 selection: Selection,
                 remove: tuple[str, ...], force: bool = False,
                 dry_run: bool = False, directory: str | None = None,
                 progress: Callable[[int], Progress] | None = None
                 ) -> Writes:
    """``trait unset``: remove the traits from the selected devices."""
    plans = [domain.DevicePlan(d, remove=remove, force=force)
             for d in _select(placement, selection)]
    return write(placement, plans, (), dry_run, directory, progress)


def _select(placement: placement_client.PlacementClient,
            selection: Selection) -> list[providers.Device]:
    return device_reads.select_devices(
        placement, references=selection.references,
        hosts=selection.hosts, resource_class=selection.resource_class,
        all_devices=selection.all_devices)


def write(placement: placement_client.PlacementClient,
          plans: list[domain.DevicePlan],
          wanted: Iterable[str], dry_run: bool = False,
          directory: str | None = None,
          progress: Callable[[int], Progress] | None = None) -> Writes:
    """Check the ``wanted`` traits, create the custom ones, run every
    plan and, with ``directory``, rewrite the provider config file of
    each host changed (checked before the first write). ``progress``:
    given the number of devices, what follows the writes.
    """
    check_exist(placement, wanted)
    if directory:
        check_export_dir(directory, [p.device for p in plans])
    if not dry_run:
        create_custom(placement, wanted)
    meter = progress(len(plans)) if progress else None
    outcomes = apply(placement, plans, dry_run,
                     meter.tick if meter else lambda: None)
    if meter:
        meter.done()
    written: list[provider_files.Written] = []
    if directory and not any(o.interrupted for o in outcomes):
        written = export_changed(placement, directory, outcomes, dry_run)
    return Writes(outcomes, written)


def check_exist(placement: placement_client.PlacementClient,
                traits: Iterable[str]) -> None:
    """Standard (non-CUSTOM_) traits must exist in os-traits or Placement.
    """
    import os_traits

    known = set(os_traits.get_traits())
    unknown = sorted(t for t in traits
                     if not t.startswith('CUSTOM_') and t not in known)
    missing = [t for t, exists in zip(
        unknown, placement.map(placement.trait_exists, unknown))
        if not exists]
    if missing:
        raise errors.Invalid(
            'Trait %s is neither a standard trait nor known to Placement; '
            'custom traits must start with CUSTOM_.' % ', '.join(missing),
            parameter='trait', traits=missing)


def create_custom(placement: placement_client.PlacementClient,
                  traits: Iterable[str]) -> None:
    """Create the CUSTOM_ traits (PUT is a no-op for existing ones)."""
    placement.map(placement.ensure_trait,
                  sorted(t for t in traits if t.startswith('CUSTOM_')))


def apply(placement: placement_client.PlacementClient,
          plans: Sequence[domain.DevicePlan], dry_run: bool = False,
          on_done: Callable[[], None] = lambda: None) -> list[Outcome]:
    """Run every DevicePlan; one Outcome each, in the plans' order.

    On Ctrl-C the devices being written are let finish and the others are
    left untouched; their Outcome says so (``interrupted``).
    """

    def run(plan: domain.DevicePlan) -> Outcome:
        try:
            if plan.skip:
                return Outcome(plan.device, None, None,
                               'skipped: %s' % plan.skip)
            device = plan.device
            # The selection's listing generation and summary traits save
            # the first read; a stale pair conflicts and is re-read.
            known = None if device.traits is None else (
                device.generation, frozenset(device.traits))
            before, after = placement.update_traits(
                device.uuid, plan.apply, dry_run=dry_run, known=known)
            return Outcome(plan.device, before, after,
                           domain.describe_change(before, after, dry_run))
        except placement_client.NotFound:
            return Outcome(plan.device, None, None,
                           'failed: the device was deleted meanwhile', True)
        except errors.Error as exc:
            return Outcome(plan.device, None, None, 'failed: %s' % exc, True)
        finally:
            on_done()

    try:
        return placement.map(run, plans)
    except pool.Interrupted as stop:
        return [stop.done[i] if i in stop.done else Outcome(
            plan.device, None, None, 'not changed: interrupted', True, True)
            for i, plan in enumerate(plans)]


def export(placement: placement_client.PlacementClient,
           hosts: Iterable[str] = (), directory: str | None = None,
           type_traits_only: bool = False,
           prefix: str = domain.DEFAULT_TRAIT_PREFIX, dry_run: bool = False
           ) -> list[provider_files.HostFile] | list[provider_files.Written]:
    """``trait export``: the provider config file of each compute node.

    ``hosts``: those nodes; none: every node with mdev devices, and the
    nodes whose file ``directory`` already holds (so a node whose last
    trait went gets its file emptied). With ``directory`` the files are
    written there (``[provider_files.Written]``), else returned
    (``[provider_files.HostFile]``).
    """
    existing: list[str] = []
    if directory is not None and not hosts:
        existing = provider_files.existing_hosts(directory)
    built = provider_files.build(placement, hosts, type_traits_only,
                                 prefix, existing)
    result = built if directory is None else provider_files.write(
        directory, built, dry_run)
    left_out = sum(f.pci_left_out for f in built)
    if left_out:
        LOG.warning(
            'Note: %d PCI-in-Placement device(s) left out: Nova sets their '
            'traits from [pci] device_spec on every update, which keeps '
            'them; set their traits there.', left_out)
    return result


def check_export_dir(directory: str,
                     devices: Collection[providers.Device]) -> None:
    """Before ``trait set/unset`` writes a trait: the
    directory can be written, and no file of it other than the hosts' own
    defines one of ``devices``.
    """
    names = sorted({export_files.file_name(d.host) for d in devices})
    provider_files.check_directory(
        directory, names, [d.candidate.name for d in devices])


def export_changed(placement: placement_client.PlacementClient,
                   directory: str, outcomes: Collection[Outcome],
                   dry_run: bool = False) -> list[provider_files.Written]:
    """``trait set/unset``: rewrite the file in ``directory`` of each
    host the ``outcomes`` touched, from Placement as it is after the
    writes (with ``dry_run``: with each device's traits as the run would
    leave them).
    """
    hosts = sorted({o.device.host for o in outcomes})
    overrides = None
    if dry_run:
        overrides = {o.device.uuid: o.after for o in outcomes
                     if o.after is not None}
    built = provider_files.build(placement, hosts, overrides=overrides)
    return provider_files.write(directory, built, dry_run)
