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

"""``mdev type change`` on real Nova for a GPU whose vGPUs are SR-IOV
VFs offered through PCI in Placement: the 4 VFs of ``tcv-node``'s GPU
at 0000:b1:00.0 go from NVIDIA L4-2Q to 3 VFs of NVIDIA L4-4Q while
the node's other GPU (L4-4Q) serves a server.

The node's snapshot is laid out as the kernel shows such a GPU (VFs at
the addresses the harness gives them, typed through ``nvidia/``). The
plan names the server to move; once moved, the plan's ``device_spec``
lines are given to the node's nova-compute, which keeps the provider
(same UUID) with the new class; ``--finish`` refuses the old file and
then accepts, and ``capacity --flavor`` for the new class equals what
Nova boots.
"""

import json

import pytest

from tests.cloud import client
from tests.e2e.helpers import apply_diff
from tests.e2e.helpers import mdev
from tests.e2e.helpers import mdev_json
from tests.e2e.helpers import servers_nova_places
from tests.fixtures import host_snapshots
from tests.fixtures import sysfs

V = {'libvirt_version': '8.6.0', 'qemu_version': '8.1.0'}
NODE, SPARE = 'tcv-node', 'tcv-spare'
GPU, OTHER = '0000:b1:00.0', '0000:b1:01.0'
L4_2Q, L4_4Q = 'CUSTOM_NVIDIA_L4_2Q', 'CUSTOM_NVIDIA_L4_4Q'
SPEC_2Q = {'vendor_id': '10de', 'product_id': '27b9',
           'resource_class': L4_2Q}
SPEC_4Q = {'vendor_id': '10de', 'product_id': '2339',
           'resource_class': L4_4Q}
TOPOLOGY = {
    'hosts': [
        dict(V, name=NODE, gpus=0, bus='0xb1', pci={
            'pfs': [{'pfs': 1, 'vfs_per_pf': 4, 'product_id': '27b9',
                     'pf_product_id': '27b8'},
                    {'pfs': 1, 'vfs_per_pf': 2, 'product_id': '2339',
                     'pf_product_id': '2338'}],
            'device_spec': [SPEC_2Q, SPEC_4Q]}),
        dict(V, name=SPARE, gpus=0, bus='0xb2', pci={
            'pfs': [{'pfs': 1, 'vfs_per_pf': 2, 'product_id': '27b9',
                     'pf_product_id': '27b8'}],
            'device_spec': [SPEC_2Q]}),
    ],
    'pci_alias': [
        {'name': 'nvidia-l4-2q', 'device_type': 'type-VF',
         'resource_class': L4_2Q},
        {'name': 'nvidia-l4-4q', 'device_type': 'type-VF',
         'resource_class': L4_4Q}],
}
CONTROLLER = '[pci]\n%s\n[filter_scheduler]\npci_in_placement = True\n' % (
    '\n'.join('alias = %s' % json.dumps(a) for a in TOPOLOGY['pci_alias']))


def _conf(host, specs):
    return ('[DEFAULT]\nhost = %s\n\n[pci]\nreport_in_placement = True\n'
            % host) + ''.join('device_spec = %s\n' % json.dumps(s)
                              for s in specs)


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('typechangevf'),
                              topology=TOPOLOGY) as cloud:
        yield cloud


def _snapshot(tmp_path, conf):
    """The node as the kernel shows it: the GPU's 4 VFs of L4-2Q (1160),
    the other GPU's first VF of L4-4Q (1161).
    """
    root = sysfs.build(tmp_path / 'sys', vgpu_gpus=[
        sysfs.VgpuGpu(GPU, 4, current=dict.fromkeys(range(4), 1160),
                      offset=1, product_id='27b8', vf_product_id='27b9'),
        sysfs.VgpuGpu(OTHER, 2, current={0: 1161}, offset=1,
                      product_id='2338', vf_product_id='2339')])
    (tmp_path / 'qemu').mkdir()
    return host_snapshots.write(tmp_path / 'tcv-node.json', root, [conf],
                                tmp_path / 'qemu', NODE)


def _provider():
    """The GPU's row of ``provider list --kind pci``."""
    return next(r for r in mdev_json('provider', 'list', '--kind', 'pci')
                if (r['Host'], r['Device']) == (NODE, GPU))


def _steps(*args):
    return [(r['Action'], r['Detail']) for r in mdev_json(
        'type', 'change', *args)]


def test_a_vf_gpu_changes_type(cloud, tmp_path):
    old = tmp_path / 'old.conf'
    old.write_text(_conf(NODE, [SPEC_2Q, SPEC_4Q]))
    spare = tmp_path / 'spare.conf'
    spare.write_text(_conf(SPARE, [SPEC_2Q]))
    controller = tmp_path / 'controller.conf'
    controller.write_text(CONTROLLER)
    snapshot = _snapshot(tmp_path, old)
    confs = ('--compute-conf', '%s=%s' % (NODE, old),
             '--compute-conf', '%s=%s' % (SPARE, spare),
             '--controller-conf', str(controller))
    f2 = cloud.control('create_flavor', name='tcv-2q', extra_specs={
        'pci_passthrough:alias': 'nvidia-l4-2q:1'})['id']
    f4 = cloud.control('create_flavor', name='tcv-4q', extra_specs={
        'pci_passthrough:alias': 'nvidia-l4-4q:1'})['id']
    moved, = cloud.control('boot', flavor=f2, name='tcv-moved', host=NODE)
    stays, = cloud.control('boot', flavor=f4, name='tcv-stays', host=NODE)
    assert (moved['status'], stays['status']) == ('ACTIVE', 'ACTIVE')
    gpu = '%s:%s' % (NODE, GPU)
    before = _provider()
    args = (gpu, '--to', 'L4-4Q:3') + confs

    # The snapshot is needed for a VF GPU.
    bare = mdev('type', 'change', *args)
    assert bare.rc == 1 and '--snapshot' in bare.stderr, bare.stderr
    args += ('--snapshot', snapshot)
    steps = _steps(*args)
    assert steps[0][0] == 'move server', steps
    assert moved['id'] in steps[0][1] and SPARE in steps[0][1]
    kind = 'live_migrate' if '--live-migration' in steps[0][1] else 'migrate'
    assert cloud.control(kind, server=moved['id'], host=SPARE)[
        'host'] == SPARE

    early = mdev('type', 'change', *args, '--finish')
    assert early.rc == 1 and 'restart' in early.stderr, early.stderr
    assert len(early.stderr.strip().splitlines()) == 1

    steps = _steps(*args)
    by_action = {}
    for action, detail in steps:
        by_action.setdefault(action, []).append(detail)
    assert 'move server' not in by_action
    assert [a for a, _ in steps][:6] == [
        'reset VFs', 'edit nova.conf', 'controller alias', 'boot script',
        'restart nova-compute', 'provider']
    reset, = by_action['reset VFs']
    assert reset.endswith(': ' + ', '.join(
        '0000:b1:00.%d (1160)' % i for i in range(1, 5))), reset
    alias, = by_action['controller alias']
    assert 'nvidia-l4-4q asks for %s already' % L4_4Q in alias
    script, = by_action['boot script']
    assert ("gpu %s 1161 'NVIDIA L4-4Q' 0000:b1:00.1 0000:b1:00.2 "
            '0000:b1:00.3' % GPU) in script
    provider, = by_action['provider']
    assert 'Nova keeps provider %s_%s (%s)' % (
        NODE, GPU.upper(), before['UUID']) in provider, provider
    assert '%s 4 with %s 3' % (L4_2Q, L4_4Q) in provider
    # tcv-2q: the spare's 2 VFs (one used) and the GPU's 4; tcv-4q: the
    # other GPU's 2 (one used), then the GPU's 3 as well.
    assert by_action['capacity'] == [
        'tcv-2q: 5 servers fit now; 1 after',
        'tcv-4q: 1 servers fit now; 4 after']

    diff, = by_action['edit nova.conf']
    new = tmp_path / 'new.conf'
    new.write_text(apply_diff(diff, old.read_text()))
    specs = [json.loads(line.split('=', 1)[1]) for line in
             new.read_text().splitlines() if line.startswith('device_spec')]
    assert [s.get('address') for s in specs] == [
        '0000:b1:00.1', '0000:b1:00.2', '0000:b1:00.3', None]
    plan = cloud.control('reconfigure', host=NODE, enabled_mdev_types=[],
                         device_spec=specs)
    assert plan['pci']['providers'][0]['total'] == 3

    new_confs = ('--compute-conf', '%s=%s' % (NODE, new),
                 '--compute-conf', '%s=%s' % (SPARE, spare),
                 '--controller-conf', str(controller),
                 '--snapshot', snapshot)
    done = _steps(gpu, '--to', 'L4-4Q:3', '--finish', *new_confs)
    assert done[0] == ('provider', '%s_%s (%s) offers %s 3, nothing '
                       'allocated' % (NODE, GPU.upper(), before['UUID'],
                                      L4_4Q)), done
    after = _provider()
    assert after['UUID'] == before['UUID']

    fits = mdev_json('capacity', '--flavor', 'tcv-4q', '--controller-conf',
                     str(controller))
    total = sum(r['Fits'] for r in fits)
    assert ('capacity', 'tcv-4q: %d servers fit' % total) in done
    assert total == 4
    assert servers_nova_places(cloud, f4, 'tcv-fill', total + 1) == total
