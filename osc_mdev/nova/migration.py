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

"""Nova's rules on moving a server, one function each, each naming the
Nova function it mirrors.

Where a move of a server with mdevs (or PCI-in-Placement GPUs) is
refused, in the order Nova refuses it: the compute API
(nova/compute/api.py: the server's state), the conductor
(nova/conductor/tasks/live_migrate.py: the target's hypervisor, the PCI
devices' ``live_migratable``, and ``[workarounds]
skip_hypervisor_version_check_on_lm`` as it reads it) and the libvirt
driver (nova/virt/libvirt/driver.py: libvirt and QEMU versions, the mdev
types on the target and how the target's mdevs map onto the server's).
The answers are None or the reason in Nova's words. Pure logic: the
verdict on a target is ``features.migration.verdict``'s, the plan
``features.migration.plan``'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping

from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.pci import request as pci_request

#: The two moves: ``server migrate --live-migration`` and ``server
#: migrate`` (a cold migration, a resize to the same flavor in Nova).
LIVE = 'live'
COLD = 'cold'

MIN_MDEV_LIVEMIG_LIBVIRT_VERSION = (8, 6, 0)
MIN_MDEV_LIVEMIG_QEMU_VERSION = (8, 1, 0)
HV_DRIVER_QEMU = 'QEMU'
# The linux kernel the guide asks for (mdev live migration, vfio v2).
MIN_KERNEL = '5.18'

# The vm_state Nova's API accepts for each move.
LIVE_VM_STATES = ('active', 'paused')
COLD_VM_STATES = ('active', 'stopped')

#: A version as a tuple: ``(8, 1, 0)``.
Version = tuple[int, ...]


def version_tuple(version: int | str | None) -> Version | None:
    """``8001000`` -> ``(8, 1, 0)``: the integer Nova stores as
    ``hypervisor_version`` (``versionutils.convert_version_to_int``) as a
    tuple; None stays None.
    """
    if version is None:
        return None
    number = int(version)
    return (number // 1000000, number // 1000 % 1000, number % 1000)


def version_text(version: Version) -> str:
    return '.'.join(str(p) for p in version)


def vm_state_allows(kind: str, vm_state: str | None,
                    task_state: str | None) -> str | None:
    """Mirrors the ``check_instance_state`` decorators of
    nova/compute/api.py ``API.live_migrate`` (vm_state active or paused)
    and ``API.resize`` (a cold migration: active or stopped), both with
    no task in progress. Answers None or the reason in Nova's words
    (``InstanceInvalidState``).
    """
    allowed = LIVE_VM_STATES if kind == LIVE else COLD_VM_STATES
    method = 'live_migrate' if kind == LIVE else 'resize'
    if vm_state not in allowed:
        return ('Instance is in vm_state %s (Nova %s accepts %s only)' % (
            vm_state, method, ' or '.join(allowed)))
    if task_state is not None:
        return ('Instance is in task_state %s (a task is in progress)'
                % task_state)
    return None


def host_can_support_mdev_live_migration(
        qemu_version: Version, libvirt_version: Version | None = None,
        hypervisor_type: str = HV_DRIVER_QEMU) -> bool:
    """Mirrors nova/virt/libvirt/driver.py
    ``LibvirtDriver._host_can_support_mdev_live_migration``
    (``Host.has_min_version(MIN_MDEV_LIVEMIG_LIBVIRT_VERSION,
    MIN_MDEV_LIVEMIG_QEMU_VERSION, HV_DRIVER_QEMU)``): libvirt and QEMU
    at least 8.6.0 and 8.1.0, on QEMU.

    Versions are tuples. The Compute API shows QEMU's version only
    (``hypervisor_version``): with ``libvirt_version`` None the answer is
    the one of what is known (libvirt is assumed new enough, and the
    caller says it was not checked).
    """
    if hypervisor_type != HV_DRIVER_QEMU:
        return False
    if libvirt_version is not None and (
            tuple(libvirt_version) < MIN_MDEV_LIVEMIG_LIBVIRT_VERSION):
        return False
    return tuple(qemu_version) >= MIN_MDEV_LIVEMIG_QEMU_VERSION


def mdev_versions_refusal(failed: str) -> str:
    """The reason ``LibvirtDriver._assert_source_can_live_migrate_mdevs``
    gives when ``failed`` ('source' or 'target') cannot migrate mdevs.
    """
    return ('Either libvirt or QEMU version for compute service %s are '
            'too old than the supported ones : (QEMU: %s, libvirt: %s)' % (
                failed, version_text(MIN_MDEV_LIVEMIG_QEMU_VERSION),
                version_text(MIN_MDEV_LIVEMIG_LIBVIRT_VERSION)))


def compatible_with_source_hypervisor(
        source_type: str, source_version: Version | None,
        destination_type: str, destination_version: Version | None,
        skip_version_check: bool = False) -> str | None:
    """Mirrors nova/conductor/tasks/live_migrate.py
    ``LiveMigrationTask._check_compatible_with_source_hypervisor``: the
    same hypervisor type, and unless ``[workarounds]
    skip_hypervisor_version_check_on_lm`` a destination version not older
    than the source's. None, or the reason in Nova's words
    (``InvalidHypervisorType``, ``DestinationHypervisorTooOld``).
    """
    if source_type != destination_type:
        return 'The supplied hypervisor type of is invalid.'
    if not skip_version_check and source_version is not None and (
            destination_version is not None) and (
            source_version > destination_version):
        return ('The instance requires a newer hypervisor version than has '
                'been provided.')
    return None


def skips_hypervisor_version_check(settings: novaconf.Settings) -> bool:
    """``[workarounds] skip_hypervisor_version_check_on_lm`` as
    nova-conductor reads it in
    ``LiveMigrationTask._check_compatible_with_source_hypervisor``
    (nova/conductor/tasks/live_migrate.py): the conductor, not
    nova-compute, checks the versions, so this is the value of the
    conductor's files (the superconductor's with cells). NovaConfError
    for a value oslo.config refuses.
    """
    value = settings.workarounds[novaconf.SKIP_HYPERVISOR_VERSION_CHECK]
    if value.error is not None:
        assert value.written is not None    # a refused value is written
        raise novaconf.NovaConfError(
            '%s: the value %s is refused by oslo.config (%s), so '
            'nova-conductor cannot read it; write True or False' % (
                value.where, value.written.value, value.error))
    return bool(value.value)


def pci_request_live_migratable(aliases: Iterable[pci_request.Alias]
                                ) -> str | None:
    """Mirrors ``LiveMigrationTask._check_can_migrate_pci`` for flavor
    PCI requests (``InstancePCIRequest.is_live_migratable``: every spec
    of the alias says ``live_migratable`` true). ``aliases`` are the
    pci_request.Alias of the flavor's ``pci_passthrough:alias``. None, or
    the reason in Nova's words.
    """
    for alias in aliases:
        if not all(spec.get('live_migratable') == 'true'
                   for spec in alias.specs):
            return ('This request does not explicitly request '
                    'live-migratable devices.')
    return None


def unsupported_mdev_types(source_mdev_types: Mapping[str, str],
                           supported_vgpu_types: Iterable[str]
                           ) -> str | None:
    """Mirrors the first check of nova/virt/libvirt/driver.py
    ``LibvirtDriver.check_source_migrate_data_at_dest``: every type of
    the server's mdevs (``{mdev: type}``) must be among the target's
    ``supported_vgpu_types``. None, or the reason in Nova's words.
    """
    if not all(t in supported_vgpu_types
               for t in source_mdev_types.values()):
        return ('Source mdev types %s are not supported by this compute : '
                '%s' % (list(source_mdev_types.values()),
                        list(supported_vgpu_types)))
    return None


def target_mdevs(source_mdev_types: Mapping[str, str],
                 dest_mdev_types: Mapping[str, str | None]
                 ) -> dict[str, str]:
    """Mirrors the mapping of ``LibvirtDriver
    .check_source_migrate_data_at_dest``: each source mdev (``{mdev:
    type}``) takes the first target mdev of its type not taken yet
    (``dest_mdev_types``, the mdevs Nova allocates on the devices
    Placement gave). Answers ``{source mdev: target mdev}``; Nova refuses
    the migration ("not fully mapped") when it maps fewer than all.
    """
    mapped: dict[str, str] = {}
    for src_mdev, src_type in source_mdev_types.items():
        for dst_mdev, dst_type in dest_mdev_types.items():
            if (src_type == dst_type and src_type not in mapped and
                    dst_mdev not in mapped.values()):
                mapped[src_mdev] = dst_mdev
                continue
    return mapped


#: The vm_state for which Nova's libvirt driver takes post-copy off.
PAUSED = 'paused'


def post_copy_enabled(permit_post_copy: bool | None) -> bool:
    """Mirrors nova/virt/libvirt/driver.py ``_parse_migration_flags``
    (its ``_handle_live_migration_post_copy``) with
    ``_is_post_copy_enabled``: the live and the block migration flags
    nova-compute builds when it starts (``init_host``) carry
    ``VIR_MIGRATE_POSTCOPY`` when its ``[libvirt]
    live_migration_permit_post_copy`` is True. These flags are the
    source's: its driver runs the migration
    (``_live_migration_operation``), so the target's setting plays no
    part in it. None (a value oslo.config refuses) is False: that
    nova-compute does not start.
    """
    return bool(permit_post_copy)


def post_copy_requested(permit_post_copy: bool | None,
                        vm_state: str | None) -> bool:
    """Mirrors ``LibvirtDriver._live_migration_operation``: whether the
    source's driver asks libvirt for post-copy for this server, its
    flags (``post_copy_enabled``) with ``VIR_MIGRATE_POSTCOPY`` taken off
    for a paused server. Nova 34 takes it off for nothing else: not for
    mdevs, nor for PCI devices.
    """
    return post_copy_enabled(permit_post_copy) and vm_state != PAUSED


#: QEMU's refusal (hw/vfio/migration.c, ``vfio_save_prepare``; "Postcopy
#: migration is currently not supported for VFIO devices",
#: docs/devel/migration/vfio.rst): a migration with post-copy enabled
#: and a VFIO device (an mdev or a PCI device given to the guest) fails
#: as it starts.
QEMU_POST_COPY_REFUSAL = ('VFIO migration is not supported with postcopy '
                          'migration')
