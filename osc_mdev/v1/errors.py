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

"""The one place where the library's errors become the command line's:
each ``osc_mdev.base.errors.Error`` is one CommandError sentence, the
inputs it names worded as the options that give them.

``OPTIONS`` maps each library parameter a sentence can name to its
option; an option plays one role in every command, so one map serves
them all.
"""

from osc_lib import exceptions

from osc_mdev.base import errors

#: The option that gives each library parameter.
OPTIONS = {
    'all_devices': '--all',
    'compute_conf': '--compute-conf',
    'controller_conf': '--controller-conf',
    'dry_run': '--dry-run',
    'flavor': '--flavor',
    'force': '--force',
    'host': '--host',
    'isolate_others': '--isolate-other-groups',
    'inventory_host': '--inventory-host',
    'node_name': '--node-name',
    'project': '--project',
    'output': '--output',
    'output_dir': '--output-dir',
    'provider_config': '--provider-config',
    'provider_config_dir': '--provider-config-dir',
    'replace': '--replace',
    'resource_class': '--resource-class',
    'snapshot': '--snapshot',
    'snapshot_dir': '--snapshot-dir',
    'spread': '--spread',
    'sysfs': '--sysfs',
    'target': '--target',
    'trait': '--trait',
    'validate': '--no-validate',
}


def option(parameter: str) -> str:
    """The option that gives ``parameter``; a parameter with no option
    of its own (an argument) keeps its name.
    """
    return OPTIONS.get(parameter, parameter)


def command_error(exc: errors.Error) -> exceptions.CommandError:
    """``exc`` as one CommandError sentence that names options."""
    return exceptions.CommandError(exc.worded(option))
