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

"""The outputs the documentation shows are what the commands print.

Runs the tour of ``tox -e demo`` (tools/demo.py) on a fresh demo cloud and
compares every sample it records with the file the documentation
includes (doc/source/samples), as tools/samples.py normalises them: the
UUIDs by what they name, nothing else. When a command's output changes on
purpose, ``tox -e demo`` rewrites the samples.
"""

import collections.abc

import pytest

from tests.cloud import client
from tools import demo
from tools import samples


@pytest.fixture(scope='module')
def cloud(
        tmp_path_factory: pytest.TempPathFactory
) -> collections.abc.Iterator[client.EmbeddedCloud]:
    """The demo cloud as ``tox -e demo`` starts it: its topology, with
    its Keystone.
    """
    with client.EmbeddedCloud(tmp_path_factory.mktemp('cloud'),
                              topology=demo.topology(),
                              keystone=True) as cloud:
        yield cloud


def test_documented_samples_are_what_the_commands_print(cloud, tmp_path):
    checker = samples.Checker()
    failures = demo.tour_with(demo.Tour(cloud, tmp_path, recorder=checker))
    assert failures == 0
    assert checker.recorded, 'the tour recorded no sample'
    assert checker.report() == '', (
        'the documented samples differ from what the commands print (run '
        'tox -e demo to rewrite them):\n' + checker.report())
