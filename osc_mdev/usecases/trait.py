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

"""Trait writes on many devices: checked first, then run at once; and the
provider config files that make the traits durable (``trait export``,
and ``trait set`` / ``unset`` with a directory of them).

Every device is read and written in the bounded pool; a device that
fails does not stop the others.
"""

import dataclasses
import logging

from osc_lib import exceptions

from osc_mdev.api import placement as placement_client
from osc_mdev.api import pool
from osc_mdev.domain import provider_config as files
from osc_mdev.domain import traits as domain
from osc_mdev.usecases import provider_config

LOG = logging.getLogger(__name__)


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


def export(placement, hosts=(), directory=None, type_traits_only=False,
           prefix=domain.DEFAULT_TRAIT_PREFIX, dry_run=False):
    """``trait export``: the provider config file of each compute node.

    ``hosts``: those nodes; none: every node with mdev devices, and the
    nodes whose file ``directory`` already holds (so a node whose last
    trait went gets its file emptied). With ``directory`` the files are
    written there (``[provider_config.Written]``), else returned
    (``[provider_config.HostFile]``).
    """
    existing = ()
    if directory is not None and not hosts:
        existing = provider_config.existing_hosts(directory)
    built = provider_config.build(placement, hosts, type_traits_only,
                                  prefix, existing)
    result = built if directory is None else provider_config.write(
        directory, built, dry_run)
    left_out = sum(f.pci_left_out for f in built)
    if left_out:
        LOG.warning(
            'Note: %d PCI-in-Placement device(s) left out: Nova sets their '
            'traits from [pci] device_spec on every update, which keeps '
            'them; set their traits there.', left_out)
    return result


def check_export_dir(directory, devices):
    """Before ``trait set/unset`` writes a trait: the
    directory can be written, and no file of it other than the hosts' own
    defines one of ``devices``.
    """
    names = sorted({files.file_name(d.host) for d in devices})
    provider_config.check_directory(
        directory, names, [d.candidate.name for d in devices])


def export_changed(placement, directory, outcomes, dry_run=False):
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
    built = provider_config.build(placement, hosts, overrides=overrides)
    return provider_config.write(directory, built, dry_run)
