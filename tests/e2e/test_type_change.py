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

"""``mdev type change`` on real Nova: an mdev GPU of ``tc-node`` goes
from nvidia-11 to nvidia-12 while the node's other GPU (nvidia-12)
serves a server.

The plan refuses while the GPU's server has nowhere to go (the spare
node's compute service disabled), then names its move with ``migration
plan``'s command; the move is made, the plan's nova.conf diff is read
back with Nova's own option parser, the harness restarts nova-compute
with that configuration, ``--finish`` refuses the old file and then
moves the type trait, and ``capacity --flavor`` for the nvidia-12
flavor equals what Nova boots.
"""

import pytest

from tests.cloud import client
from tests.e2e.helpers import apply_diff
from tests.e2e.helpers import mdev
from tests.e2e.helpers import mdev_json
from tests.e2e.helpers import servers_nova_places
from tests.fixtures import host_snapshots
from tests.fixtures import nova_driver
from tests.fixtures import sysfs

V = {'libvirt_version': '8.6.0', 'qemu_version': '8.1.0'}
NODE, SPARE = 'tc-node', 'tc-spare'
GPU, OTHER = '0000:a7:00.0', '0000:a7:01.0'
TOPOLOGY = {'hosts': [
    dict(V, name=NODE, gpus=2, bus='0xa7',
         enabled_mdev_types=['nvidia-11', 'nvidia-12'],
         mdev={'nvidia-11': {'device_addresses': [GPU]},
               'nvidia-12': {'device_addresses': [OTHER]}}),
    dict(V, name=SPARE, gpus=1, bus='0xa8',
         enabled_mdev_types=['nvidia-11']),
]}
OLD_CONF = """[DEFAULT]
host = tc-node

[devices]
enabled_mdev_types = nvidia-11, nvidia-12

[mdev_nvidia-11]
device_addresses = 0000:a7:00.0

[mdev_nvidia-12]
device_addresses = 0000:a7:01.0
"""
DIFF = """--- {path}
+++ {path} (new)
@@ -4,8 +4,7 @@
 [devices]
-enabled_mdev_types = nvidia-11, nvidia-12
+enabled_mdev_types = nvidia-12
{blank}
 [mdev_nvidia-11]
-device_addresses = 0000:a7:00.0
{blank}
 [mdev_nvidia-12]
-device_addresses = 0000:a7:01.0
+device_addresses = 0000:a7:01.0, 0000:a7:00.0"""


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('typechange'),
                              topology=TOPOLOGY) as cloud:
        yield cloud


def _snapshot(cloud, tmp_path, conf, mdevs):
    """The node's snapshot: its GPUs as the fake hypervisor has them,
    with ``mdevs`` (``(uuid, address, type)``) on them.
    """
    root = sysfs.build(tmp_path / 'sys', devices=[
        (gpu['pci_address'], gpu['offers'], None)
        for gpu in cloud.hosts[NODE]['gpus']], mdevs=mdevs)
    (tmp_path / 'qemu').mkdir()
    return host_snapshots.write(tmp_path / 'tc-node.json', root, [conf],
                                tmp_path / 'qemu', NODE)


def _steps(*args):
    return [(r['Action'], r['Detail']) for r in mdev_json(
        'type', 'change', *args)]


def test_an_mdev_gpu_changes_type(cloud, tmp_path):
    old = tmp_path / 'old.conf'
    old.write_text(OLD_CONF)
    spare = tmp_path / 'spare.conf'
    spare.write_text('[devices]\nenabled_mdev_types = nvidia-11\n')
    confs = ('--compute-conf', '%s=%s' % (NODE, old),
             '--compute-conf', '%s=%s' % (SPARE, spare))
    assert mdev('trait', 'set', *confs).rc == 0
    f11 = cloud.control('create_flavor', name='tc-11', extra_specs={
        'resources:VGPU': '1', 'trait:CUSTOM_NVIDIA_11': 'required'})['id']
    f12 = cloud.control('create_flavor', name='tc-12', extra_specs={
        'resources:VGPU': '1', 'trait:CUSTOM_NVIDIA_12': 'required'})['id']
    moved, = cloud.control('boot', flavor=f11, name='tc-moved', host=NODE)
    stays, = cloud.control('boot', flavor=f12, name='tc-stays', host=NODE)
    truth = cloud.control('mdev_truth')
    assert {m['server']: m['pci_address'] for m in truth} == {
        moved['id']: GPU, stays['id']: OTHER}
    # Nova leaves the moved server's mdev on the GPU.
    snapshot = _snapshot(cloud, tmp_path, old, [
        (m['mdev_uuid'], m['pci_address'], m['mdev_type']) for m in truth])
    left = next(m['mdev_uuid'] for m in truth if m['server'] == moved['id'])
    gpu = '%s:%s' % (NODE, GPU)
    args = (gpu, '--to', 'nvidia-12') + confs

    # Nowhere to go: refused, naming the server; nothing written.
    cloud.control('set_service', host=SPARE, disabled=True)
    refused = mdev('type', 'change', *args)
    assert refused.rc == 1 and 'tc-moved (%s)' % moved['id'] in \
        refused.stderr, refused.stderr
    assert 'Traceback' not in refused.stderr
    cloud.control('set_service', host=SPARE, disabled=False)
    steps = _steps(*args)
    assert steps[0][0] == 'move server'
    assert 'server migrate' in steps[0][1] and SPARE in steps[0][1]
    kind = 'live_migrate' if '--live-migration' in steps[0][1] else 'migrate'
    assert cloud.control(kind, server=moved['id'], host=SPARE)[
        'host'] == SPARE

    # --finish with a server or the old file: refused.
    early = mdev('type', 'change', *args, '--finish')
    assert early.rc == 1 and 'not nvidia-12' in early.stderr, early.stderr

    steps = dict(_steps(*args))
    assert 'move server' not in steps
    assert steps['edit nova.conf'] == DIFF.format(path=old, blank=' ')
    assert 'Nova keeps provider %s_pci_0000_a7_00_0' % NODE in \
        steps['provider']
    assert 'removes CUSTOM_NVIDIA_11 and adds CUSTOM_NVIDIA_12' in \
        steps['traits']
    assert steps['capacity'] == (
        'tc-12: 7 servers fit now; 7 after plus those the GPU holds of '
        'nvidia-12')
    # With the node's snapshot: the mdev by UUID, and the GPU's nvidia-12
    # instances counted after.
    known = dict(_steps(*args, '--snapshot', snapshot))
    assert known['remove mdevs'].endswith(': %s (nvidia-11)' % left), \
        known['remove mdevs']
    assert known['capacity'] == 'tc-12: 7 servers fit now; 15 after'
    wrong = mdev('type', 'change', *args, '--snapshot', str(old))
    assert wrong.rc == 1 and 'no host snapshot' in wrong.stderr, \
        wrong.stderr
    # A type the GPU's sysfs does not offer: one line, nothing planned.
    unknown = mdev('type', 'change', gpu, '--to', 'nvidia-99', *confs,
                   '--snapshot', snapshot)
    assert (unknown.rc, unknown.stdout) == (1, ''), unknown
    assert 'offers no mdev type nvidia-99' in unknown.stderr, \
        unknown.stderr
    new = tmp_path / 'new.conf'
    new.write_text(apply_diff(steps['edit nova.conf'], OLD_CONF))
    # Nova's own option parser reads the new file as meant.
    values = nova_driver.nova_values([str(new)])
    assert values['devices']['enabled_mdev_types'] == ['nvidia-12']
    assert values['mdev_nvidia-12']['device_addresses'] == [OTHER, GPU]

    cloud.control('reconfigure', host=NODE,
                  enabled_mdev_types=['nvidia-12'],
                  mdev={'nvidia-12': {'device_addresses': [OTHER, GPU]}})
    new_confs = ('--compute-conf', '%s=%s' % (NODE, new),
                 '--compute-conf', '%s=%s' % (SPARE, spare))
    done = _steps(gpu, '--to', 'nvidia-12', '--finish', *new_confs)
    assert ('traits', 'added CUSTOM_NVIDIA_12; removed CUSTOM_NVIDIA_11') \
        in done, done
    traits = mdev_json('provider', 'show', gpu)
    assert 'CUSTOM_NVIDIA_12' in str(traits)
    assert 'CUSTOM_NVIDIA_11' not in str(traits)

    fits = mdev_json('capacity', '--flavor', 'tc-12')
    total = sum(r['Fits'] for r in fits)
    assert ('capacity', 'tc-12: %d servers fit' % total) in done
    assert total == 8 + 8 - 1
    # One server at a time, as many as Nova places: exactly as counted.
    assert servers_nova_places(cloud, f12, 'tc-fill', total + 1) == total
