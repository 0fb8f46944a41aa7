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


"""config check's provider config inputs, as the library refuses them:
errors with data, naming the parameters (the CLI words the options).
"""

import pytest

from osc_mdev.base import errors
from osc_mdev.features.config.check import reads
from osc_mdev.v1 import errors as cli_errors


def no_clients():
    raise AssertionError('the cloud is read only for host')


def test_a_host_in_the_value_alone_reads_nothing_and_asks_for_host():
    with pytest.raises(errors.Invalid) as caught:
        reads.check_provider_configs([('gpu3', 'exports')],
                                     clients=no_clients)
    assert caught.value.data == {'parameter': 'provider_config',
                                 'host': 'gpu3'}
    assert errors.inputs(caught.value.sentence) == [
        'provider_config', 'host']
    assert cli_errors.command_error(caught.value).args[0].startswith(
        '--provider-config gives the files of compute node gpu3; ')
    assert 'give --host gpu3 too' in str(
        cli_errors.command_error(caught.value))


def test_files_of_two_nodes_are_refused_before_any_read():
    with pytest.raises(errors.Invalid, match='not a, b'):
        reads.check_provider_configs([('a', 'x')], host='b',
                                     clients=no_clients)
