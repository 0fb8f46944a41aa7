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

"""The rows of ``mdev config check``: one lister, every -f and -c.

One row per finding (``Severity`` error, warning or info, ``Where``,
``Message``), then, with ``--long``, one ``effective`` row per device,
PCI device spec, PCI provider and PCI alias (what Nova will make of it,
with the ``Device``, ``Mdev Type``, ``Resource Class`` and ``Traits``
columns ``--long`` adds), and last the one ``result`` row: what was
checked, and the verdict ("nothing is wrong" for a clean file).
"""

from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Sequence
import dataclasses

from osc_mdev.base import findings as finding_model
from osc_mdev.base import words
from osc_mdev.features.config.check import mdev as configcheck
from osc_mdev.features.config.check import pci as configcheck_pci
from osc_mdev.nova.conf import options as nova_options
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.pci import devspec as pci_devspec
from osc_mdev.nova.pci import placement_translator as translator
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

COLUMNS = ('Severity', 'Where', 'Message')
LONG_COLUMNS = ('Device', 'Mdev Type', 'Resource Class', 'Traits')
#: The Severity of the rows that are no finding.
EFFECTIVE = 'effective'
RESULT = 'result'

#: A row: a finding's, an effective one, or the result.
Row = tuple[str | None, ...]


@dataclasses.dataclass(frozen=True)
class Effect:
    """One row of the effective result: what Nova makes of a device, a
    PCI device spec, a PCI provider or a PCI alias, and the line that
    decides it.
    """

    where: str
    message: str
    device: str = ''
    mdev_type: str | None = None
    resource_class: str | None = None
    traits: str = ''


def device_effects(conf: libvirt_driver.MdevConfig,
                   devices: Collection[str] = ()) -> list[Effect]:
    """``features.config.check.mdev.effective`` as rows: each device with
    the type and resource class Nova will give it.
    """
    return [Effect(r.where, words.sentence(r.why), r.device, r.mdev_type,
                   r.resource_class)
            for r in configcheck.effective(conf, devices)]


def pci_effects(pci: pci_rules.PciConfig,
                devices: Sequence[pci_devspec.PciDevice] | None = None,
                root_name: str = '<node>') -> list[Effect]:
    """What Nova makes of ``[pci]``: each device spec (the class and
    traits of the devices it matches), with the node's PCI functions
    (``devices``) the providers Nova will make, and each alias' request.
    """
    found = []
    for spec in pci.specs:
        if not translator.in_placement(spec):
            found.append(Effect(spec.where, (
                'PCI device spec with physical_network: for Neutron SR-IOV, '
                'not reported to Placement.'), spec.describe()))
        elif not pci.report_in_placement:
            found.append(Effect(spec.where, (
                'PCI device spec, not reported to Placement: [pci] '
                'report_in_placement is off.'), spec.describe()))
        else:
            found.append(Effect(
                spec.where, 'PCI device spec: Nova reports the devices it '
                'matches to Placement with this class and these traits.',
                spec.describe(),
                resource_class=translator.spec_resource_class(spec) or
                'CUSTOM_PCI_<VENDOR>_<PRODUCT>',
                traits=', '.join(sorted(translator.parent_traits(
                    spec.tags)))))
    if devices is not None and pci.report_in_placement:
        providers, _ = translator.pci_providers(
            root_name, devices, pci.specs,
            pci_devspec.physical_functions(devices))
        for provider in sorted(providers.values(), key=lambda p: p.name):
            found.append(Effect(
                novaconf.where('pci', 'device_spec'),
                'PCI provider Nova makes of %s.' % ', '.join(
                    d.address for d in provider.devices),
                provider.name, resource_class=provider.resource_class,
                traits=', '.join(sorted(provider.traits or ()))))
    for name, alias in sorted(pci.aliases.items()):
        found.append(Effect(
            alias.where, 'PCI alias %s: %s.' % (
                name, configcheck_pci.alias_request(alias, 1,
                                                    pci.pci_in_placement)),
            resource_class=alias.resource_class
            if pci.pci_in_placement else None))
    return found


def scope(conf: libvirt_driver.MdevConfig | None, pci_configured: bool = False,
          sysfs_root: str | None = None, host: str | None = None,
          provider_configs: bool = False,
          vgpu_vfs: str | None = None) -> list[str]:
    """What a check looked at, in words, for the result row: the
    nova.conf files' ``conf`` (None when only provider config files were
    given) and, with ``provider_configs``, nova-compute's provider config
    files; ``vgpu_vfs``: the SR-IOV vGPU VFs checked
    (``features.config.check.vf.VfCheck.scope``).
    """
    checked = []
    if conf is not None:
        types = list(conf.supported_types)
        checked.append('the section and option names against the options '
                       'of Nova %s' % nova_options.NOVA_VERSION)
        if types:
            checked.append('the mdev type%s %s' % (
                '' if len(types) == 1 else 's', words.and_list(types)))
        else:
            checked.append('no mdev type enabled')
    if pci_configured:
        checked.append('[pci]')
    if provider_configs:
        checked.append('the provider config files as nova-compute reads '
                       'them')
    if sysfs_root:
        checked.append('the devices under %s' % sysfs_root)
    if vgpu_vfs:
        checked.append(vgpu_vfs)
    if host:
        checked.append("Placement's view of %s" % host)
    return checked


def result(files: Iterable[str], findings: Collection[novaconf.Finding],
           checked: Iterable[str]) -> tuple[str, str, str]:
    """The last row: what was checked and the verdict."""
    counts = {s: sum(1 for f in findings if f.severity == s)
              for s in (novaconf.ERROR, novaconf.WARNING, novaconf.INFO)}
    errors, warnings, infos = (counts[novaconf.ERROR],
                               counts[novaconf.WARNING],
                               counts[novaconf.INFO])
    if errors:
        failing = [f.fails for f in findings
                   if f.severity == novaconf.ERROR and f.fails]
        parts = []
        if errors > len(failing):
            parts.append('%s: nova-compute will refuse to start with these '
                         'files' % words.count(errors - len(failing),
                                               'error'))
        if failing:
            parts.append('%s: nova-compute will start, but %s' % (
                words.count(len(failing), 'error'),
                words.and_list(list(dict.fromkeys(failing)))))
        verdict = '; '.join(parts)
        if warnings:
            verdict += ' (and %s)' % words.count(warnings, 'warning')
    elif warnings:
        verdict = ('%s: nova-compute will start but do something other '
                   'than written' % words.count(warnings, 'warning'))
    else:
        verdict = 'Nothing is wrong'
        if infos:
            verdict += ' (%s)' % words.count(infos, 'note')
    return (RESULT, ', '.join(files), 'Checked %s. %s.' % (
        words.and_list(checked), verdict))


def failure(findings: Collection[novaconf.Finding]) -> str | None:
    """The one line of a check with errors (its exit status is 1), or
    None: the errors nova-compute refuses to start with first, else what
    fails although it starts.
    """
    errors = [f for f in findings if f.severity == novaconf.ERROR]
    if not errors:
        return None
    if any(not f.fails for f in errors):
        return ('%d error(s): nova-compute will refuse to start with this '
                'configuration.' % len(errors))
    return '%d error(s): nova-compute will start, but %s.' % (
        len(errors), words.and_list(list(dict.fromkeys(
            f.fails for f in errors))))


def report(findings: Collection[novaconf.Finding], effects: Iterable[Effect],
           files: Iterable[str], checked: Iterable[str],
           long: bool = False) -> tuple[tuple[str, ...], list[Row]]:
    """``(columns, rows)`` of the check: the findings (sorted by
    severity), with ``long`` the effective rows, and the result row.
    """
    columns = COLUMNS + (LONG_COLUMNS if long else ())
    blank = ('', '', '', '') if long else ()
    rows: list[Row] = [(f.severity, f.where, f.message) + blank
                       for f in finding_model.by_severity(findings)]
    if long:
        rows += [(EFFECTIVE, e.where, e.message, e.device, e.mdev_type,
                  e.resource_class, e.traits) for e in effects]
    rows.append(result(files, findings, checked) + blank)
    return columns, rows
