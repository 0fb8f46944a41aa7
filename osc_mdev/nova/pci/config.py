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

"""The PCI part of a nova.conf, as Nova reads it: one ``PciConfig``.

``[pci] device_spec`` (old names ``[pci] passthrough_whitelist`` and
``[DEFAULT] pci_passthrough_whitelist``) says which PCI devices Nova may
give to servers; with ``[pci] report_in_placement`` nova-compute reports
them to Placement, one provider per PCI or physical function named
``<node>_<ADDRESS>``. ``[pci] alias`` names what a flavor asks for with
``pci_passthrough:alias``; with ``[filter_scheduler] pci_in_placement``
the scheduler asks Placement for it.

The options are read by ``nova.conf.settings.parse_texts`` (oslo.config, with
their deprecated names); Nova's rules live in one module per Nova file,
one function per rule naming the Nova function it mirrors:
``nova.pci.devspec`` (nova/pci/devspec.py: the device specs),
``nova.pci.request`` (nova/pci/request.py: the aliases and what a flavor
asks) and ``nova.pci.placement_translator``
(nova/compute/pci_placement_translator.py: what nova-compute reports to
Placement). A ``PciConfig`` holds what they make of one set of files
and is what every command that knows the controller's or a compute's
``[pci]`` hands on, whole.
"""

from collections.abc import Mapping
import dataclasses

from osc_mdev.base import findings as finding_model
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.pci import devspec
from osc_mdev.nova.pci import request as pci_request


@dataclasses.dataclass(frozen=True)
class PciConfig:
    """What the files say about PCI devices: the device specs and aliases
    Nova reads, the two switches of PCI in Placement (off, Nova's
    default, unless given), and the errors Nova stops at (as Findings).
    """

    specs: tuple[devspec.DeviceSpec, ...] = ()
    #: name -> Alias; empty when Nova refuses the aliases.
    aliases: Mapping[str, pci_request.Alias] = dataclasses.field(
        default_factory=dict)
    report_in_placement: bool = False
    pci_in_placement: bool = False
    findings: tuple[finding_model.Finding, ...] = ()
    settings: novaconf.Settings | None = None
    #: The finding of aliases Nova refuses (also in ``findings``).
    alias_error: finding_model.Finding | None = None

    @property
    def configured(self) -> bool:
        """Whether the files give Nova PCI devices to handle: a device
        spec, an alias, or PCI in Placement turned on (off, written or
        not, is Nova's default), or a value Nova refuses.
        """
        pci = self.settings.pci if self.settings else {}
        return bool(pci.get('device_spec') or pci.get('alias') or
                    self.report_in_placement or self.pci_in_placement or
                    self.findings)


def _entry_where(occ: novaconf.Occurrence | None, option: str) -> str:
    if occ is None:
        return '[pci] %s' % option
    return novaconf.where(occ.section, occ.name, occ)


def _device_specs(settings: novaconf.Settings, report_in_placement: bool,
                  found: list[finding_model.Finding]
                  ) -> list[devspec.DeviceSpec]:
    """The specs of every ``[pci] device_spec`` value; an entry Nova
    refuses is an error finding in ``found``.
    """
    specs = []
    for text, occ in settings.pci['device_spec']:
        here = _entry_where(occ, 'device_spec')
        try:
            specs.extend(devspec.device_spec_entries(
                text, here, report_in_placement))
        except novaconf.NovaConfError as exc:
            found.append(finding_model.Finding(
                finding_model.ERROR, here, 'nova-compute refuses to start: '
                'invalid [pci] device_spec (%s); fix or remove this entry.'
                % exc, stops_nova=True))
    return specs


def _aliases(settings: novaconf.Settings, pci_in_placement: bool
             ) -> tuple[dict[str, pci_request.Alias],
                        finding_model.Finding | None]:
    """``(aliases, None)`` of the ``[pci] alias`` of the files, or
    ``({}, the error finding)`` when Nova refuses them.
    """
    entries = [(text, _entry_where(occ, 'alias'))
               for text, occ in settings.pci['alias']]
    try:
        return pci_request.pci_aliases(entries, pci_in_placement), None
    except pci_request.AliasError as exc:
        return {}, finding_model.Finding(
            finding_model.ERROR, exc.where, 'nova-api and nova-compute '
            'refuse to start: invalid [pci] alias (%s); fix the alias.'
            % exc.reason, stops_nova=True)


def pci_config(settings: novaconf.Settings) -> PciConfig:
    """The PciConfig of parsed files (``nova.conf.settings.parse_texts``)."""
    found: list[finding_model.Finding] = []
    report = bool(novaconf.checked(settings.pci['report_in_placement'],
                                   found, False))
    scheduler = bool(novaconf.checked(settings.pci['pci_in_placement'],
                                      found, False))
    specs = _device_specs(settings, report, found)
    aliases, alias_error = _aliases(settings, scheduler)
    if alias_error is not None:
        found.append(alias_error)
    return PciConfig(tuple(specs), aliases, report, scheduler,
                     tuple(found), settings, alias_error)
