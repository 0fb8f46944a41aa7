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

"""The nova.conf inputs of capacity and flavor raise the library's errors:
data and a sentence naming the parameter, worded with the option on the
command line; the capacity command keeps nothing on itself between calls.
"""

import argparse

import pytest

from osc_mdev.base import errors
from osc_mdev.features.capacity import reads as capacity
from osc_mdev.features import nova_conf
from osc_mdev.nova import objects
from osc_mdev.v1 import capacity as capacity_command
from osc_mdev.v1 import errors as v1_errors


def test_a_host_named_twice_names_the_parameter_and_the_option(tmp_path):
    conf = tmp_path / 'nova.conf'
    conf.write_text('[devices]\nenabled_mdev_types = nvidia-35\n')
    with pytest.raises(errors.Invalid) as caught:
        nova_conf.compute_confs([('gpu1', str(conf)), ('gpu1', str(conf))])
    assert caught.value.data == {'parameter': 'compute_conf',
                                 'host': 'gpu1'}
    assert str(caught.value) == (
        'compute_conf names host gpu1 twice; give one file per host.')
    assert str(v1_errors.command_error(caught.value)) == (
        '--compute-conf names host gpu1 twice; give one file per host.')


def test_an_unreadable_controller_conf_is_invalid(tmp_path):
    missing = str(tmp_path / 'nope.conf')
    with pytest.raises(errors.Invalid) as caught:
        nova_conf.controller_pci([missing])
    assert caught.value.data['parameter'] == 'controller_conf'
    assert str(caught.value).startswith('controller_conf: ')
    assert str(v1_errors.command_error(caught.value)).startswith(
        '--controller-conf: ')


def test_a_pci_flavor_without_the_controller_conf_says_which_input():
    flavor = objects.Flavor(id='f1', name='vgpu.pci', vcpus=1, ram=512,
                            disk=1, extra_specs={
                                'pci_passthrough:alias': 'a16:1'})
    with pytest.raises(errors.Invalid) as caught:
        capacity.request_of(flavor)
    assert caught.value.data == {'parameter': 'controller_conf',
                                 'flavor': 'vgpu.pci'}
    assert str(v1_errors.command_error(caught.value)).endswith(
        'pass its nova.conf with --controller-conf <file>.')


def test_capacity_keeps_no_state_between_calls():
    args = argparse.Namespace(
        resource_class='VGPU', flavor=None, require_trait=[],
        forbid_trait=[], spread=False, amount=1, controller_conf=[])
    command = capacity_command.Capacity.__new__(capacity_command.Capacity)
    before = dict(vars(command))
    counting = command._requests(args)
    assert counting.pci_config is None
    assert [flavor for flavor, _ in counting.wanted] == [None]
    assert vars(command) == before
