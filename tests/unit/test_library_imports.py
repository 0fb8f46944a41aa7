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

"""osc_mdev.library stands below the command line: it imports no command
module, no cliff, osc-lib or python-openstackclient, and names no option.
"""

from osc_mdev import library
from tests.unit import test_layers

LIBRARY = test_layers.PACKAGE / 'library.py'
COMMAND_LINE = ('cliff', 'osc_lib', 'openstackclient', 'osc_mdev.v1',
                'osc_mdev.plugin')


def test_the_library_knows_no_command_line():
    found = list(test_layers.imports(LIBRARY))
    assert 'osc_mdev.api' in found
    assert [name for name in found if any(
        name == top or name.startswith(top + '.')
        for top in COMMAND_LINE)] == []
    assert list(test_layers.named_options(LIBRARY)) == []


def test_everything_it_exports_exists():
    assert all(hasattr(library, name) for name in library.__all__)
