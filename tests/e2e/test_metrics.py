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

"""``openstack mdev metrics`` against real Nova and Placement.

Each flavor's ``openstack_mdev_flavor_fits`` follows the servers that
boot, and is the number of servers Nova's scheduler then boots before it
answers NoValidHost; the used mdevs per device are those the fake
hypervisor created.
"""

from prometheus_client import parser
import pytest

from tests.cloud import client
from tests.e2e.helpers import mdev

TOPOLOGY = {'hosts': [
    {'name': 'met1', 'gpus': 2, 'bus': '0x84',
     'enabled_mdev_types': ['nvidia-12']},
    {'name': 'met2.rack1', 'gpus': 1, 'bus': '0x85',
     'enabled_mdev_types': ['nvidia-12']},
]}


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('metrics'),
                              topology=TOPOLOGY) as cloud:
        yield cloud


@pytest.fixture(scope='module')
def flavors(cloud):
    return [cloud.control('create_flavor', name=name,
                          extra_specs={'resources:VGPU': amount})['name']
            for name, amount in (('met-vgpu1', '1'), ('met-vgpu8', '8'))]


def scraped(*flavors):
    args = [a for f in flavors for a in ('--flavor', f)]
    result = mdev('metrics', *args)
    assert result.rc == 0, result.stderr
    return {f.name: f for f in parser.text_string_to_metric_families(
        result.stdout)}


def used_per_device(cloud):
    """{(node, pci address): mdevs} from the fake hypervisor."""
    used = {}
    for found in cloud.control('mdev_truth'):
        key = (found['node'], found['pci_address'])
        used[key] = used.get(key, 0) + 1
    return used


def check(cloud, flavors):
    found = scraped(*flavors)
    got = {s.labels['flavor']: s.value
           for s in found['openstack_mdev_flavor_fits'].samples}
    used = {(s.labels['host'], s.labels['device']): s.value
            for s in found['openstack_mdev_device_used'].samples}
    truth = used_per_device(cloud)
    assert {k: v for k, v in used.items() if v} == truth
    assert len(used) == 3
    return got


def test_flavor_fits_follow_the_servers(cloud, flavors):
    small, big = flavors
    assert check(cloud, flavors) == {small: 24, big: 3}
    cloud.control('boot', flavor=big, name='met-big')
    assert check(cloud, flavors) == {small: 16, big: 2}
    cloud.control('boot', flavor=small, count=2, name='met-small')
    after = check(cloud, flavors)
    # A device still empty takes one more big server.
    empty = 3 - len(used_per_device(cloud))
    assert after == {small: 14, big: empty}
    # Nova boots exactly that many more big servers, then says no.
    more = int(after[big])
    booted = [cloud.control('boot', flavor=big, name='met-fill-%d' % i)[0]
              for i in range(more + 1)]
    assert [s['status'] for s in booted] == ['ACTIVE'] * more + ['ERROR']
    assert 'No valid host' in booted[-1]['fault']
    assert check(cloud, flavors)[big] == 0
