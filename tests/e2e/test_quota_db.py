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

"""``openstack mdev quota list`` against Nova running its default quota
driver, ``nova.quota.DbQuotaDriver``, beside a Keystone that holds
unified limits for Nova's service (which that Nova never reads).

With the controller's nova.conf the tool must say that no GPU class is
limited, and with ``--flavor`` how many servers Nova's own quotas
(``instances``, ``cores``, ``ram`` of the project's quota set) let in:
servers are booted as a member of the project until Nova refuses.
"""

import pytest

from tests.cloud import client
from tests.e2e import helpers
from tests.e2e.test_quota import boot_until_refused
from tests.e2e.test_quota import delete
from tests.e2e.test_quota import fit

TOPOLOGY = {
    'hosts': [{'name': 'gpu1', 'gpus': 1, 'bus': '0x81',
               'enabled_mdev_types': ['nvidia-12']}],
    'quota': {'driver': 'nova.quota.DbQuotaDriver'},
    # What a unified limits driver would enforce: 1 vGPU per project.
    'unified_limits': {'registered': {'servers': 10, 'class:VGPU': 1}},
}
# The controller's nova.conf (tests/e2e/conftest.py: controller): with
# no [quota] driver it runs Nova's default.
CONTROLLER_CONF = '[quota]\ninstances = 10\n'
RULE = ('no limit; [quota] driver nova.quota.DbQuotaDriver limits no '
        'resource class')
# The nvidia-12 GPU holds 8 vGPUs.
GPU_SIZE = 8

# The module's cloud (tests/e2e/conftest.py): on TOPOLOGY, with a real
# Keystone the CLI logs in to with a password, and this flavor.
KEYSTONE = True
FLAVORS = {'vgpu': {'resources:VGPU': '1'}}
pytestmark = pytest.mark.usefixtures('keystone_cli')


def set_quota(cloud: client.EmbeddedCloud, project: str, **quotas: int
              ) -> None:
    helpers.nova_request(cloud, 'PUT', '/os-quota-sets/%s' % project,
                         json={'quota_set': quotas})


def test_nova_stops_at_the_instances_quota_the_tool_gave(
        cloud: client.EmbeddedCloud, controller: str) -> None:
    project = cloud.projects['ml-team']
    set_quota(cloud, project, instances=2)
    before = fit('vgpu', 'ml-team', '--controller-conf', controller)
    assert before == {
        'Project': project, 'Fits': 2, 'Quota Allows': 2,
        'Capacity Allows': GPU_SIZE,
        'Bound By': 'quota instances: 0 of 2 used, 1 per server'}
    # Assuming unified limits, Keystone's registered limit would bind.
    assumed = helpers.mdev('quota', 'list', '--flavor', 'vgpu',
                           '--project', 'ml-team', '-f', 'json')
    assert assumed.json()[0]['Fits'] == 1
    assert 'assumed to use nova.quota.UnifiedLimitsDriver' in \
        assumed.stderr
    active, refusal, booted = boot_until_refused(cloud, 'vgpu', project)
    try:
        assert (len(active), refusal) == (2, 'quota')
        after = fit('vgpu', 'ml-team', '--controller-conf', controller)
        assert (after['Fits'], after['Bound By']) == (
            0, 'quota instances (403 quota exceeded): 2 of 2 used, 1 per '
               'server')
        result = helpers.mdev('quota', 'list', '--controller-conf', controller,
                              '-f', 'json')
        assert result.rc == 0, result.stderr
        assert result.json() == [{
            'Project': project, 'Resource': 'class:VGPU', 'Used': 2,
            'Limit': -1, 'Free': None, 'Rule': RULE}]
        assert "Nova uses none of Keystone's limits" in result.stderr
    finally:
        delete(cloud, booted)


def test_nova_stops_at_the_cores_quota_the_tool_gave(
        cloud: client.EmbeddedCloud, controller: str) -> None:
    project = cloud.projects['render-farm']
    [flavor] = [f for f in helpers.nova_request(
        cloud, 'GET', '/flavors/detail')['flavors'] if f['name'] == 'vgpu']
    vcpus = flavor['vcpus']
    cores = 3 * vcpus - 1
    set_quota(cloud, project, cores=cores)
    before = fit('vgpu', project, '--controller-conf', controller)
    assert (before['Fits'], before['Bound By']) == (
        2, 'quota cores: 0 of %d used, %d per server' % (cores, vcpus))
    active, refusal, booted = boot_until_refused(cloud, 'vgpu', project)
    try:
        assert (len(active), refusal) == (2, 'quota')
        assert fit('vgpu', project, '--controller-conf',
                   controller)['Fits'] == 0
    finally:
        delete(cloud, booted)
