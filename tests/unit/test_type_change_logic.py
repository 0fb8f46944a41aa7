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

"""``type change``'s nova.conf rewrite and trait move, read back with
Nova's own option parser where Nova reads the file.
"""

import pytest

from osc_mdev.base import errors
from osc_mdev.features.type import change
from osc_mdev.features.type import reads
from tests.fixtures import nova_driver

GPU = 'pci_0000_84_00_0'


def _nova(tmp_path, text):
    path = tmp_path / 'nova.conf'
    path.write_text(text)
    return nova_driver.nova_values([str(path)])


@pytest.mark.nova
def test_listed_gpu_moves_to_the_new_type(tmp_path):
    text = ('[devices]\nenabled_mdev_types = nvidia-11\n'
            '[mdev_nvidia-11]\ndevice_addresses = 0000:84:00.0,\n'
            '  0000:85:00.0\nmdev_class = CUSTOM_A\n')
    found = change.new_conf_text('f', text, GPU, 'nvidia-12')
    assert (found.old_type, found.resource_class) == ('nvidia-11', 'VGPU')
    values = _nova(tmp_path, found.new_text)
    assert values['devices']['enabled_mdev_types'] == ['nvidia-11',
                                                       'nvidia-12']
    assert values['mdev_nvidia-11']['device_addresses'] == ['0000:85:00.0']
    assert values['mdev_nvidia-11']['mdev_class'] == 'CUSTOM_A'
    assert values['mdev_nvidia-12']['device_addresses'] == ['0000:84:00.0']


@pytest.mark.nova
def test_a_type_left_without_address_leaves_enabled(tmp_path):
    text = ('[devices]\nenabled_mdev_types = nvidia-11, nvidia-12\n'
            '[mdev_nvidia-11]\ndevice_addresses = 0000:84:00.0\n'
            '[mdev_nvidia-12]\ndevice_addresses = 0000:85:00.0\n')
    found = change.new_conf_text('f', text, GPU, 'nvidia-12')
    values = _nova(tmp_path, found.new_text)
    assert values['devices']['enabled_mdev_types'] == ['nvidia-12']
    assert values['mdev_nvidia-12']['device_addresses'] == [
        '0000:85:00.0', '0000:84:00.0']


def test_the_default_type_keeps_the_other_gpus(tmp_path):
    text = '[devices]\nenabled_mdev_types = nvidia-11\n'
    found = change.new_conf_text('f', text, GPU, 'nvidia-12')
    conf = change.mdev_config('f', found.new_text)
    assert conf.type_for(GPU) == 'nvidia-12'
    assert conf.type_for('pci_0000_85_00_0') == 'nvidia-11'
    assert '+[mdev_nvidia-12]' in found.diff()


def test_a_gpu_of_that_type_already_is_refused():
    with pytest.raises(errors.Refused):
        change.new_conf_text(
            'f', '[devices]\nenabled_mdev_types = nvidia-12\n', GPU,
            'nvidia-12')


def test_trait_move_keeps_other_traits():
    remove, add = change.trait_move(
        ['OWNER_NOVA', 'CUSTOM_NVIDIA_11', 'CUSTOM_RACK_A'], 'nvidia-12')
    assert (remove, add) == (('CUSTOM_NVIDIA_11',), 'CUSTOM_NVIDIA_12')


class _NoPlacement:
    """A Placement client no request may reach."""

    def __getattr__(self, name):
        raise AssertionError('a request was made: %s' % name)


def test_an_unreadable_compute_conf_is_refused_before_any_request(tmp_path):
    good = tmp_path / 'gpu1.conf'
    good.write_text('[devices]\nenabled_mdev_types = nvidia-11\n')
    missing = tmp_path / 'gpu2.conf'
    with pytest.raises(errors.Invalid) as caught:
        reads.read_gpu(_NoPlacement(), GPU,
                       [('gpu1', str(good)), ('gpu2', str(missing))])
    assert caught.value.data['parameter'] == 'compute_conf'
    assert caught.value.data['path'] == str(missing)
