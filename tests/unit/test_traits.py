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

import pytest

from osc_mdev.cloud import traits
from osc_mdev.local import conf_files as local_novaconf


def test_plan_adds_and_keeps_others():
    assert traits.plan({'OWNER_NOVA', 'CUSTOM_A'}, add=['CUSTOM_B']) == {
        'OWNER_NOVA', 'CUSTOM_A', 'CUSTOM_B'}


def test_plan_removes_only_named():
    assert traits.plan({'OWNER_NOVA', 'CUSTOM_A', 'CUSTOM_B'},
                       remove=['CUSTOM_A', 'CUSTOM_NOT_THERE']) == {
        'OWNER_NOVA', 'CUSTOM_B'}


def test_plan_replace_keeps_owner_traits_unless_forced():
    current = {'OWNER_NOVA', 'OWNER_CYBORG', 'CUSTOM_A'}
    assert traits.plan(current, add=['CUSTOM_B'], replace=True) == {
        'OWNER_NOVA', 'OWNER_CYBORG', 'CUSTOM_B'}
    assert traits.plan(current, add=['CUSTOM_B'], replace=True,
                       force=True) == {'CUSTOM_B'}


def test_plan_never_removes_owner_traits_without_force():
    assert traits.plan({'OWNER_NOVA'}, remove=['OWNER_NOVA']) == {
        'OWNER_NOVA'}
    assert traits.plan({'OWNER_NOVA'}, remove=['OWNER_NOVA'],
                       force=True) == set()
    assert traits.protected_removals(['OWNER_NOVA', 'CUSTOM_A'],
                                     False) == ['OWNER_NOVA']
    assert traits.protected_removals(['OWNER_NOVA'], True) == []


def test_plan_is_idempotent():
    once = traits.plan({'OWNER_NOVA'}, add=['CUSTOM_A'])
    assert traits.plan(once, add=['CUSTOM_A']) == once


@pytest.mark.parametrize('mdev_type,prefix,expected', [
    ('nvidia-35', 'CUSTOM_', 'CUSTOM_NVIDIA_35'),
    ('mlx5_core', 'CUSTOM_', 'CUSTOM_MLX5_CORE'),
    ('i915-GVTg_V5_4', 'CUSTOM_', 'CUSTOM_I915_GVTG_V5_4'),
    ('nvidia-35', 'CUSTOM_VGPU_', 'CUSTOM_VGPU_NVIDIA_35'),
    # os-traits' normalize_name: a run of other characters is one '_'.
    ('grid--p40.8q', 'CUSTOM_', 'CUSTOM_GRID_P40_8Q'),
])
def test_trait_for_mdev_type(mdev_type, prefix, expected):
    assert traits.trait_for_mdev_type(mdev_type, prefix) == expected


@pytest.mark.parametrize('prefix', ['VGPU_', 'custom_', 'CUSTOM-X'])
def test_bad_prefix(prefix):
    with pytest.raises(ValueError, match='must start with CUSTOM_'):
        traits.trait_for_mdev_type('nvidia-35', prefix)


def test_describe_change():
    assert traits.describe_change({'A'}, {'A'}) == 'unchanged'
    assert traits.describe_change({'A', 'B'}, {'A', 'C', 'D'}) == (
        'added C, D; removed B')
    assert traits.describe_change({'A'}, {'A', 'C'}, dry_run=True) == (
        'would add C')


def test_plans_from_nova_conf(tmp_path):
    from osc_mdev.cloud import providers

    path = tmp_path / 'nova.conf'
    path.write_text('[devices]\nenabled_mdev_types = nvidia-35, '
                    'nvidia-36\n[mdev_nvidia-35]\ndevice_addresses = '
                    '0000:84:00.0\n[mdev_nvidia-36]\ndevice_addresses '
                    '= 0000:85:00.0\n')
    conf = local_novaconf.parse_files([str(path)])

    def device(address):
        nodedev = 'pci_' + address.replace(':', '_').replace('.', '_')
        cand = providers.Candidate('u-' + address, 'h_' + nodedev, 'h', 'r',
                                   nodedev, address, 1)
        return providers.build_devices(cand, {'VGPU': {'total': 1}}, 1,
                                       {})[0]

    devices = [device('0000:84:00.0'), device('0000:85:00.0'),
               device('0000:86:00.0')]
    plans = traits.plans_from_nova_conf(devices, conf, 'nova.conf',
                                        add=('CUSTOM_POOL',))
    assert plans[0].apply({'OWNER_NOVA', 'CUSTOM_NVIDIA_36'}) == {
        'OWNER_NOVA', 'CUSTOM_POOL', 'CUSTOM_NVIDIA_35'}
    assert plans[1].apply({'OWNER_NOVA'}) == {
        'OWNER_NOVA', 'CUSTOM_POOL', 'CUSTOM_NVIDIA_36'}
    assert plans[2].skip == 'no mdev type for it in nova.conf'
    assert traits.type_traits(conf, 'CUSTOM_T_') == {
        'nvidia-35': 'CUSTOM_T_NVIDIA_35', 'nvidia-36': 'CUSTOM_T_NVIDIA_36'}


def test_plans_from_the_nova_confs_of_several_hosts(tmp_path):
    from osc_mdev.cloud import providers

    def conf(name, text):
        path = tmp_path / name
        path.write_text(text)
        return local_novaconf.parse_files([str(path)])

    def device(host):
        cand = providers.Candidate('u-' + host, host + '_pci_0000_84_00_0',
                                   host, 'r', 'pci_0000_84_00_0',
                                   '0000:84:00.0', 1)
        return providers.build_devices(cand, {'VGPU': {'total': 1}}, 1,
                                       {})[0]

    confs = {'h1': conf('h1.conf', '[devices]\nenabled_mdev_types = '
                                   'nvidia-35\n'),
             'h2': conf('h2.conf', '[devices]\nenabled_mdev_types = '
                                   'nvidia-36\n'),
             'h3': conf('h3.conf', '[DEFAULT]\ndebug = True\n')}
    sources = {h: h + '.conf' for h in confs}
    plans = traits.plans_from_nova_confs([device('h1'), device('h2')], confs,
                                         sources)
    assert [p.add for p in plans] == [('CUSTOM_NVIDIA_35',),
                                      ('CUSTOM_NVIDIA_36',)]
    with pytest.raises(traits.NoNovaConf) as refused:
        traits.plans_from_nova_confs([device('h1'), device('h4')], confs,
                                     sources)
    assert refused.value.device.host == 'h4'
    with pytest.raises(traits.NoTypeGiven) as refused:
        traits.plans_from_nova_confs([device('h3')], confs, sources)
    assert refused.value.sources == {'h3': 'h3.conf'}
