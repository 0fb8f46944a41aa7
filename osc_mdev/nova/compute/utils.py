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

"""Mirrors nova/compute/utils.py: what a new server counts against
Nova's own quotas under DbQuotaDriver (``check_num_instances_quota``),
and those quotas as a project's quota set shows them.
"""

from collections.abc import Mapping

from osc_mdev.nova.limit import utils

# Nova's own quotas (DbQuotaDriver): what a new server counts against
# them (check_num_instances_quota), by the resources of its request.
LEGACY_RESOURCES = {'instances': (utils.SERVERS,),
                    'cores': ('class:VCPU', 'class:PCPU'),
                    'ram': ('class:MEMORY_MB',)}
QUOTA_SET = 'quota set'


def legacy_deltas(deltas: Mapping[str, int]) -> dict[str, int]:
    """What one server of ``deltas`` (``flavor_deltas``) counts against
    DbQuotaDriver's quotas: ``instances`` 1, ``cores`` its vCPUs (shared
    or dedicated), ``ram`` its memory, as
    ``check_num_instances_quota`` asks ``Quotas.check_deltas``.
    """
    return {name: sum(deltas.get(r, 0) for r in resources)
            for name, resources in LEGACY_RESOURCES.items()}


def legacy_limits(quota_set: Mapping[str, Mapping[str, int]]
                  ) -> tuple[dict[str, utils.Effective], dict[str, int]]:
    """The limits and usage of DbQuotaDriver's quotas (``instances``,
    ``cores``, ``ram``) of a project's quota set (``GET
    /os-quota-sets/{project}/detail``): ``({name: Effective}, {name:
    used})``, used being what Nova counts (in use and reserved); a
    negative limit is unlimited. Mirrors the quotas
    ``check_num_instances_quota`` checks (``Quotas.check_deltas``: the
    limit against what is in use and reserved).
    """
    effective, used = {}, {}
    for name in LEGACY_RESOURCES:
        value = int(quota_set[name]['limit'])
        effective[name] = utils.Effective(
            utils.UNLIMITED if value < 0 else value, QUOTA_SET)
        used[name] = int(quota_set[name].get('in_use', 0)) + int(
            quota_set[name].get('reserved', 0))
    return effective, used
