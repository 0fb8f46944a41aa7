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

"""``mdev config check --host`` predicts what Nova does on a restart.

A host of the embedded cloud gets a new mdev configuration: the check
runs on the new file against what Placement shows before the restart,
then the host's nova-compute is restarted with that configuration and
Placement is read again: each device has the class the check predicted,
the total of the type predicted (the fake GPUs offer 16 nvidia-11 and 8
nvidia-12 instances), and a device left without a type keeps its stale
provider, as the check says.
"""

import pytest

from tests.cloud import client
from tests.e2e.helpers import mdev

HOST = 'cfg-node.example.net'
TOPOLOGY = {'hosts': [
    {'name': HOST, 'gpus': 3, 'bus': '0x85',
     'enabled_mdev_types': ['nvidia-11']},
    {'name': 'other-node', 'gpus': 1, 'bus': '0x86',
     'enabled_mdev_types': ['nvidia-12']},
]}
OFFERS = {'nvidia-11': 16, 'nvidia-12': 8}


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('cloud'),
                              topology=TOPOLOGY) as cloud:
        yield cloud


def placement_view(host):
    rows = mdev('provider', 'list', '--host', host, '-f', 'json').json()
    return {r['Device']: (r['Resource Class'], r['Capacity'])
            for r in rows}


NEW_CONF = """[DEFAULT]
host = cfg-node

[devices]
enabled_mdev_types = nvidia-12, nvidia-11

[mdev_nvidia-12]
device_addresses = 0000:85:00.0
mdev_class = CUSTOM_NV12

[mdev_nvidia-11]
device_addresses = 0000:85:01.0, 0000:85:03.0

[libvirt]
live_migration_downtime = 500000
live_migration_downtime_steps = 3
live_migration_downtime_delay = 3
"""


def test_check_predicts_the_restart(cloud, tmp_path):
    before = placement_view(HOST)
    assert before == {'0000:85:00.0': ('VGPU', 16),
                      '0000:85:01.0': ('VGPU', 16),
                      '0000:85:02.0': ('VGPU', 16)}
    old = tmp_path / 'old.conf'
    old.write_text('[devices]\nenabled_mdev_types = nvidia-11\n')
    assert mdev('trait', 'set', '--compute-conf',
                '%s=%s' % (HOST, old)).rc == 0
    # The running configuration matches Placement: nothing to say.
    same = mdev('config', 'check', str(old), '--host', HOST, '-f', 'json')
    assert [f for f in same.json()
            if f['Where'].startswith('Placement')] == []

    new = tmp_path / 'nova.conf'
    new.write_text(NEW_CONF)
    result = mdev('config', 'check', str(new), '--host', HOST, '--long',
                  '-f', 'json')
    assert result.rc == 0, result.stderr
    rows = result.json()
    predicted = {d['Device']: (d['Mdev Type'], d['Resource Class'])
                 for d in rows if d['Severity'] == 'effective'}
    assert predicted == {'0000:85:00.0': ('nvidia-12', 'CUSTOM_NV12'),
                         '0000:85:01.0': ('nvidia-11', 'VGPU'),
                         '0000:85:02.0': (None, None),
                         '0000:85:03.0': ('nvidia-11', 'VGPU')}
    messages = [f['Message'] for f in rows
                if f['Severity'] in ('error', 'warning', 'info')]
    assert any(m.startswith('Placement has no device 0000:85:03.0')
               for m in messages)
    assert any(m.startswith('Device 0000:85:00.0 is VGPU in Placement but '
                            'Nova will report CUSTOM_NV12') for m in messages)
    assert any(m.startswith('Device 0000:85:00.0 carries CUSTOM_NVIDIA_11 '
                            'but will be of type nvidia-12') for m in messages)
    assert any(m.startswith('Device 0000:85:02.0 (VGPU, total 16) gets no '
                            'type from this file') for m in messages)

    cloud.control('reconfigure', host=HOST,
                  enabled_mdev_types=['nvidia-12', 'nvidia-11'],
                  mdev={'nvidia-12': {'device_addresses': ['0000:85:00.0'],
                                      'mdev_class': 'CUSTOM_NV12'},
                        'nvidia-11': {'device_addresses': [
                            '0000:85:01.0', '0000:85:03.0']}})
    after = placement_view(HOST)
    for device, (mdev_type, resource_class) in predicted.items():
        if device == '0000:85:03.0':
            assert device not in after     # no such GPU on the host
        elif mdev_type is None:
            # Not deleted: the stale provider keeps its old inventory.
            assert after[device] == before[device]
        else:
            assert after[device] == (resource_class, OFFERS[mdev_type])
    # Now Placement agrees with the file, but for the stale provider and
    # the missing device, which the check still reports.
    again = mdev('config', 'check', str(new), '--host', HOST, '-f', 'json')
    left = sorted(f['Message'].split(': ')[0] for f in again.json()
                  if f['Severity'] == 'warning')
    assert left == ['Device 0000:85:00.0 carries CUSTOM_NVIDIA_11 but will '
                    'be of type nvidia-12',
                    'Device 0000:85:02.0 (VGPU, total 16) gets no type from '
                    'this file',
                    'Placement has no device 0000:85:03.0 on host %s' % HOST]


def test_servers_on_a_device_left_without_a_type_are_named(cloud, tmp_path):
    # On the host the test above leaves alone: its one GPU has room and
    # no stale provider next to it, so Nova boots the server there.
    node = 'other-node'
    flavor = cloud.control('create_flavor', name='cfg-vgpu',
                           extra_specs={'resources:VGPU': '1'})['id']
    server, = cloud.control('boot', flavor=flavor, name='cfg-server',
                            host=node)
    try:
        assert server['status'] == 'ACTIVE', server
        # A file that lists no device of the host: its GPU, the server's,
        # is left without a type.
        conf = tmp_path / 'nova.conf'
        conf.write_text('[devices]\nenabled_mdev_types = nvidia-12\n'
                        '[mdev_nvidia-12]\ndevice_addresses = 0000:86:09.0\n')
        result = mdev('config', 'check', str(conf), '--host', node, '-f',
                      'json')
        assert 'Traceback' not in result.stderr, result.stderr
        untyped = [f['Message'] for f in result.json()
                   if 'gets no type from this file' in f['Message']]
        assert len(untyped) == 1, result.json()
        # Nova names the server: its name next to its ID.
        assert 'cfg-server (%s)' % server['id'] in untyped[0], untyped
    finally:
        cloud.control('delete', server=server['id'])
