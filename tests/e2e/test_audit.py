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

"""``openstack mdev audit`` against a cloud that real Nova built.

Each inconsistency is made with Nova's and Placement's own APIs, the
audit must name the right objects, ``--fix`` must repair only what it
may, and afterwards the fake hypervisors (``mdev_truth``) and Placement
must agree, with every other provider and allocation untouched.
"""

import uuid

import pytest
import requests

from tests.cloud import client
from tests.e2e import helpers
from tests.e2e.helpers import mdev_table
from tests.e2e.helpers import placement_request as placement
from tests.e2e.helpers import rewrite_allocations
from tests.fixtures import cli

ORPHAN = str(uuid.UUID('0c1e4b1c-5bd5-4a4e-8a55-2f4f3c0e0a0d'))


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('cloud')) as cloud:
        yield cloud


def audit(*args):
    return cli.openstack('mdev', 'audit', '-f', 'json', *args)


def rows_of(result):
    import json
    assert 'Traceback' not in result.stderr, result.stderr
    return json.loads(result.stdout)


def nova(cloud, method, path, version='latest', **kwargs):
    rsp = requests.request(
        method, cloud.compute_url + path, timeout=30,
        headers={'X-Auth-Token': 'admin',
                 'OpenStack-API-Version': 'compute %s' % version}, **kwargs)
    rsp.raise_for_status()
    return rsp.json() if rsp.content else None


def providers(cloud):
    return {p['name']: p for p in placement(
        cloud, 'GET', '/resource_providers')['resource_providers']}


def provider(cloud, host, address):
    return providers(cloud)['%s_pci_%s' % (host, address.replace(
        ':', '_').replace('.', '_'))]


def set_traits(cloud, rp_uuid, change):
    current = placement(cloud, 'GET', '/resource_providers/%s/traits'
                        % rp_uuid)
    for trait in change(set(current['traits'])):
        if trait.startswith('CUSTOM_'):
            placement(cloud, 'PUT', '/traits/%s' % trait)
    placement(cloud, 'PUT', '/resource_providers/%s/traits' % rp_uuid,
              json={'resource_provider_generation':
                    current['resource_provider_generation'],
                    'traits': sorted(change(set(current['traits'])))})


def truth(cloud):
    found = {}
    for mdev in cloud.control('mdev_truth'):
        found.setdefault(mdev['server'], []).append(
            (mdev['host'], mdev['pci_address']))
    return found


def state(cloud):
    """Every provider (generation, inventories, traits) and every
    consumer's allocations, from Placement.
    """
    snapshot, consumers = {}, {}
    for name, rp in providers(cloud).items():
        base = '/resource_providers/%s' % rp['uuid']
        snapshot[name] = (
            rp['generation'],
            placement(cloud, 'GET', base + '/inventories')['inventories'],
            sorted(placement(cloud, 'GET', base + '/traits')['traits']))
        for consumer, alloc in placement(
                cloud, 'GET', base + '/allocations')['allocations'].items():
            consumers.setdefault(consumer, {})[name] = alloc['resources']
    return snapshot, consumers


def boot(cloud, flavor, **kwargs):
    servers = cloud.control('boot', flavor=flavor, **kwargs)
    for server in servers:
        assert server['status'] == 'ACTIVE', server['fault']
    return servers


@pytest.fixture(scope='module')
def broken(cloud):
    """The cloud with one of each inconsistency; what was broken where."""
    flavor = cloud.control('create_flavor', name='audit-vgpu',
                           extra_specs={'resources:VGPU': '1'})['id']
    keep, missing = boot(cloud, flavor, host='compute1', count=2,
                         name='audit-c1')
    [over] = boot(cloud, flavor, host='compute2', name='audit-c2')
    [moved] = boot(cloud, flavor, host='compute1', name='audit-moved')
    where = truth(cloud)

    # Type traits, as an operator sets them: both compute1 GPUs are
    # nvidia-11; then one loses it (as when Nova re-creates a provider).
    c1 = [provider(cloud, 'compute1', a) for a in ('0000:81:00.0',
                                                   '0000:81:01.0')]
    for rp in c1:
        set_traits(cloud, rp['uuid'], lambda t: t | {'CUSTOM_NVIDIA_11'})
    lost = c1[1]
    set_traits(cloud, lost['uuid'], lambda t: t - {'CUSTOM_NVIDIA_11'})
    # A device with the traits of two types.
    double = provider(cloud, 'gpu_node.rack3', '0000:3b:01.0')
    set_traits(cloud, double['uuid'],
               lambda t: t | {'CUSTOM_NVIDIA_12', 'CUSTOM_MLX5_CORE'})

    # An allocation for a consumer that is no server.
    other_c2 = next(a for a in ('0000:84:00.0', '0000:84:01.0')
                    if ('compute2', a) not in where[over['id']])
    orphan_rp = provider(cloud, 'compute2', other_c2)
    placement(cloud, 'PUT', '/allocations/%s' % ORPHAN, json={
        'allocations': {orphan_rp['uuid']: {'resources': {'VGPU': 1}}},
        'project_id': 'gone', 'user_id': 'gone',
        'consumer_generation': None, 'consumer_type': 'INSTANCE'})

    # A server whose mdev allocation is removed (VCPU etc. stay).
    mdev_rps = {rp['uuid'] for rp in providers(cloud).values()
                if rp['parent_provider_uuid']}
    rewrite_allocations(cloud, missing['id'], lambda allocs: {
        rp: a for rp, a in allocs.items() if rp not in mdev_rps})

    # A server whose mdev allocation sits on another node's GPU.
    far = provider(cloud, 'gpu_node.rack3', '0000:3b:01.0')
    rewrite_allocations(cloud, moved['id'], lambda allocs: dict(
        {rp: a for rp, a in allocs.items() if rp not in mdev_rps},
        **{far['uuid']: {'resources': {'VGPU': 1}}}))

    # Usage above a lowered total (Nova's next periodic resets it).
    [(_, over_address)] = where[over['id']]
    over_rp = provider(cloud, 'compute2', over_address)
    inv = placement(cloud, 'GET', '/resource_providers/%s/inventories'
                    % over_rp['uuid'])
    placement(cloud, 'PUT', '/resource_providers/%s/inventories/VGPU'
              % over_rp['uuid'], json={
                  'resource_provider_generation':
                      inv['resource_provider_generation'],
                  'total': 1, 'reserved': 1, 'max_unit': 1})

    # A flavor re-tagged to a trait no GPU carries any more.
    placement(cloud, 'PUT', '/traits/CUSTOM_AUDIT_GOLD')
    gone = cloud.control('create_flavor', name='audit-gold', extra_specs={
        'resources:VGPU': '1', 'trait:CUSTOM_AUDIT_GOLD': 'required'})['id']
    return {'keep': keep, 'missing': missing, 'over': over, 'moved': moved,
            'lost': lost, 'double': double, 'orphan_rp': orphan_rp,
            'orphan_address': other_c2, 'over_rp': over_rp,
            'over_address': over_address, 'gold': gone, 'far': far,
            'where': where}


def plural(n, word):
    return '%d %s%s' % (n, word, '' if n == 1 else 's')


def by_check(rows):
    found = {}
    for row in rows:
        found.setdefault(row['Check'], []).append(row)
    return found


def test_01_audit_names_every_inconsistency(cloud, broken):
    result = audit('--long')
    assert result.rc == 1, result.stderr
    found = by_check(rows_of(result))

    [orphan] = found['orphaned-allocation']
    assert (orphan['Severity'], orphan['Host'], orphan['Device'],
            orphan['Server']) == ('error', 'compute2',
                                  broken['orphan_address'], ORPHAN)
    assert orphan['Provider UUID'] == broken['orphan_rp']['uuid']
    assert 'openstack mdev audit --fix orphaned-allocation' in (
        orphan['Message'])

    [missing] = found['missing-allocation']
    assert missing['Server'] == broken['missing']['id']
    assert missing['Host'] == 'compute1'
    assert 'asks for 1 x VGPU but it holds none' in missing['Message']

    [node] = found['node-mismatch']
    assert (node['Server'], node['Host'], node['Device']) == (
        broken['moved']['id'], 'gpu_node.rack3', '0000:3b:01.0')
    assert 'runs on node compute1' in node['Message']

    [over] = found['over-capacity']
    assert (over['Host'], over['Device'], over['Server']) == (
        'compute2', broken['over_address'], broken['over']['id'])

    [lost] = found['lost-trait']
    assert (lost['Severity'], lost['Host'], lost['Device']) == (
        'warning', 'compute1', '0000:81:01.0')
    assert ('openstack mdev trait set --trait CUSTOM_NVIDIA_11 '
            'compute1:0000:81:01.0') in lost['Message']

    [wrong] = found['wrong-trait']
    assert (wrong['Host'], wrong['Device']) == ('gpu_node.rack3',
                                                '0000:3b:01.0')
    assert 'CUSTOM_MLX5_CORE, CUSTOM_NVIDIA_12' in wrong['Message']

    # The reason is the capacity explainer's, as 'mdev capacity --flavor
    # F --explain' gives it: the constraint that leaves no host, what it
    # rules out, and the smallest change.
    [flavor] = found['unschedulable-flavor']
    assert broken['gold'] in flavor['Message']
    explained = mdev_table('capacity', '--flavor', broken['gold'],
                           '--explain')
    last = next(r for r in explained if r['Hosts Left'] == '0')
    assert last['Constraint'] == 'required trait CUSTOM_AUDIT_GOLD'
    [fix] = [r['Constraint'] for r in explained
             if r['Constraint'].startswith('Smallest change: ')]
    assert fix.startswith('Smallest change: tag ')
    assert ('cannot be scheduled: required trait CUSTOM_AUDIT_GOLD rules '
            'out %s and %s, leaving none; smallest change: %s; see it '
            'with: openstack mdev capacity --flavor %s --explain' % (
                plural(int(last['Devices Ruled Out']), 'device'),
                plural(int(last['Hosts Ruled Out']), 'host'),
                fix[len('Smallest change: '):], broken['gold'])) in (
                    flavor['Message'])

    # The healthy servers and GPUs give no finding.
    named = {r['Server'] for r in rows_of(result)}
    assert broken['keep']['id'] not in named
    assert set(found) == {
        'orphaned-allocation', 'missing-allocation', 'node-mismatch',
        'over-capacity', 'lost-trait', 'wrong-trait',
        'unschedulable-flavor'}


def test_02_host_filter_and_nova_conf(cloud, broken, tmp_path):
    rows = rows_of(audit('--host', 'compute1'))
    found = sorted((r['Check'], r['Host'], r['Device'], r['Server'])
                   for r in rows)
    # The server on compute1 whose vGPU is on another host's GPU is
    # followed there (one GET /allocations), not called missing.
    assert found == sorted([
        ('missing-allocation', 'compute1', '', broken['missing']['id']),
        ('node-mismatch', 'gpu_node.rack3', '0000:3b:01.0',
         broken['moved']['id']),
        ('lost-trait', 'compute1', '0000:81:01.0', '')])
    conf = tmp_path / 'rack3.conf'
    conf.write_text('[devices]\nenabled_mdev_types = mlx5_core, nvidia-12\n'
                    '[mdev_mlx5_core]\ndevice_addresses = 0000:3b:00.0\n'
                    'mdev_class = CUSTOM_MLX5\n'
                    '[mdev_nvidia-12]\ndevice_addresses = 0000:3b:01.0\n')
    rows = rows_of(audit('--host', 'gpu_node.rack3', '--compute-conf',
                         'gpu_node.rack3=%s' % conf))
    traits = sorted((r['Check'], r['Device'], r['Message'].split(';')[0])
                    for r in rows if r['Check'].endswith('-trait'))
    assert traits == [
        ('lost-trait', '0000:3b:00.0', 'Device gpu_node.rack3:0000:3b:00.0 '
         'lacks CUSTOM_MLX5_CORE, the trait of its type in nova.conf'),
        ('wrong-trait', '0000:3b:01.0', 'Device gpu_node.rack3:0000:3b:01.0 '
         'carries CUSTOM_MLX5_CORE, the trait of another type in nova.conf '
         '(its type has CUSTOM_NVIDIA_12)')]


def test_03_bad_options_write_nothing(cloud, broken):
    before = state(cloud)
    for args, fragment in (
            (['--fix', 'over-capacity'], 'has no automatic fix'),
            (['--fix', 'no-such-check'], "'no-such-check' is not a check"),
            (['--dry-run'], 'give --fix too'),
            (['--host', 'nowhere', '--fix', 'lost-trait'],
             "No compute host named 'nowhere'"),
            (['--compute-conf', 'compute1'], 'takes HOST=FILE'),
            (['--compute-conf', 'compute1=/no/such/file', '--fix',
              'lost-trait'], 'Cannot read /no/such/file')):
        cli.assert_one_line_error(
            cli.openstack('mdev', 'audit', *args), fragment)
    assert state(cloud) == before


def test_04_dry_run_changes_nothing(cloud, broken):
    before = state(cloud)
    result = audit('--fix', 'orphaned-allocation,lost-trait', '--dry-run')
    assert result.rc == 1
    found = by_check(rows_of(result))
    assert found['orphaned-allocation'][0]['Repair'].startswith(
        'would remove its allocations')
    assert found['lost-trait'][0]['Repair'] == 'would add CUSTOM_NVIDIA_11'
    assert found['over-capacity'][0]['Repair'] == ''
    assert state(cloud) == before


def test_05_fix_repairs_only_what_it_may(cloud, broken):
    providers_before, consumers_before = state(cloud)
    truth_before = truth(cloud)
    result = audit('--fix', 'orphaned-allocation,lost-trait')
    # Errors that --fix does not repair remain: exit status 1.
    assert result.rc == 1, result.stderr
    found = by_check(rows_of(result))
    assert found['orphaned-allocation'][0]['Repair'].startswith(
        'removed its allocations')
    assert found['lost-trait'][0]['Repair'] == 'added CUSTOM_NVIDIA_11'
    assert 'failed' not in result.stderr

    providers_after, consumers_after = state(cloud)
    # The orphan is gone, every other consumer is as it was.
    assert ORPHAN in consumers_before and ORPHAN not in consumers_after
    del consumers_before[ORPHAN]
    assert consumers_after == consumers_before
    # The lost trait is back, OWNER_NOVA kept; the orphan's GPU moved on
    # (its allocation went); nothing else changed.
    lost_name = broken['lost']['name']
    assert providers_after[lost_name][2] == [
        'CUSTOM_NVIDIA_11', 'OWNER_NOVA']
    changed = {n for n in providers_after
               if providers_after[n] != providers_before[n]}
    assert changed == {lost_name, broken['orphan_rp']['name']}
    assert (providers_after[broken['orphan_rp']['name']][1:] ==
            providers_before[broken['orphan_rp']['name']][1:])
    # The hypervisors still run every guest where they did.
    assert truth(cloud) == truth_before

    # Running it again converges: nothing left to repair.
    again = by_check(rows_of(audit('--fix', 'orphaned-allocation,'
                                   'lost-trait')))
    assert 'orphaned-allocation' not in again
    assert 'lost-trait' not in again
    assert state(cloud) == (providers_after, consumers_after)


def test_06_consistent_with_the_hypervisors(cloud, broken):
    """Servers not broken on purpose hold their mdev where libvirt has
    it.
    """
    where = truth(cloud)
    mdev_rps = {rp['uuid']: rp for rp in providers(cloud).values()
                if rp['parent_provider_uuid']}
    for name in ('keep', 'over'):
        server = broken[name]
        allocs = placement(cloud, 'GET', '/allocations/%s'
                           % server['id'])['allocations']
        [(host, address)] = where[server['id']]
        [rp] = [mdev_rps[u] for u in allocs if u in mdev_rps]
        assert rp['name'] == provider(cloud, host, address)['name']


def test_07_ended_migration_consumer_is_orphaned(cloud, broken):
    flavor = cloud.control('create_flavor', name='audit-mover',
                           extra_specs={'resources:VGPU': '1'})['id']
    [server] = boot(cloud, flavor, host='compute1', name='audit-mover')
    try:
        _ended_migration_is_orphaned(cloud, broken, server)
    finally:
        # The scheduler may have moved it to any host: gone, it leaves
        # every GPU it could have taken as it was.
        cloud.control('delete', server=server['id'])


def _ended_migration_is_orphaned(cloud, broken, server):
    cloud.control('migrate', server=server['id'])
    [migration] = [m for m in nova(cloud, 'GET', '/os-migrations')[
        'migrations'] if m['instance_uuid'] == server['id']]
    assert migration['status'] == 'confirmed'
    # The GPU the orphan had: it has room (the other compute2 GPU's
    # capacity was lowered to 0).
    rp = broken['orphan_rp']
    placement(cloud, 'PUT', '/allocations/%s' % migration['uuid'], json={
        'allocations': {rp['uuid']: {'resources': {'VGPU': 1}}},
        'project_id': 'p', 'user_id': 'u', 'consumer_generation': None,
        'consumer_type': 'MIGRATION'})
    rows = [r for r in rows_of(audit()) if r['Server'] == migration['uuid']]
    assert [(r['Check'], r['Host'], r['Device']) for r in rows] == [
        ('orphaned-allocation', 'compute2', broken['orphan_address'])]
    assert 'which ended (confirmed)' in rows[0]['Message']
    assert server['id'] in rows[0]['Message']
    audit('--fix', 'orphaned-allocation')
    assert placement(cloud, 'GET', '/allocations/%s'
                     % migration['uuid'])['allocations'] == {}


def test_08_recreated_provider_loses_its_trait(cloud):
    """Nova deletes a device's provider when the host's config leaves it
    no inventory, and re-creates it with a new UUID and none of the
    operator's traits when the config gives it back: the audit finds the
    lost trait and puts it back, touching nothing else.
    """
    node, address = 'gpu4.dc2.example.net', '0000:25:01.0'
    # A provider in use cannot be deleted: no server may be on gpu4.
    for gpu in ('0000:25:00.0', address):
        assert placement(cloud, 'GET', '/resource_providers/%s/allocations'
                         % provider(cloud, node, gpu)['uuid'])[
            'allocations'] == {}, 'a server is on %s:%s' % (node, gpu)
    # Both GPUs of gpu4 nvidia-11 (VGPU), tagged as an operator does.
    cloud.control('reconfigure', host='gpu4',
                  enabled_mdev_types=['nvidia-11'])
    result = helpers.mdev('trait', 'set', '--host', node, '--trait',
                          'CUSTOM_NVIDIA_11')
    assert result.rc == 0, result.stderr
    old = provider(cloud, node, address)
    assert 'CUSTOM_NVIDIA_11' in placement(
        cloud, 'GET', '/resource_providers/%s/traits' % old['uuid'])[
            'traits']

    # max_instances leaves the second GPU no room: Nova deletes its
    # provider. Back to the old config: Nova creates a new one.
    plan = cloud.control('reconfigure', host='gpu4',
                         enabled_mdev_types=['nvidia-11'],
                         mdev={'nvidia-11': {'max_instances': 16}})
    assert [g['total'] for g in plan['gpus']] == [16, 0]
    assert '%s_pci_0000_25_01_0' % node not in providers(cloud)
    cloud.control('reconfigure', host='gpu4',
                  enabled_mdev_types=['nvidia-11'])
    new = provider(cloud, node, address)
    assert new['uuid'] != old['uuid']
    assert placement(cloud, 'GET', '/resource_providers/%s/traits'
                     % new['uuid'])['traits'] == ['OWNER_NOVA']

    result = audit('--long')
    found = by_check(rows_of(result))['lost-trait']
    [lost] = [r for r in found if r['Host'] == node]
    assert (lost['Severity'], lost['Device'], lost['Provider UUID']) == (
        'warning', address, new['uuid'])
    assert ('openstack mdev trait set --trait CUSTOM_NVIDIA_11 %s:%s'
            % (node, address)) in lost['Message']
    # Run alone, the module's other lost trait (compute1) is still there
    # for --fix to repair too.
    repaired = {n for n, rp in providers(cloud).items()
                if rp['uuid'] in {r['Provider UUID'] for r in found}}
    name = '%s_pci_0000_25_01_0' % node

    before = state(cloud)
    dry = by_check(rows_of(audit('--fix', 'lost-trait', '--dry-run')))
    assert [r['Repair'] for r in dry['lost-trait'] if r['Host'] == node] == [
        'would add CUSTOM_NVIDIA_11']
    assert state(cloud) == before

    fixed = by_check(rows_of(audit('--fix', 'lost-trait')))
    assert [(r['Device'], r['Repair']) for r in fixed['lost-trait']
            if r['Host'] == node] == [(address, 'added CUSTOM_NVIDIA_11')]
    after = state(cloud)
    assert after[0][name][2] == ['CUSTOM_NVIDIA_11', 'OWNER_NOVA']
    # Every other provider (generation, inventories, traits) and every
    # allocation as it was.
    assert {n: v for n, v in after[0].items() if n not in repaired} == {
        n: v for n, v in before[0].items() if n not in repaired}
    assert after[1] == before[1]

    # Again: nothing to repair, nothing written.
    again = by_check(rows_of(audit('--fix', 'lost-trait')))
    assert 'lost-trait' not in again
    assert state(cloud) == after
