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

"""``openstack mdev audit`` against a real Placement, without Nova.

The checks that need only Placement (over-capacity, lost-trait,
wrong-trait) run, and their repair; Nova's endpoint is dead, so no
consumer may be called orphaned: that is a finding of its own.
"""

import json
import uuid

import pytest

from tests.fixtures import cli
from tests.fixtures import placement_data
from tests.fixtures.placement_data import Gpu


@pytest.fixture
def cloud(placement_url, tmp_path, monkeypatch):
    cli.use_cloud_without_nova(placement_url, tmp_path, monkeypatch)


@pytest.fixture
def host(placement):
    """A host with a lost, a wrong and an over-full GPU, and a consumer
    Nova was never asked about.
    """
    name = 'audit-%s.example_com' % uuid.uuid4().hex[:8]
    gpus = [Gpu('pci_0000_84_00_0', 'VGPU', 4,
                ('CUSTOM_NVIDIA_11', 'CUSTOM_KEEP_ME')),
            Gpu('pci_0000_85_00_0', 'VGPU', 4, ('CUSTOM_KEEP_ME',)),
            Gpu('pci_0000_86_00_0', 'VGPU', 4,
                ('CUSTOM_NVIDIA_11', 'CUSTOM_NVIDIA_12')),
            Gpu('pci_0000_87_00_0', 'CUSTOM_MLX5', 2)]
    root = placement.add_compute_node(name, gpus)
    servers = [placement.boot_server(root, gpus[3]) for _ in range(2)]
    placement.set_inventory(gpus[3].uuid, {'CUSTOM_MLX5': {
        'total': 1, 'max_unit': 1}})
    unknown = placement.boot_server(root, gpus[0])
    return name, gpus, servers, unknown


def audit(*args):
    return cli.openstack('mdev', 'audit', '-f', 'json', *args)


def state(placement):
    rps = placement.request('GET', '/resource_providers')[
        'resource_providers']
    return {rp['name']: (rp['generation'],
                         sorted(placement.get_traits(rp['uuid'])),
                         placement.request(
                             'GET', '/resource_providers/%s/allocations'
                             % rp['uuid'])['allocations'])
            for rp in rps}


def test_placement_checks_without_nova(cloud, placement, placement_url,
                                       host):
    name, gpus, servers, unknown = host
    before = placement_data.server_stats(placement_url)['requests']
    result = audit('--host', name)
    requests = placement_data.server_stats(placement_url)['requests'] - (
        before)
    assert result.rc == 1, result.stderr
    rows = json.loads(result.stdout)
    found = sorted((r['Severity'], r['Check'], r['Device'], r['Server'])
                   for r in rows)
    assert found == [
        ('error', 'nova-unreachable', '', ''),
        ('error', 'over-capacity', '0000:87:00.0', ','.join(sorted(
            servers))),
        ('error', 'wrong-trait', '0000:86:00.0', ''),
        ('warning', 'lost-trait', '0000:85:00.0', '')]
    # The consumer Nova was not asked about is not called orphaned.
    assert unknown not in result.stdout
    nova = next(r for r in rows if r['Check'] == 'nova-unreachable')
    assert 'Cannot reach the Compute API' in nova['Message']
    assert 'orphaned-allocation' in nova['Message']
    # One provider list and the allocation candidate summaries; then the
    # allocations of the two devices in use (84, 87) and the inventory of
    # the one used beyond its capacity (87).
    assert len(gpus) == 4
    assert requests == 2 + 2 + 1


def test_fix_lost_trait_keeps_everything_else(cloud, placement, host):
    name, gpus, servers, unknown = host
    before = state(placement)
    dry = json.loads(audit('--host', name, '--fix', 'lost-trait',
                           '--dry-run').stdout)
    assert [r['Repair'] for r in dry if r['Check'] == 'lost-trait'] == [
        'would add CUSTOM_NVIDIA_11']
    assert state(placement) == before

    result = audit('--host', name, '--fix', 'lost-trait,orphaned-allocation')
    assert result.rc == 1        # the errors remain; the repair worked
    rows = json.loads(result.stdout)
    [lost] = [r for r in rows if r['Check'] == 'lost-trait']
    assert lost['Repair'] == 'added CUSTOM_NVIDIA_11'
    assert [r['Repair'] for r in rows if r['Check'] == 'over-capacity'] == [
        '']
    after = state(placement)
    assert after[gpus[1].name][1] == [
        'CUSTOM_KEEP_ME', 'CUSTOM_NVIDIA_11', 'OWNER_NOVA']
    # Only that provider changed; no allocation was touched although Nova
    # was unreachable and orphaned-allocation was asked for.
    assert {n for n in after if after[n] != before[n]} == {gpus[1].name}
    assert unknown in after[gpus[0].name][2]

    again = json.loads(audit('--host', name, '--fix', 'lost-trait').stdout)
    assert 'lost-trait' not in {r['Check'] for r in again}
    assert state(placement) == after


def test_nova_conf_judges_by_type(cloud, placement, host, tmp_path):
    name, gpus, _, _ = host
    conf = tmp_path / 'nova.conf'
    conf.write_text('[devices]\nenabled_mdev_types = nvidia-11, nvidia-12\n'
                    '[mdev_nvidia-12]\ndevice_addresses = 0000:86:00.0\n')
    rows = json.loads(audit('--host', name, '--compute-conf', '%s=%s' % (
        name, conf)).stdout)
    traits = sorted((r['Check'], r['Device'], r['Severity']) for r in rows
                    if r['Check'].endswith('-trait'))
    assert traits == [
        ('lost-trait', '0000:85:00.0', 'warning'),
        ('lost-trait', '0000:87:00.0', 'warning'),
        ('wrong-trait', '0000:86:00.0', 'error')]


@pytest.mark.parametrize('args,fragment', [
    (['--fix', 'missing-allocation'], 'has no automatic fix'),
    (['--dry-run'], 'give --fix too'),
    (['--host', 'no-such-host'], "No compute host named 'no-such-host'"),
    (['--compute-conf', 'x'], 'takes HOST=FILE'),
    (['--controller-conf', '/nonexistent/nova.conf'],
     '--controller-conf: '),
    (['--fix', 'orphaned-allocation', '--controller-conf',
      '/nonexistent/nova.conf'], '/nonexistent/nova.conf'),
])
def test_bad_options_write_nothing(cloud, placement, host, args, fragment):
    before = state(placement)
    cli.assert_one_line_error(cli.openstack('mdev', 'audit', *args),
                              fragment)
    assert state(placement) == before


def test_orphan_removal_is_guarded_by_the_consumer_generation(
        placement, placement_url):
    """An allocation that changed after the audit read it is left alone
    and reported; with the generation read now it is removed.
    """
    from keystoneauth1 import session as ks_session
    from keystoneauth1 import token_endpoint

    from osc_mdev.api import http
    from osc_mdev.api import placement as placement_client
    from osc_mdev.features.audit import checks as checks
    from osc_mdev.features.audit import reads as client_audit

    name = 'guard-%s' % uuid.uuid4().hex[:8]
    gpu = Gpu('pci_0000_84_00_0', 'VGPU', 4)
    root = placement.add_compute_node(name, [gpu])
    consumer = placement.boot_server(root, gpu)
    client = placement_client.PlacementClient(http.Service(
        ks_session.Session(auth=token_endpoint.Token(placement_url,
                                                     'admin')),
        'placement', 'Placement'))

    read = client.get_consumer(consumer)
    stale = checks.RemoveAllocations(consumer, read['consumer_generation'],
                                     read['project_id'], read['user_id'])
    # Someone (Nova) changes the consumer's allocations meanwhile.
    placement.request('PUT', '/allocations/%s' % consumer, json={
        'allocations': {gpu.uuid: {'resources': {'VGPU': 2}}},
        'project_id': read['project_id'], 'user_id': read['user_id'],
        'consumer_generation': read['consumer_generation'],
        'consumer_type': 'INSTANCE'})

    [outcome] = client_audit.fix(client, [stale]).values()
    assert outcome.failed
    assert outcome.result.startswith('left alone: its allocations changed')
    assert placement.request('GET', '/allocations/%s' % consumer)[
        'allocations'][gpu.uuid]['resources'] == {'VGPU': 2}

    dry = client_audit.fix(client, [stale], dry_run=True)
    assert list(dry.values())[0].result.startswith('would remove')

    now = client.get_consumer(consumer)
    fresh = checks.RemoveAllocations(consumer, now['consumer_generation'],
                                     now['project_id'], now['user_id'])
    [outcome] = client_audit.fix(client, [fresh]).values()
    assert not outcome.failed, outcome.result
    assert placement.request('GET', '/allocations/%s' % consumer)[
        'allocations'] == {}
    # The root's VCPU/MEMORY_MB/DISK_GB went with it: the whole consumer.
    assert placement.request('GET', '/resource_providers/%s/usages'
                             % root)['usages']['VCPU'] == 0


def test_orphan_removal_whose_answer_is_lost_is_verified(
        placement, placement_url):
    """Placement removes the allocations but the answer is lost: the
    retried PUT meets the new consumer generation, the re-read shows the
    allocations gone, and the repair is reported as done.
    """
    from keystoneauth1 import session as ks_session
    from keystoneauth1 import token_endpoint

    from osc_mdev.api import http
    from osc_mdev.api import placement as placement_client
    from osc_mdev.features.audit import checks as checks
    from osc_mdev.features.audit import reads as client_audit
    from tests.fixtures import faults

    name = 'lost-%s' % uuid.uuid4().hex[:8]
    gpu = Gpu('pci_0000_84_00_0', 'VGPU', 4)
    root = placement.add_compute_node(name, [gpu])
    consumer = placement.boot_server(root, gpu)
    with faults.FaultProxy(placement_url, rule=faults.nth(
            'PUT', '/allocations/', {1}, faults.DROP_AFTER)) as proxy:
        client = placement_client.PlacementClient(http.Service(
            ks_session.Session(auth=token_endpoint.Token(proxy.url,
                                                         'admin')),
            'placement', 'Placement', connect_retry_delay=0.05))
        read = client.get_consumer(consumer)
        repair = checks.RemoveAllocations(
            consumer, read['consumer_generation'], read['project_id'],
            read['user_id'])
        [outcome] = client_audit.fix(client, [repair]).values()
        assert proxy.actions(faults.DROP_AFTER)
    assert not outcome.failed, outcome.result
    assert outcome.result.startswith('removed its allocations')
    assert placement.request('GET', '/allocations/%s' % consumer)[
        'allocations'] == {}


PREFIX = 'CUSTOM_GPU_'
TWO_TYPES = ('[devices]\nenabled_mdev_types = nvidia-11, nvidia-12\n'
             '[mdev_nvidia-12]\ndevice_addresses = 0000:85:00.0\n')


def trait_rows(result):
    return sorted((r['Check'], r['Device'], r.get('Repair'))
                  for r in json.loads(result.stdout)
                  if r['Check'].endswith('-trait'))


def test_trait_prefix_as_trait_set_names_them(cloud, placement, tmp_path):
    """A cloud that tags its devices with its own prefix ('trait set
    --compute-conf --trait-prefix') is audited with the same option:
    nothing is lost or wrong, and a repair adds the prefixed trait.
    """
    name = 'prefix-%s.example.com' % uuid.uuid4().hex[:8]
    gpus = [Gpu('pci_0000_84_00_0', 'VGPU', 4),
            Gpu('pci_0000_85_00_0', 'VGPU', 4),
            Gpu('pci_0000_86_00_0', 'VGPU', 4)]
    placement.add_compute_node(name, gpus)
    conf = tmp_path / 'nova.conf'
    conf.write_text(TWO_TYPES)
    compute_conf = '%s=%s' % (name, conf)
    tagged = cli.openstack('mdev', 'trait', 'set', '--compute-conf',
                           compute_conf, '--trait-prefix', PREFIX)
    assert tagged.rc == 0, tagged.stderr
    assert [sorted(placement.get_traits(g.uuid)) for g in gpus] == [
        ['CUSTOM_GPU_NVIDIA_11', 'OWNER_NOVA'],
        ['CUSTOM_GPU_NVIDIA_12', 'OWNER_NOVA'],
        ['CUSTOM_GPU_NVIDIA_11', 'OWNER_NOVA']]

    # With the same prefix: by the nova.conf and by the siblings, clean.
    assert trait_rows(audit('--host', name, '--compute-conf', compute_conf,
                            '--trait-prefix', PREFIX)) == []
    assert trait_rows(audit('--host', name, '--trait-prefix', PREFIX)) == []
    # By the default naming every device lacks its trait, and --fix would
    # add the default one: what the option is for.
    assert trait_rows(audit('--host', name, '--compute-conf', compute_conf,
                            '--fix', 'lost-trait', '--dry-run')) == [
        ('lost-trait', '0000:84:00.0', 'would add CUSTOM_NVIDIA_11'),
        ('lost-trait', '0000:85:00.0', 'would add CUSTOM_NVIDIA_12'),
        ('lost-trait', '0000:86:00.0', 'would add CUSTOM_NVIDIA_11')]

    # A device that lost its trait gets the prefixed one back; nothing
    # else changes. Its siblings carry two types: by them alone, which is
    # its type is not known, so only the nova.conf repairs it.
    placement.set_traits(gpus[2].uuid, ['OWNER_NOVA'])
    before = state(placement)
    dry = audit('--host', name, '--trait-prefix', PREFIX, '--fix',
                'lost-trait', '--dry-run')
    assert trait_rows(dry) == [
        ('lost-trait', '0000:86:00.0', 'no automatic repair')]
    assert 'carry CUSTOM_GPU_NVIDIA_11, CUSTOM_GPU_NVIDIA_12' in dry.stdout
    dry = audit('--host', name, '--trait-prefix', PREFIX, '--fix',
                'lost-trait', '--dry-run', '--compute-conf', compute_conf)
    assert trait_rows(dry) == [
        ('lost-trait', '0000:86:00.0', 'would add CUSTOM_GPU_NVIDIA_11')]
    assert state(placement) == before
    fixed = audit('--host', name, '--trait-prefix', PREFIX, '--fix',
                  'lost-trait', '--compute-conf', compute_conf)
    assert trait_rows(fixed) == [
        ('lost-trait', '0000:86:00.0', 'added CUSTOM_GPU_NVIDIA_11')]
    after = state(placement)
    assert after[gpus[2].name][1] == ['CUSTOM_GPU_NVIDIA_11', 'OWNER_NOVA']
    assert {n for n in after if after[n] != before[n]} == {gpus[2].name}

    # A wrong type trait under the cloud's prefix is seen.
    placement.set_traits(gpus[0].uuid, ['CUSTOM_GPU_NVIDIA_11',
                                        'CUSTOM_GPU_NVIDIA_12', 'OWNER_NOVA'])
    assert trait_rows(audit('--host', name, '--compute-conf', compute_conf,
                            '--trait-prefix', PREFIX)) == [
        ('wrong-trait', '0000:84:00.0', None)]


def test_bad_trait_prefix_writes_nothing(cloud, placement, host):
    name = host[0]
    before = state(placement)
    cli.assert_one_line_error(
        cli.openstack('mdev', 'audit', '--host', name, '--fix', 'lost-trait',
                      '--trait-prefix', 'gpu_'),
        "'gpu_' is not a valid trait prefix")
    assert state(placement) == before
