import pytest

from osc_mdev.domain import traits


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
