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

import configparser
import pathlib

import pytest

from tools import min_constraints

SETUP_CFG = pathlib.Path(__file__).parents[2] / 'setup.cfg'


def _cfg(*requirements):
    return '[options]\ninstall_requires =\n%s\n' % '\n'.join(
        '    ' + r for r in requirements)


def test_floors_become_pins():
    text = _cfg('cliff>=4.0', 'os-traits >= 3.3.0, !=3.4.0  # comment',
                'osc-lib>=3.0,<99; python_version >= "3.10"')
    assert min_constraints.floors(text) == [
        ('cliff', '4.0'), ('os-traits', '3.3.0'), ('osc-lib', '3.0')]


@pytest.mark.parametrize('requirement', ['cliff', 'cliff==4.0', 'cliff<5'])
def test_requirement_without_floor_is_an_error(requirement):
    with pytest.raises(ValueError, match='no single >= floor'):
        min_constraints.floors(_cfg(requirement))


def test_every_dependency_of_setup_cfg_has_a_floor():
    config = configparser.ConfigParser()
    config.read(SETUP_CFG)
    declared = [line for line in
                config.get('options', 'install_requires').splitlines()
                if line.strip()]
    pins = min_constraints.constraints(SETUP_CFG).splitlines()
    assert len(pins) == len(declared)
    assert all('==' in pin for pin in pins)
    assert 'python-openstackclient==8.0' in pins
    # Nova's PCI resource class normalisation needs its standard classes.
    assert 'os-resource-classes==1.1.0' in pins
