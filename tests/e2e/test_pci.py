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

"""The commands on GPUs Nova reports through PCI in Placement.

Real Nova boots servers with ``pci_passthrough:alias`` flavors onto the
SR-IOV virtual functions of the demo cloud's host ``sriov1`` (two PFs of
four ``10de:26b9`` VFs, class ``CUSTOM_NVIDIA_L40S_VF`` from the device
spec, alias ``l40s-vf``; one PF of two ``10de:2330`` VFs, Nova's default
class ``CUSTOM_PCI_10DE_2330``, alias ``h100-vf``). Every answer is
checked against the READY plan and the fake hypervisor's own record of
which VF each server got (``pci_truth``: the VF and its parent PF).
"""

import collections
import json
import uuid

import pytest

from tests.e2e.helpers import flavor_specs
from tests.e2e.helpers import mdev
from tests.e2e.helpers import mdev_json
from tests.e2e.helpers import mdev_table
from tests.e2e.helpers import placement_request
from tests.fixtures import cli

HOST = 'sriov1'
L40S = 'CUSTOM_NVIDIA_L40S_VF'
H100 = 'CUSTOM_PCI_10DE_2330'
ALIAS = 'pci_passthrough:alias'


@pytest.fixture(scope='module')
def plan(cloud):
    """sriov1's PF providers as planned, by PF address."""
    info = cloud.hosts[HOST]
    assert info['hypervisor_hostname'] == HOST
    return {p['pci_address']: p for p in info['pci']['providers']}


@pytest.fixture(scope='module')
def flavors(cloud):
    return {name: cloud.control(
        'create_flavor', name='e2e-pci-%s' % name.replace(':', '-'),
        extra_specs={ALIAS: name})['id']
        for name in ('l40s-vf:1', 'l40s-vf:2', 'l40s-vf:5', 'h100-vf:1')}


@pytest.fixture
def boot(cloud):
    """Boot one server (checking its status); every server booted is
    deleted at the end of the test, and its VFs are free again.
    """
    booted = []

    def _boot(flavor, status='ACTIVE'):
        server, = cloud.control('boot', flavor=flavor)
        booted.append(server['id'])
        assert server['status'] == status, server['fault']
        return server

    assert _truth(cloud) == [], 'VFs of an earlier test are still in use'
    yield _boot
    for server_id in booted:
        cloud.control('delete', server=server_id)
    assert _truth(cloud) == []


def _truth(cloud, server=None):
    """The fake hypervisor's record of the VFs guests use on sriov1."""
    devices = [d for d in cloud.control('pci_truth') if d['host'] == HOST]
    if server is None:
        return devices
    return [d for d in devices if d['server'] == server['id']]


def _pfs_of(cloud, server):
    """How many VFs of each PF the server got: {PF address: count}."""
    devices = _truth(cloud, server)
    for device in devices:
        assert (device['node'], device['dev_type'], device['status'],
                device['instance_uuid']) == (
            HOST, 'type-VF', 'allocated', server['id'])
    return collections.Counter(d['parent_addr'] for d in devices)


def _used(cloud):
    """VFs in use per PF, by the fake hypervisor's record."""
    return collections.Counter(d['parent_addr'] for d in _truth(cloud))


def _generations(cloud):
    return {p['uuid']: p['generation'] for p in placement_request(
        cloud, 'GET', '/resource_providers')['resource_providers']}


def _traits(cloud, rp_uuid):
    return sorted(placement_request(
        cloud, 'GET', '/resource_providers/%s/traits' % rp_uuid)['traits'])


def _pci_rows(*args):
    return {r['Device']: r for r in mdev_json('provider', 'list', *args)
            if r['Host'] == HOST}


def test_providers_match_the_plan_and_the_hypervisor(
        cloud, plan, flavors, boot):
    one = boot(flavors['l40s-vf:1'])
    two = boot(flavors['l40s-vf:2'])
    h100 = boot(flavors['h100-vf:1'])
    assert sum(_pfs_of(cloud, one).values()) == 1
    assert sum(_pfs_of(cloud, two).values()) == 2
    assert _pfs_of(cloud, h100) == {
        a: 1 for a, p in plan.items() if p['resource_class'] == H100}
    truth = {s['id']: _pfs_of(cloud, s) for s in (one, two, h100)}
    used = _used(cloud)
    assert sum(used.values()) == 4

    rows = _pci_rows('--kind', 'pci')
    assert sorted(rows) == sorted(plan)
    for address, p in plan.items():
        row = rows[address]
        default_class = p['resource_class'] == H100
        assert row == {
            'UUID': row['UUID'], 'Host': HOST, 'Device': address,
            'Kind': 'pci',
            # Ids only where the class is Nova's default, which names them.
            'Vendor ID': '10de' if default_class else None,
            'Product ID': '2330' if default_class else None,
            # Each provider holds the VFs of one PF, named by its address.
            'VFs of PF': address,
            'Resource Class': p['resource_class'], 'Capacity': p['total'],
            'Used': used[address], 'Free': p['total'] - used[address],
            'State': 'in use' if used[address] else 'free',
            'Traits': p['traits']}

    # --kind all: the same PCI rows, with the mdev GPUs of the other hosts.
    everything = mdev_json('provider', 'list', '--kind', 'all', '--long')
    mdev_planned = {g['provider_name'] for h in cloud.hosts.values()
                    for g in h['gpus'] if g['resource_class']}
    pci_planned = {p['provider_name'] for p in plan.values()}
    assert sorted(r['Name'] for r in everything) == sorted(
        mdev_planned | pci_planned)
    for r in everything:
        assert r['Kind'] == ('pci' if r['Name'] in pci_planned else 'mdev')
        if r['Kind'] == 'pci':
            assert {k: v for k, v in r.items() if k in rows[r['Device']]} \
                == rows[r['Device']]
            assert r['Name'] == plan[r['Device']]['provider_name']
    # By default, mdev devices only, and no Kind column.
    default = mdev_json('provider', 'list')
    assert HOST not in {r['Host'] for r in default}
    assert all('Kind' not in r for r in default)

    # show by HOST:ADDRESS, upper and lower case: the server on each VF.
    for address, p in plan.items():
        consumers = sorted((s, pfs[address]) for s, pfs in truth.items()
                           if pfs[address])
        for name in ('%s:%s' % (HOST, address),
                     '%s:%s' % (HOST, address.upper())):
            shown = mdev_json('provider', 'show', name)
            assert (shown['UUID'], shown['Name'], shown['Kind'],
                    shown['Device'], shown['Used'], shown['Total']) == (
                rows[address]['UUID'], p['provider_name'], 'pci', address,
                used[address], p['total'])
            assert sorted((c['consumer'], c['amount'])
                          for c in shown['Consumers']) == consumers
            assert {c['resource_class'] for c in shown['Consumers']} <= {
                p['resource_class']}


def test_allocations_go_from_server_to_pf_and_back(
        cloud, plan, flavors, boot):
    servers = [boot(flavors['l40s-vf:1']), boot(flavors['l40s-vf:2']),
               boot(flavors['h100-vf:1']),
               # No PF has 5 VFs: Nova asks Placement for each VF of the
               # alias in a group of its own, so they come from two PFs.
               boot(flavors['l40s-vf:5'])]
    truth = {s['id']: _pfs_of(cloud, s) for s in servers}
    spread = servers[3]
    assert len(truth[spread['id']]) == 2
    assert sum(truth[spread['id']].values()) == 5
    rp = {a: placement_request(
        cloud, 'GET', '/resource_providers?name=%s' % p['provider_name'])[
        'resource_providers'][0]['uuid'] for a, p in plan.items()}
    expected = {(s['id'], s['name'], pf, truth[s['id']][pf])
                for s in servers for pf in truth[s['id']]}

    # Server -> node -> PF: one row per PF the server has VFs of.
    for server in servers:
        rows = mdev_json('allocation', 'show', server['id'], '--kind', 'pci')
        assert sorted((r['Server'], r['Host'], r['Device'], r['Kind'],
                       r['Resource Class'], r['Amount'], r['Provider UUID'])
                      for r in rows) == sorted(
            (server['id'], HOST, pf, 'pci', plan[pf]['resource_class'], n,
             rp[pf]) for pf, n in truth[server['id']].items())
        for r in rows:
            assert r['Traits'] == plan[r['Device']]['traits']
    by_name = mdev_json('allocation', 'show', spread['name'], '--kind', 'all')
    assert sorted((r['Device'], r['Amount']) for r in by_name) == sorted(
        truth[spread['id']].items())
    # The default kind shows no PCI row, and says where to look.
    result = mdev('allocation', 'show', spread['id'], '-f', 'json')
    assert result.json() == []
    assert 'holds 2 on PCI-in-Placement devices' in result.stderr
    assert '--kind pci' in result.stderr

    # Host -> servers.
    for kind in ('pci', 'all'):
        rows = mdev_json('allocation', 'list', '--host', HOST, '--kind', kind)
        assert {(r['Server'], r['Server Name'], r['Device'], r['Amount'])
                for r in rows} == expected
        assert len(rows) == len(expected)
        assert {r['Kind'] for r in rows} == {'pci'}
    assert mdev_json('allocation', 'list', '--host', HOST) == []

    # Device -> servers, named by HOST:ADDRESS in either case, provider
    # name or UUID, whatever --kind says.
    for pf, p in plan.items():
        on_pf = {(s, n, pf, a) for s, n, d, a in expected if d == pf}
        assert on_pf
        for device in ('%s:%s' % (HOST, pf), '%s:%s' % (HOST, pf.upper()),
                       p['provider_name'], rp[pf]):
            rows = mdev_json('allocation', 'list', '--device', device)
            assert {(r['Server'], r['Server Name'], r['Device'], r['Amount'])
                    for r in rows} == on_pf, device


def test_capacity_reaches_zero_when_nova_finds_no_valid_host(
        cloud, plan, flavors, boot):
    l40s = sorted(a for a, p in plan.items() if p['resource_class'] == L40S)
    total = sum(plan[a]['total'] for a in l40s)
    assert total == 8

    def capacity():
        rows = {r['Host']: r for r in mdev_json(
            'capacity', '--resource-class', L40S)}
        assert sum(r['Fits'] for r in rows.values()) == rows[HOST]['Fits']
        return rows[HOST]

    for booted in range(total):
        free = {a: plan[a]['total'] - _used(cloud)[a] for a in l40s}
        row = capacity()
        assert (row['Fits'], row['Free']) == (total - booted,
                                              total - booted)
        assert row['Devices'] == ['%s:%s' % (HOST, a)
                                  for a in l40s if free[a]]
        boot(flavors['l40s-vf:1'])
    assert sum(_used(cloud)[a] for a in l40s) == total
    # Nothing fits: the host's row says 0, --explain says why,
    # constraint by constraint.
    assert capacity()['Fits'] == 0
    rows = {r['Constraint']: r for r in mdev_table(
        'capacity', '--resource-class', L40S, '--explain')}
    assert 'Servers that fit: 0' in rows
    room = rows['room for 1 %s' % L40S]
    assert (room['Devices Ruled Out'], room['Hosts Ruled Out'],
            room['Devices Left'], room['Hosts Left']) == ('2', '1', '0', '0')
    [change] = [c for c in rows if c.startswith('Smallest change')]
    assert change in {'Smallest change: free 1 %s on %s:%s' % (L40S, HOST, a)
                      for a in l40s}
    server = boot(flavors['l40s-vf:1'], status='ERROR')
    assert 'No valid host was found' in server['fault']
    assert _truth(cloud, server) == []


def test_trait_set_refuses_a_pci_device_and_writes_nothing(cloud, plan):
    address = sorted(plan)[0]
    p = plan[address]
    rp_uuid = placement_request(
        cloud, 'GET', '/resource_providers?name=%s' % p['provider_name'])[
        'resource_providers'][0]['uuid']
    before = _generations(cloud)
    traits = {u: _traits(cloud, u) for u in before}
    mdev_gpu = next(g for h in cloud.hosts.values() for g in h['gpus']
                    if g['resource_class'])
    mdev_name = mdev_gpu['provider_name']
    for device in ('%s:%s' % (HOST, address),
                   '%s:%s' % (HOST, address.upper()),
                   p['provider_name'], rp_uuid):
        for args in (('trait', 'set', device, '--trait', 'CUSTOM_REFUSED'),
                     ('trait', 'set', mdev_name, device, '--trait',
                      'CUSTOM_REFUSED'),
                     ('trait', 'unset', device, '--trait', p['traits'][0])):
            cli.assert_one_line_error(
                mdev(*args),
                'Device %s:%s is a PCI-in-Placement device' % (HOST, address),
                "whose traits Nova replaces with its device spec's when "
                'nova-compute restarts or refreshes its provider cache',
                'traits tag of [pci] device_spec on that compute.')
    assert _generations(cloud) == before
    assert {u: _traits(cloud, u) for u in before} == traits
    assert placement_request(
        cloud, 'GET', '/traits?name=in:CUSTOM_REFUSED')['traits'] == []


def test_nova_replaces_hand_set_traits_when_nova_compute_restarts(
        cloud, plan):
    """A PCI device's traits set by hand in Placement last until
    nova-compute restarts (or refreshes its provider cache): the periodic
    update leaves them, a restart puts the device spec's back.
    """
    providers = {a: placement_request(
        cloud, 'GET', '/resource_providers?name=%s' % p['provider_name'])[
        'resource_providers'][0]['uuid'] for a, p in plan.items()}
    added, replaced = sorted(plan)[0], sorted(plan)[-1]
    placement_request(cloud, 'PUT', '/traits/CUSTOM_BY_HAND')
    hand = {added: plan[added]['traits'] + ['CUSTOM_BY_HAND'],
            replaced: ['CUSTOM_BY_HAND']}
    for address, traits in hand.items():
        generation = placement_request(
            cloud, 'GET', '/resource_providers/%s' % providers[address])[
            'generation']
        placement_request(
            cloud, 'PUT', '/resource_providers/%s/traits' % providers[address],
            json={'resource_provider_generation': generation,
                  'traits': traits})

    cloud.control('periodic')
    for address, traits in hand.items():
        assert _traits(cloud, providers[address]) == sorted(traits)

    # Restart sriov1's nova-compute with the settings it has.
    info = cloud.hosts[HOST]
    restarted = cloud.control('reconfigure', host=HOST,
                              enabled_mdev_types=info['enabled_mdev_types'])
    assert restarted == info
    for address, p in plan.items():
        assert _traits(cloud, providers[address]) == p['traits']
        assert set(p['traits']) >= {'COMPUTE_MANAGED_PCI_DEVICE',
                                    'OWNER_NOVA'}
    # The providers are the same ones, and the commands see the traits.
    rows = _pci_rows('--kind', 'pci')
    assert {a: r['UUID'] for a, r in rows.items()} == providers
    assert {a: r['Traits'] for a, r in rows.items()} == {
        a: p['traits'] for a, p in plan.items()}


def _resources(cloud, consumer):
    """What a consumer holds, per provider, without the generations."""
    return {rp: held['resources'] for rp, held in placement_request(
        cloud, 'GET', '/allocations/%s' % consumer)['allocations'].items()}


def test_audit_fixes_an_orphaned_pci_allocation_and_nothing_else(
        cloud, plan, flavors, boot, controller):
    server = boot(flavors['l40s-vf:2'])
    owned = _pfs_of(cloud, server)
    # The orphan shares a PF with the server.
    address = sorted(owned)[0]
    rp_uuid = placement_request(
        cloud, 'GET', '/resource_providers?name=%s'
        % plan[address]['provider_name'])['resource_providers'][0]['uuid']
    orphan = str(uuid.uuid4())
    placement_request(cloud, 'PUT', '/allocations/%s' % orphan, json={
        'allocations': {rp_uuid: {'resources': {L40S: 1}}},
        'project_id': str(uuid.uuid4()), 'user_id': str(uuid.uuid4()),
        'consumer_generation': None, 'consumer_type': 'INSTANCE'})
    server_allocations = _resources(cloud, server['id'])
    rows = mdev_json('allocation', 'list', '--device',
                     '%s:%s' % (HOST, address))
    assert (orphan, '(orphaned: no such server in Nova)') in {
        (r['Server'], r['Server Name']) for r in rows}

    result = mdev('audit', '-f', 'json', '--long', '--host', HOST,
                  '--controller-conf', controller)
    assert result.rc == 1, result.stderr     # an error-level finding
    found = json.loads(result.stdout)
    assert [(f['Check'], f['Host'], f['Device'], f['Server'],
             f['Resource Class'], f['Provider UUID']) for f in found] == [
        ('orphaned-allocation', HOST, address, orphan, L40S, rp_uuid)]

    before = _generations(cloud)
    result = mdev('audit', '--fix', 'orphaned-allocation', '-f', 'json',
                  '--controller-conf', controller)
    assert result.rc == 0, result.stderr
    fixed = [f for f in json.loads(result.stdout)
             if f['Check'] == 'orphaned-allocation']
    assert [(f['Server'], f['Device']) for f in fixed] == [(orphan, address)]
    assert placement_request(
        cloud, 'GET', '/allocations/%s' % orphan)['allocations'] == {}
    after = _generations(cloud)
    assert {u: g for u, g in after.items() if u != rp_uuid} == {
        u: g for u, g in before.items() if u != rp_uuid}
    # The server keeps its VFs and its allocations.
    assert _pfs_of(cloud, server) == owned
    # (The provider's generation in the answer moved with the removal.)
    assert _resources(cloud, server['id']) == server_allocations
    result = mdev('audit', '-f', 'json', '--host', HOST,
                  '--controller-conf', controller)
    assert (result.rc, json.loads(result.stdout)) == (0, []), result.stderr


def test_flavor_configure_pci_alias_boots_on_two_vfs(
        cloud, plan, boot, controller):
    flavor = cloud.control('create_flavor', name='e2e-pci-configured')['id']
    args = ('flavor', 'configure', flavor, '--pci-alias', 'l40s-vf:2',
            '--controller-conf', controller)
    [row] = mdev_json(*args)
    assert (row['Property'], row['After'], row['Result']) == (
        ALIAS, 'l40s-vf:2', 'added')
    assert flavor_specs(cloud, flavor) == {ALIAS: 'l40s-vf:2'}
    [row] = mdev_json(*args)
    assert row['Result'] == 'unchanged'

    server = boot(flavor)
    devices = _truth(cloud, server)
    assert len(devices) == 2
    l40s = {a for a, p in plan.items() if p['resource_class'] == L40S}
    for device in devices:
        assert (device['vendor_id'], device['product_id']) == (
            '10de', '26b9')
        assert device['parent_addr'] in l40s
        assert device['pci_address'] in plan[device['parent_addr']]['vfs']
