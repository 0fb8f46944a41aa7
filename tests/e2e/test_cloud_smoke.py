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

"""Smoke tests of the embedded test cloud (``tests.cloud``).

One cloud on the demo topology serves the whole module: real Nova services
with fake-libvirt GPU hosts and a real Placement, in a child process. The
tests check that what Nova writes into Placement matches the configured
topology and the fake hypervisors' own record of which GPU each server's
mdev (or PCI virtual function) sits on, and that the real ``openstack``
CLI works against it.
"""

import collections

import pytest
import requests

from tests.cloud import client
from tests.e2e.helpers import placement_request
from tests.fixtures import cli


PLACEMENT_HEADERS = {'X-Auth-Token': 'admin',
                     'OpenStack-API-Version': 'placement 1.14'}
CLASSES = ('VGPU', 'CUSTOM_MLX5')


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('cloud')) as cloud:
        yield cloud
    assert cloud.returncode == 0


@pytest.fixture(scope='module')
def flavors(cloud):
    """One flavor per mdev resource class of the demo topology."""
    return {
        rc: cloud.control(
            'create_flavor', name='e2e-%s' % rc.lower(),
            extra_specs={'resources:%s' % rc: '1'})['id']
        for rc in CLASSES}


def placement_get(cloud, path):
    rsp = requests.get(cloud.placement_url + path,
                       headers=PLACEMENT_HEADERS, timeout=30)
    rsp.raise_for_status()
    return rsp.json()


def boot(cloud, flavor, **kwargs):
    server, = cloud.control('boot', flavor=flavor, **kwargs)
    assert server['status'] == 'ACTIVE', server['fault']
    return server


def mdev_of(cloud, server):
    """The fake hypervisor's record of the server's one mdev."""
    mdevs = [m for m in cloud.control('mdev_truth')
             if m['server'] == server['id']]
    assert len(mdevs) == 1, mdevs
    return mdevs[0]


def openstack(cloud, *args):
    return cli.openstack_process(
        '--os-cloud', cloud.cloud_name, *args, '-f', 'json',
        env=cloud.cli_environ()).json()


def test_placement_has_one_provider_per_configured_gpu(cloud):
    providers = {p['name']: p for p in placement_get(
        cloud, '/resource_providers')['resource_providers']}
    planned = {gpu['provider_name']: gpu
               for host in cloud.hosts.values() for gpu in host['gpus']
               if gpu['resource_class']}
    expected = {name: gpu['resource_class'] for name, gpu in planned.items()}
    # The demo topology mixes a vGPU class and a generic one, and has a
    # host whose name holds '_' and '.'.
    assert set(expected.values()) == set(CLASSES)
    assert any('_' in h and '.' in h for h in cloud.hosts)

    # The PCI host's providers are children of its root too.
    pci = {p['provider_name'] for info in cloud.hosts.values()
           for p in info['pci']['providers']}
    assert pci

    children = {}
    for info in cloud.hosts.values():
        root = providers[info['hypervisor_hostname']]
        assert root['parent_provider_uuid'] is None
        children.update({name: p for name, p in providers.items()
                         if p['parent_provider_uuid'] == root['uuid']})
    assert sorted(children) == sorted(set(expected) | pci)
    for name, resource_class in expected.items():
        inventories = placement_get(
            cloud, '/resource_providers/%s/inventories'
            % children[name]['uuid'])['inventories']
        assert list(inventories) == [resource_class], name
        assert inventories[resource_class]['total'] > 0, name
        assert inventories[resource_class]['total'] == planned[name]['total']


@pytest.mark.parametrize('resource_class', CLASSES)
def test_allocation_names_the_gpu_the_hypervisor_used(
        cloud, flavors, resource_class):
    server = boot(cloud, flavors[resource_class])
    mdev = mdev_of(cloud, server)
    assert mdev['host'] == server['host']
    gpus = {g['parent_device']: g for g in cloud.hosts[server['host']]['gpus']}
    assert mdev['parent_device'] in gpus
    gpu = gpus[mdev['parent_device']]
    assert gpu['resource_class'] == resource_class
    assert mdev['mdev_type'] == gpu['mdev_type']
    assert mdev['pci_address'] == gpu['pci_address']

    allocations = placement_get(
        cloud, '/allocations/%s' % server['id'])['allocations']
    holders = {uuid: a['resources'] for uuid, a in allocations.items()
               if resource_class in a['resources']}
    assert len(holders) == 1, allocations
    (provider_uuid, resources), = holders.items()
    assert resources[resource_class] == 1
    provider = placement_get(cloud, '/resource_providers/%s' % provider_uuid)
    assert provider['name'] == '%s_%s' % (mdev['node'],
                                          mdev['parent_device'])


def test_cli_shows_the_server_and_the_usage(cloud, flavors):
    before = {row['UUID']: row
              for row in openstack(cloud, 'mdev', 'provider', 'list')}
    server = boot(cloud, flavors['VGPU'])
    mdev = mdev_of(cloud, server)

    shown = openstack(cloud, 'server', 'show', server['id'])
    assert shown['id'] == server['id']
    assert shown['status'] == 'ACTIVE'
    assert shown['OS-EXT-SRV-ATTR:host'] == server['host']
    listed = openstack(cloud, 'server', 'list')
    assert server['id'] in [s['ID'] for s in listed]

    after = {row['UUID']: row
             for row in openstack(cloud, 'mdev', 'provider', 'list')}
    assert sorted(after) == sorted(before)
    moved = {uuid: row for uuid, row in after.items()
             if row['Used'] != before[uuid]['Used']}
    assert len(moved) == 1, moved
    (uuid, row), = moved.items()
    assert (row['Host'], row['Device']) == (mdev['node'],
                                            mdev['pci_address'])
    assert row['Used'] == before[uuid]['Used'] + 1


def test_delete_frees_the_device(cloud, flavors):
    server = boot(cloud, flavors['VGPU'])
    mdev = mdev_of(cloud, server)
    provider, = placement_get(
        cloud, '/resource_providers?name=%s_%s' % (
            mdev['node'], mdev['parent_device']))['resource_providers']
    usages = '/resource_providers/%s/usages' % provider['uuid']
    used = placement_get(cloud, usages)['usages']['VGPU']

    cloud.control('delete', server=server['id'])
    assert server['id'] not in [m['server']
                                for m in cloud.control('mdev_truth')]
    assert placement_get(
        cloud, '/allocations/%s' % server['id'])['allocations'] == {}
    assert placement_get(cloud, usages)['usages']['VGPU'] == used - 1


def test_resize_moves_the_mdev_to_the_new_host(cloud, flavors):
    server = boot(cloud, flavors['VGPU'], host='compute1')
    bigger = cloud.control('create_flavor', name='e2e-vgpu-bigger', ram=1024,
                           extra_specs={'resources:VGPU': '1'})
    moved = cloud.control('resize', server=server['id'], flavor=bigger['id'])
    assert moved['status'] == 'ACTIVE'
    assert moved['source_host'] == 'compute1'
    assert moved['host'] != 'compute1'

    mdev = mdev_of(cloud, server)
    assert mdev['host'] == moved['host']
    allocations = placement_get(
        cloud, '/allocations/%s' % server['id'])['allocations']
    names = [placement_get(cloud, '/resource_providers/%s' % uuid)['name']
             for uuid, a in allocations.items() if 'VGPU' in a['resources']]
    assert names == ['%s_%s' % (mdev['node'], mdev['parent_device'])]


def test_a_node_named_unlike_its_service_host(cloud, flavors):
    # The demo topology has a compute whose service host (gpu4) is not
    # its node (gpu4.dc2.example.net), as Nova reports it.
    [(host, info)] = [(h, i) for h, i in cloud.hosts.items()
                      if i['hypervisor_hostname'] != h]
    assert info['service_host'] == host
    node = info['hypervisor_hostname']
    roots = [p['name'] for p in placement_get(
        cloud, '/resource_providers')['resource_providers']
        if p['parent_provider_uuid'] is None]
    assert node in roots and host not in roots
    server = boot(cloud, flavors['VGPU'], host=host)
    assert server['host'] == host
    shown = openstack(cloud, 'server', 'show', server['id'])
    assert shown['OS-EXT-SRV-ATTR:host'] == host
    assert shown['OS-EXT-SRV-ATTR:hypervisor_hostname'] == node
    mdev = mdev_of(cloud, server)
    assert (mdev['host'], mdev['node']) == (host, node)
    assert mdev['parent_device'] in {
        g['parent_device'] for g in info['gpus']}


def test_control_api_errors_are_reported(cloud):
    with pytest.raises(client.CloudError, match="unknown op 'no_such_op'"):
        cloud.control('no_such_op')
    with pytest.raises(client.CloudError, match='no flavor'):
        cloud.control('boot', flavor='no-such-flavor')


# GPUs reported through PCI in Placement (host sriov1 of the demo).

def pci_host(cloud):
    """The demo's one host with PCI-in-Placement devices, and its plan."""
    [(host, info)] = [(h, i) for h, i in sorted(cloud.hosts.items())
                      if i['pci']['providers']]
    return host, info


def pci_of(cloud, server):
    """The fake hypervisor's record of the server's PCI devices."""
    return [d for d in cloud.control('pci_truth')
            if d['server'] == server['id']]


def test_pci_devices_are_providers_in_placement(cloud):
    host, info = pci_host(cloud)
    node = info['hypervisor_hostname']
    root, = placement_request(
        cloud, 'GET', '/resource_providers?name=%s' % node)[
        'resource_providers']
    tree = {p['name']: p for p in placement_request(
        cloud, 'GET', '/resource_providers?in_tree=%s' % root['uuid'])[
        'resource_providers']}
    planned = {p['provider_name']: p for p in info['pci']['providers']}
    # One provider per PF, named after its upper-case address, under the
    # compute node; both forms of class: set in device_spec, and default.
    assert sorted(tree) == sorted([node] + list(planned))
    assert {p['resource_class'] for p in planned.values()} == {
        'CUSTOM_NVIDIA_L40S_VF', 'CUSTOM_PCI_10DE_2330'}
    for name, plan in planned.items():
        assert name == '%s_%s' % (node, plan['pci_address'].upper())
        provider = tree[name]
        assert provider['parent_provider_uuid'] == root['uuid']
        inventories = placement_request(
            cloud, 'GET', '/resource_providers/%s/inventories'
            % provider['uuid'])['inventories']
        assert list(inventories) == [plan['resource_class']]
        inventory = inventories[plan['resource_class']]
        assert inventory['total'] == plan['total'] == len(plan['vfs'])
        assert inventory['max_unit'] == plan['total']
        traits = placement_request(
            cloud, 'GET', '/resource_providers/%s/traits'
            % provider['uuid'])['traits']
        assert sorted(traits) == plan['traits']
        assert {'COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA'} <= set(traits)
    # The PFs themselves match no device_spec: they are no providers.
    devices = info['pci']['devices']
    assert {d['dev_type'] for d in devices} == {'type-PF', 'type-VF'}
    assert all(d['provider_name'] is None
               for d in devices if d['dev_type'] == 'type-PF')


def test_servers_get_vfs_of_the_pf_placement_allocated(cloud):
    host, info = pci_host(cloud)
    planned = {p['provider_name']: p for p in info['pci']['providers']}
    resource_class = 'CUSTOM_NVIDIA_L40S_VF'
    providers = {name: placement_request(
        cloud, 'GET', '/resource_providers?name=%s' % name)[
        'resource_providers'][0]['uuid']
        for name, p in planned.items()
        if p['resource_class'] == resource_class}
    names = {uuid: name for name, uuid in providers.items()}

    def used():
        return sum(placement_request(
            cloud, 'GET', '/resource_providers/%s/usages' % uuid)[
            'usages'].get(resource_class, 0) for uuid in providers.values())

    before = used()
    one = cloud.control('create_flavor', name='e2e-l40s-vf-1',
                        extra_specs={'pci_passthrough:alias': 'l40s-vf:1'})
    two = cloud.control('create_flavor', name='e2e-l40s-vf-2',
                        extra_specs={'pci_passthrough:alias': 'l40s-vf:2'})
    servers = [(boot(cloud, one['id']), 1), (boot(cloud, one['id']), 1),
               (boot(cloud, two['id']), 2)]
    seen = set()
    for server, count in servers:
        assert server['host'] == host
        devices = pci_of(cloud, server)
        assert len(devices) == count, devices
        allocations = placement_request(
            cloud, 'GET', '/allocations/%s' % server['id'])['allocations']
        # Nova asks Placement for each VF of an alias in a group of its
        # own, so the VFs of ':2' may come from two PFs: each PF provider
        # holds as many units as the server has VFs of that PF.
        holders = {planned[names[uuid]]['pci_address']: a['resources'][
            resource_class] for uuid, a in allocations.items()
            if resource_class in a['resources']}
        assert sum(holders.values()) == count
        assert collections.Counter(
            d['parent_addr'] for d in devices) == holders
        for device in devices:
            assert (device['host'], device['node']) == (
                host, info['hypervisor_hostname'])
            assert device['instance_uuid'] == server['id']
            assert device['status'] == 'allocated'
            assert device['dev_type'] == 'type-VF'
            plan, = [p for p in planned.values()
                     if p['pci_address'] == device['parent_addr']]
            assert device['pci_address'] in plan['vfs']
            assert (device['vendor_id'], device['product_id']) == (
                '10de', '26b9')
            assert device['pci_address'] not in seen
            seen.add(device['pci_address'])
    assert used() == before + 4

    for server, _ in servers:
        cloud.control('delete', server=server['id'])
        assert pci_of(cloud, server) == []
        assert placement_request(
            cloud, 'GET', '/allocations/%s' % server['id'])[
            'allocations'] == {}
    assert used() == before


def test_a_default_class_alias_boots_on_its_own_pf(cloud):
    host, info = pci_host(cloud)
    [plan] = [p for p in info['pci']['providers']
              if p['resource_class'] == 'CUSTOM_PCI_10DE_2330']
    flavor = cloud.control('create_flavor', name='e2e-h100-vf',
                           extra_specs={'pci_passthrough:alias': 'h100-vf:1'})
    server = boot(cloud, flavor['id'])
    device, = pci_of(cloud, server)
    assert device['parent_addr'] == plan['pci_address']
    assert device['product_id'] == '2330'
    cloud.control('delete', server=server['id'])
    assert pci_of(cloud, server) == []
