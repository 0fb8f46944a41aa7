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

"""Flavors with named request groups (``resources_GPU:VGPU``), end to end.

Two hosts of nvidia-12 GPUs (8 mdevs each): ``ng1`` with two GPUs, and
``ng2`` (compute node ``ng2.example.org``) with one. Only the first GPU of
``ng1`` and the GPU of ``ng2`` carry CUSTOM_NVIDIA_12, so a named group
that requires it can use 16 of the 24 mdevs, and a request with
``group_policy=isolate`` fits only on ``ng1``.

Every command reads a flavor as Nova's ResourceRequest does. Each answer
is checked against what does not come from osc-mdev: the servers real
Nova boots one at a time before NoValidHost, the fake hypervisor's record
of the mdevs behind each server (``mdev_truth``), Placement's own
allocations and traits, and the Nova API's own extra spec validation.
"""

import json

import pytest
import requests

from tests.cloud import client
from tests.e2e.helpers import fits
from tests.e2e.helpers import flavor_specs
from tests.e2e.helpers import mdev
from tests.e2e.helpers import mdev_json
from tests.e2e.helpers import placement_request as placement
from tests.e2e.helpers import rewrite_allocations
from tests.fixtures import cli

TRAIT = 'CUSTOM_NVIDIA_12'
NODE1, NODE2 = 'ng1', 'ng2.example.org'
TOPOLOGY = {'hosts': [
    {'name': 'ng1', 'gpus': 2, 'bus': '0x87',
     'enabled_mdev_types': ['nvidia-12']},
    {'name': 'ng2', 'hypervisor_hostname': NODE2, 'gpus': 1, 'bus': '0x88',
     'enabled_mdev_types': ['nvidia-12']},
]}
#: The GPUs tagged with TRAIT, as (compute node, PCI address).
TAGGED = {(NODE1, '0000:87:00.0'), (NODE2, '0000:88:00.0')}
UNTAGGED = (NODE1, '0000:87:01.0')
NAMED = {'resources_GPU:VGPU': '1', 'trait_GPU:%s' % TRAIT: 'required'}
NO_VALID_HOST = 'No valid host was found'


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('named-groups'),
                              topology=TOPOLOGY) as cloud:
        yield cloud


def gpu_providers(cloud):
    """{provider UUID: (compute node, PCI address)} of every GPU, named as
    the cloud's plan names them, UUIDs from Placement.
    """
    names = {g['provider_name']: (h['hypervisor_hostname'],
                                  g['pci_address'])
             for h in cloud.control('hosts').values() for g in h['gpus']}
    return {rp['uuid']: names[rp['name']] for rp in placement(
        cloud, 'GET', '/resource_providers')['resource_providers']
        if rp['name'] in names}


def gpu_totals(cloud):
    """{(compute node, PCI address): VGPU total} from Placement."""
    return {gpu: placement(cloud, 'GET', '/resource_providers/%s/'
                           'inventories' % rp)['inventories']['VGPU']['total']
            for rp, gpu in gpu_providers(cloud).items()}


@pytest.fixture(scope='module')
def module_cli(cloud):
    """The CLI reaches the cloud in module-scoped fixtures too (the
    autouse ``os_cloud`` serves each test only).
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv('OS_CLIENT_CONFIG_FILE', str(cloud.clouds_yaml))
        patch.setenv('OS_CLOUD', cloud.cloud_name)
        yield


@pytest.fixture(scope='module')
def tagged(cloud, module_cli):
    """TRAIT on the TAGGED GPUs, by device name and by --host; checked in
    Placement.
    """
    address = sorted(a for n, a in TAGGED if n == NODE1)[0]
    for args in (['%s:%s' % (NODE1, address)], ['--host', NODE2]):
        result = mdev('trait', 'set', '--trait', TRAIT, *args)
        assert result.rc == 0, result.stderr
    carriers = {gpu for rp, gpu in gpu_providers(cloud).items()
                if TRAIT in placement(cloud, 'GET', '/resource_providers/%s/'
                                      'traits' % rp)['traits']}
    assert carriers == TAGGED
    return TAGGED


@pytest.fixture(scope='module')
def named_flavor(cloud, tagged):
    return cloud.control('create_flavor', name='ng-one',
                         extra_specs=NAMED)


def fill(cloud, flavor, limit=30):
    """Boot one server at a time until one is not ACTIVE, asking capacity
    before the first boot and after each that succeeded. The servers
    booted, the capacity answers and the server that failed (deleted).
    """
    record = {'servers': [], 'fits': [fits(flavor)], 'refused': None}
    while len(record['servers']) <= limit:
        server, = cloud.control('boot', flavor=flavor, name='%s-%d' % (
            flavor, len(record['servers'])))
        if server['status'] != 'ACTIVE':
            record['refused'] = server
            cloud.control('delete', server=server['id'])
            break
        record['servers'].append(server)
        record['fits'].append(fits(flavor))
    return record


def assert_nova_agrees(record):
    """Capacity said N and went down by one per boot; Nova booted N and
    then answered NoValidHost.
    """
    refused = record['refused']
    assert refused is not None, 'the cloud never filled up'
    assert NO_VALID_HOST in (refused['fault'] or ''), refused
    booted = len(record['servers'])
    assert booted > 0
    assert record['fits'] == list(range(booted, -1, -1)), record['fits']


def compute(cloud, method, path, version='latest', **kwargs):
    return requests.request(
        method, cloud.compute_url + path, timeout=60,
        headers={'X-Auth-Token': 'admin',
                 'OpenStack-API-Version': 'compute %s' % version}, **kwargs)


def clear(cloud):
    """Delete every server of the cloud."""
    rsp = compute(cloud, 'GET', '/servers?all_tenants=1')
    rsp.raise_for_status()
    for server in rsp.json()['servers']:
        cloud.control('delete', server=server['id'])


def mdevs_of(cloud, server_id):
    """{(compute node, PCI address): mdevs} the hypervisor gave a server."""
    found = {}
    for m in cloud.control('mdev_truth'):
        if m['server'] == server_id:
            gpu = (m['node'], m['pci_address'])
            found[gpu] = found.get(gpu, 0) + 1
    return found


def vgpus_in_placement(cloud, server_id):
    """{(compute node, PCI address): VGPU} the server holds in Placement,
    and the sum of VGPU over all its providers.
    """
    gpus = gpu_providers(cloud)
    allocations = placement(cloud, 'GET', '/allocations/%s'
                            % server_id)['allocations']
    held = {gpus.get(rp, rp): a['resources']['VGPU']
            for rp, a in allocations.items() if 'VGPU' in a['resources']}
    return held, sum(held.values())


def audit(*args):
    result = cli.openstack('mdev', 'audit', '-f', 'json', *args)
    assert 'Traceback' not in result.stderr, result.stderr
    return result.rc, json.loads(result.stdout)


@pytest.fixture(scope='module')
def named_servers(cloud, module_cli, named_flavor):
    """The cloud filled with servers of the named-group flavor."""
    clear(cloud)
    record = fill(cloud, named_flavor['name'])
    yield record
    clear(cloud)


def test_01_flavor_show_reads_the_named_group(cloud, named_flavor):
    flavor = named_flavor['name']
    shown = mdev_json('flavor', 'show', flavor)
    assert shown['Request'] == 'resources_GPU: 1 x VGPU with %s' % TRAIT
    assert shown['Extra Specs'] == flavor_specs(
        cloud, named_flavor['id']) == NAMED
    assert shown['Problem'] == ''
    # The trait of the named group counts: the tagged GPUs' mdevs, not
    # all of them (Nova's boots confirm it in test_02).
    totals = gpu_totals(cloud)
    assert shown['Servers That Fit'] == sum(totals[g] for g in TAGGED)
    assert shown['Servers That Fit'] < sum(totals.values())


def test_02_named_group_capacity_is_what_nova_boots(cloud, named_servers):
    assert_nova_agrees(named_servers)
    for server in named_servers['servers']:
        # Nova honoured the group's trait: each mdev on a tagged GPU.
        [(gpu, count)] = mdevs_of(cloud, server['id']).items()
        assert gpu in TAGGED and count == 1


def test_03_allocation_show_names_the_hypervisors_device(
        cloud, named_servers):
    for server in named_servers['servers']:
        rows = mdev_json('allocation', 'show', server['id'])
        assert {(r['Host'], r['Device']): r['Amount'] for r in rows} == (
            mdevs_of(cloud, server['id'])), server
        assert [r['Server'] for r in rows] == [server['id']]


def test_04_audit_is_silent_about_healthy_named_group_servers(
        cloud, named_servers, named_flavor):
    rc, rows = audit()
    ids = {s['id'] for s in named_servers['servers']}
    assert [r for r in rows if r['Server'] in ids] == []
    assert [r for r in rows if r['Check'] == 'missing-allocation'] == []
    # Full (Nova said NoValidHost), but not unschedulable: it booted.
    assert [r for r in rows if r['Check'] == 'unschedulable-flavor'
            and named_flavor['id'] in r['Message']] == []
    assert rc == 0, rows


def test_05_audit_flags_a_named_group_no_device_can_serve(cloud, tagged):
    placement(cloud, 'PUT', '/traits/CUSTOM_NOBODY_HAS')
    nobody = cloud.control('create_flavor', name='ng-nobody', extra_specs={
        'resources_GPU:VGPU': '1',
        'trait_GPU:CUSTOM_NOBODY_HAS': 'required'})
    _, rows = audit()
    found = [r for r in rows if r['Check'] == 'unschedulable-flavor'
             and nobody['id'] in r['Message']]
    assert len(found) == 1, rows
    assert 'required trait CUSTOM_NOBODY_HAS' in found[0]['Message']
    # Nova cannot boot it, though a GPU has room: the same group without
    # the trait boots.
    server, = cloud.control('boot', flavor=nobody['id'], name='ng-nobody')
    assert server['status'] == 'ERROR', server
    assert NO_VALID_HOST in (server['fault'] or ''), server
    cloud.control('delete', server=server['id'])
    room = cloud.control('create_flavor', name='ng-room', extra_specs={
        'resources_GPU:VGPU': '1'})
    server, = cloud.control('boot', flavor=room['id'], name='ng-room')
    try:
        assert server['status'] == 'ACTIVE', server
    finally:
        cloud.control('delete', server=server['id'])
    _, rows = audit()
    assert [r for r in rows if r['Check'] == 'unschedulable-flavor'
            and room['id'] in r['Message']] == []


def test_06_audit_finds_a_named_group_server_without_its_vgpu(
        cloud, named_servers):
    victim = named_servers['servers'][0]
    gpus = gpu_providers(cloud)
    rewrite_allocations(cloud, victim['id'], lambda allocations: {
        rp: a for rp, a in allocations.items() if rp not in gpus})
    # Placement: the root's allocation is kept, the VGPU is gone.
    allocations = placement(cloud, 'GET', '/allocations/%s'
                            % victim['id'])['allocations']
    [root] = allocations.values()
    assert 'VCPU' in root['resources'], allocations
    assert vgpus_in_placement(cloud, victim['id'])[1] == 0
    # The hypervisor still runs it with its mdev.
    [(node, _)] = mdevs_of(cloud, victim['id'])

    rc, rows = audit()
    missing = [r for r in rows if r['Check'] == 'missing-allocation']
    assert [(r['Server'], r['Host']) for r in missing] == [
        (victim['id'], node)], rows
    assert 'asks for 1 x VGPU but it holds none' in missing[0]['Message']
    assert rc == 1


NUMBERED = {'resources1:VGPU': '5', 'resources2:VGPU': '2',
            'group_policy': 'isolate'}
NAMED_ISOLATE = {'resources_A:VGPU': '3', 'trait_A:%s' % TRAIT: 'required',
                 'resources_B:VGPU': '2', 'group_policy': 'isolate'}


# Only ng1 has two GPUs. Numbered: 5 + 2 of 8 + 8 leaves 1 + 1 after two
# servers. Named: the 3 of group A only on the tagged GPU, two servers.
@pytest.mark.parametrize('name,specs,request_,per_server,servers', [
    ('ng-numbered', NUMBERED,
     'resources1: 5 x VGPU; resources2: 2 x VGPU; group_policy=isolate',
     [2, 5], 2),
    ('ng-named-isolate', NAMED_ISOLATE,
     'resources_A: 3 x VGPU with %s; resources_B: 2 x VGPU; '
     'group_policy=isolate' % TRAIT, [2, 3], 2),
])
def test_07_group_capacity_is_what_nova_boots(cloud, tagged, name, specs,
                                              request_, per_server,
                                              servers):
    clear(cloud)
    flavor = cloud.control('create_flavor', name=name,
                           extra_specs=specs)['name']
    shown = mdev_json('flavor', 'show', flavor)
    assert shown['Request'] == request_
    assert shown['Problem'] == ''
    record = fill(cloud, flavor)
    try:
        assert_nova_agrees(record)
        assert shown['Servers That Fit'] == len(record['servers'])
        assert len(record['servers']) == servers
        for server in record['servers']:
            # Isolated: the groups' mdevs on two GPUs of one host, as
            # many as each group asks.
            where = mdevs_of(cloud, server['id'])
            assert sorted(where.values()) == per_server, where
            assert len({node for node, _ in where}) == 1, where
            held, total = vgpus_in_placement(cloud, server['id'])
            assert held == where and total == sum(per_server)
            if 'trait_A:%s' % TRAIT in specs:
                # The group with the trait is on a tagged GPU.
                [gpu_a] = [g for g, n in where.items() if n == 3]
                assert gpu_a in TAGGED, where
    finally:
        clear(cloud)


def test_08_configure_replaces_the_named_group(cloud, tagged):
    clear(cloud)
    flavor = cloud.control('create_flavor', name='ng-configure',
                           extra_specs=NAMED)['id']
    rows = mdev_json('flavor', 'configure', flavor, '--resource-class',
                     'VGPU', '--amount', '1', '--require-trait', TRAIT)
    assert {r['Property']: r['Result'] for r in rows} == {
        'resources_GPU:VGPU': 'removed',
        'trait_GPU:%s' % TRAIT: 'removed',
        'resources:VGPU': 'added',
        'trait:%s' % TRAIT: 'added'}
    assert flavor_specs(cloud, flavor) == {'resources:VGPU': '1',
                                           'trait:%s' % TRAIT: 'required'}
    server, = cloud.control('boot', flavor=flavor, name='ng-configured')
    try:
        assert server['status'] == 'ACTIVE', server
        held, total = vgpus_in_placement(cloud, server['id'])
        assert total == 1
        where = mdevs_of(cloud, server['id'])
        assert sum(where.values()) == 1
        assert held == where and set(where) <= TAGGED
    finally:
        cloud.control('delete', server=server['id'])


def test_09_a_key_nova_refuses_is_refused_and_nothing_written(
        cloud, tagged):
    bad = {'resources:VGPU': '1', 'trait_GPU:%s' % TRAIT: 'yes'}
    flavor = cloud.control('create_flavor', name='ng-typo')['id']
    # The Nova API validates extra specs from microversion 2.86 ...
    rsp = compute(cloud, 'POST', '/flavors/%s/os-extra_specs' % flavor,
                  json={'extra_specs': bad})
    assert rsp.status_code == 400, rsp.text
    assert 'is not one of: required, forbidden' in rsp.text, rsp.text
    assert flavor_specs(cloud, flavor) == {}
    # ... an older client stores anything.
    rsp = compute(cloud, 'POST', '/flavors/%s/os-extra_specs' % flavor,
                  version='2.1', json={'extra_specs': bad})
    rsp.raise_for_status()
    assert flavor_specs(cloud, flavor) == bad

    result = mdev('flavor', 'configure', flavor, '--resource-class', 'VGPU',
                  '--require-trait', TRAIT)
    cli.assert_one_line_error(result, 'trait_GPU:%s' % TRAIT,
                              'is not one of: required, forbidden')
    assert flavor_specs(cloud, flavor) == bad
