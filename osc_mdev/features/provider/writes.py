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

"""Releasing one-time-use devices: ``reserved`` back to 0 on the providers
Nova reserved after one use, and only on those.

Nova (``nova.compute.pci_placement_translator.PciResourceProvider.
_handle_one_time_use``) sets a one-time-use device's ``reserved`` to its
``total`` while a server holds it and never resets it: once the server is
gone the device waits, reserved, for the operator to clean it and give
it back. Giving it back is a generation-guarded inventory write decided
on a consistent read of the provider: a device in use (reserved too, but
with a consumer) or reserved by someone else is never written, and a
provider that changed since it was read (a new allocation, Nova's own
update, another operator) is read again and decided again, never
overwritten.
"""

from collections.abc import Callable
from collections.abc import Sequence
import dataclasses
import logging

from osc_mdev.api import placement as placement_client
from osc_mdev.api import pool
from osc_mdev.base import errors
from osc_mdev.cloud import providers
from osc_mdev.cloud import reads as device_reads

LOG = logging.getLogger(__name__)

RELEASED = 'released'
WOULD_RELEASE = 'would release'
#: Why a device is not written, by its state.
NOT_WRITTEN = {
    providers.IN_USE: 'refused: in use',
    providers.FREE: 'not changed: not reserved',
    providers.RESERVED: 'refused: reserved, but not by Nova after one use',
}
#: The states a device named on purpose may end in without failing.
FINE = (providers.FREE,)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What became of one device: its ``state`` as last read, the
    ``result`` (RELEASED, WOULD_RELEASE or a NOT_WRITTEN sentence, or
    ``failed: ...``) and whether it counts as a failure.
    """

    device: providers.Device
    state: str
    result: str
    failed: bool = False

    @property
    def released(self) -> bool:
        return self.result == RELEASED


@dataclasses.dataclass(frozen=True)
class Releases:
    outcomes: list[Outcome]

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.failed]


def release(placement: 'placement_client.PlacementClient',
            references: Sequence[str] = (), all_devices: bool = False,
            dry_run: bool = False) -> Releases:
    """Release the one-time-use devices ``references`` name, or with
    ``all_devices`` every device waiting to be cleaned.

    Every named device is checked before the first write (errors.NotFound
    for a name that matches nothing, errors.Refused for a device that is
    not one-time-use); then each device is released on its own in the
    bounded pool. A named device in use, or reserved by someone else, is
    a failed outcome; one that is not reserved is left as it is. With
    ``all_devices``, a device that stopped waiting meanwhile is reported
    and is no failure.
    """
    if bool(references) == bool(all_devices):
        raise errors.Invalid(
            'Name the devices to release, or give %s for every device '
            'waiting to be cleaned, not both.' % errors.given('all_devices'),
            parameter='all_devices')
    devices = device_reads.one_time_use_devices(placement, references,
                                                all_devices)
    outcomes = pool.call_all(
        [_call(placement, d, dry_run, named=not all_devices)
         for d in devices], placement.max_workers)
    return Releases(list(outcomes))


def _call(placement: 'placement_client.PlacementClient',
          device: providers.Device, dry_run: bool, named: bool
          ) -> Callable[[], Outcome]:
    return lambda: release_device(placement, device, dry_run, named)


def release_device(placement: 'placement_client.PlacementClient',
                   device: providers.Device, dry_run: bool = False,
                   named: bool = True,
                   attempts: int = placement_client.UPDATE_ATTEMPTS,
                   backoff: float = placement_client.UPDATE_BACKOFF
                   ) -> Outcome:
    """Release one device if it waits to be cleaned, guarded by the
    generation it was read at.

    ``device`` comes from the bulk reads: when its inventory was read at
    the generation of the provider listing (``candidate.generation``),
    read before its usage, it is decided on at once; otherwise, and after
    a conflict, the provider is read again (inventories, consumers and
    traits at one generation) and decided again.
    """
    current: providers.Device | None = device
    for attempt in range(attempts):
        if attempt:
            try:
                current = reread(placement, device)
            except errors.Error as exc:
                return Outcome(device, device.state, 'failed: %s' % exc,
                               failed=True)
            if current is None:
                return Outcome(device, '', 'failed: the device is gone',
                               failed=True)
        assert current is not None
        state = current.state
        if state != providers.TO_CLEAN:
            return Outcome(current, state, NOT_WRITTEN[state],
                           failed=(named or state == providers.RESERVED)
                           and state not in FINE)
        if current.generation != current.candidate.generation:
            continue  # read at two generations: read it again
        if dry_run:
            return Outcome(current, state, WOULD_RELEASE)
        try:
            _put_released(placement, current)
        except placement_client.GenerationConflict:
            if attempt:
                placement_client.pause_after_conflict(attempt, backoff)
            continue
        except errors.Error as exc:
            return Outcome(current, state, 'failed: %s' % exc, failed=True)
        return Outcome(current, state, RELEASED)
    return Outcome(device, device.state,
                   'failed: the provider kept changing under %d reads; run '
                   'the command again' % attempts, failed=True)


def _put_released(placement: 'placement_client.PlacementClient',
                  device: providers.Device) -> None:
    inventory = device.inventory
    assert inventory is not None    # waiting is decided on it
    placement.put_inventory(
        device.uuid, device.generation, device.resource_class,
        {'total': inventory.total, 'reserved': 0,
         'min_unit': inventory.min_unit, 'max_unit': inventory.max_unit,
         'step_size': inventory.step_size,
         'allocation_ratio': inventory.allocation_ratio})


def reread(placement: 'placement_client.PlacementClient',
           device: providers.Device, reads: int = 3
           ) -> providers.Device | None:
    """The device as Placement has it now: its inventories, consumers and
    traits read at one generation (the candidate carries it), or None
    when the provider is gone. Reads that straddle a change are done
    again, ``reads`` times at most; the last ones are kept, with the
    generation of the inventories, which makes a later write conflict.
    """
    uuid = device.uuid
    for _ in range(reads):
        try:
            generation, inventories = placement.get_inventories(uuid)
            at, allocations = placement.get_allocations_and_generation(uuid)
            traits_at, traits = placement.get_traits_and_generation(uuid)
        except placement_client.NotFound:
            return None
        if generation == at == traits_at:
            break
    # Never consistent: a candidate generation no write is guarded by.
    candidate = dataclasses.replace(
        device.candidate,
        generation=generation if generation == at == traits_at else -1)
    rows = [d for d in providers.build_devices(
        candidate, inventories, generation,
        providers.usages_from_allocations(allocations), traits)
        if d.resource_class == device.resource_class]
    return rows[0] if rows else None
