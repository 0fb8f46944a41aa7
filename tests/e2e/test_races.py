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

"""Writers racing on one flavor in a cloud real Nova built.

``openstack mdev flavor configure`` rewrites only the flavor's mdev keys;
an operator who sets unrelated properties with ``openstack flavor set
--property`` at the same moment loses none of them.
"""

import concurrent.futures
import subprocess
import sys

import pytest

from tests.cloud import client
from tests.e2e.helpers import flavor_specs

ROUNDS = 8


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('cloud')) as cloud:
        yield cloud


def openstack(cloud, *args):
    return subprocess.run(
        [sys.executable, '-m', 'openstackclient.shell', *args],
        capture_output=True, text=True, env=cloud.cli_environ(),
        timeout=300)


def test_flavor_configure_racing_flavor_set_loses_no_key(cloud):
    flavor = cloud.control('create_flavor', name='race-flavor',
                           extra_specs={'hw_rng:allowed': 'True'})

    def operator(i):
        return openstack(cloud, 'flavor', 'set', '--property',
                         'race:key%02d=v%d' % (i, i), flavor['id'])

    def mdev(i):
        return openstack(cloud, 'mdev', 'flavor', 'configure',
                         flavor['id'], '--resource-class', 'VGPU',
                         '--amount', str(1 + i % 2))

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        jobs = [pool.submit(operator, i) for i in range(ROUNDS)]
        jobs += [pool.submit(mdev, i) for i in range(ROUNDS)]
        results = [job.result() for job in jobs]
    for result in results:
        assert result.returncode == 0, result.stderr
    specs = flavor_specs(cloud, flavor['id'])
    for i in range(ROUNDS):
        assert specs.get('race:key%02d' % i) == 'v%d' % i, specs
    assert specs['hw_rng:allowed'] == 'True'
    assert specs['resources:VGPU'] in ('1', '2')
    mdev_keys = [k for k in specs if k.startswith(('resources', 'trait'))]
    assert mdev_keys == ['resources:VGPU'], specs
