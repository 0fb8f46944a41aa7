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

"""The nova.conf fragments ``config generate`` writes, read back before
any file is written.

Each fragment is read as Nova's services read it: by oslo.config's
parser with Nova's option definitions
(``nova.conf.settings.parse_texts``), then by Nova's rules on device
specs and aliases (``nova.pci.config.pci_config``) and on mdev types
(``nova.virt.libvirt.driver.supported_vgpu_types``). What is read must be
what the plan says, value for value, and no rule may refuse it;
``check`` raises ``features.config.generate.plan.GenerateError`` otherwise.
"""

from collections.abc import Sequence
import typing

from osc_mdev.base import words
from osc_mdev.features.config.generate import files as generated
from osc_mdev.features.config.generate import plan as plans
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver


def _refused(file: generated.GeneratedFile, reason: str
             ) -> plans.GenerateError:
    return plans.GenerateError(
        'Nova would not read %s as it is written (%s); no file is written'
        % (file.name, words.escaped(reason)))


def _settings(file: generated.GeneratedFile) -> novaconf.Settings:
    try:
        return novaconf.parse_texts([(file.name, file.text)])
    except novaconf.NovaConfError as exc:
        raise _refused(file, str(exc)) from exc


def _same(file: generated.GeneratedFile, option: str, read: typing.Any,
          meant: typing.Any) -> None:
    if read != meant:
        raise _refused(file, '%s reads %r, not %r' % (option, read, meant))


def _no_errors(file: generated.GeneratedFile,
               found: Sequence[novaconf.Finding]) -> None:
    errors = [f for f in found if f.severity == novaconf.ERROR]
    if errors:
        raise _refused(file, errors[0].message)


def _texts(settings: novaconf.Settings, name: str) -> list[str]:
    """The values of a ``[pci]`` multi option, in Nova's order."""
    return [text for text, _ in settings.pci[name]]


def check_compute_conf(plan: plans.Plan,
                       file: generated.GeneratedFile) -> None:
    """nova-compute reads the compute node's fragment as the plan says:
    its device specs and ``report_in_placement``, its enabled mdev
    types and the addresses of each.
    """
    settings = _settings(file)
    _same(file, '[pci] device_spec', _texts(settings, 'device_spec'),
          [generated.device_spec(vf, gpu.resource_class)
           for gpu in plan.vf_gpus for vf in gpu.vfs])
    pci = pci_rules.pci_config(settings)
    _same(file, '[pci] report_in_placement', pci.report_in_placement,
          bool(plan.vf_gpus))
    _no_errors(file, pci.findings)
    _same(file, '[devices] enabled_mdev_types', settings.enabled.value,
          [t.mdev_type for t in plan.mdev_types])
    for mdev_type in plan.mdev_types:
        _same(file, '[mdev_%s] device_addresses' % mdev_type.mdev_type,
              settings.groups[mdev_type.mdev_type][
                  'device_addresses'].value,
              list(mdev_type.addresses))
    _no_errors(file, libvirt_driver.supported_vgpu_types(settings).findings)


def check_controller_conf(plan: plans.Plan,
                          file: generated.GeneratedFile) -> None:
    """nova-api and nova-scheduler read the controller's fragment as the
    plan says: its aliases and ``pci_in_placement``.
    """
    settings = _settings(file)
    _same(file, '[pci] alias', _texts(settings, 'alias'),
          [generated.alias(name, resource_class)
           for name, resource_class in plan.aliases().items()])
    pci = pci_rules.pci_config(settings)
    _same(file, '[filter_scheduler] pci_in_placement',
          pci.pci_in_placement, True)
    _no_errors(file, pci.findings)


def check(plan: plans.Plan,
          files: Sequence[generated.GeneratedFile]) -> None:
    """GenerateError unless Nova reads each nova.conf fragment of
    ``files`` as the plan says.
    """
    for file in files:
        if file.name == generated.COMPUTE_CONF:
            check_compute_conf(plan, file)
        elif file.name == generated.CONTROLLER_CONF:
            check_controller_conf(plan, file)
