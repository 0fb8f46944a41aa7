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

"""Keep an embedded cloud running for ``openstack`` in another shell.

``tox -e sandbox`` starts the embedded test cloud (see
tests/cloud/server.py) on 127.0.0.1, prints how to point ``openstack`` at
it, and serves until Ctrl-C.
"""

import argparse
import os
import pathlib
import signal
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.cloud import client  # noqa: E402


def describe(cloud):
    lines = [
        'The sandbox cloud is running. In another shell:',
        '',
        '    export OS_CLIENT_CONFIG_FILE=%s' % cloud.clouds_yaml,
        '    export OS_CLOUD=%s' % cloud.cloud_name,
        '    %s mdev provider list' % openstack_path(),
        '',
        'Nova API:  %s' % cloud.compute_url,
        'Placement: %s' % cloud.placement_url,
        'Hosts:     %s' % ', '.join(
            describe_host(host, info)
            for host, info in sorted(cloud.hosts.items())),
        'Control API (boot/delete servers, see tests/cloud/server.py): %s'
        % cloud.control_url,
        '',
        'Press Ctrl-C to stop it.',
    ]
    return '\n'.join(lines)


def describe_host(host, info):
    """A host's name, its node's if another, and whether Nova reports
    GPUs of it through PCI in Placement.
    """
    notes = []
    if info['hypervisor_hostname'] != host:
        notes.append('node %s' % info['hypervisor_hostname'])
    if info.get('pci', {}).get('providers'):
        notes.append('PCI in Placement')
    return '%s (%s)' % (host, ', '.join(notes)) if notes else host


def openstack_path():
    """The openstack command that has osc-mdev (this environment's)."""
    here = pathlib.Path(sys.executable).parent / 'openstack'
    return str(here) if here.exists() else 'openstack'


def wait(cloud):
    print('\n' + describe(cloud), flush=True)
    stop = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.append(True))
    while not stop and cloud.returncode is None:
        time.sleep(0.5)
    print('\nStopping the sandbox cloud.', flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--workdir', default=os.path.join(
        os.environ.get('TMPDIR', '/tmp'), 'osc-mdev-sandbox'),
        help='where clouds.yaml and the logs go (default: %(default)s)')
    parser.add_argument('--topology', help='topology JSON file (see '
                        'tests/cloud/server.py); default: the demo cloud')
    args = parser.parse_args()
    missing = client.missing_modules()
    if missing:
        sys.exit('The sandbox needs %s; run it with "tox -e sandbox".'
                 % ', '.join(missing))
    print('Starting the sandbox cloud in %s...' % args.workdir, flush=True)
    with client.EmbeddedCloud(args.workdir, topology=args.topology) as cloud:
        wait(cloud)
    return 0


if __name__ == '__main__':
    sys.exit(main())
