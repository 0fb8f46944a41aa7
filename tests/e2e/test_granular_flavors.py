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

"""Flavors written with named and numbered request groups, end to end.

One host with two nvidia-12 GPUs (8 mdevs each). Every command reads a
flavor as Nova does; each answer is checked against what real Nova does
with the same flavor (the servers it boots before NoValidHost), against
the fake hypervisor's record of which GPU backs a server (``mdev_truth``)
and against Placement's own allocations.
"""

import requests

import pytest

from tests.cloud import client
from tests.e2e.helpers import flavor_specs
from tests.e2e.helpers import mdev
from tests.e2e.helpers import mdev_json
from tests.e2e.helpers import placement_request as placement
from tests.e2e.helpers import rewrite_allocations
from tests.fixtures import cli

HOST = 'granular1'
TOPOLOGY = {'hosts': [{'name': HOST, 'gpus': 2, 'bus': '0x86',
                       'enabled_mdev_types': ['nvidia-12']}]}
NO_VALID_HOST = 'No valid host was found'
NAMED = {'resources_GPU:VGPU': '4', 'trait_GPU:CUSTOM_NVIDIA_12': 'required'}
NUMBERED = {'resources1:VGPU': '4', 'resources2:VGPU': '4',
            'trait1:CUSTOM_NVIDIA_12': 'required',
            'group_policy': 'isolate'}


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('granular'),
                              topology=TOPOLOGY) as cloud:
        yield cloud


def fits(flavor):
    rows = mdev_json('capacity', '--flavor', flavor)
    if 'Host' not in rows[0]:
        assert rows[-2]['Constraint'] == 'Servers that fit: 0', rows
        return 0
    assert rows[-1]['Host'] == 'Total'
    return rows[-1]['Fits']


def boot_until_no_valid_host(cloud, flavor):
    """Boot one server at a time until Nova answers NoValidHost; check
    after each that capacity counted it. The servers booted.
    """
    left = fits(flavor)
    booted = []
    while True:
        server, = cloud.control('boot', flavor=flavor,
                                name='%s-%d' % (flavor, len(booted)))
        if server['status'] != 'ACTIVE':
            assert NO_VALID_HOST in (server['fault'] or ''), server
            cloud.control('delete', server=server['id'])
            break
        booted.append(server)
        assert fits(flavor) == left - len(booted)
        assert len(booted) <= 16, 'the cloud never filled up'
    assert len(booted) == left
    return booted


def delete(cloud, servers):
    for server in servers:
        cloud.control('delete', server=server['id'])


def gpus_of(cloud, server_id):
    """The GPUs whose mdevs back the server, and how many of each."""
    found = {}
    for m in cloud.control('mdev_truth'):
        if m['server'] == server_id:
            gpu = (m['host'], m['pci_address'])
            found[gpu] = found.get(gpu, 0) + 1
    return found


def vgpus_held(cloud, server_id):
    body = placement(cloud, 'GET', '/allocations/%s' % server_id)
    return sum(a['resources'].get('VGPU', 0)
               for a in body['allocations'].values())


def findings(*args):
    result = cli.openstack('mdev', 'audit', '-f', 'json', *args)
    assert 'Traceback' not in result.stderr, result.stderr
    import json
    return json.loads(result.stdout)


def test_01_flavor_show_names_the_group_and_counts_as_capacity(cloud):
    result = mdev('trait', 'set', '--trait', 'CUSTOM_NVIDIA_12', '--host',
                  HOST)
    assert result.rc == 0, result.stderr
    cloud.control('create_flavor', name='gr-named', extra_specs=NAMED)
    shown = mdev_json('flavor', 'show', 'gr-named')
    assert shown['Request'] == 'resources_GPU: 4 x VGPU with CUSTOM_NVIDIA_12'
    assert shown['Extra Specs'] == NAMED
    assert shown['Problem'] == ''
    assert shown['Servers That Fit'] == fits('gr-named') == 4


def test_02_named_group_capacity_is_what_nova_boots(cloud):
    servers = boot_until_no_valid_host(cloud, 'gr-named')
    try:
        for server in servers:
            # allocation show names the GPU the hypervisor gave it.
            rows = mdev_json('allocation', 'show', server['id'])
            assert {(r['Host'], r['Device']): r['Amount']
                    for r in rows} == gpus_of(cloud, server['id'])
            assert vgpus_held(cloud, server['id']) == 4
        # Healthy servers of the named-group flavor are no finding.
        found = findings('--host', HOST)
        assert [f for f in found if f['Check'] == 'missing-allocation'] == []

        # One whose VGPU allocation is gone is.
        victim = servers[0]['id']
        rewrite_allocations(cloud, victim, lambda allocations: {
            rp: a for rp, a in allocations.items()
            if 'VGPU' not in a['resources']})
        missing = [f for f in findings('--host', HOST)
                   if f['Check'] == 'missing-allocation']
        assert [f['Server'] for f in missing] == [victim]
        assert 'asks for 4 x VGPU but it holds none' in missing[0]['Message']
    finally:
        delete(cloud, servers)


def test_03_numbered_group_capacity_is_what_nova_boots(cloud):
    cloud.control('create_flavor', name='gr-numbered', extra_specs=NUMBERED)
    shown = mdev_json('flavor', 'show', 'gr-numbered')
    assert shown['Request'] == (
        'resources1: 4 x VGPU with CUSTOM_NVIDIA_12; resources2: 4 x VGPU; '
        'group_policy=isolate')
    servers = boot_until_no_valid_host(cloud, 'gr-numbered')
    try:
        assert len(servers) == 2
        for server in servers:
            # One mdev on each GPU, as isolate asks.
            assert gpus_of(cloud, server['id']) == {
                (HOST, '0000:86:00.0'): 4, (HOST, '0000:86:01.0'): 4}
            assert vgpus_held(cloud, server['id']) == 8
    finally:
        delete(cloud, servers)


def test_04_audit_flags_a_named_group_no_device_can_serve(cloud):
    placement(cloud, 'PUT', '/traits/CUSTOM_NOBODY_HAS')
    cloud.control('create_flavor', name='gr-nobody', extra_specs={
        'resources_GPU:VGPU': '1',
        'trait_GPU:CUSTOM_NOBODY_HAS': 'required'})
    unschedulable = [f for f in findings()
                     if f['Check'] == 'unschedulable-flavor']
    assert [f for f in unschedulable if 'gr-nobody' in f['Message']], \
        unschedulable
    assert not [f for f in unschedulable if 'gr-named' in f['Message']]
    # Nova agrees: it cannot boot it.
    server, = cloud.control('boot', flavor='gr-nobody', name='gr-nobody')
    assert NO_VALID_HOST in (server['fault'] or ''), server
    cloud.control('delete', server=server['id'])


def test_05_configure_replaces_the_named_group(cloud):
    flavor = cloud.control('create_flavor', name='gr-reconfigure',
                           extra_specs=NAMED)['id']
    rows = mdev_json('flavor', 'configure', flavor, '--resource-class',
                     'VGPU', '--amount', '1', '--trait', 'CUSTOM_NVIDIA_12')
    assert {r['Property']: r['Result'] for r in rows} == {
        'resources:VGPU': 'added', 'trait:CUSTOM_NVIDIA_12': 'added',
        'resources_GPU:VGPU': 'removed',
        'trait_GPU:CUSTOM_NVIDIA_12': 'removed'}
    assert flavor_specs(cloud, flavor) == {
        'resources:VGPU': '1', 'trait:CUSTOM_NVIDIA_12': 'required'}
    server, = cloud.control('boot', flavor=flavor, name='gr-reconfigured')
    try:
        assert server['status'] == 'ACTIVE', server
        assert vgpus_held(cloud, server['id']) == 1
        assert list(gpus_of(cloud, server['id']).values()) == [1]
    finally:
        delete(cloud, [server])


def test_06_a_key_nova_refuses_is_refused_and_nothing_written(cloud):
    flavor = cloud.control('create_flavor', name='gr-typo')['id']
    # Nova validates extra specs from microversion 2.86: an older client
    # could store this one.
    rsp = requests.post(
        '%s/flavors/%s/os-extra_specs' % (cloud.compute_url, flavor),
        json={'extra_specs': {'resources:VGPU': '1',
                              'trait_GPU:CUSTOM_NVIDIA_12': 'yes'}},
        headers={'X-Auth-Token': 'admin',
                 'OpenStack-API-Version': 'compute 2.1'}, timeout=30)
    rsp.raise_for_status()
    before = flavor_specs(cloud, flavor)
    result = mdev('flavor', 'configure', flavor, '--resource-class', 'VGPU',
                  '--trait', 'CUSTOM_NVIDIA_12')
    cli.assert_one_line_error(result, "'trait_GPU:CUSTOM_NVIDIA_12'",
                              "'yes' is not one of: required, forbidden")
    assert flavor_specs(cloud, flavor) == before
    shown = mdev_json('flavor', 'show', flavor)
    assert 'trait_GPU:CUSTOM_NVIDIA_12' in shown['Problem']
