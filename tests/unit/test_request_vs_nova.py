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

"""The one request builder against Nova's own code, field by field.

Every row builds the request with ``nova.scheduler.utils.request_for``
and with Nova's ``ResourceRequest.from_request_spec`` from the same flavor,
and compares every group (resources, required and forbidden traits) and
the group policy; every extra spec is judged by ``nova_refuses`` and by
Nova's API validators. Then each command's request (capacity, quota and
metrics, migration check and plan, audit, flavor show and configure),
built as its feature builds it from Nova's answers, is held against
Nova's request for the same flavor and server.
"""

import json

import pytest

from osc_mdev.cloud import payloads as nova_payloads
from osc_mdev.nova.scheduler import utils as rr


def request_of(flavor, pci_config=None, booted_from_volume=False):
    """The request of a flavor as Nova's API gives it, built as every
    command builds it.
    """
    return rr.request_for(nova_payloads.flavor(flavor), pci_config,
                          booted_from_volume)


LONG = 'G' * 64

SPECS = {
    # -- unnumbered ---------------------------------------------------------
    'empty': {},
    'vgpu': {'resources:VGPU': '1'},
    'two vgpus from one device': {'resources:VGPU': '2'},
    'custom class': {'resources:CUSTOM_MLX5': '3'},
    'required trait': {'resources:VGPU': '1',
                       'trait:CUSTOM_NVIDIA_12': 'required'},
    'forbidden trait': {'resources:VGPU': '1',
                        'trait:CUSTOM_BROKEN': 'forbidden'},
    'other trait value ignored': {'resources:VGPU': '1',
                                  'trait:CUSTOM_X': 'preferred'},
    'empty trait value ignored': {'resources:VGPU': '1',
                                  'trait:CUSTOM_X': ''},
    'standard trait': {'resources:VGPU': '1',
                       'trait:HW_CPU_X86_AVX2': 'required'},
    # -- numbered -----------------------------------------------------------
    'numbered': {'resources1:VGPU': '1'},
    'numbered isolate': {'resources1:VGPU': '1', 'resources2:VGPU': '1',
                         'group_policy': 'isolate'},
    'numbered none': {'resources1:VGPU': '1', 'resources2:VGPU': '1',
                      'group_policy': 'none'},
    'numbered without policy': {'resources1:VGPU': '1',
                                'resources2:VGPU': '1'},
    'numbered with traits': {'resources1:VGPU': '1',
                             'trait1:CUSTOM_A': 'required',
                             'trait1:CUSTOM_B': 'forbidden',
                             'resources2:VGPU': '1',
                             'trait2:CUSTOM_A': 'required',
                             'group_policy': 'isolate'},
    'numbered trait only': {'resources:VGPU': '1',
                            'trait1:CUSTOM_A': 'required'},
    'numbered zero': {'resources1:VGPU': '0', 'resources:VGPU': '1'},
    'numbered root classes': {'resources1:VCPU': '2',
                              'resources1:MEMORY_MB': '1024',
                              'resources2:VGPU': '1',
                              'group_policy': 'none'},
    'three numbered isolate': {'resources1:VGPU': '1',
                               'resources2:VGPU': '1',
                               'resources3:VGPU': '1',
                               'group_policy': 'isolate'},
    # -- named (suffixed) ----------------------------------------------------
    'named': {'resources_GPU:VGPU': '1',
              'trait_GPU:CUSTOM_NVIDIA_12': 'required'},
    'named forbidden': {'resources_GPU:VGPU': '1',
                        'trait_GPU:CUSTOM_OLD': 'forbidden'},
    'named with dash': {'resources-a:VGPU': '1',
                        'trait-a:CUSTOM_A': 'required'},
    'two named without policy': {'resources_A:VGPU': '1',
                                 'resources_B:VGPU': '1'},
    'two named isolate': {'resources_A:VGPU': '1', 'resources_B:VGPU': '1',
                          'group_policy': 'isolate'},
    'named 64 characters': {'resources%s:VGPU' % LONG: '1'},
    'named 65 characters': {'resources%sG:VGPU' % LONG: '1'},
    'named trait only': {'resources:VGPU': '1',
                         'trait_X:CUSTOM_A': 'required'},
    'traits: is a group named s': {'resources:VGPU': '1',
                                   'traits:CUSTOM_X': 'required'},
    'resourcesX: is a group named X': {'resourcesX:VGPU': '1'},
    # -- mixed --------------------------------------------------------------
    'unnumbered, numbered and named': {
        'resources:VGPU': '1', 'trait:CUSTOM_A': 'required',
        'resources1:CUSTOM_MLX5': '1', 'trait1:CUSTOM_B': 'forbidden',
        'resources_GPU:VGPU': '2', 'trait_GPU:CUSTOM_C': 'required',
        'group_policy': 'none'},
    'the same class in three groups': {
        'resources:VGPU': '1', 'resources1:VGPU': '1',
        'resources_Z:VGPU': '1', 'group_policy': 'isolate'},
    # -- overrides of the flavor's own resources -----------------------------
    'vcpu override': {'resources:VCPU': '0', 'resources:VGPU': '1'},
    'memory override': {'resources:MEMORY_MB': '0'},
    'disk override': {'resources:DISK_GB': '0', 'resources:VGPU': '1'},
    'disk set': {'resources:DISK_GB': '5'},
    'everything zero': {'resources:VCPU': '0', 'resources:MEMORY_MB': '0',
                        'resources:DISK_GB': '0'},
    'memory in a named group': {'resources_M:MEMORY_MB': '512',
                                'resources_M:VGPU': '1'},
    # -- values and names Nova ignores --------------------------------------
    'negative amount': {'resources:VGPU': '-1'},
    'word amount': {'resources:VGPU': 'one'},
    'float amount': {'resources:VGPU': '1.0'},
    'spaced amount': {'resources:VGPU': ' 2'},
    'lower-case class': {'resources:vgpu': '1'},
    'unknown standard class': {'resources:FOO': '1'},
    'standard class': {'resources:PGPU': '1', 'resources:SRIOV_NET_VF': '2'},
    'invalid group policy': {'resources1:VGPU': '1',
                             'resources2:VGPU': '1',
                             'group_policy': 'sometimes'},
    'unrelated keys': {'hw:mem_page_size': 'large', 'hw_rng:allowed': 'True',
                       'resources:VGPU': '1'},
    # -- CPU pinning ----------------------------------------------------------
    'dedicated': {'hw:cpu_policy': 'dedicated', 'resources:VGPU': '1'},
    'dedicated isolate threads': {'hw:cpu_policy': 'dedicated',
                                  'hw:cpu_thread_policy': 'isolate'},
    'dedicated require threads': {'hw:cpu_policy': 'dedicated',
                                  'hw:cpu_thread_policy': 'require'},
    'dedicated emulator thread': {'hw:cpu_policy': 'dedicated',
                                  'hw:emulator_threads_policy': 'isolate'},
}

FLAVORS = {
    'default': dict(vcpus=2, ram=2048, disk=20, ephemeral=0, swap=''),
    'swap and ephemeral': dict(vcpus=4, ram=4096, disk=10, ephemeral=5,
                               swap=1500),
    'no disk': dict(vcpus=1, ram=512, disk=0, ephemeral=0, swap=''),
}


def nova_request(flavor, specs, is_bfv):
    """Nova's ResourceRequest for a boot of ``flavor``: ``{suffix:
    (resources, required, forbidden)}`` ('' for the unnumbered group)
    and the group policy.
    """
    from nova import objects
    from nova.scheduler import utils
    objects.register_all()
    spec = objects.RequestSpec(
        flavor=objects.Flavor(
            vcpus=flavor['vcpus'], memory_mb=flavor['ram'],
            root_gb=flavor['disk'], ephemeral_gb=flavor['ephemeral'],
            swap=flavor['swap'] or 0, extra_specs=dict(specs)),
        is_bfv=is_bfv,
        image=objects.ImageMeta(properties=objects.ImageMetaProps()))
    request = utils.ResourceRequest.from_request_spec(spec)
    return ({(k or ''): (dict(g.resources), set(g.required_traits),
                         set(g.forbidden_traits))
             for k, g in request._rg_by_id.items()}, request.group_policy)


@pytest.mark.nova
@pytest.mark.parametrize('is_bfv', [False, True],
                         ids=['image', 'volume'])
@pytest.mark.parametrize('flavor', sorted(FLAVORS))
@pytest.mark.parametrize('name', sorted(SPECS))
def test_request_is_novas(name, flavor, is_bfv):
    specs = SPECS[name]
    ours = request_of(
        dict(FLAVORS[flavor], extra_specs=specs,
             **{'OS-FLV-EXT-DATA:ephemeral': FLAVORS[flavor]['ephemeral']}),
        booted_from_volume=is_bfv)
    groups, policy = nova_request(FLAVORS[flavor], specs, is_bfv)
    assert {g.suffix: (g.amounts, set(g.required), set(g.forbidden))
            for g in ours.groups} == groups
    assert ours.group_policy == policy


ONE_SPEC = [
    ('resources:VGPU', '1'), ('resources:VGPU', '0'),
    ('resources:VGPU', '-1'), ('resources:VGPU', 'one'),
    ('resources:VGPU', '1.5'), ('resources:VGPU', ' 2'),
    ('resources:vgpu', '1'), ('resources:FOO', '1'),
    ('resources:PGPU', '1'), ('resources:CUSTOM_X', '1'),
    ('resources:CUSTOM_a', '1'), ('resources_GPU:VGPU', '1'),
    ('resources_GPU:VGPU', 'x'), ('resources-a:CUSTOM_Y', '2'),
    ('resources%s:VGPU' % LONG, '1'), ('resources%sG:VGPU' % LONG, '1'),
    ('trait:CUSTOM_X', 'required'), ('trait:CUSTOM_X', 'forbidden'),
    ('trait:CUSTOM_X', 'preferred'), ('trait:CUSTOM_X', ''),
    ('trait:HW_CPU_X86_AVX2', 'required'),
    ('trait:HW_NOT_A_TRAIT', 'required'),
    ('trait_GPU:CUSTOM_NVIDIA_12', 'required'),
    ('trait_GPU:CUSTOM_NVIDIA_12', 'yes'), ('traits:CUSTOM_X', 'required'),
    ('group_policy', 'isolate'), ('group_policy', 'none'),
    ('group_policy', 'spread'), ('pci_passthrough:alias', 'a:1'),
    ('pci_passthrough:alias', 'a:1, b:2'), ('pci_passthrough:alias', 'a'),
    ('pci_passthrough:alias', 'a:x'), ('hw:cpu_policy', 'whatever'),
    ('hw_rng:allowed', 'maybe'),
]


@pytest.fixture(scope='module')
def validators():
    from nova.api.validation.extra_specs import validators
    validators.load_validators()
    return validators


@pytest.mark.nova
@pytest.mark.parametrize('key, value', ONE_SPEC)
def test_nova_refuses_what_novas_validators_refuse(validators, key, value):
    from nova import exception

    ours = dict(rr.nova_refuses({key: value}))
    if key.startswith('hw'):
        # Not a request key: never ours to judge, whatever Nova says.
        assert ours == {}
        return
    try:
        validators.validate(key, value)
    except exception.ValidationError as exc:
        assert key in ours, exc
        assert ours[key] in str(exc)
    else:
        assert ours == {}


# -- each command's request against Nova's ---------------------------------
#
# The same flavor, and a server of it booted from an image or from a
# volume, built the way each command's feature builds it, against
# Nova's own RequestSpec on the same inputs: its PCI requests
# (get_pci_requests_from_flavor) and their groups with the controller's
# [filter_scheduler] pci_in_placement on and off, the prefilters the
# commands apply (compute_status_filter, owner_nova_filter), and
# resources_from_request_spec.

ALIASES = [
    {'name': 'l40s-vf', 'vendor_id': '10de', 'product_id': '26b9',
     'device_type': 'type-VF', 'resource_class': 'CUSTOM_NVIDIA_L40S_VF',
     'traits': 'CUSTOM_GPU_L40S'},
    {'name': 'h100-vf', 'vendor_id': '10de', 'product_id': '2330',
     'device_type': 'type-VF'},
]

#: The controller's nova.conf, as --controller-conf gives it.
CONTROLLER_CONF = """[pci]
alias = %s
alias = %s

[filter_scheduler]
pci_in_placement = %%s
""" % tuple(json.dumps(a) for a in ALIASES)

#: (extra specs, the image's properties): an image Nova accepts for the
#: flavor (memory encryption needs UEFI firmware, Intel TDX stateless
#: firmware and no video device too).
UEFI = {'hw_firmware_type': 'uefi'}
COMMAND_SPECS = {
    'vgpu': ({'resources:VGPU': '1'}, {}),
    'two vgpus isolated': ({'resources1:VGPU': '1', 'resources2:VGPU': '1',
                            'trait1:CUSTOM_NVIDIA_12': 'required',
                            'group_policy': 'isolate'}, {}),
    'named group, no policy': ({'resources_GPU:VGPU': '1',
                                'resources_X:CUSTOM_MLX5': '1'}, {}),
    'one vf': ({'pci_passthrough:alias': 'l40s-vf:1'}, {}),
    'vfs of two aliases': ({'pci_passthrough:alias': 'l40s-vf:2, h100-vf:1',
                            'group_policy': 'isolate'}, {}),
    'vf and a numbered vgpu': ({'pci_passthrough:alias': 'h100-vf:1',
                                'resources1:VGPU': '1'}, {}),
    'vf and an unnumbered vgpu': ({'pci_passthrough:alias': 'l40s-vf:2',
                                   'resources:VGPU': '1',
                                   'trait:CUSTOM_A': 'forbidden'}, {}),
    'root classes overridden': ({'resources:VCPU': '0',
                                 'resources:DISK_GB': '0',
                                 'resources:VGPU': '1'}, {}),
    'dedicated cpus': ({'hw:cpu_policy': 'dedicated',
                        'hw:cpu_thread_policy': 'require',
                        'hw:emulator_threads_policy': 'isolate',
                        'resources:VGPU': '1'}, {}),
    'mixed cpus': ({'hw:cpu_policy': 'mixed',
                    'hw:cpu_dedicated_mask': '^0'}, {}),
    'mixed realtime cpus': ({'hw:cpu_policy': 'mixed',
                             'hw:cpu_realtime': 'yes',
                             'hw:cpu_realtime_mask': '^0-1'}, {}),
    'memory encryption': ({'hw:mem_encryption': 'true',
                           'resources:VGPU': '1'}, UEFI),
    'sev-es': ({'hw:mem_encryption': 'yes',
                'hw:mem_encryption_model': 'amd-sev-es'}, UEFI),
    'intel tdx': ({'hw:mem_encryption': 'true',
                   'hw:mem_encryption_model': 'intel-tdx'},
                  dict(UEFI, hw_firmware_stateless=True,
                       hw_video_model='none')),
    'vtpm crb': ({'hw:tpm_version': '2.0', 'hw:tpm_model': 'tpm-crb'}, {}),
    'vtpm 1.2': ({'hw:tpm_version': '1.2'}, {}),
    'persistent memory': ({'hw:pmem': 'SMALL, large-1,SMALL'}, {}),
    'pci numa socket': ({'hw:pci_numa_affinity_policy': 'socket',
                         'pci_passthrough:alias': 'h100-vf:1'}, {}),
    'secure boot': ({'os:secure_boot': 'required'}, {}),
    'maxphysaddr': ({'hw:maxphysaddr_mode': 'emulate'}, {}),
}

SIZES = dict(vcpus=4, ram=4096, disk=20, ephemeral=5, swap=1500)


def flavor_payload(specs):
    """The flavor as Nova's flavor list gives it."""
    return {'id': 'f1', 'name': 'f', 'vcpus': SIZES['vcpus'],
            'ram': SIZES['ram'], 'disk': SIZES['disk'],
            'OS-FLV-EXT-DATA:ephemeral': SIZES['ephemeral'],
            'swap': SIZES['swap'], 'extra_specs': dict(specs)}


def server_payload(specs, is_bfv):
    """A server of the flavor as Nova's server list gives it (its
    embedded flavor, microversion 2.47; no image when booted from
    volume).
    """
    return {'id': 's1', 'name': 'vm', 'status': 'ACTIVE',
            'OS-EXT-STS:vm_state': 'active',
            'OS-EXT-SRV-ATTR:host': 'gpu1',
            'OS-EXT-SRV-ATTR:hypervisor_hostname': 'gpu1',
            'image': '' if is_bfv else {'id': 'img'},
            'flavor': dict(SIZES, original_name='f', extra_specs=dict(specs))}


def controller(pci_in_placement):
    """The PciConfig --controller-conf makes of the controller's file."""
    from osc_mdev.features import nova_conf
    from osc_mdev.nova.conf import settings as novaconf
    return nova_conf.pci_of(novaconf.parse_texts(
        [('nova.conf', CONTROLLER_CONF % pci_in_placement)]))


def nova_command_request(specs, image, is_bfv, pci, prefilters):
    """Nova's request for a boot of the flavor: ``pci`` None (the
    controller's aliases not read: no PCI request), True or False (its
    ``pci_in_placement``); ``prefilters``: compute_status_filter and
    owner_nova_filter (every compute reporting OWNER_NOVA) applied.
    ``(groups by suffix, PCI groups, group policy, root required, root
    forbidden)``.
    """
    from unittest import mock

    from nova import conf as nova_conf
    from nova import objects
    from nova.pci import request as nova_pci
    from nova.scheduler import request_filter
    from nova.scheduler import utils
    objects.register_all()
    conf = nova_conf.CONF
    conf.set_override('alias', [json.dumps(a) for a in ALIASES], 'pci')
    conf.set_override('pci_in_placement', bool(pci), 'filter_scheduler')
    try:
        flavor = objects.Flavor(
            name='f', vcpus=SIZES['vcpus'], memory_mb=SIZES['ram'],
            root_gb=SIZES['disk'], ephemeral_gb=SIZES['ephemeral'],
            swap=SIZES['swap'], extra_specs=dict(specs))
        spec = objects.RequestSpec(
            flavor=flavor, is_bfv=is_bfv,
            image=objects.ImageMeta(
                properties=objects.ImageMetaProps(**image)),
            pci_requests=(nova_pci.get_pci_requests_from_flavor(flavor)
                          if pci is not None
                          else objects.InstancePCIRequests(requests=[])),
            requested_resources=[],
            request_level_params=objects.RequestLevelParams())
        spec.generate_request_groups_from_pci_requests()
        if prefilters:
            request_filter.compute_status_filter(None, spec)
            with mock.patch.object(request_filter,
                                   '_should_filter_by_owner',
                                   return_value=True):
                request_filter.owner_nova_filter(None, spec)
        request = utils.resources_from_request_spec(None, spec, None)
    finally:
        conf.clear_override('alias', 'pci')
        conf.clear_override('pci_in_placement', 'filter_scheduler')
    pci_ids = {r.request_id for r in spec.pci_requests.requests}
    groups, pci_groups = {}, []
    for suffix, group in request._rg_by_id.items():
        fields = (dict(group.resources), set(group.required_traits),
                  set(group.forbidden_traits))
        if suffix and suffix.rsplit('-', 1)[0] in pci_ids:
            pci_groups.append(fields)
        else:
            groups[suffix or ''] = fields
    return (groups, sorted(pci_groups, key=repr), request.group_policy,
            set(request._root_required), set(request._root_forbidden))


def ours(request):
    """The same fields of one of our requests."""
    groups, pci_groups = {}, []
    for group in request.groups:
        fields = (group.amounts, set(group.required), set(group.forbidden))
        if group.is_pci:
            pci_groups.append(fields)
        else:
            groups[group.suffix] = fields
    return (groups, sorted(pci_groups, key=repr), request.group_policy,
            set(request.root_required), set(request.root_forbidden))


def capacity_request(specs, pci, is_bfv):
    """capacity --flavor, quota list --flavor, metrics --flavor
    (``features.capacity.reads.count``): the flavor's request, prefilters
    added.
    """
    from osc_mdev.features.capacity import reads as capacity
    from osc_mdev.nova.scheduler import request_filter
    request = capacity.request_of(nova_payloads.flavor(flavor_payload(
        specs)), controller(pci))
    return request_filter.process_reqspec(request, owner_nova=True)


def migration_request(specs, pci, is_bfv):
    """migration check and plan: the server's request, prefilters added
    (``features.migration``'s ``check`` and ``plan``).
    """
    from osc_mdev.features.migration import reads as migration
    from osc_mdev.nova.scheduler import request_filter
    server = migration._server(nova_payloads.server(server_payload(
        specs, is_bfv)), (), controller(pci))
    return request_filter.process_reqspec(server.request, owner_nova=True)


def audit_server_request(specs, pci, is_bfv):
    """audit's missing-allocation: the server's request."""
    from osc_mdev.features.audit import checks as audit
    return audit.server_request(nova_payloads.server(server_payload(
        specs, is_bfv)), controller(pci))


def audit_flavor_request(specs, pci, is_bfv):
    """audit's unschedulable-flavor: the flavor's request, which the
    explainer prefilters.
    """
    from osc_mdev.features.audit import checks as audit
    from osc_mdev.nova.scheduler import request_filter
    found = audit.flavor_requests(
        [nova_payloads.flavor(flavor_payload(specs))],
        {'VGPU', 'CUSTOM_MLX5'}, controller(pci))
    if not found:
        return None
    return request_filter.process_reqspec(found['f1'], owner_nova=True)


def flavor_show_request(specs, pci, is_bfv):
    """flavor show and configure: the flavor's own request (the
    controller's aliases are not read: no PCI device).
    """
    from osc_mdev.nova.scheduler import request_filter
    request = rr.request_for(nova_payloads.flavor(flavor_payload(specs)))
    return request_filter.process_reqspec(request, owner_nova=True)


#: (how the command builds it, whether it is a server's (image or
#: volume) or a new server's (image), the controller's pci_in_placement
#: the command reads (None: none), prefilters).
COMMANDS = {
    'capacity': (capacity_request, False, (True, False), True),
    'migration': (migration_request, True, (True, False), True),
    'audit server': (audit_server_request, True, (True, False), False),
    'audit flavor': (audit_flavor_request, False, (True, False), True),
    'flavor show': (flavor_show_request, False, (None,), True),
}
CASES = [
    pytest.param(command, name, pci, is_bfv, id='%s-%s-%s-%s' % (
        command, name, {True: 'pci-in-placement', False: 'pci-filter',
                        None: 'no-aliases'}[pci],
        'volume' if is_bfv else 'image'))
    for command, (_, server, pcis, _) in sorted(COMMANDS.items())
    for name in sorted(COMMAND_SPECS)
    for pci in pcis
    for is_bfv in ((False, True) if server else (False,))
]


@pytest.mark.nova
@pytest.mark.parametrize('command, name, pci, is_bfv', CASES)
def test_command_request_is_novas(command, name, pci, is_bfv):
    build, _, _, prefilters = COMMANDS[command]
    specs, image = COMMAND_SPECS[name]
    request = build(specs, pci, is_bfv)
    expected = nova_command_request(specs, image, is_bfv, pci, prefilters)
    if request is None:
        # The audit judges only flavors that ask for a device.
        assert command == 'audit flavor'
        assert not expected[1] and not {
            rc for g in expected[0].values() for rc in g[0]} & {
            'VGPU', 'CUSTOM_MLX5'}
        return
    assert ours(request) == expected


@pytest.mark.nova
@pytest.mark.parametrize('name', sorted(
    n for n, (_, image) in COMMAND_SPECS.items() if not image))
@pytest.mark.parametrize('pci', [True, False])
def test_quota_deltas_are_novas(name, pci):
    """quota list --flavor: what one server counts against the unified
    limits, against Nova's ``_get_deltas`` of its
    ``request_spec_for_limits`` (which reads no image: the flavors whose
    image matters are left out).
    """
    from nova import conf as nova_conf
    from nova.limit import placement as placement_limits
    from nova import objects
    from nova.scheduler import utils

    from osc_mdev.nova.limit import placement as mdev_placement
    specs, _ = COMMAND_SPECS[name]
    ours_ = mdev_placement.flavor_deltas(capacity_request(specs, pci, False))
    objects.register_all()
    conf = nova_conf.CONF
    conf.set_override('alias', [json.dumps(a) for a in ALIASES], 'pci')
    conf.set_override('pci_in_placement', pci, 'filter_scheduler')
    try:
        flavor = objects.Flavor(
            name='f', vcpus=SIZES['vcpus'], memory_mb=SIZES['ram'],
            root_gb=SIZES['disk'], ephemeral_gb=SIZES['ephemeral'],
            swap=SIZES['swap'], extra_specs=dict(specs))
        nova = placement_limits._get_deltas(
            utils.request_spec_for_limits(flavor, False), 1)
    finally:
        conf.clear_override('alias', 'pci')
        conf.clear_override('pci_in_placement', 'filter_scheduler')
    assert ours_ == nova


@pytest.mark.parametrize('value', ['nope:1', 'l40s-vf'])
def test_every_command_refuses_an_alias_nova_refuses(value):
    """What Nova's API refuses to boot (PciRequestAliasNotDefined,
    an invalid pci_passthrough:alias) no command counts.
    """
    from osc_mdev.base import errors

    specs = {'pci_passthrough:alias': value}
    with pytest.raises(errors.Invalid):
        capacity_request(specs, True, False)
    from osc_mdev.features.migration import reads as migration
    server = migration._server(nova_payloads.server(server_payload(
        specs, False)), (), controller(False))
    assert server.request is None and server.problem
    assert audit_server_request(specs, False, False) is None
    assert audit_flavor_request(specs, True, False) is None
