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

"""The files of ``config generate`` as the variables OpenStack-Ansible's
``os_nova`` role reads, laid out as in ``/etc/openstack_deploy``.

The compute node's options are its host variables,
``host_vars/<node>.yml``: ``nova_device_spec`` (one JSON string per VF,
each a ``[pci] device_spec`` line of the role's nova.conf),
``nova_enabled_mdev_types`` (``type`` and ``address`` per mdev type: the
role writes ``[devices] enabled_mdev_types`` and ``[mdev_<type>]
device_addresses`` from it) and ``nova_nova_conf_overrides`` for ``[pci]
report_in_placement``, which has no variable of its own. The
controller's are group variables of ``nova_api_os_compute`` and
``nova_scheduler``: ``nova_pci_alias`` and ``nova_nova_conf_overrides``
for ``[filter_scheduler] pci_in_placement``.

A host's ``nova_nova_conf_overrides`` replaces one set for every host (in
``user_variables.yml``): Ansible does not merge the two.

The unit and its script keep their names at the top of the directory:
the role has no place for them.
"""

import typing

import yaml

from osc_mdev.features.config.generate import files as generated
from osc_mdev.features.config.generate import plan as plans

#: The groups of the controller's services that read ``[pci] alias``.
CONTROLLER_GROUPS = ('nova_api_os_compute', 'nova_scheduler')


def host_name(inventory_host: str) -> str:
    """The node's host variables file."""
    return 'host_vars/%s.yml' % inventory_host


def group_name(group: str) -> str:
    """A group's variables file."""
    return 'group_vars/%s.yml' % group


def host_vars(plan: plans.Plan) -> dict[str, typing.Any]:
    """The compute node's variables."""
    found: dict[str, typing.Any] = {}
    if plan.vf_gpus:
        found['nova_device_spec'] = [
            generated.device_spec(vf, gpu.resource_class)
            for gpu in plan.vf_gpus for vf in gpu.vfs]
    if plan.mdev_types:
        found['nova_enabled_mdev_types'] = [
            {'type': t.mdev_type, 'address': list(t.addresses)}
            for t in plan.mdev_types]
    if plan.vf_gpus:
        found['nova_nova_conf_overrides'] = {
            'pci': {'report_in_placement': True}}
    return found


def group_vars(plan: plans.Plan) -> dict[str, typing.Any]:
    """The controller's variables."""
    return {
        'nova_pci_alias': [generated.alias(name, resource_class)
                           for name, resource_class in plan.aliases().items()],
        'nova_nova_conf_overrides': {
            'filter_scheduler': {'pci_in_placement': True}}}


def _yaml(lines: list[str], plan: plans.Plan,
          variables: dict[str, typing.Any]) -> str:
    return '%s---\n%s' % (generated.header(lines, plan), yaml.safe_dump(
        variables, default_flow_style=False, sort_keys=False, width=1000))


def files(plan: plans.Plan,
          inventory_host: str) -> list[generated.GeneratedFile]:
    """The files of ``plan`` (``generated.files``) as OpenStack-Ansible
    reads them, for the node ``inventory_host`` (its inventory name).
    """
    found = []
    for file in generated.files(plan):
        if file.name == generated.COMPUTE_CONF:
            found.append(generated.GeneratedFile(
                host_name(inventory_host),
                '%s\'s variables: %s' % (inventory_host, ', '.join(
                    host_vars(plan))),
                _yaml(["os_nova's variables for the vGPUs of the compute "
                       'node %s.' % inventory_host], plan, host_vars(plan))))
        elif file.name == generated.CONTROLLER_CONF:
            found += [generated.GeneratedFile(
                group_name(group),
                "%s's variables: nova_pci_alias %s, nova_nova_conf_overrides"
                ' [filter_scheduler] pci_in_placement'
                % (group, ', '.join(plan.aliases())),
                _yaml(["os_nova's variables for the controller (%s) for "
                       'the vGPUs of a' % group, 'compute node.'], plan,
                      group_vars(plan))) for group in CONTROLLER_GROUPS]
        else:
            found.append(generated.installed_by_hand(
                file, 'OpenStack-Ansible', inventory_host))
    return found
