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

"""The mdev rules of Nova's libvirt driver (nova/virt/libvirt/driver.py).

What nova-compute makes of a nova.conf's mdev options when it starts
(``supported_vgpu_types``, an ``MdevConfig``), and which type and
resource class it then gives each mdev parent (``vgpu_type_per_pgpu``,
``resource_class_for_device``); the nova.conf texts are parsed in
``osc_mdev.nova.conf.settings``. Each function whose docstring says
"Mirrors" follows the Nova function it names. Addresses are kept as
written, as Nova keeps them: ``84:00.0`` stops nova-compute, while
``0000:3B:00.4`` starts fine but never matches libvirt's lower-case
``0000:3b:00.4``, so that device takes the default type.

Also the ``[libvirt] live_migration_downtime*`` and post-copy settings
the driver uses for a live migration, judged against what Nova's vGPU
guide asks for NVIDIA vGPUs.
"""

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses
import re

from osc_mdev.base import findings as findings_model
from osc_mdev.base import words
from osc_mdev.nova.conf import settings as conf_settings
from osc_mdev.nova import names
from osc_mdev.nova.pci import utils as pci_utils
from osc_mdev.nova.virt.libvirt import config as libvirt_config

VGPU = names.VGPU
ERROR, WARNING = findings_model.ERROR, findings_model.WARNING
Finding = findings_model.Finding

# libvirt's name of a PCI parent and the address Nova compares with it.
_LIBVIRT_PCI_RE = re.compile(r'^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')


def looks_like_virtual_parent(address: str) -> bool:
    """Whether ``address`` can name a virtual parent device (``mtty_mtty``
    for ``/sys/devices/virtual/mtty/mtty``) when sysfs cannot be read.
    """
    return names.is_nodedev_name(address) and not address.startswith('pci_')


def validate_device_address(
        address: str,
        virtual_parent_exists: Callable[[str], bool] | None = None) -> str:
    """Mirrors nova/virt/libvirt/driver.py ``_validate_device_address``.

    Returns ``'pci'`` for what ``parse_address`` accepts (even if it can
    never match, see :func:`matches_libvirt`) and ``'virtual'`` for a
    virtual parent that exists (``mtty_mtty`` ->
    ``/sys/devices/virtual/mtty/mtty``). Anything else raises
    conf_settings.NovaConfError: Nova raises InvalidLibvirtMdevConfig and
    nova-compute stops. Without ``virtual_parent_exists`` the check is
    on the name's form only.
    """
    try:
        pci_utils.parse_address(address)
        return 'pci'
    except ValueError:
        pass
    exists = virtual_parent_exists or looks_like_virtual_parent
    if exists(address):
        return 'virtual'
    hint = ('write the full lower-case address, e.g. 0000:84:00.0'
            if ':' in address or address.startswith('pci_') else
            'give a PCI address such as 0000:84:00.0 or an existing virtual '
            'parent such as mtty_mtty')
    raise conf_settings.NovaConfError(
        "device address '%s' is neither a PCI address nor a virtual mdev "
        "parent: nova-compute refuses to start (incorrect device address); "
        "%s" % (address, hint))


def matches_libvirt(address: str) -> bool:
    """Whether a PCI address Nova accepted can ever equal the address Nova
    builds from libvirt's name (``_get_device_address``): lower-case hex
    and a ``.`` before the function.
    """
    return bool(_LIBVIRT_PCI_RE.match(address))


@dataclasses.dataclass(frozen=True)
class EnabledType:
    """One type of ``enabled_mdev_types`` that nova-compute uses, with
    what its ``[mdev_<type>]`` group gives it: the device addresses it
    takes (as written, those Nova refuses left out), its resource class
    and its most mdevs.
    """

    name: str
    device_addresses: tuple[str, ...]    # as written
    mdev_class: str = VGPU
    max_instances: int | None = None


@dataclasses.dataclass(frozen=True)
class MdevConfig:
    """What nova-compute makes of the file: the attributes its libvirt
    driver sets in ``_get_supported_vgpu_types``.
    """

    supported_types: tuple[str, ...]  # supported_vgpu_types, Nova's order
    types: tuple[EnabledType, ...]       # of each supported type
    pgpu_type_mapping: dict[str, str]   # address as written -> type
    mdev_class_mapping: dict[str, str]  # address as written -> class
    default_type: str | None     # pgpu_type_default
    virtual_mdevs: frozenset[str]
    max_instances: dict[str, int]       # mdev_type_max_mapping
    findings: tuple[Finding, ...] = ()
    settings: conf_settings.Settings | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    def mdev_type(self, name: str) -> EnabledType | None:
        for mdev_type in self.types:
            if mdev_type.name == name:
                return mdev_type
        return None

    def type_for(self, nodedev: str) -> str | None:
        return vgpu_type_per_pgpu(self, nodedev)

    def resource_class_for(self, nodedev: str) -> str:
        return resource_class_for_device(self, nodedev)

    def unmatched_addresses(self) -> list[str]:
        """PCI addresses Nova accepts but never matches to a device."""
        return [a for a in self.pgpu_type_mapping
                if a not in self.virtual_mdevs and not matches_libvirt(a)]


def supported_vgpu_types(
        settings: conf_settings.Settings,
        virtual_parent_exists: Callable[[str], bool] | None = None
) -> MdevConfig:
    """Mirrors nova/virt/libvirt/driver.py ``_get_supported_vgpu_types``.

    Walks ``enabled_mdev_types`` in order: the first type without
    ``device_addresses`` becomes the default type (``pgpu_type_default``)
    and any further one is dropped with only a warning; each listed
    address must pass ``_validate_device_address`` and may appear under
    one type only ("duplicate types for PCI ID"); the class goes into
    ``mdev_class_mapping`` for the listed addresses only. Where Nova
    stops at its first fatal error this goes on and records every one as
    an ``error`` Finding.
    """
    findings: list[Finding] = []
    supported: list[str] = []
    types: list[EnabledType] = []
    type_mapping: dict[str, str] = {}
    class_mapping: dict[str, str] = {}
    max_mapping: dict[str, int] = {}
    virtual: set[str] = set()
    where_of: dict[str, str] = {}
    default: str | None = None
    for mdev_type in settings.enabled.value or ():
        supported.append(mdev_type)
        opts = settings.groups[mdev_type]
        mdev_class = conf_settings.checked(opts['mdev_class'], findings,
                                           VGPU)
        max_instances = conf_settings.checked(opts['max_instances'],
                                              findings, None)
        if max_instances:
            max_mapping[mdev_type] = max_instances
        addresses = conf_settings.checked(opts['device_addresses'],
                                          findings, [])
        if not addresses:
            if default is None:
                default = mdev_type
            else:
                findings.append(Finding(
                    WARNING, settings.group_line('mdev_%s' % mdev_type),
                    'Type %s has no device_addresses and %s is already the '
                    'default type, so Nova does not use %s at all (it only '
                    'logs a warning); list the devices of %s in '
                    'device_addresses or remove it from enabled_mdev_types.'
                    % (mdev_type, default, mdev_type, mdev_type)))
                supported.remove(mdev_type)
                continue
            types.append(EnabledType(mdev_type, (), mdev_class, max_instances))
            continue
        listed = []
        for address in addresses:
            here = opts['device_addresses'].where
            if address in type_mapping:
                findings.append(Finding(
                    ERROR, here,
                    "Device address %s is also listed under [mdev_%s] "
                    "(%s): nova-compute refuses to start (duplicate types "
                    "for PCI ID %s); list each device under one type only."
                    % (address, type_mapping[address], where_of[address],
                       address)))
                continue
            try:
                kind = validate_device_address(address, virtual_parent_exists)
            except conf_settings.NovaConfError as exc:
                findings.append(Finding(ERROR, here, words.sentence(str(exc))))
                continue
            if kind == 'virtual':
                virtual.add(address)
            type_mapping[address] = mdev_type
            class_mapping[address] = mdev_class
            where_of[address] = here
            listed.append(address)
        types.append(EnabledType(mdev_type, tuple(listed), mdev_class,
                                 max_instances))
    return MdevConfig(tuple(supported), tuple(types), type_mapping,
                      class_mapping, default, frozenset(virtual), max_mapping,
                      tuple(findings), settings)


def device_address(conf: MdevConfig, nodedev: str) -> str | None:
    """Mirrors nova/virt/libvirt/driver.py ``_get_device_address``: a
    listed virtual parent keeps its name, ``pci_0000_84_00_0`` becomes
    ``0000:84:00.0``, anything else None.
    """
    if nodedev in conf.virtual_mdevs:
        return nodedev
    return names.pci_address_from_nodedev(nodedev)


def vgpu_type_per_pgpu(conf: MdevConfig, nodedev: str) -> str | None:
    """Mirrors nova/virt/libvirt/driver.py ``_get_vgpu_type_per_pgpu``:
    the type listed for the device's address, compared literally, else
    the default type; None when no type is enabled or the device has no
    address.
    """
    if not conf.supported_types:
        return None
    address = device_address(conf, nodedev)
    if not address:
        return None
    return conf.pgpu_type_mapping.get(address) or conf.default_type


def resource_class_for_device(conf: MdevConfig, nodedev: str) -> str:
    """Mirrors nova/virt/libvirt/driver.py
    ``_get_resource_class_for_device`` (``mdev_class_mapping``): the
    ``mdev_class`` of the type that lists the device's address, VGPU for
    every other device, the default type's included.
    """
    address = device_address(conf, nodedev)
    if not address:
        return VGPU
    return conf.mdev_class_mapping.get(address, VGPU)


def get_all_assigned_mediated_devices(
        guests: Iterable[libvirt_config.Guest]
) -> dict[str | None, str | None]:
    """Mirrors nova/virt/libvirt/driver.py
    ``_get_all_assigned_mediated_devices`` (all guests, no instance
    given): ``{mdev UUID: instance UUID}`` of every mdev of the guests'
    definitions (a later guest wins a UUID two hold). The mdevs Nova
    claims for an incoming live migration are in its memory only, not
    here.
    """
    allocated: dict[str | None, str | None] = {}
    for guest in guests:
        for device in guest.mdevs:
            allocated[device.uuid] = guest.uuid
    return allocated


# -- Using the rules -------------------------------------------------------


def fatal(conf: MdevConfig) -> None:
    """Raise NovaConfError with the first error finding, if any: what
    nova-compute stops on when it starts (the driver's ``init_host``).
    """
    for finding in conf.errors:
        raise conf_settings.NovaConfError(
            '%s: %s' % (finding.where, finding.message.rstrip('.')))


def libvirt_form(address: str) -> str:
    """The address libvirt would give the device ``address`` means."""
    return '%s.%s' % (address[:10].lower(), address[11:])


def unmatched_notes(conf: MdevConfig) -> list[str]:
    """One sentence per address Nova accepts but never matches."""
    notes = []
    for address in conf.unmatched_addresses():
        if conf.default_type:
            takes = 'the default type %s' % conf.default_type
        else:
            takes = 'no type (no type without device_addresses is enabled)'
        notes.append(
            '%s in [mdev_%s] device_addresses matches no device: Nova '
            "compares it literally with libvirt's %s, so that device takes "
            '%s; write it as %s'
            % (address, conf.pgpu_type_mapping[address],
               libvirt_form(address), takes, libvirt_form(address)))
    return notes


# -- [libvirt] live_migration_downtime* for NVIDIA vGPUs -------------------

# Nova's vGPU admin guide: what NVIDIA vGPUs need to converge.
NVIDIA_DOWNTIME = {'live_migration_downtime': 500000,
                   'live_migration_downtime_steps': 3,
                   'live_migration_downtime_delay': 3}


def downtime_off(values: Mapping[str, int | None]
                 ) -> list[tuple[str, int | None]]:
    """What Nova's vGPU guide asks of the computes that live-migrate
    NVIDIA vGPUs: ``[libvirt] live_migration_downtime = 500000``,
    ``live_migration_downtime_steps = 3`` and
    ``live_migration_downtime_delay = 3``, or the migration does not
    converge. ``values`` is ``{option: value}`` (Nova's defaults where
    unset: 500, 10, 75; None for a value oslo.config refuses). Answers
    ``[(option, value)]`` of the options that are off.
    """
    off: list[tuple[str, int | None]] = []
    for option, wanted in NVIDIA_DOWNTIME.items():
        value = values.get(option)
        if value is None or (value < wanted if option ==
                             'live_migration_downtime' else value > wanted):
            off.append((option, value))
    return off


def downtime_problem(values: Mapping[str, int | None]) -> str | None:
    """``downtime_off`` as text (``option = value, ...``), or None."""
    off = downtime_off(values)
    return ', '.join('%s = %s' % (option, 'invalid' if value is None
                                  else value)
                     for option, value in off) or None


def downtime_settings(conf: conf_settings.Settings) -> dict[str, int | None]:
    """``{option: value}`` of the ``[libvirt] live_migration_downtime*``
    options nova-compute uses with these nova.conf files: Nova's
    defaults where unset, whether or not the files have a ``[libvirt]``
    section; None for a value oslo.config refuses.
    """
    return {option: conf.libvirt[option].value
            for option in conf_settings.LIVE_MIGRATION_DOWNTIME_OPTIONS}


def post_copy_setting(conf: conf_settings.Settings) -> bool | None:
    """``[libvirt] live_migration_permit_post_copy`` as nova-compute
    reads it from these files: Nova's default (False) where unset, None
    for a value oslo.config refuses (nova-compute does not start).
    """
    return conf.libvirt[conf_settings.POST_COPY].value


DOWNTIME_NEEDED = (
    'NVIDIA vGPUs need %s, or their live migration does not converge '
    '(Nova\'s vGPU guide)' % ', '.join(
        '%s = %d' % item for item in NVIDIA_DOWNTIME.items()))
