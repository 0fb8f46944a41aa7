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

"""Pure capacity logic: the request Nova builds, servers per host, the
explainer and Nova's multi-create rule.
"""

import json

import pytest

from osc_mdev.cloud import allocation_candidates
from osc_mdev.cloud import explanation
from osc_mdev.cloud import fit as c
from osc_mdev.cloud import multicreate
from osc_mdev.cloud import payloads as nova_payloads
from osc_mdev.nova.scheduler import request_filter
from osc_mdev.nova.scheduler import utils as rr


def request_of(flavor, pci_config=None, booted_from_volume=False):
    """The request of a flavor as Nova's API gives it, built as every
    command builds it.
    """
    return rr.request_for(nova_payloads.flavor(flavor), pci_config,
                          booted_from_volume)


I = c.Inventory  # noqa: E741


# -- the request, against Nova's own ResourceRequest ------------------------

FLAVOR = {'vcpus': 2, 'ram': 2048, 'disk': 20,
          'OS-FLV-EXT-DATA:ephemeral': 0, 'swap': ''}

SPECS = {
    'plain': {},
    'one vgpu': {'resources:VGPU': '1'},
    'vgpu with traits': {'resources:VGPU': '2',
                         'trait:CUSTOM_NVIDIA_11': 'required',
                         'trait:CUSTOM_BAD': 'forbidden',
                         'trait:CUSTOM_IGNORED': 'preferred'},
    'numbered isolate': {'resources1:VGPU': '1', 'resources2:VGPU': '1',
                         'trait1:CUSTOM_A': 'required',
                         'group_policy': 'isolate'},
    'vcpu override': {'resources:VCPU': '0', 'resources:VGPU': '1'},
    'memory in a group': {'resources1:MEMORY_MB': '1024',
                          'resources1:VGPU': '1'},
    'disk override': {'resources:DISK_GB': '5'},
    'bad values ignored': {'resources:VGPU': '-1', 'resources:vgpu': '1',
                           'resources:CUSTOM_X': 'two',
                           'group_policy': 'sometimes'},
    'string suffix': {'resources_gpu:CUSTOM_MLX5': '2',
                      'trait_gpu:CUSTOM_Y': 'forbidden'},
    'dedicated cpus': {'hw:cpu_policy': 'dedicated',
                       'hw:cpu_thread_policy': 'isolate',
                       'resources:VGPU': '1'},
}


def nova_groups(flavor, specs):
    from nova import objects
    from nova.scheduler import utils
    objects.register_all()
    swap = flavor['swap'] or 0
    spec = objects.RequestSpec(
        flavor=objects.Flavor(
            vcpus=flavor['vcpus'], memory_mb=flavor['ram'],
            root_gb=flavor['disk'],
            ephemeral_gb=flavor['OS-FLV-EXT-DATA:ephemeral'], swap=swap,
            extra_specs=dict(specs)),
        is_bfv=False, image=objects.ImageMeta(
            properties=objects.ImageMetaProps()))
    request = utils.ResourceRequest.from_request_spec(spec)
    return {(k or ''): (dict(g.resources), set(g.required_traits),
                        set(g.forbidden_traits))
            for k, g in request._rg_by_id.items()}, request.group_policy


@pytest.mark.nova
@pytest.mark.parametrize('name', sorted(SPECS))
@pytest.mark.parametrize('swap, ephemeral', [('', 0), (1500, 5)])
def test_request_is_novas(name, swap, ephemeral):
    flavor = dict(FLAVOR, swap=swap, extra_specs=SPECS[name])
    flavor['OS-FLV-EXT-DATA:ephemeral'] = ephemeral
    ours = request_of(flavor)
    groups, policy = nova_groups(flavor, SPECS[name])
    assert {g.suffix: (g.amounts, set(g.required), set(g.forbidden))
            for g in ours.groups} == groups
    assert ours.group_policy == policy


def test_prefilters_add_root_traits_only():
    request = request_filter.process_reqspec(rr.bare_request('VGPU'))
    assert request.root_required == {'OWNER_NOVA'}
    assert request.root_forbidden == {'COMPUTE_STATUS_DISABLED'}
    assert request.groups[0].required == frozenset()
    assert request_filter.process_reqspec(
        rr.bare_request('VGPU'), owner_nova=False).root_required == set()


@pytest.mark.nova
def test_querystring_is_novas():
    from nova import objects
    from nova.scheduler import utils
    objects.register_all()
    specs = SPECS['numbered isolate']
    flavor = dict(FLAVOR, extra_specs=specs)
    spec = objects.RequestSpec(
        flavor=objects.Flavor(vcpus=2, memory_mb=2048, root_gb=20,
                              ephemeral_gb=0, swap=0, extra_specs=specs),
        is_bfv=False, image=objects.ImageMeta(
            properties=objects.ImageMetaProps()),
        request_level_params=objects.RequestLevelParams(
            root_required={'OWNER_NOVA'},
            root_forbidden={'COMPUTE_STATUS_DISABLED'}))
    nova = utils.ResourceRequest.from_request_spec(spec).to_querystring()
    ours = rr.to_querystring(
        request_filter.process_reqspec(request_of(flavor)))
    assert ours == nova


@pytest.mark.parametrize('specs, message', [
    ({'resources1:VGPU': '1', 'resources2:VGPU': '1'}, 'group_policy'),
    ({'resources:VCPU': '0', 'resources:MEMORY_MB': '0'}, 'no resources'),
])
def test_requests_placement_refuses(specs, message):
    flavor = dict(FLAVOR, disk=0, extra_specs=specs)
    with pytest.raises(rr.RequestError, match=message):
        rr.check_request(request_of(flavor))


def test_bare_request_amount():
    with pytest.raises(rr.RequestError):
        rr.bare_request('VGPU', 0)
    spread = rr.bare_request('VGPU', 3, spread=True)
    assert [g.suffix for g in spread.groups] == ['1', '2', '3']
    assert spread.group_policy == 'isolate'


# -- servers per host -------------------------------------------------------

def root(vcpu=64, ram=65536, disk=1000, traits=('OWNER_NOVA',), used=None):
    return c.Provider('root', 'h', {
        'VCPU': I(vcpu), 'MEMORY_MB': I(ram), 'DISK_GB': I(disk)},
        used or {}, frozenset(traits))


def gpu(n, total=4, used=0, traits=('OWNER_NOVA',), rc='VGPU', **inv):
    return c.Provider('gpu%d' % n, 'h_pci_0000_8%d_00_0' % n,
                      {rc: I(total, max_unit=inv.pop('max_unit', total),
                             **inv)},
                      {rc: used}, frozenset(traits), '0000:8%d:00.0' % n)


def host(*gpus, disabled=False, **root_args):
    return c.Host('h', root(**root_args), tuple(gpus), disabled)


VGPU1 = {'resources:VGPU': '1'}
FLAVOR_1 = dict(FLAVOR, vcpus=4, ram=4096, disk=10)


def flavor_request(specs, **flavor):
    return request_filter.process_reqspec(request_of(
        dict(FLAVOR_1, extra_specs=specs, **flavor)))


CASES = [
    # (name, request, host, fits, limit)
    ('one per mdev', flavor_request(VGPU1),
     host(gpu(1), gpu(2, used=1)), 7, 'VGPU'),
    ('root VCPU limits', flavor_request(VGPU1),
     host(gpu(1), gpu(2), vcpu=12), 3, 'VCPU'),
    ('root RAM limits', flavor_request(VGPU1),
     host(gpu(1), gpu(2), ram=8192, used={'MEMORY_MB': 0}), 2,
     'MEMORY_MB'),
    ('vcpu override frees the root', flavor_request(
        {'resources:VGPU': '1', 'resources:VCPU': '0'}),
     host(gpu(1), gpu(2), vcpu=0), 8, 'VGPU'),
    ('two from one device', flavor_request({'resources:VGPU': '2'}),
     host(gpu(1, total=3), gpu(2, total=4)), 3, 'VGPU'),
    ('max_unit below the amount', flavor_request({'resources:VGPU': '2'}),
     host(gpu(1, max_unit=1), gpu(2, total=2)), 1, 'VGPU'),
    ('step size', flavor_request({'resources:VGPU': '3'}),
     host(gpu(1, total=8, step_size=2)), 0, 'no matching device'),
    ('min unit', flavor_request({'resources:VGPU': '1'}),
     host(gpu(1, total=8, min_unit=2)), 0, 'no matching device'),
    ('reserved and ratio', flavor_request(VGPU1),
     host(gpu(1, total=4, reserved=1, allocation_ratio=2.0)), 6, 'VGPU'),
    ('isolate needs two devices', flavor_request(
        {'resources1:VGPU': '1', 'resources2:VGPU': '1',
         'group_policy': 'isolate'}),
     host(gpu(1, total=8)), 0, 'no matching device'),
    ('isolate spreads', flavor_request(
        {'resources1:VGPU': '1', 'resources2:VGPU': '1',
         'group_policy': 'isolate'}),
     host(gpu(1, total=3), gpu(2, total=1), gpu(3, total=2)), 3, 'VGPU'),
    ('policy none shares a device', flavor_request(
        {'resources1:VGPU': '1', 'resources2:VGPU': '1',
         'group_policy': 'none'}),
     host(gpu(1, total=5)), 2, 'VGPU'),
    ('numbered trait', flavor_request(
        {'resources1:VGPU': '1', 'trait1:CUSTOM_A': 'required'}),
     host(gpu(1), gpu(2, traits=('CUSTOM_A',))), 4, 'VGPU'),
    ('unnumbered trait on the device', flavor_request(
        {'resources:VGPU': '1', 'trait:CUSTOM_A': 'required'}),
     host(gpu(1), gpu(2, traits=('CUSTOM_A',))), 4, 'VGPU'),
    ('unnumbered trait on the root counts', flavor_request(
        {'resources:VGPU': '1', 'trait:HW_X': 'required'}),
     host(gpu(1), traits=('OWNER_NOVA', 'HW_X')), 4, 'VGPU'),
    ('forbidden trait', flavor_request(
        {'resources:VGPU': '1', 'trait:CUSTOM_A': 'forbidden'}),
     host(gpu(1), gpu(2, traits=('CUSTOM_A',))), 4, 'VGPU'),
    ('other class', flavor_request({'resources:CUSTOM_MLX5': '1'}),
     host(gpu(1)), 0, 'no matching device'),
    ('disabled service', flavor_request(VGPU1),
     host(gpu(1), disabled=True), 0, 'compute disabled'),
    ('disabled trait', flavor_request(VGPU1),
     host(gpu(1), traits=('OWNER_NOVA', 'COMPUTE_STATUS_DISABLED')), 0,
     'compute disabled'),
    ('root without OWNER_NOVA', flavor_request(VGPU1),
     host(gpu(1), traits=()), 0, 'root lacks OWNER_NOVA'),
    ('two classes', flavor_request(
        {'resources1:VGPU': '1', 'resources2:CUSTOM_MLX5': '1',
         'group_policy': 'isolate'}),
     host(gpu(1, total=2), gpu(2, total=5, rc='CUSTOM_MLX5')), 2,
     'CUSTOM_MLX5, VGPU'),
]


@pytest.mark.parametrize('name, request_, tree, fits, limit', CASES,
                         ids=[case[0] for case in CASES])
def test_host_capacity(name, request_, tree, fits, limit):
    result = c.host_capacity(request_, tree)
    assert (result.fits, result.limit) == (fits, limit)


def test_devices_and_free():
    request = request_filter.process_reqspec(
        rr.bare_request('VGPU', required=('CUSTOM_A',)))
    tree = host(gpu(1, traits=('CUSTOM_A',)),
                gpu(2, used=4, traits=('CUSTOM_A',)), gpu(3))
    result = c.host_capacity(request, tree)
    assert result.fits == 4
    assert result.devices == ('0000:81:00.0',)
    assert result.free == 4


# -- the explainer ----------------------------------------------------------

def named(name, *gpus, **kwargs):
    tree = host(*gpus, **kwargs)
    children = tuple(c.Provider(name + g.uuid, name + '_' + g.name,
                                g.inventories, g.usages, g.traits, g.device)
                     for g in gpus)
    return c.Host(name, c.Provider(name, name, tree.root.inventories,
                                   tree.root.usages, tree.root.traits),
                  children, tree.disabled)


def test_explain_orders_constraints_and_counts():
    request = flavor_request({'resources:VGPU': '2',
                              'trait:CUSTOM_A': 'required'})
    hosts = [named('a', gpu(1, traits=('CUSTOM_A',), used=3), gpu(2)),
             named('b', gpu(1, rc='CUSTOM_MLX5')),
             named('c', gpu(1, traits=('CUSTOM_A',)), vcpu=2),
             named('d', gpu(1, traits=('CUSTOM_A',)), disabled=True)]
    steps, fix = explanation.explain(request, hosts)
    table = [(s.constraint, s.devices_out, s.hosts_out, s.hosts_left)
             for s in steps]
    assert table == [
        ('offers VGPU', 1, 1, 3),
        ('required trait CUSTOM_A', 1, 0, 3),
        ('room for 2 VGPU', 1, 1, 2),
        ('units allowed (min_unit, max_unit, step_size)', 0, 0, 2),
        ('root room for DISK_GB:10, MEMORY_MB:4096, VCPU:4', 1, 1, 1),
        ('compute service enabled (root without COMPUTE_STATUS_DISABLED)',
         1, 1, 0),
        ('root trait OWNER_NOVA', 0, 0, 0),
        ('all groups at once', 0, 0, 0),
    ]
    # Tagging a's free device beats freeing VCPU, mdevs or enabling d
    # plus nothing else: one trait change.
    assert fix == 'tag a:0000:82:00.0 with CUSTOM_A'


def test_explain_isolate_and_fix_when_devices_are_short():
    request = flavor_request({'resources1:VGPU': '1',
                              'resources2:VGPU': '1',
                              'group_policy': 'isolate'})
    hosts = [named('a', gpu(1)), named('b', gpu(1, used=4), gpu(2))]
    steps, fix = explanation.explain(request, hosts)
    isolate = next(s for s in steps if 'different devices' in s.constraint)
    # b lost its full device at 'room'; a never had two.
    assert (isolate.hosts_out, isolate.hosts_left) == (2, 0)
    assert fix == 'free 1 VGPU on b:0000:81:00.0'


def test_explain_when_servers_fit_has_no_fix():
    steps, fix = explanation.explain(flavor_request(VGPU1),
                                     [named('a', gpu(1))])
    assert steps[-1].hosts_left == 1 and fix is None


def test_no_fix_when_no_device_can_ever_serve():
    steps, fix = explanation.explain(flavor_request({'resources:VGPU': '8'}),
                                     [named('a', gpu(1))])
    assert fix is None


# -- multi-create -----------------------------------------------------------

def summary(capacity, used, rc='VGPU'):
    return {'resources': {rc: {'capacity': capacity, 'used': used}}}


def parsed(by_host, summaries):
    """``({host: [AllocationRequest]}, {uuid: Summary})`` of Placement's
    JSON (``{host: [allocations]}``, its summaries), through the parser.
    """
    listed = [(h, a) for h in by_host for a in by_host[h]]
    answer = allocation_candidates.parse({
        'allocation_requests': [{'allocations': a} for _, a in listed],
        'provider_summaries': summaries})
    found = {h: [] for h in by_host}
    for (host, _), request in zip(listed, answer.requests):
        found[host].append(request)
    return found, answer.summaries


@pytest.mark.parametrize('count, first, summaries, placed, per_host', [
    # Two hosts, each first candidate a GPU with room for 2 and 1.
    (3, {'a': {'g1': {'resources': {'VGPU': 1}}},
         'b': {'g2': {'resources': {'VGPU': 1}}}},
     {'g1': summary(4, 2), 'g2': summary(4, 3)}, 3, {'a': 2, 'b': 1}),
    # SR-IOV: one VF per candidate, so one server per host in a request
    # although the host has 8 VFs free (bug 1874664).
    (4, {'a': {'vf1': {'resources': {'VGPU': 1}}},
         'b': {'vf9': {'resources': {'VGPU': 1}}}},
     {'vf1': summary(1, 0), 'vf9': summary(1, 0)}, 2, {'a': 1, 'b': 1}),
    # The root's room counts too.
    (5, {'a': {'g1': {'resources': {'VGPU': 1}},
               'a': {'resources': {'VCPU': 4}}}},
     {'g1': summary(16, 0), 'a': summary(10, 0, 'VCPU')}, 2, {'a': 2}),
    # Two mdevs of one device per server.
    (9, {'a': {'g1': {'resources': {'VGPU': 2}}}},
     {'g1': summary(16, 1)}, 7, {'a': 7}),
])
def test_multi_create(count, first, summaries, placed, per_host):
    assert multicreate.multi_create(count, *parsed(
        {h: [a] for h, a in first.items()}, summaries)) == (
        placed, per_host)


def test_multi_create_against_novas_scheduler_loop():
    """The rule reproduces SchedulerManager._schedule: claim only
    alloc_reqs[0] of each host, per server, until a claim fails.
    """
    first = {'a': {'g1': {'resources': {'VGPU': 1}}},
             'b': {'g2': {'resources': {'VGPU': 1}}}}
    free = {'g1': 2, 'g2': 1}
    placed = 0
    for _ in range(10):
        for host in sorted(first):
            rp, alloc = next(iter(first[host].items()))
            if free[rp] >= alloc['resources']['VGPU']:
                free[rp] -= 1
                placed += 1
                break
        else:
            break
    got, _ = multicreate.multi_create(10, *parsed(
        {h: [a] for h, a in first.items()},
        {'g1': summary(2, 0), 'g2': summary(1, 0)}))
    assert got == placed == 3


def test_multi_create_bounds_over_every_first_candidate():
    # Two VFs per server: from one PF (fits twice on a PF of 4) or one
    # from each of two PFs (fits four times).
    same = {'pfa': {'resources': {'VF': 2}}}
    split = {'pfa': {'resources': {'VF': 1}},
             'pfb': {'resources': {'VF': 1}}}
    summaries = {'pfa': summary(4, 0, 'VF'), 'pfb': summary(4, 0, 'VF')}
    assert multicreate.multi_create_bounds(
        4, *parsed({'a': [same, split]}, summaries)) == (2, 4, {'a': 2})
    assert multicreate.multi_create_bounds(
        3, *parsed({'a': [split]}, summaries)) == (3, 3, {'a': 4})
    assert multicreate.multi_create_bounds(
        1, *parsed({'a': []}, summaries)) == (0, 0, {'a': 0})


def test_candidate_order_is_fixed_only_without_pci_groups():
    mdev = rr.Request(groups=(rr.Group('1', (('VGPU', 1),)),))
    pci = rr.Request(groups=(rr.Group('1', (('VGPU', 1),)),
                             rr.Group('_pci0', (('CUSTOM_X', 1),),
                                      alias='x')))
    assert multicreate.candidate_order_is_fixed(mdev)
    assert not multicreate.candidate_order_is_fixed(pci)


@pytest.mark.parametrize('count, per_host, fits, plan', [
    # First request: the first-candidate room; then one per host with room.
    (8, {'a': 2, 'b': 1, 'c': 1}, {'a': 4, 'b': 3, 'c': 1}, [4, 2, 2]),
    (5, {'a': 2, 'b': 1}, {'a': 2, 'b': 1}, [3]),
    (3, {'a': 1}, {'a': 3}, [1, 1, 1]),
    (5, {'a': 0}, {'a': 0}, []),
])
def test_batches(count, per_host, fits, plan):
    assert multicreate.batches(count, per_host, fits) == plan


def test_owner_nova_in_effect():
    assert c.owner_nova_in_effect([named('a', gpu(1))])
    assert not c.owner_nova_in_effect([named('a', gpu(1)),
                                       named('b', gpu(1), traits=())])


@pytest.mark.parametrize('request_, ruled_out', [
    # The flavor's unnumbered group takes VCPU from the root: a trait
    # there serves it.
    (flavor_request({'resources:VGPU': '1', 'trait:HW_X': 'required'}), 0),
    # A bare request allocates nothing on the root: the root's trait does
    # not count.
    (request_filter.process_reqspec(
        rr.bare_request('VGPU', required=('HW_X',))), 1),
])
def test_unnumbered_trait_on_the_root(request_, ruled_out):
    hosts = [named('a', gpu(1), traits=('OWNER_NOVA', 'HW_X'))]
    steps, _ = explanation.explain(request_, hosts)
    step = next(s for s in steps if s.constraint == 'required trait HW_X')
    assert step.hosts_out == ruled_out
    assert c.host_capacity(request_, hosts[0]).fits == (4 if not ruled_out
                                                        else 0)


# -- PCI aliases: the groups Nova adds for pci_passthrough:alias ------------

ALIASES = [
    {'name': 'l40s-vf', 'vendor_id': '10de', 'product_id': '26b9',
     'device_type': 'type-VF', 'resource_class': 'CUSTOM_NVIDIA_L40S_VF'},
    {'name': 'h100-vf', 'vendor_id': '10de', 'product_id': '2330',
     'device_type': 'type-VF', 'traits': 'gpu_h100,CUSTOM_FAST'},
]

PCI_SPECS = {
    'one vf': {'pci_passthrough:alias': 'l40s-vf:1'},
    'two vfs': {'pci_passthrough:alias': 'l40s-vf:2'},
    'two aliases': {'pci_passthrough:alias': 'l40s-vf:1, h100-vf:2'},
    'vf and vgpu': {'pci_passthrough:alias': 'l40s-vf:1',
                    'resources:VGPU': '1'},
    'vf and numbered vgpu': {'pci_passthrough:alias': 'l40s-vf:1',
                             'resources1:VGPU': '1'},
    'vfs isolated': {'pci_passthrough:alias': 'l40s-vf:2',
                     'group_policy': 'isolate'},
    'two numbered and a vf': {'pci_passthrough:alias': 'h100-vf:1',
                              'resources1:VGPU': '1',
                              'resources2:VGPU': '1'},
    'trait-only group and vfs': {'pci_passthrough:alias': 'l40s-vf:2',
                                 'trait1:CUSTOM_X': 'required',
                                 'trait2:CUSTOM_Y': 'forbidden'},
}


def _pci_config(pci_in_placement=True):
    from osc_mdev.nova.pci import config as pci
    from osc_mdev.nova.pci import request as pci_request
    return pci.PciConfig(aliases=pci_request.pci_aliases(
        [(json.dumps(a), '[pci] alias') for a in ALIASES],
        pci_in_placement=True), pci_in_placement=pci_in_placement)


def nova_pci_request(flavor, specs):
    """Nova's own ResourceRequest for a boot of ``flavor``: the PCI
    requests of its alias, the groups generated from them, and
    ``resources_from_request_spec`` (which applies group_policy).
    """
    from nova import conf as nova_conf
    from nova import objects
    from nova.pci import request as pci_request
    from nova.scheduler import utils
    objects.register_all()
    conf = nova_conf.CONF
    conf.set_override('alias', [json.dumps(a) for a in ALIASES], 'pci')
    conf.set_override('pci_in_placement', True, 'filter_scheduler')
    try:
        nova_flavor = objects.Flavor(
            vcpus=flavor['vcpus'], memory_mb=flavor['ram'],
            root_gb=flavor['disk'], ephemeral_gb=0, swap=0,
            extra_specs=dict(specs))
        spec = objects.RequestSpec(
            flavor=nova_flavor, is_bfv=False,
            image=objects.ImageMeta(properties=objects.ImageMetaProps()),
            pci_requests=pci_request.get_pci_requests_from_flavor(
                nova_flavor),
            requested_resources=[])
        spec.generate_request_groups_from_pci_requests()
        request = utils.resources_from_request_spec(None, spec, None)
    finally:
        conf.clear_override('alias', 'pci')
        conf.clear_override('pci_in_placement', 'filter_scheduler')
    groups = sorted(
        (k in specs_suffixes(specs), sorted(g.resources.items()),
         sorted(g.required_traits), sorted(g.forbidden_traits))
        for k, g in request._rg_by_id.items() if k)
    unnumbered = request._rg_by_id.get(None)
    return groups, (dict(unnumbered.resources) if unnumbered else None), \
        request.group_policy


def specs_suffixes(specs):
    return {m.group(2) for m in map(rr.XS_KEYPAT.match, specs)
            if m and m.group(2)}


@pytest.mark.nova
@pytest.mark.parametrize('name', sorted(PCI_SPECS))
def test_pci_alias_request_is_novas(name):
    specs = PCI_SPECS[name]
    flavor = dict(FLAVOR, extra_specs=specs)
    ours = request_of(flavor, _pci_config())
    groups, unnumbered, policy = nova_pci_request(flavor, specs)
    assert sorted(
        (not g.is_pci, sorted(g.resources), sorted(g.required),
         sorted(g.forbidden))
        for g in ours.numbered_groups) == groups
    assert (ours.group('').amounts if ours.group('') else None) == unnumbered
    assert ours.group_policy == policy


def test_pci_alias_groups():
    flavor = dict(FLAVOR, extra_specs=PCI_SPECS['two aliases'])
    request = request_of(flavor, _pci_config())
    pci = [g for g in request.groups if g.is_pci]
    assert [(g.alias, g.amounts) for g in pci] == [
        ('l40s-vf', {'CUSTOM_NVIDIA_L40S_VF': 1}),
        ('h100-vf', {'CUSTOM_PCI_10DE_2330': 1}),
        ('h100-vf', {'CUSTOM_PCI_10DE_2330': 1})]
    # The alias' traits are normalized as Nova normalizes them.
    assert pci[1].required == {'CUSTOM_GPU_H100', 'CUSTOM_FAST'}
    assert request.group_policy == 'none'
    # OWNER_NOVA goes to the PCI groups too, never to mdev groups.
    prefiltered = request_filter.process_reqspec(request_of(
        dict(FLAVOR, extra_specs=PCI_SPECS['vf and numbered vgpu']),
        _pci_config()))
    assert {g.suffix: 'OWNER_NOVA' in g.required
            for g in prefiltered.numbered_groups} == {
        '1': False, '_pci1_0': True}
    # Without the alias definitions (or pci_in_placement) Placement is
    # asked for no PCI device.
    assert not any(g.is_pci for g in request_of(flavor).groups)
    assert not any(g.is_pci for g in request_of(
        flavor, _pci_config(False)).groups)


def test_pci_alias_suffix_never_taken_by_the_flavor():
    specs = {'pci_passthrough:alias': 'l40s-vf:1',
             'resources_pci1_0:VGPU': '1', 'group_policy': 'none'}
    request = request_of(dict(FLAVOR, extra_specs=specs), _pci_config())
    assert sorted(g.suffix for g in request.numbered_groups) == [
        '__pci1_0', '_pci1_0']


@pytest.mark.parametrize('value, message', [
    ('nope:1', 'PCI alias nope of the flavor is not defined'),
    ('l40s-vf', 'is not valid'),
])
def test_pci_alias_nova_refuses(value, message):
    flavor = dict(FLAVOR, extra_specs={'pci_passthrough:alias': value})
    with pytest.raises(rr.RequestError, match=message):
        request_of(flavor, _pci_config())


PF_TRAITS = ('OWNER_NOVA', 'COMPUTE_MANAGED_PCI_DEVICE')


def vf_pf(n, total=4, used=0, traits=PF_TRAITS, rc='CUSTOM_NVIDIA_L40S_VF'):
    return c.Provider('pf%d' % n, 'h_0000:C1:0%d.0' % n,
                      {rc: I(total, max_unit=total)}, {rc: used},
                      frozenset(traits), '0000:C1:0%d.0' % n)


def pci_request(value, **specs):
    return request_filter.process_reqspec(request_of(
        dict(FLAVOR_1, extra_specs=dict(
            specs, **{'pci_passthrough:alias': value})), _pci_config()))


@pytest.mark.parametrize('request_, tree, fits, limit', [
    # Two VFs each from any PF (group_policy none): 8 VFs, 4 servers.
    (pci_request('l40s-vf:2'), host(vf_pf(0), vf_pf(1)), 4,
     'CUSTOM_NVIDIA_L40S_VF'),
    # Odd VFs left over on each PF still pair up across PFs.
    (pci_request('l40s-vf:2'), host(vf_pf(0, used=1), vf_pf(1, used=2)), 2,
     'CUSTOM_NVIDIA_L40S_VF'),
    # isolate: each VF from a different PF.
    (pci_request('l40s-vf:2', group_policy='isolate'),
     host(vf_pf(0), vf_pf(1, used=3)), 1, 'CUSTOM_NVIDIA_L40S_VF'),
    # The root limits before the VFs do.
    (pci_request('l40s-vf:1'), host(vf_pf(0), vf_pf(1), vcpu=12), 3,
     'VCPU'),
    # A PF without OWNER_NOVA is not Nova's (Cyborg's, say).
    (pci_request('l40s-vf:1'), host(vf_pf(0, traits=())), 0,
     'no matching device'),
    # The alias' traits are required on the PF's provider.
    (pci_request('h100-vf:1'), host(vf_pf(0, rc='CUSTOM_PCI_10DE_2330')), 0,
     'no matching device'),
    (pci_request('h100-vf:1'),
     host(vf_pf(0, rc='CUSTOM_PCI_10DE_2330',
                traits=('OWNER_NOVA', 'CUSTOM_GPU_H100', 'CUSTOM_FAST'))),
     4, 'CUSTOM_PCI_10DE_2330'),
    # An mdev and a VF per server.
    (pci_request('l40s-vf:1', **{'resources:VGPU': '1'}),
     host(gpu(1, total=2), vf_pf(0)), 2, 'CUSTOM_NVIDIA_L40S_VF, VGPU'),
])
def test_pci_host_capacity(request_, tree, fits, limit):
    result = c.host_capacity(request_, tree)
    assert (result.fits, result.limit) == (fits, limit)


def test_pci_devices_and_free():
    result = c.host_capacity(pci_request('l40s-vf:2'),
                             host(vf_pf(0, used=4), vf_pf(1, used=1)))
    assert result.fits == 1
    assert result.devices == ('0000:C1:01.0',)
    assert result.free == 3


def test_explain_pci_alias():
    trees = [named('a', vf_pf(0, used=4), vf_pf(1, used=4)),
             named('b', vf_pf(0, rc='CUSTOM_PCI_10DE_2330'))]
    steps, fix = explanation.explain(pci_request('l40s-vf:1'), trees)
    by_name = {s.constraint: s for s in steps}
    assert by_name['offers CUSTOM_NVIDIA_L40S_VF'].hosts_out == 1
    assert by_name['room for 1 CUSTOM_NVIDIA_L40S_VF'].devices_out == 2
    assert fix == 'free 1 CUSTOM_NVIDIA_L40S_VF on a:0000:C1:00.0'
    steps, fix = explanation.explain(pci_request('h100-vf:1'), trees)
    by_name = {s.constraint: s for s in steps}
    assert by_name['required trait CUSTOM_FAST'].hosts_out == 1
    assert fix == 'tag b:0000:C1:00.0 with CUSTOM_FAST, CUSTOM_GPU_H100'


def test_fix_frees_what_several_groups_take_from_one_device():
    # Two VFs per server, every VF used: free 2 on one PF, said once.
    trees = [named('a', vf_pf(0, used=4), vf_pf(1, used=4))]
    _, fix = explanation.explain(pci_request('l40s-vf:2'), trees)
    assert fix == 'free 2 CUSTOM_NVIDIA_L40S_VF on a:0000:C1:00.0'
    # One VF free on each PF: one more on either is enough.
    trees = [named('a', vf_pf(0, used=3), vf_pf(1, used=4))]
    _, fix = explanation.explain(pci_request('l40s-vf:3'), trees)
    assert fix == 'free 2 CUSTOM_NVIDIA_L40S_VF on a:0000:C1:00.0'
    # More VFs than the host has: no change of usage helps.
    trees = [named('a', vf_pf(0, total=2))]
    _, fix = explanation.explain(pci_request('l40s-vf:3'), trees)
    assert fix is None
