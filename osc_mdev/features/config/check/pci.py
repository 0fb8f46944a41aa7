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

"""``mdev config check``, its ``[pci]`` half: what nova-compute, nova-api
and the scheduler will make of the PCI devices a configuration gives.

Nova's own rules, and the errors it stops at, come from ``nova.pci``
(``nova.pci.config.PciConfig``); this module adds what Nova does not say
(names it silently rewrites, options it ignores, aliases no device spec
of the node can serve), compares the device specs with a compute node's
PCI functions (its sysfs) and with its PCI providers in Placement.
``features.config.check.mdev`` is the mdev half;
``features.config.check.report`` renders both.
"""

from collections.abc import Collection
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import re
import typing

import os_traits

from osc_mdev.base import findings
from osc_mdev.base import words
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.pci import devspec
from osc_mdev.nova.pci import placement_translator as translator
from osc_mdev.nova.pci import request as pci_request

ERROR, WARNING, INFO = findings.ERROR, findings.WARNING, findings.INFO
Finding = findings.Finding

_DEPRECATED_PCI = {
    ('pci', 'passthrough_whitelist'): '[pci] device_spec',
    ('DEFAULT', 'pci_passthrough_whitelist'): '[pci] device_spec',
    ('DEFAULT', 'pci_alias'): '[pci] alias',
}
#: What nova-compute cannot do with a name Placement refuses.
_COMPUTE_FAILS = 'nova-compute cannot report the device to Placement'
#: What the scheduler cannot do with a name Placement refuses.
_SCHEDULER_FAILS = 'the scheduler cannot ask Placement for the alias'


def _settings(pci: pci_rules.PciConfig) -> novaconf.Settings:
    """The settings ``nova.pci.config.pci_config`` always gives."""
    assert pci.settings is not None
    return pci.settings


# -- Names Nova rewrites ------------------------------------------------------

def _written_traits(text: object) -> list[str]:
    return text.split(',') if isinstance(text, str) and text else []


def _is_standard_trait(name: str) -> bool:
    return os_traits.check_traits([name])[0] == {name}


def _name_findings(kind: str, written: str, normalized: str, here: str,
                   fatal_where: str) -> list[Finding]:
    """Findings about one class or trait name as Nova normalizes it."""
    problem = translator.placement_name_problem(normalized, kind)
    if problem:
        return [Finding(ERROR, here, '%s from %r: %s; %s.' % (
            normalized, written, problem, fatal_where))]
    if written == normalized:
        return []
    if written != written.strip():
        return [Finding(WARNING, here, (
            '%s %r has spaces around it: Nova makes %s of it, not %s; '
            'remove the spaces (write "a,b", not "a, b").') % (
                kind, written, normalized,
                translator.normalize_traits([written.strip()])[0]
                if kind == 'trait' else
                translator.normalize_resource_class(written.strip())))]
    if kind == 'trait' and _is_standard_trait(written.upper()):
        return [Finding(WARNING, here, (
            'trait %r is the standard trait %s in lower case: Nova does not '
            'recognise it and reports the custom trait %s instead; write '
            '%s.') % (written, written.upper(), normalized, written.upper()))]
    # Else Nova makes of it what was meant (blue: CUSTOM_BLUE), as of the
    # name written in full: the effective rows show the name.
    return []


def _tag_name_findings(tags: Mapping[str, typing.Any], here: str,
                       fatal_where: str) -> list[Finding]:
    """The ``resource_class`` and ``traits`` of a device spec's tags or
    of an alias definition, as Nova normalizes them
    (``nova.pci.placement_translator.get_resource_class`` and ``get_traits``).
    """
    found = []
    requested = tags.get('resource_class')
    if requested:
        found += _name_findings(
            'resource class', requested,
            translator.normalize_resource_class(requested), here,
            fatal_where)
    for written in _written_traits(tags.get('traits', '')):
        found += _name_findings('trait', written,
                                translator.normalize_traits([written])[0],
                                here, fatal_where)
    return found


# -- Aliases a node can serve -------------------------------------------------

def _ids_compatible(spec: devspec.DeviceSpec, vendor: str | None,
                    product: str | None) -> bool:
    """Whether a device spec can match devices with these ids."""
    return (spec.vendor_id in (devspec.ANY, (vendor or '').lower())
            and spec.product_id in (devspec.ANY, (product or '').lower()))


def _of_class(rc: str, specs: Sequence[devspec.DeviceSpec]
              ) -> list[devspec.DeviceSpec]:
    """The specs whose devices get resource class ``rc``."""
    of_class = []
    for spec in specs:
        spec_rc = translator.spec_resource_class(spec)
        if spec_rc is not None:
            if spec_rc == rc:
                of_class.append(spec)
            continue
        match = re.match(r'^CUSTOM_PCI_([0-9A-F]{4})_([0-9A-F]{4})$', rc)
        if match and _ids_compatible(spec, *match.groups()):
            of_class.append(spec)
    return of_class


def alias_problem(alias: pci_request.Alias,
                  specs: Sequence[devspec.DeviceSpec],
                  in_placement: bool) -> str | None:
    """Why no device spec of ``specs`` can serve ``alias``, or None.

    ``in_placement``: the scheduler asks Placement (resource class and
    traits of the device spec); else Nova's PCI filter matches vendor and
    product ids.
    """
    spec = alias.specs[0]
    vendor, product = spec.get('vendor_id'), spec.get('product_id')
    if not in_placement:
        if vendor is None or product is None or any(
                _ids_compatible(s, vendor, product) for s in specs):
            # An alias without ids asks Placement only (and this node is
            # not in Placement: reported apart).
            return None
        return 'no device spec matches vendor_id %s and product_id %s' % (
            vendor, product)
    rc = alias.resource_class
    of_class = _of_class(rc, specs)
    if not of_class:
        return 'no device spec gives resource class %s' % rc
    spec_traits = [translator.parent_traits(s.tags) for s in of_class]
    if not any(alias.traits <= traits for traits in spec_traits):
        missing = sorted(alias.traits - min(
            spec_traits, key=lambda t: len(alias.traits - t)))
        return 'no device spec of class %s has trait %s' % (
            rc, ', '.join(missing))
    return None


# -- The [pci] options --------------------------------------------------------

def _deprecated_names(settings: novaconf.Settings) -> list[Finding]:
    """The deprecated names of ``[pci]`` options the files use."""
    found = []
    for occ in settings.occurrences:
        new = _DEPRECATED_PCI.get((novaconf.group_key(occ.section),
                                   occ.name))
        if new:
            found.append(Finding(INFO, novaconf.where(occ.section,
                                                      occ.name, occ),
                                 '%s is the deprecated name of %s; Nova '
                                 'still reads it.' % (occ.name, new)))
    return found


def _reported_findings(pci: pci_rules.PciConfig,
                       placed: Sequence[devspec.DeviceSpec],
                       sysfs_known: bool) -> list[Finding]:
    """With ``[pci] report_in_placement`` on: specs nova-compute refuses
    (a ``devname`` in any spec: ``translator.specs_with_devname``),
    names Placement refuses in the specs it reports, specs it does not
    report, what is not known without the node's devices, and the
    scheduler's switch.
    """
    found = []
    for spec in translator.specs_with_devname(pci.specs):
        found.append(Finding(
            ERROR, spec.where,
            'nova-compute refuses to start: PCI in Placement does '
            'not support devname (%s) in [pci] device_spec; give '
            'the PCI address instead.' % spec.devname))
    for spec in placed:
        found += _tag_name_findings(spec.tags, spec.where, _COMPUTE_FAILS)
    for spec in pci.specs:
        if not translator.in_placement(spec):
            found.append(Finding(
                INFO, spec.where,
                'Has physical_network: Neutron SR-IOV, not reported to '
                'Placement by Nova.'))
    if placed and not sysfs_known:
        found.append(Finding(
            INFO, novaconf.where('pci', 'device_spec'),
            "Without the node's sysfs the virtual functions of each "
            'physical function are not known: nova-compute refuses to '
            'start when VFs of one PF get different classes or traits, '
            'or a PF is listed with its VFs; check it against the '
            'node: openstack mdev config check FILE --sysfs /sys.'))
    if not pci.pci_in_placement:
        found.append(Finding(
            WARNING, _settings(pci).pci['pci_in_placement'].where,
            '[pci] report_in_placement is on but [filter_scheduler] '
            'pci_in_placement is off here: unless it is True on '
            'nova-api, nova-scheduler and nova-conductor, the scheduler '
            'ignores the PCI devices in Placement and does not allocate '
            'them there.'))
    return found


def _unreported_findings(pci: pci_rules.PciConfig,
                         placed: Sequence[devspec.DeviceSpec]
                         ) -> list[Finding]:
    """With ``[pci] report_in_placement`` off: tags only Placement uses,
    and a scheduler that asks Placement for devices not there.
    """
    found = []
    for spec in pci.specs:
        named = [t for t in ('resource_class', 'traits') if t in spec.tags]
        if named:
            found.append(Finding(
                WARNING, spec.where,
                'Ignored: %s is only used with [pci] report_in_placement '
                '= True, which is off.' % ' and '.join(named)))
    if pci.pci_in_placement and placed:
        found.append(Finding(
            WARNING, _settings(pci).pci['report_in_placement'].where,
            '[filter_scheduler] pci_in_placement is on but this '
            "compute's [pci] report_in_placement is off: its devices "
            'are not in Placement, so servers with PCI aliases are never '
            'scheduled to it.'))
    return found


def _alias_findings(pci: pci_rules.PciConfig,
                    placed: Sequence[devspec.DeviceSpec]) -> list[Finding]:
    """Each alias: its names as the scheduler asks Placement for them (or
    what it ignores without), and whether this node's specs serve it.
    """
    found = []
    in_placement = pci.pci_in_placement and pci.report_in_placement
    for name, alias in sorted(pci.aliases.items()):
        spec = alias.specs[0]
        if pci.pci_in_placement:
            found += _tag_name_findings(spec, alias.where, _SCHEDULER_FAILS)
        else:
            named = [t for t in ('resource_class', 'traits') if t in spec]
            if named:
                found.append(Finding(
                    WARNING, alias.where,
                    'Alias %s: %s is ignored while [filter_scheduler] '
                    'pci_in_placement is off (it is only used to ask '
                    'Placement).' % (name, ' and '.join(named))))
        if pci.specs:
            problem = alias_problem(
                alias, placed if in_placement else pci.specs, in_placement)
            if problem:
                found.append(Finding(
                    WARNING, alias.where,
                    'Alias %s cannot be served by this node: %s, so servers '
                    'asking for it are never scheduled here.'
                    % (name, problem)))
    return found


def _sysfs_findings(pci: pci_rules.PciConfig,
                    devices: Sequence[devspec.PciDevice],
                    root_name: str,
                    explained: Sequence[devspec.DeviceSpec] = ()
                    ) -> list[Finding]:
    """The specs against the node's PCI functions: specs matching none
    (but those ``explained`` otherwise), and where nova-compute stops
    making its providers.
    """
    found = []
    pfs = devspec.physical_functions(devices)
    for spec in pci.specs:
        if spec in explained:
            continue
        if not any(devspec.spec_matches(spec, d, pfs) for d in devices):
            found.append(Finding(
                WARNING, spec.where,
                "Matches no PCI device of the node's sysfs (%s): Nova "
                'offers nothing from it.' % spec.describe()))
    if pci.report_in_placement:
        _, problems = translator.pci_providers(root_name, devices,
                                               pci.specs, pfs)
        for exception, message in problems:
            found.append(Finding(
                ERROR, novaconf.where('pci', 'device_spec'),
                'nova-compute refuses to start (%s): %s; list either the '
                'PF or its VFs, and give VFs of one PF one resource_class '
                'and one set of traits.' % (exception, message)))
    return found


def pci_findings(pci: pci_rules.PciConfig,
                 sysfs_devices: Sequence[devspec.PciDevice] | None = None,
                 root_name: str = '<node>',
                 explained: Sequence[devspec.DeviceSpec] = ()
                 ) -> list[Finding]:
    """Findings about ``[pci]`` (and ``[filter_scheduler]
    pci_in_placement``) beyond the errors ``nova.pci.config.pci_config`` found.

    ``sysfs_devices``: the node's PCI functions (``Host.pci_devices``)
    when known; ``explained``: specs whose devices are missing for a
    reason another check gives (``features.config.check.vf``: VFs not enabled).
    """
    found = list(pci.findings)
    found += _deprecated_names(_settings(pci))
    placed = [s for s in pci.specs if translator.in_placement(s)]
    if pci.report_in_placement:
        found += _reported_findings(pci, placed, sysfs_devices is not None)
    else:
        found += _unreported_findings(pci, placed)
    found += _alias_findings(pci, placed)
    if sysfs_devices is not None and pci.specs:
        found += _sysfs_findings(pci, sysfs_devices, root_name, explained)
    return found


def alias_request(alias: pci_request.Alias, count: int = 1,
                  pci_in_placement: bool = True) -> str:
    """An alias' request in words."""
    spec = alias.specs[0]
    kind = spec.get('dev_type') or 'any type'
    if pci_in_placement:
        groups = pci_request.alias_request_groups(alias, count)
        [rc] = groups[0][0]
        text = '%s of %s:1' % (words.count(count, 'request group'), rc)
        if groups[0][1]:
            text += ' with ' + ', '.join(sorted(groups[0][1]))
    else:
        ids = ' or '.join(
            '%s:%s' % (s.get('vendor_id', '*'), s.get('product_id', '*'))
            for s in alias.specs)
        text = '%s %s' % (words.count(count, 'device'), ids)
        text += ' (PCI filter only, not Placement)'
    return '%s; %s; numa_policy %s' % (text, kind, alias.numa_policy)


# -- Placement ----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PlacementPciProvider:
    """One PCI provider of the node in Placement (one row per class)."""

    name: str
    resource_class: str | None
    total: int
    used: int
    traits: tuple[str, ...]
    uuid: str = ''
    servers: Sequence[str] = ()        # names (or IDs) of the servers there


def _tracking_turned_off(pci: pci_rules.PciConfig, host: str,
                         placed: Collection[PlacementPciProvider]
                         ) -> Finding | None:
    """nova-compute refuses to start when ``[pci] report_in_placement``
    was on before (``translator.tracking_disabled_after_enabled``).
    """
    if not translator.tracking_disabled_after_enabled(
            pci.report_in_placement, [p.traits for p in placed]):
        return None
    providers = sorted({p.name for p in placed})
    return Finding(
        ERROR, _settings(pci).pci['report_in_placement'].where,
        'nova-compute refuses to start (PlacementPciException): [pci] '
        'report_in_placement is off but Placement has %d PCI '
        'provider(s) of %s (%s), so it was on before, and Nova cannot '
        'turn it off again; set report_in_placement = True.'
        % (len(providers), host, words.first_few(providers)))


def _provider_findings(provider: PlacementPciProvider,
                       expected: translator.PciProvider | None,
                       where_host: str) -> list[Finding]:
    """What happens to one PCI provider in Placement on restart, Nova
    making ``expected`` of the devices (None: nothing).
    """
    in_use = (' %d in use: Placement refuses the change while '
              'servers hold allocations there, so nova-compute\'s '
              'updates of the node fail until they go.' % provider.used
              if provider.used else '')
    if expected is None:
        return [Finding(
            WARNING, where_host,
            'Provider %s (%s, total %d) matches no device spec any '
            'more: nova-compute removes it on restart%s' % (
                provider.name, provider.resource_class, provider.total,
                ' (it keeps it while %d server device(s) use it).'
                % provider.used if provider.used else '.'))]
    found = []
    if provider.resource_class != expected.resource_class:
        found.append(Finding(
            WARNING, where_host,
            'Provider %s is %s in Placement but Nova will report %s: '
            'its inventory changes class on restart.%s' % (
                provider.name, provider.resource_class,
                expected.resource_class, in_use)))
    lost = sorted(set(provider.traits) - set(expected.traits or ())
                  - {'OWNER_NOVA'})
    if lost:
        found.append(Finding(
            WARNING, where_host,
            'Provider %s carries %s, which nova-compute removes when it '
            'restarts: it sets the traits of PCI providers from '
            '[pci] device_spec only; put them in the spec\'s traits.'
            % (provider.name, ', '.join(lost))))
    return found


def pci_placement_findings(
        pci: pci_rules.PciConfig, host: str,
        placed: Sequence[PlacementPciProvider],
        predicted: Mapping[str, translator.PciProvider] | None = None
        ) -> list[Finding]:
    """What happens to the node's PCI providers when nova-compute
    restarts with the files.

    ``placed``: PlacementPciProvider rows; ``predicted``: the providers
    Nova will make (``nova.pci.placement_translator.pci_providers`` of the
    sysfs devices, by name), None when the devices are not known.
    """
    refused = _tracking_turned_off(pci, host, placed)
    if refused is not None:
        return [refused]
    if not pci.report_in_placement or predicted is None:
        return []
    where_host = 'Placement, host %s' % host
    found = []
    for provider in placed:
        found += _provider_findings(provider, predicted.get(provider.name),
                                    where_host)
    for name in sorted(set(predicted) - {p.name for p in placed}):
        found.append(Finding(
            INFO, where_host, 'Provider %s (%s) is new: nova-compute '
            'creates it on restart.' % (name,
                                        predicted[name].resource_class)))
    return found
