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

"""Lost mdevs: which guest holds each, on which GPU and of which type."""

from osc_mdev.features.config.check import lost
from osc_mdev.host import gpus
from osc_mdev.local import node

A, B = '5b2c0e8e-7f4c-4a55-9b36-1f1c3b0f6a01', \
    '0f2a8d3e-2b9e-4c1d-8e55-9d6f1a7c2b02'
M1, M2, M3 = ('c2177883-f1bb-47f0-914d-32a22e3a8804',
              'a297db4a-f4c2-11e6-90f6-d3b88d6c9525',
              '8b8c1f9e-0a5d-4d27-b1a3-52f3b6a0e703')
G1, G2 = '0000:84:00.0', '0000:85:00.0'


def xml(uuid, *mdevs):
    return ('<domain><uuid>%s</uuid><devices>%s</devices></domain>' % (
        uuid, ''.join("<hostdev mode='subsystem' type='mdev'><source>"
                      "<address uuid='%s'/></source></hostdev>" % m
                      for m in mdevs)))


HOST = gpus.Host(
    devices={G1: gpus.Device(G1, {'nvidia-35': gpus.SupportedType(
        'nvidia-35', 1)}, mdev_parent=True),
        G2: gpus.Device(G2, {'nvidia-36': gpus.SupportedType(
            'nvidia-36', 1)}, mdev_parent=True)},
    mdev_bus=True, mdevs=(gpus.Mdev(M2, G2, 'nvidia-36'),))


def holding(server, gpu, traits=()):
    return lost.Holding(server, gpu, 'pci_' + gpu.replace(':', '_').replace(
        '.', '_'), 'VGPU', 1, traits)


def test_the_gpu_short_of_the_servers_mdevs_is_the_parent():
    guests = lost.guests_of([node.Domain('a.xml', xml(A, M1, M2)),
                             node.Domain('b.xml', xml(B, M3)),
                             node.Domain('c.xml', '<domain')], 'gpu1')
    assert [f.where for f in guests.findings] == ['c.xml']
    gone = lost.missing(guests, HOST)
    assert sorted(gone) == sorted([M1, M3])
    found = lost.lost_mdevs(
        gone, HOST, [holding(A, G1, ('CUSTOM_NVIDIA_35',)), holding(A, G2)],
        lost.type_for(None, HOST), {A: 'vm-a'})
    assert found == [
        lost.LostMdev(A, 'vm-a', M1, G1, 'nvidia-35', 'a.xml'),
        lost.LostMdev(B, None, M3, None, None, 'b.xml')]
    message = lost.finding('gpu1', found[1]).message
    assert 'Placement holds no vGPU of the server on this node' in message


def test_without_trait_the_type_of_the_gpus_mdevs():
    type_of = lost.type_for(None, HOST)
    assert type_of(holding(A, G2)) == 'nvidia-36'
    assert type_of(holding(A, G1)) is None
