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
hypervisor created. A flavor deleted meanwhile costs its own series
only: the rest is written and the command exits non-zero. With
``--allocations`` each server's series names the GPU the fake hypervisor
gave it (an mdev's parent device, a VF's PF) and the project and flavor
Nova has for it; PCI-in-Placement GPUs are in the default run.
"""

from prometheus_client import parser
import pytest
import requests

from tests.cloud import client
from tests.e2e.helpers import mdev
from tests.fixtures import cli
from tools import sandbox

L40S = 'CUSTOM_NVIDIA_L40S_VF'
TOPOLOGY = {
    'hosts': [
        {'name': 'met1', 'gpus': 2, 'bus': '0x84',
         'enabled_mdev_types': ['nvidia-12']},
        {'name': 'met2.rack1', 'gpus': 1, 'bus': '0x85',
         'enabled_mdev_types': ['nvidia-12']},
        {'name': 'metvf', 'gpus': 0, 'bus': '0xc1',
         'pci': {
             'pfs': [{'pfs': 1, 'vfs_per_pf': 2, 'product_id': '26b9',
                      'pf_product_id': '26b8'}],
             'device_spec': [{'vendor_id': '10de', 'product_id': '26b9',
                              'resource_class': L40S}]}},
    ],
    'pci_alias': [
        {'name': 'l40s-vf', 'vendor_id': '10de', 'product_id': '26b9',
         'device_type': 'type-VF', 'resource_class': L40S}],
}


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
            for s in found['openstack_mdev_device_used'].samples
            if s.labels['kind'] == 'mdev'}
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


def delete_flavor(cloud: client.EmbeddedCloud, name: str) -> None:
    """Delete a flavor through the Nova API, as another admin would."""
    found = requests.get('%s/flavors' % cloud.compute_url, timeout=30,
                         headers={'X-Auth-Token': 'admin'}).json()
    flavor_id, = [f['id'] for f in found['flavors'] if f['name'] == name]
    requests.delete('%s/flavors/%s' % (cloud.compute_url, flavor_id),
                    headers={'X-Auth-Token': 'admin'},
                    timeout=30).raise_for_status()


def test_a_deleted_flavor_costs_its_own_series_only(cloud, flavors,
                                                    tmp_path):
    small, _ = flavors
    # What a run without the bad flavors counts for the good one.
    alone = check(cloud, (small,))[small]
    cloud.control('create_flavor', name='met-deleted',
                  extra_specs={'resources:VGPU': '1'})
    delete_flavor(cloud, 'met-deleted')
    target = tmp_path / 'openstack_mdev.prom'
    target.write_text('openstack_mdev_flavor_fits{flavor="old"} 7\n')

    result = mdev('metrics', '--flavor', small, '--flavor', 'met-deleted',
                  '--flavor', 'met-never-created', '--output', str(target))

    # Non-zero for cron and systemd, one line per flavor and the summary.
    assert result.rc == 1, result.stderr
    assert 'Traceback' not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len([line for line in lines if 'met-deleted' in line]) == 2
    assert len([line for line in lines
                if 'met-never-created' in line]) == 2
    # The file was replaced: everything that could be read is there.
    found = {f.name: f for f in parser.text_string_to_metric_families(
        target.read_text())}
    assert {s.labels['flavor']: s.value
            for s in found['openstack_mdev_flavor_fits'].samples} == {
        small: alone}
    assert {s.labels['flavor']: s.value
            for s in found['openstack_mdev_flavor_up'].samples} == {
        small: 1, 'met-deleted': 0, 'met-never-created': 0}
    used = {(s.labels['host'], s.labels['device']): s.value
            for s in found['openstack_mdev_device_used'].samples
            if s.labels['kind'] == 'mdev'}
    assert {k: v for k, v in used.items() if v} == used_per_device(cloud)
    assert len(used) == 3
    assert [s.value for s in found[
        'openstack_mdev_scrape_success'].samples] == [0]
    assert [p.name for p in tmp_path.iterdir() if p.suffix == '.tmp'] == []


def test_a_pci_alias_flavor_is_counted_with_the_controllers_conf(
        cloud, controller):
    """Without the controller's [pci] alias the flavor cannot be counted
    (flavor_up 0, one warning naming --controller-conf, exit 1); with it
    the count is the number of servers Nova then boots before it answers
    NoValidHost.
    """
    flavor = cloud.control(
        'create_flavor', name='met-l40s-1',
        extra_specs={'pci_passthrough:alias': 'l40s-vf:1'})['name']

    alone = mdev('metrics', '--flavor', flavor)
    assert alone.rc == 1
    found = {f.name: f for f in parser.text_string_to_metric_families(
        alone.stdout)}
    assert [s.value for s in found['openstack_mdev_flavor_up'].samples] \
        == [0]
    warned = [line for line in alone.stderr.splitlines() if flavor in line]
    assert len(warned) == 2, alone.stderr
    assert 'pass its nova.conf with --controller-conf' in warned[0]

    result = mdev('metrics', '--flavor', flavor, '--controller-conf',
                  controller)
    assert result.rc == 0, result.stderr
    found = {f.name: f for f in parser.text_string_to_metric_families(
        result.stdout)}
    assert [s.value for s in found['openstack_mdev_flavor_up'].samples] \
        == [1]
    [fits] = [s.value for s in found['openstack_mdev_flavor_fits'].samples]
    used = len(cloud.control('pci_truth'))
    assert fits == 2 - used > 0
    booted = [cloud.control('boot', flavor=flavor, name='met-l40s-%d' % i)[0]
              for i in range(int(fits) + 1)]
    try:
        assert [s['status'] for s in booted] == \
            ['ACTIVE'] * int(fits) + ['ERROR']
        assert 'No valid host' in booted[-1]['fault']
        again = mdev('metrics', '--flavor', flavor, '--controller-conf',
                     controller)
        assert 'openstack_mdev_flavor_fits{flavor="met-l40s-1"} 0.0' in \
            again.stdout
    finally:
        for server in booted:
            cloud.control('delete', server=server['id'])


def test_the_controller_conf_needs_flavor_or_quota(cloud, controller):
    cli.assert_one_line_error(
        mdev('metrics', '--controller-conf', controller),
        '--controller-conf', '--flavor', '--quota')


def nova_servers(cloud: client.EmbeddedCloud) -> dict:
    """Every server as the Nova API has it: ``{id: server}``, each with
    its flavor (microversion 2.47).
    """
    body = requests.get(
        '%s/servers/detail?all_tenants=1' % cloud.compute_url, timeout=30,
        headers={'X-Auth-Token': 'admin',
                 'OpenStack-API-Version': 'compute 2.47'}).json()
    return {s['id']: s for s in body['servers']}


def gpus_of_servers(cloud: client.EmbeddedCloud) -> dict:
    """``{(server, node, GPU address, kind): units}`` from the fake
    hypervisor: each mdev on its parent device, each VF on its PF (the
    provider Nova reports a PF's VFs under).
    """
    truth = {}
    for found in cloud.control('mdev_truth'):
        key = (found['server'], found['node'], found['pci_address'],
               'mdev')
        truth[key] = truth.get(key, 0) + 1
    for found in cloud.control('pci_truth'):
        key = (found['server'], found['node'], found['parent_addr'], 'pci')
        truth[key] = truth.get(key, 0) + 1
    return truth


def test_allocations_join_each_server_to_its_gpu(cloud, flavors, tmp_path):
    small, _ = flavors
    cloud.control('create_flavor', name='met-l40s',
                  extra_specs={'pci_passthrough:alias': 'l40s-vf:2'})
    cloud.control('boot', flavor=small, name='met-join')
    vf_server, = cloud.control('boot', flavor='met-l40s', name='met-vf')
    assert vf_server['status'] == 'ACTIVE', vf_server['fault']
    conf = tmp_path / 'met1.conf'
    conf.write_text(sandbox.nova_conf(cloud.hosts['met1']))

    result = mdev('metrics', '--allocations', '--compute-conf',
                  'met1=%s' % conf)

    assert result.rc == 0, result.stderr
    found = {f.name: f for f in parser.text_string_to_metric_families(
        result.stdout)}
    samples = found['openstack_mdev_allocation_used'].samples
    assert {(s.labels['server'], s.labels['host'], s.labels['device'],
             s.labels['kind']): s.value
            for s in samples} == gpus_of_servers(cloud)
    servers = nova_servers(cloud)
    for sample in samples:
        server = servers[sample.labels['server']]
        assert sample.labels['server_name'] == server['name']
        assert sample.labels['project'] == server['tenant_id']
        assert sample.labels['flavor'] == server['flavor']['original_name']
        assert sample.labels['pci_bus_id'] == '0000%s' % (
            sample.labels['device'].upper())
    # The servers' units on a device are the device's used units.
    per_device = {}
    for sample in samples:
        key = (sample.labels['host'], sample.labels['device'])
        per_device[key] = per_device.get(key, 0) + sample.value
    assert per_device == {
        (s.labels['host'], s.labels['device']): s.value
        for s in found['openstack_mdev_device_used'].samples if s.value}
    # The type as met1's nova.conf names it; no file and no trait for
    # met2's device; the VFs' PF has no mdev type.
    types = {(s.labels['host'], s.labels['kind']): s.labels['type']
             for s in found['openstack_mdev_device_capacity'].samples}
    assert types == {('met1', 'mdev'): 'nvidia-12',
                     ('met2.rack1', 'mdev'): '', ('metvf', 'pci'): ''}
    assert {s.labels['resource_class'] for s in samples
            if s.labels['kind'] == 'pci'} == {L40S}
