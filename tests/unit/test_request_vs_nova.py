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

"""The one reading of a flavor against Nova's own code, field by field.

Every row builds the request with ``resource_request.request_for``
and with Nova's ``ResourceRequest.from_request_spec`` from the same flavor,
and compares every group (resources, required and forbidden traits) and
the group policy; every extra spec is judged by ``nova_refuses`` and by
Nova's API validators.
"""

import pytest

from osc_mdev.domain import resource_request as rr
from osc_mdev.usecases import nova_payloads


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
