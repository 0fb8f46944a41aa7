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

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

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


def test_openstackclient_finds_the_commands_and_the_version_option():
    """As openstackclient's shell does: the extension entry point is the
    plugin module, the command group is ``openstack.<API_NAME>.v<major>``
    of the default version, and the version option is the plugin's.
    """
    import argparse
    import configparser

    from osc_mdev import plugin

    config = configparser.ConfigParser()
    config.read(ROOT / 'setup.cfg')
    groups = config['options.entry_points']
    extensions = dict(
        (part.strip() for part in line.split('='))
        for line in groups['openstack.cli.extension'].splitlines()
        if line.strip())
    assert extensions == {plugin.API_NAME: 'osc_mdev.plugin'}
    assert plugin.DEFAULT_API_VERSION in plugin.API_VERSIONS
    group = 'openstack.%s.v%s' % (plugin.API_NAME.replace('-', '_'),
                                  plugin.DEFAULT_API_VERSION.split('.')[0])
    commands = [line.split('=')[0].strip()
                for line in groups[group].splitlines() if line.strip()]
    assert commands
    assert all(c.startswith(plugin.API_NAME + '_') for c in commands)
    parser = plugin.build_option_parser(argparse.ArgumentParser())
    assert plugin.API_VERSION_OPTION in {a.dest for a in parser._actions}
