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

from osc_mdev.domain import novaconf

MULTI = """
[DEFAULT]
host = compute1

[devices]
enabled_mdev_types = nvidia-35, nvidia-36 ,mlx5_core

[mdev_nvidia-35]
device_addresses = 0000:84:00.0,0000:85:00.0

[mdev_nvidia-36]
device_addresses = 0000:86:00.0
max_instances = 4

[mdev_mlx5_core]
mdev_class = CUSTOM_MLX5
"""


def test_multi_type_with_default():
    conf = novaconf.parse(MULTI)
    assert [t.name for t in conf.types] == [
        'nvidia-35', 'nvidia-36', 'mlx5_core']
    assert conf.type_for('0000:84:00.0') == 'nvidia-35'
    assert conf.type_for('0000:86:00.0') == 'nvidia-36'
    # Not listed: the first type without addresses is the default.
    assert conf.type_for('0000:3b:00.0') == 'mlx5_core'
    assert conf.default_type == 'mlx5_core'
    assert conf.mdev_class('mlx5_core') == 'CUSTOM_MLX5'
    assert conf.mdev_class('nvidia-35') == 'VGPU'
    assert conf.types[1].max_instances == 4
    assert conf.warnings == ()


def test_legacy_names():
    conf = novaconf.parse("""
[devices]
enabled_vgpu_types = nvidia-11,nvidia-12
[vgpu_nvidia-11]
device_addresses = 0000:84:00.0
[vgpu_nvidia-12]
device_addresses = 0000:85:00.0
""")
    assert conf.type_for('0000:84:00.0') == 'nvidia-11'
    assert conf.type_for('0000:85:00.0') == 'nvidia-12'
    assert conf.type_for('0000:86:00.0') is None


def test_new_group_name_wins_over_legacy():
    conf = novaconf.parse("""
[devices]
enabled_mdev_types = nvidia-11
[mdev_nvidia-11]
device_addresses = 0000:84:00.0
[vgpu_nvidia-11]
device_addresses = 0000:99:00.0
""")
    assert conf.by_address == {'0000:84:00.0': 'nvidia-11'}


def test_addresses_are_normalised():
    conf = novaconf.parse("""
[devices]
enabled_mdev_types = nvidia-11
[mdev_nvidia-11]
device_addresses = 0000:AF:00.0, 3b:00.0, mtty_mtty
""")
    assert set(conf.by_address) == {'0000:af:00.0', '0000:3b:00.0',
                                    'mtty_mtty'}


def test_second_type_without_addresses_is_dropped_with_warning():
    conf = novaconf.parse("""
[devices]
enabled_mdev_types = nvidia-11,nvidia-12
""")
    assert conf.default_type == 'nvidia-11'
    assert [t.name for t in conf.types] == ['nvidia-11']
    assert len(conf.warnings) == 1
    assert 'nvidia-12' in conf.warnings[0]


@pytest.mark.parametrize('text,message', [
    ("""
[devices]
enabled_mdev_types = nvidia-11,nvidia-12
[mdev_nvidia-11]
device_addresses = 0000:84:00.0
[mdev_nvidia-12]
device_addresses = 0000:85:00.0,0000:84:00.0
""", 'device 0000:84:00.0 is listed under both [mdev_nvidia-11] and '
     '[mdev_nvidia-12]'),
    ("""
[devices]
enabled_mdev_types = nvidia-11
[mdev_nvidia-11]
device_addresses = 0000:84:00
""", "'0000:84:00' is not a PCI address"),
    ("""
[devices]
enabled_mdev_types = mlx5_core
[mdev_mlx5_core]
mdev_class = mlx5
""", 'mdev_class = mlx5 is invalid'),
    ("""
[devices]
enabled_mdev_types = nvidia-11
[mdev_nvidia-11]
max_instances = 0
""", 'max_instances must be a whole number of at least 1'),
    ("""
[DEFAULT]
debug = true
""", 'enables no mdev type'),
    ("no section header", 'not a valid INI file'),
])
def test_files_nova_refuses(text, message):
    with pytest.raises(novaconf.NovaConfError) as err:
        novaconf.parse(text, source='nova.conf')
    assert message in str(err.value)
    assert str(err.value).startswith('nova.conf')
