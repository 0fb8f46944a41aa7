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

import subprocess
import sys

HEAVY = ('osc_lib', 'keystoneauth1', 'openstack', 'cliff', 'requests',
         'osc_placement', 'os_traits', 'concurrent.futures')


def test_plugin_import_is_cheap():
    # openstack imports every plugin's entry point on every run.
    code = ('import sys, osc_mdev.plugin; '
            'print("\\n".join(sorted(sys.modules)))')
    loaded = subprocess.run([sys.executable, '-c', code], check=True,
                            capture_output=True, text=True).stdout.split()
    heavy = [m for m in loaded if m.split('.')[0] in HEAVY or m in HEAVY]
    assert heavy == []
    assert [m for m in loaded if m.startswith('osc_mdev')] == [
        'osc_mdev', 'osc_mdev.plugin']


def test_plugin_declares_its_own_api_name():
    from osc_mdev import plugin
    assert plugin.API_NAME == 'mdev'
    assert plugin.API_VERSIONS == ('1',)
