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

"""Trait writes on many devices: checked first, then run at once.

Every device is read and written in the bounded pool; a device that
fails does not stop the others.
"""

import dataclasses

from osc_lib import exceptions

from osc_mdev.api import placement as placement_client
from osc_mdev.api import pool
from osc_mdev.domain import traits as domain


@dataclasses.dataclass(frozen=True)
class Outcome:
    device: object
    before: frozenset | None
    after: frozenset | None
    result: str
    failed: bool = False
    interrupted: bool = False


def check_exist(placement, traits):
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
        raise exceptions.CommandError(
            'Trait %s is neither a standard trait nor known to Placement; '
            'custom traits must start with CUSTOM_.' % ', '.join(missing))


def create_custom(placement, traits):
    """Create the CUSTOM_ traits (PUT is a no-op for existing ones)."""
    placement.map(placement.ensure_trait,
                  sorted(t for t in traits if t.startswith('CUSTOM_')))


def apply(placement, plans, dry_run=False, on_done=lambda: None):
    """Run every DevicePlan; one Outcome each, in the plans' order.

    On Ctrl-C the devices being written are let finish and the others are
    left untouched; their Outcome says so (``interrupted``).
    """

    def run(plan):
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
        except exceptions.CommandError as exc:
            return Outcome(plan.device, None, None, 'failed: %s' % exc, True)
        finally:
            on_done()

    try:
        return placement.map(run, plans)
    except pool.Interrupted as stop:
        return [stop.done[i] if i in stop.done else Outcome(
            plan.device, None, None, 'not changed: interrupted', True, True)
            for i, plan in enumerate(plans)]
