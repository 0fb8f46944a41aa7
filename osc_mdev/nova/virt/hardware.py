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

"""What a flavor's ``hw:`` and ``os:`` extra specs ask of a host, as
nova/virt/hardware.py reads them: the constraints
``ResourceRequest`` turns into resources and traits
(``nova.scheduler.utils``).

Pure logic, one function per Nova function, each naming it. Nova reads
each constraint from the flavor and the image; a server's image
properties are not part of what the Compute API shows, so only the
flavor's half is read here (an image with no properties). Nova's API
refuses a flavor whose value is not one it knows (microversion 2.86) and
a boot with one: such a value is read as absent.
"""

from __future__ import annotations

from collections.abc import Mapping
import dataclasses

from osc_mdev.nova.pci import devspec as pci_devspec

Specs = Mapping[str, str]

# nova/objects/fields.py
DEDICATED, SHARED, MIXED = 'dedicated', 'shared', 'mixed'
CPU_POLICIES = (DEDICATED, SHARED, MIXED)
PREFER, ISOLATE, REQUIRE = 'prefer', 'isolate', 'require'
CPU_THREAD_POLICIES = (PREFER, ISOLATE, REQUIRE)
EMULATOR_THREADS_POLICIES = ('share', ISOLATE)
PCI_NUMA_POLICIES = ('required', 'legacy', 'preferred', 'socket')
TPM_VERSIONS = ('1.2', '2.0')
TPM_TIS, TPM_CRB = 'tpm-tis', 'tpm-crb'
SECURE_BOOT_POLICIES = ('required', 'disabled', 'optional')
MAXPHYSADDR_MODES = ('passthrough', 'emulate')

#: ``MemEncryptionConfig.create`` (nova/virt/hardware.py): per model, the
#: CPU trait it requires and whether it needs stateless firmware.
MEM_ENCRYPTION_MODELS = {
    'amd-sev': ('HW_CPU_X86_AMD_SEV', False),
    'amd-sev-es': ('HW_CPU_X86_AMD_SEV_ES', False),
    'amd-sev-snp': ('HW_CPU_X86_AMD_SEV_SNP', False),
    'intel-tdx': ('HW_CPU_X86_INTEL_TDX', True),
}
DEFAULT_MEM_ENCRYPTION_MODEL = 'amd-sev'


def _one_of(value: str | None, allowed: tuple[str, ...]) -> str | None:
    """``value`` when Nova knows it, else None (Nova refuses it)."""
    return value if value in allowed else None


def get_cpu_policy_constraint(specs: Specs) -> str | None:
    """Mirrors ``get_cpu_policy_constraint``: ``hw:cpu_policy``."""
    return _one_of(specs.get('hw:cpu_policy'), CPU_POLICIES)


def get_cpu_thread_policy_constraint(specs: Specs) -> str | None:
    """Mirrors ``get_cpu_thread_policy_constraint``:
    ``hw:cpu_thread_policy``.
    """
    return _one_of(specs.get('hw:cpu_thread_policy'), CPU_THREAD_POLICIES)


def get_emulator_thread_policy_constraint(specs: Specs) -> str | None:
    """Mirrors ``get_emulator_thread_policy_constraint``:
    ``hw:emulator_threads_policy``.
    """
    return _one_of(specs.get('hw:emulator_threads_policy'),
                   EMULATOR_THREADS_POLICIES)


def parse_cpu_spec(spec: str) -> set[int]:
    """Mirrors ``parse_cpu_spec``: the CPUs of ``1-4,^3,6``. Raises
    ValueError where Nova raises Invalid.
    """
    include: set[int] = set()
    exclude: set[int] = set()
    for rule in (r.strip() for r in spec.split(',')):
        if not rule:
            continue
        parts = rule.split('-', 1)
        if len(parts) > 1:
            reject = parts[0].startswith('^')
            start = int((parts[0][1:] if reject else parts[0]).strip())
            end = int(parts[1].strip())
            if start > end:
                raise ValueError('invalid range expression %r' % rule)
            (exclude if reject else include).update(range(start, end + 1))
        elif rule.startswith('^'):
            exclude.add(int(rule[1:].strip()))
        else:
            include.add(int(rule))
    return include - exclude


def _cpu_mask(mask: str, vcpus: int) -> set[int]:
    """A CPU mask as Nova reads it: ``^N`` alone excludes from all."""
    if mask.strip().startswith('^'):
        return parse_cpu_spec('0-%d,%s' % (vcpus - 1, mask))
    return parse_cpu_spec(mask)


def get_dedicated_cpu_constraint(specs: Specs,
                                 vcpus: int) -> set[int] | None:
    """Mirrors ``get_dedicated_cpu_constraint``: the CPUs of
    ``hw:cpu_dedicated_mask``, None without one (or one Nova refuses: no
    dedicated or no shared CPU left, or CPUs the flavor does not have).
    """
    mask = specs.get('hw:cpu_dedicated_mask')
    if not mask:
        return None
    try:
        pcpus = _cpu_mask(mask, vcpus)
    except ValueError:
        return None
    cpus = set(range(vcpus))
    if not pcpus or not cpus - pcpus or not pcpus <= cpus:
        return None
    return pcpus


def is_realtime_enabled(specs: Specs) -> bool:
    """Mirrors ``is_realtime_enabled``: ``hw:cpu_realtime``."""
    return pci_devspec.bool_from_string(specs.get('hw:cpu_realtime'))


def get_realtime_cpu_constraint(specs: Specs,
                                vcpus: int) -> set[int] | None:
    """Mirrors ``get_realtime_cpu_constraint``: the CPUs of
    ``hw:cpu_realtime_mask`` (every CPU without one) when
    ``hw:cpu_realtime`` is on; None when off or refused by Nova.
    """
    if not is_realtime_enabled(specs):
        return None
    cpus = set(range(vcpus))
    mask = specs.get('hw:cpu_realtime_mask')
    try:
        realtime = _cpu_mask(mask, vcpus) if mask else set(cpus)
    except ValueError:
        return None
    if not realtime or not realtime <= cpus or (
            realtime == cpus
            and not get_emulator_thread_policy_constraint(specs)):
        return None
    return realtime


@dataclasses.dataclass(frozen=True)
class MemEncryption:
    """``MemEncryptionConfig``: a memory encryption model, the CPU trait
    a host needs for it and whether it needs stateless firmware.
    """

    model: str
    required_trait: str
    needs_stateless_firmware: bool


def get_mem_encryption_constraint(specs: Specs) -> MemEncryption | None:
    """Mirrors ``get_mem_encryption_constraint``: ``hw:mem_encryption``
    on, with ``hw:mem_encryption_model`` (AMD SEV by default).

    Nova also requires of the image (UEFI firmware, stateless for a
    model that needs it) and refuses the boot otherwise: a server or a
    boot Nova accepts has such an image.
    """
    if not pci_devspec.bool_from_string(specs.get('hw:mem_encryption')):
        return None
    model = specs.get('hw:mem_encryption_model') or \
        DEFAULT_MEM_ENCRYPTION_MODEL
    if model not in MEM_ENCRYPTION_MODELS:
        return None
    trait, stateless = MEM_ENCRYPTION_MODELS[model]
    return MemEncryption(model, trait, stateless)


def get_vpmems(specs: Specs) -> list[str]:
    """Mirrors ``get_vpmems``: the labels of ``hw:pmem``."""
    return [label.strip() for label in (specs.get('hw:pmem') or '').split(
        ',') if label.strip()]


def get_vtpm_constraint(specs: Specs) -> tuple[str, str] | None:
    """Mirrors ``get_vtpm_constraint``: ``(version, model)`` of
    ``hw:tpm_version`` and ``hw:tpm_model`` (TIS by default; CRB only
    with version 2.0); None without a version.
    """
    version = _one_of(specs.get('hw:tpm_version'), TPM_VERSIONS)
    if version is None:
        return None
    model = specs.get('hw:tpm_model') or TPM_TIS
    if model not in (TPM_TIS, TPM_CRB) or (
            model == TPM_CRB and version != '2.0'):
        return None
    return version, model


def get_pci_numa_policy_constraint(specs: Specs) -> str | None:
    """Mirrors ``get_pci_numa_policy_constraint``:
    ``hw:pci_numa_affinity_policy``.
    """
    return _one_of(specs.get('hw:pci_numa_affinity_policy'),
                   PCI_NUMA_POLICIES)


def get_secure_boot_constraint(specs: Specs) -> str | None:
    """Mirrors ``get_secure_boot_constraint``: ``os:secure_boot``."""
    return _one_of(specs.get('os:secure_boot'), SECURE_BOOT_POLICIES)


def get_maxphysaddr_mode(specs: Specs) -> str | None:
    """Mirrors ``get_maxphysaddr_mode``: ``hw:maxphysaddr_mode``."""
    return _one_of(specs.get('hw:maxphysaddr_mode'), MAXPHYSADDR_MODES)
