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

"""The command layer's own logic: the checks of arguments that span
options, and the wording of the library's errors with the options' names.
"""

from osc_lib import exceptions
import pytest

from osc_mdev.base import errors as library_errors
from osc_mdev.cloud import providers
from osc_mdev.cloud import traits
from osc_mdev.features.trait import writes
from osc_mdev.v1 import common
from osc_mdev.v1 import errors


@pytest.mark.parametrize('kwargs,refusal', [
    (dict(all_devices=True, hosts=('a',)), 'combined with --host'),
    (dict(all_devices=True, resource_class='VGPU'),
     'combined with --resource-class'),
    (dict(all_devices=True, references=('a:0000:84:00.0',), hosts=('a',)),
     'combined with device names or --host'),
    (dict(all_devices=True), None),
    (dict(hosts=('a', 'b'), resource_class='VGPU'), None),
    (dict(references=('x',), hosts=('a',)), None),
    (dict(), None),
])
def test_all_stands_alone(kwargs, refusal):
    """--all with another selector is refused; every other combination
    is accepted.
    """
    try:
        writes.Selection(**kwargs)
        refused = None
    except library_errors.Invalid as exc:
        refused = str(errors.command_error(exc))
    if refusal is None:
        assert refused is None
    else:
        assert refusal in (refused or '')


@pytest.mark.parametrize('error, sentence', [
    (providers.OutsideSelection('x', providers.BY_HOST, 'h1', ('h2', 'h3')),
     "The selection contradicts itself: device 'x' is on host h1, not on "
     "h2, h3 given with --host; drop the option or the name."),
    (providers.OutsideSelection('x', providers.BY_RESOURCE_CLASS,
                                'CUSTOM_MLX5', ('VGPU',)),
     "The selection contradicts itself: device 'x' has resource class "
     "CUSTOM_MLX5, not VGPU given with --resource-class; drop the option or "
     "the name."),
    (traits.NoNovaConf(providers.Candidate('u', 'h4_pci_0000_84_00_0', 'h4',
                                           'r', 'pci_0000_84_00_0',
                                           '0000:84:00.0', 1)),
     'Device h4:0000:84:00.0 is on host h4, which no --compute-conf '
     'describes; give --compute-conf h4=FILE or leave the device out.'),
    (traits.NoTypeGiven({'h1': 'a.conf', 'h2': 'b.conf'}),
     'a.conf, b.conf gives no mdev type to any device of host h1, h2.'),
])
def test_domain_errors_are_worded_with_the_options(error, sentence):
    assert str(errors.command_error(error)) == sentence


@pytest.mark.parametrize('outcome, status', [
    (common.DONE, 0),
    (common.verdict(True), 0),
    (common.verdict(False), 1),
])
def test_an_outcome_decides_the_exit_status(outcome, status):
    assert outcome.exit_status() == status


def test_a_failure_is_one_command_error_after_the_rows():
    with pytest.raises(exceptions.CommandError, match='^2 of the devices'):
        common.Outcome(failure='2 of the devices failed.').exit_status()


def test_an_interruption_says_what_is_left_and_stops(caplog):
    assert common.Outcome(interrupted='Interrupted: 3 of 9 devices were '
                                      'not changed.').exit_status() == 130
    assert 'Interrupted: 3 of 9 devices' in caplog.text
