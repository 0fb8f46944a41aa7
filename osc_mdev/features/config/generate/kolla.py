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

"""The files of ``config generate`` laid out as kolla-ansible merges
them, under its ``node_custom_config`` (``/etc/kolla/config``).

kolla-ansible builds each Nova service's nova.conf with its
``merge_configs`` action plugin from its own template, then
``global.conf``, ``nova.conf``, ``nova/<service>.conf`` and
``nova/<inventory_hostname>/nova.conf`` of that directory, a later file
winning key by key. The compute node's fragment is its per-host
override, ``nova/<node>/nova.conf``; the controller's (the ``type-VF``
aliases and ``pci_in_placement``) is ``nova/nova-scheduler.conf`` and
``nova/nova-api.conf``. A key repeated in one file (a ``device_spec``
per VF) stays one line per value through the merge; a key of a later
file replaces every value of that key in the earlier ones, so the
per-host file's ``device_spec`` lines are the node's whole list.

kolla-ansible has no place for a systemd unit of the host: the unit and
its script keep their names at the top of the directory, to be installed
on the node by other means.

Every file is a Jinja template to ``merge_configs``: a file holding
Jinja's markers is refused (``plan.GenerateError``).
"""

import dataclasses

from osc_mdev.features.config.generate import files as generated
from osc_mdev.features.config.generate import plan as plans

#: The controller's services that read the ``[pci] alias``.
CONTROLLER_SERVICES = ('nova-scheduler', 'nova-api')
#: What Jinja reads as the start of an expression, a statement or a
#: comment.
JINJA_MARKERS = ('{{', '{%', '{#')


def compute_name(inventory_host: str) -> str:
    """The per-host override of nova.conf, in ``node_custom_config``."""
    return 'nova/%s/nova.conf' % inventory_host


def controller_name(service: str) -> str:
    """A service's override of nova.conf, in ``node_custom_config``."""
    return 'nova/%s.conf' % service


def _templatable(file: generated.GeneratedFile) -> None:
    found = [m for m in JINJA_MARKERS if m in file.text]
    if found:
        raise plans.GenerateError(
            "%s holds %s, which kolla-ansible's merge_configs reads as "
            'Jinja; no file is written' % (file.name, found[0]))


def files(plan: plans.Plan,
          inventory_host: str) -> list[generated.GeneratedFile]:
    """The files of ``plan`` (``generated.files``) as kolla-ansible
    merges them for the node ``inventory_host`` (its ``inventory_hostname``).
    """
    found = []
    for file in generated.files(plan):
        if file.name in (generated.COMPUTE_CONF, generated.CONTROLLER_CONF):
            _templatable(file)
        if file.name == generated.COMPUTE_CONF:
            found.append(dataclasses.replace(
                file, name=compute_name(inventory_host),
                holds="%s's override of every Nova service's nova.conf: "
                '%s' % (inventory_host, file.holds)))
        elif file.name == generated.CONTROLLER_CONF:
            found += [dataclasses.replace(
                file, name=controller_name(service),
                holds="%s's nova.conf override: %s" % (service, file.holds))
                for service in CONTROLLER_SERVICES]
        else:
            found.append(generated.installed_by_hand(
                file, 'kolla-ansible', inventory_host))
    return found
