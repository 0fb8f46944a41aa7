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

"""``mdev flavor configure`` against real Nova and Placement.

One compute host with two nvidia GPUs (type nvidia-11, class VGPU). Each
test builds its own flavors and tags, boots with the flavor it configured
and checks where the fake hypervisor put the server's mdev
(``mdev_truth``). Write faults come from a proxy in front of the real Nova
API (tests.fixtures.faults).
"""

import itertools
import json

import pytest
import yaml

from tests.cloud import client
from tests.e2e.helpers import flavor_specs as specs_of
from tests.e2e.helpers import mdev
from tests.e2e.helpers import mdev_json
from tests.e2e.helpers import placement_request as placement
from tests.fixtures import cli
from tests.fixtures import faults

HOST = 'flavorhost'
TOPOLOGY = {'hosts': [{'name': HOST, 'gpus': 2, 'bus': '0x85',
                       'enabled_mdev_types': ['nvidia-11']}]}
GPU0 = '%s:0000:85:00.0' % HOST
GPU1 = '%s:0000:85:01.0' % HOST


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('flavor-cloud'),
                              topology=TOPOLOGY) as cloud:
        yield cloud


@pytest.fixture(autouse=True)
def untagged(cloud):
    """Every test starts and ends with no custom trait on the GPUs."""
    _untag(cloud)
    yield
    _untag(cloud)


def _untag(cloud):
    for row in mdev_json('provider', 'list'):
        custom = [t for t in row['Traits'] if t.startswith('CUSTOM_')]
        if custom:
            args = [a for t in custom for a in ('--trait', t)]
            result = mdev('trait', 'unset', *args, row['UUID'])
            assert result.rc == 0, result.stderr


def boot_one(cloud, flavor, name):
    [server] = cloud.control('boot', flavor=flavor, name=name)
    assert server['status'] == 'ACTIVE', server.get('fault')
    return server


def boot_fails(cloud, flavor, name):
    [server] = cloud.control('boot', flavor=flavor, name=name)
    assert server['status'] == 'ERROR'
    assert 'No valid host' in str(server.get('fault')), server
    cloud.control('delete', server=server['id'])


def gpus_of(cloud, server_id):
    """The GPUs (HOST:ADDRESS) the fake hypervisor gave the server."""
    return sorted('%s:%s' % (m['host'], m['pci_address'])
                  for m in cloud.control('mdev_truth')
                  if m['server'] == server_id)


def tag(trait, *devices):
    result = mdev('trait', 'set', '--trait', trait, *devices)
    assert result.rc == 0, result.stderr


def results(rows):
    return {r['Property']: r['Result'] for r in rows}


def test_retag_then_reconfigure_leaves_a_bootable_flavor(cloud):
    flavor = cloud.control('create_flavor', name='ff-retag')['id']
    tag('CUSTOM_OLD', GPU0)
    rows = mdev_json('flavor', 'configure', flavor, '--resource-class',
                     'VGPU', '--require-trait', 'CUSTOM_OLD')
    assert results(rows) == {'resources:VGPU': 'added',
                             'trait:CUSTOM_OLD': 'added'}
    server = boot_one(cloud, flavor, 'ff-old')
    assert gpus_of(cloud, server['id']) == [GPU0]

    # The operator moves the tag to the other GPU.
    result = mdev('trait', 'unset', '--trait', 'CUSTOM_OLD', '--all')
    assert result.rc == 0, result.stderr
    tag('CUSTOM_NEW', GPU1)
    shown = mdev_json('flavor', 'show', flavor)
    assert shown['Extra Specs'] == {'resources:VGPU': '1',
                                    'trait:CUSTOM_OLD': 'required'}
    assert 'resources requires trait CUSTOM_OLD, which no resource ' \
        'provider has' in shown['Problem']
    rows = mdev_json('flavor', 'configure', flavor, '--resource-class',
                     'VGPU', '--require-trait', 'CUSTOM_NEW')
    assert results(rows) == {'resources:VGPU': 'unchanged',
                             'trait:CUSTOM_NEW': 'added',
                             'trait:CUSTOM_OLD': 'removed'}
    [old] = [r for r in rows if r['Property'] == 'trait:CUSTOM_OLD']
    assert 'no resource provider has CUSTOM_OLD' in old['Note']
    assert specs_of(cloud, flavor) == {'resources:VGPU': '1',
                                       'trait:CUSTOM_NEW': 'required'}
    for name in ('ff-new-1', 'ff-new-2'):
        server = boot_one(cloud, flavor, name)
        assert gpus_of(cloud, server['id']) == [GPU1]


def test_required_trait_nobody_has_is_refused_forbidden_is_kept(cloud):
    tag('CUSTOM_KEEP', GPU0)
    # A standard trait no provider has is not an mdev key: the resulting
    # flavor could not be scheduled, so nothing is written.
    flavor = cloud.control('create_flavor', name='ff-avx', extra_specs={
        'trait:HW_CPU_X86_AVX512VNNI': 'required'})['id']
    result = mdev('flavor', 'configure', flavor, '--resource-class',
                  'VGPU', '--require-trait', 'CUSTOM_KEEP')
    cli.assert_one_line_error(
        result, 'HW_CPU_X86_AVX512VNNI', 'no resource provider has')
    assert specs_of(cloud, flavor) == {
        'trait:HW_CPU_X86_AVX512VNNI': 'required'}

    # A forbidden trait that exists but no one has never stops
    # scheduling: it stays. One that does not exist makes Placement
    # refuse the request: it goes.
    placement(cloud, 'PUT', '/traits/CUSTOM_GUARD')
    flavor = cloud.control('create_flavor', name='ff-forbid', extra_specs={
        'trait:CUSTOM_GUARD': 'forbidden',
        'trait:CUSTOM_NEVER_MADE': 'forbidden'})['id']
    boot_fails(cloud, flavor, 'ff-forbid-before')
    rows = mdev_json('flavor', 'configure', flavor, '--resource-class',
                     'VGPU', '--require-trait', 'CUSTOM_KEEP')
    assert results(rows) == {'resources:VGPU': 'added',
                             'trait:CUSTOM_KEEP': 'added',
                             'trait:CUSTOM_NEVER_MADE': 'removed'}
    [gone] = [r for r in rows if r['Result'] == 'removed']
    assert 'CUSTOM_NEVER_MADE no longer exists' in gone['Note']
    assert specs_of(cloud, flavor) == {
        'trait:CUSTOM_GUARD': 'forbidden', 'resources:VGPU': '1',
        'trait:CUSTOM_KEEP': 'required'}
    server = boot_one(cloud, flavor, 'ff-forbid')
    assert gpus_of(cloud, server['id']) == [GPU0]


def test_trait_of_the_compute_node_is_kept_and_checked(cloud):
    [root] = [p for p in placement(cloud, 'GET', '/resource_providers')[
        'resource_providers'] if p['name'] == HOST]
    traits = placement(cloud, 'GET', '/resource_providers/%s/traits'
                       % root['uuid'])['traits']
    node_trait, other_node_trait = sorted(
        t for t in traits if t.startswith('COMPUTE_'))[:2]
    tag('CUSTOM_NODE_TEST', GPU1)
    flavor = cloud.control('create_flavor', name='ff-node', extra_specs={
        'trait:%s' % node_trait: 'required'})['id']
    rows = mdev_json('flavor', 'configure', flavor, '--resource-class',
                     'VGPU', '--require-trait', 'CUSTOM_NODE_TEST')
    assert results(rows) == {'resources:VGPU': 'added',
                             'trait:CUSTOM_NODE_TEST': 'added'}
    assert specs_of(cloud, flavor)['trait:%s' % node_trait] == 'required'
    server = boot_one(cloud, flavor, 'ff-node')
    assert gpus_of(cloud, server['id']) == [GPU1]
    # Forbidding what the node has leaves no host: refused, unwritten.
    before = specs_of(cloud, flavor)
    result = mdev('flavor', 'configure', flavor, '--resource-class', 'VGPU',
                  '--require-trait', 'CUSTOM_NODE_TEST', '--forbid-trait',
                  other_node_trait)
    cli.assert_one_line_error(result, other_node_trait)
    assert specs_of(cloud, flavor) == before


def _proxied_clouds_yaml(cloud, tmp_path, proxy):
    config = yaml.safe_load(open(cloud.clouds_yaml))
    entry = config['clouds'][cloud.cloud_name]
    path = cloud.compute_url.split('/', 3)[3]
    entry['compute_endpoint_override'] = '%s/%s' % (proxy.url, path)
    target = tmp_path / 'clouds.yaml'
    target.write_text(yaml.safe_dump(config))
    return target


def _retagged_flavor(cloud, name):
    """A flavor configured for CUSTOM_OLD, then GPU0 re-tagged NEW."""
    flavor = cloud.control('create_flavor', name=name)['id']
    tag('CUSTOM_OLD', GPU0)
    mdev_json('flavor', 'configure', flavor, '--resource-class', 'VGPU',
              '--require-trait', 'CUSTOM_OLD')
    result = mdev('trait', 'unset', '--trait', 'CUSTOM_OLD', '--all')
    assert result.rc == 0, result.stderr
    tag('CUSTOM_NEW', GPU0)
    return flavor


def _compute_origin(cloud):
    return '/'.join(cloud.compute_url.split('/', 3)[:3])


def test_delete_fails_midway_then_converges(cloud, tmp_path, monkeypatch):
    flavor = _retagged_flavor(cloud, 'ff-fault-delete')

    # Every attempt fails, however many times the client retries.
    def fail_deletes(req):
        if req.method == 'DELETE' and '/os-extra_specs/' in req.path:
            return faults.status(500)
        return None
    with faults.FaultProxy(_compute_origin(cloud), fail_deletes) as proxy:
        monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(
            _proxied_clouds_yaml(cloud, tmp_path, proxy)))
        result = mdev('flavor', 'configure', flavor, '--resource-class',
                      'VGPU', '--require-trait', 'CUSTOM_NEW', '-f', 'json')
    assert proxy.actions()
    assert result.rc == 1
    rows = json.loads(result.stdout)
    assert results(rows) == {'resources:VGPU': 'unchanged',
                             'trait:CUSTOM_NEW': 'added',
                             'trait:CUSTOM_OLD': 'failed'}
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and 'Traceback' not in result.stderr
    assert 'HTTP 500' in lines[0] and 'removing trait:CUSTOM_OLD' in lines[0]
    assert 'failed: trait:CUSTOM_OLD' in lines[0]
    assert 'written: trait:CUSTOM_NEW' in lines[0] and 'again' in lines[0]
    assert 'http://' not in lines[0]
    assert specs_of(cloud, flavor) == {
        'resources:VGPU': '1', 'trait:CUSTOM_OLD': 'required',
        'trait:CUSTOM_NEW': 'required'}

    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(cloud.clouds_yaml))
    rows = mdev_json('flavor', 'configure', flavor, '--resource-class',
                     'VGPU', '--require-trait', 'CUSTOM_NEW')
    assert results(rows) == {'resources:VGPU': 'unchanged',
                             'trait:CUSTOM_NEW': 'unchanged',
                             'trait:CUSTOM_OLD': 'removed'}
    assert specs_of(cloud, flavor) == {'resources:VGPU': '1',
                                       'trait:CUSTOM_NEW': 'required'}
    server = boot_one(cloud, flavor, 'ff-fault-delete')
    assert gpus_of(cloud, server['id']) == [GPU0]


@pytest.mark.parametrize('action,outcome,written,reason', [
    # The POST never reaches Nova: nothing is set, nothing removed.
    (faults.DROP_BEFORE, 'failed', False, 'no answer from Nova to setting'),
    # Nova writes, then the answer is lost: the re-read shows the keys.
    (faults.after(faults.status(500)), 'added', True, 'HTTP 500'),
])
def test_set_fails_then_converges(cloud, tmp_path, monkeypatch, action,
                                  outcome, written, reason):
    flavor = _retagged_flavor(cloud, 'ff-fault-set-%s' % written)

    def fail_sets(req):
        if req.method == 'POST' and '/os-extra_specs' in req.path:
            return action
        return None
    with faults.FaultProxy(_compute_origin(cloud), fail_sets) as proxy:
        monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(
            _proxied_clouds_yaml(cloud, tmp_path, proxy)))
        result = mdev('flavor', 'configure', flavor, '--resource-class',
                      'VGPU', '--require-trait', 'CUSTOM_NEW', '-f', 'json')
    assert proxy.actions()
    assert result.rc == 1
    rows = json.loads(result.stdout)
    assert results(rows) == {'resources:VGPU': 'unchanged',
                             'trait:CUSTOM_NEW': outcome,
                             'trait:CUSTOM_OLD': 'not written'}
    [line] = result.stderr.strip().splitlines()
    assert reason in line and 'setting trait:CUSTOM_NEW' in line
    assert 'not written: trait:CUSTOM_OLD' in line
    assert 'http://' not in line
    expected = {'resources:VGPU': '1', 'trait:CUSTOM_OLD': 'required'}
    if written:
        expected['trait:CUSTOM_NEW'] = 'required'
    assert specs_of(cloud, flavor) == expected

    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(cloud.clouds_yaml))
    mdev_json('flavor', 'configure', flavor, '--resource-class', 'VGPU',
              '--require-trait', 'CUSTOM_NEW')
    assert specs_of(cloud, flavor) == {'resources:VGPU': '1',
                                       'trait:CUSTOM_NEW': 'required'}


def test_spread_over_other_numbered_groups_needs_isolate_other_groups(
        cloud):
    tag('CUSTOM_SPREAD', GPU0, GPU1)
    # Another request's numbered group: one more VCPU from the node.
    flavor = cloud.control('create_flavor', name='ff-spread', extra_specs={
        'resources1:VCPU': '1'})['id']
    args = ['flavor', 'configure', flavor, '--resource-class', 'VGPU',
            '--amount', '2', '--spread', '--require-trait', 'CUSTOM_SPREAD']
    line = cli.assert_one_line_error(mdev(*args), 'group_policy=isolate',
                                     'resources1', '--isolate-other-groups')
    assert 'also' in line
    assert specs_of(cloud, flavor) == {'resources1:VCPU': '1'}

    line = cli.assert_one_line_error(
        mdev(*args[:-5], '--isolate-other-groups'),
        '--isolate-other-groups', '--spread')
    rows = mdev_json(*args, '--isolate-other-groups')
    assert results(rows) == {
        'group_policy': 'added',
        'resources2:VGPU': 'added', 'trait2:CUSTOM_SPREAD': 'added',
        'resources3:VGPU': 'added', 'trait3:CUSTOM_SPREAD': 'added'}
    assert specs_of(cloud, flavor) == {
        'resources1:VCPU': '1', 'group_policy': 'isolate',
        'resources2:VGPU': '1', 'trait2:CUSTOM_SPREAD': 'required',
        'resources3:VGPU': '1', 'trait3:CUSTOM_SPREAD': 'required'}
    server = boot_one(cloud, flavor, 'ff-spread')
    assert gpus_of(cloud, server['id']) == [GPU0, GPU1]


def _placement_agrees(cloud, specs):
    """Whether real Placement has candidates for a flavor with ``specs``.

    The request Nova builds: the flavor's VCPU, MEMORY_MB and DISK_GB in
    the unnumbered group, each group's resources and traits, and the
    group_policy.
    """
    groups = {'': {'resources': {'VCPU': 1, 'MEMORY_MB': 512,
                                 'DISK_GB': 1}, 'required': []}}
    for key, value in specs.items():
        kind, _, name = key.partition(':')
        if kind.startswith('resources'):
            group = groups.setdefault(kind[len('resources'):], {
                'resources': {}, 'required': []})
            group['resources'][name] = int(value)
        elif kind.startswith('trait'):
            group = groups.setdefault(kind[len('trait'):], {
                'resources': {}, 'required': []})
            group['required'].append(
                name if value == 'required' else '!' + name)
    params = []
    for suffix, group in sorted(groups.items()):
        params.append(('resources' + suffix, ','.join(
            '%s:%d' % rc for rc in sorted(group['resources'].items()))))
        if group['required']:
            params.append(('required' + suffix,
                           ','.join(sorted(group['required']))))
    if 'group_policy' in specs:
        params.append(('group_policy', specs['group_policy']))
    answer = placement(cloud, 'GET', '/allocation_candidates',
                       params=params + [('limit', '1')])
    return bool(answer['allocation_requests'])


AGREE = itertools.count()


@pytest.mark.parametrize('before,args,after', [
    ({}, ['--require-trait', 'CUSTOM_XA'],
     {'resources:VGPU': '1', 'trait:CUSTOM_XA': 'required'}),
    ({'trait:NODE_1': 'required'}, ['--require-trait', 'CUSTOM_XA'],
     {'resources:VGPU': '1', 'trait:CUSTOM_XA': 'required',
      'trait:NODE_1': 'required'}),
    ({'trait:NODE_2': 'forbidden'}, ['--require-trait', 'CUSTOM_XA'],
     {'resources:VGPU': '1', 'trait:CUSTOM_XA': 'required',
      'trait:NODE_2': 'forbidden'}),
    ({'trait:CUSTOM_XGUARD': 'forbidden'}, ['--require-trait', 'CUSTOM_XB'],
     {'resources:VGPU': '1', 'trait:CUSTOM_XB': 'required',
      'trait:CUSTOM_XGUARD': 'forbidden'}),
    ({'resources1:VCPU': '1', 'trait1:NODE_1': 'required'},
     ['--amount', '2', '--spread', '--isolate-other-groups'],
     {'resources1:VCPU': '1', 'trait1:NODE_1': 'required',
      'group_policy': 'isolate', 'resources2:VGPU': '1',
      'resources3:VGPU': '1'}),
    ({'resources1:VCPU': '1', 'trait1:CUSTOM_XA': 'required'},
     ['--require-trait', 'CUSTOM_XA'],
     {'resources1:VCPU': '1', 'trait1:CUSTOM_XA': 'required',
      'resources:VGPU': '1', 'trait:CUSTOM_XA': 'required'}),
    ({}, ['--amount', '3', '--spread'],
     {'group_policy': 'isolate', 'resources1:VGPU': '1',
      'resources2:VGPU': '1', 'resources3:VGPU': '1'}),
])
def test_check_agrees_with_placement(cloud, before, args, after):
    """The verdict on the resulting extra specs is Placement's own."""
    tag('CUSTOM_XA', GPU0)
    tag('CUSTOM_XB', GPU1)
    placement(cloud, 'PUT', '/traits/CUSTOM_XGUARD')
    [root] = [p for p in placement(cloud, 'GET', '/resource_providers')[
        'resource_providers'] if p['name'] == HOST]
    node = sorted(t for t in placement(
        cloud, 'GET', '/resource_providers/%s/traits' % root['uuid'])[
            'traits'] if t.startswith('COMPUTE_'))

    def real(specs):
        return {k.replace('NODE_1', node[0]).replace('NODE_2', node[1]): v
                for k, v in specs.items()}

    before, after = real(before), real(after)
    flavor = cloud.control('create_flavor', name='ff-agree-%d' % next(
        AGREE), extra_specs=before)['id']
    result = mdev('flavor', 'configure', flavor, '--resource-class', 'VGPU',
                  '--dry-run', '-f', 'json', *args)
    if result.rc == 0:
        rows = json.loads(result.stdout)
        planned = {k: v for k, v in before.items()}
        for row in rows:
            planned.pop(row['Property'], None)
            if row['After'] is not None:
                planned[row['Property']] = row['After']
        assert planned == after
    assert (result.rc == 0) == _placement_agrees(cloud, after), (
        result.stderr)
    assert specs_of(cloud, flavor) == before
