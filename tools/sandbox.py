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
tests/cloud/server.py) on 127.0.0.1 (with a Keystone whose unified limits
Nova enforces, when the topology gives limits, as the demo's does),
writes the nova.conf of each compute host (``nova-<host>.conf``) and of
the controller (``controller.conf``) into its work directory, prints how
to point ``openstack`` at it and how to boot a server, and serves until
Ctrl-C.
"""

import argparse
import json
import os
import pathlib
import signal
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from osc_mdev.domain import novaconf  # noqa: E402
from osc_mdev.domain import traits  # noqa: E402
from tests.cloud import client  # noqa: E402


def nova_conf(info, downtime=True):
    """The ``[devices]`` and ``[mdev_<type>]`` part of a compute host's
    nova.conf, from its entry in the cloud's ``hosts``, and for NVIDIA
    types (unless not ``downtime``) the ``[libvirt]`` live-migration
    settings of Nova's vGPU guide; None for a host without mdev types.
    """
    if not info['enabled_mdev_types']:
        return None
    by_type = {}
    for gpu in info['gpus']:
        if gpu['mdev_type']:
            by_type.setdefault(gpu['mdev_type'], []).append(
                gpu['pci_address'])
    lines = ['[devices]', 'enabled_mdev_types = %s'
             % ', '.join(info['enabled_mdev_types'])]
    for mdev_type in info['enabled_mdev_types']:
        lines += ['', '[mdev_%s]' % mdev_type,
                  'device_addresses = %s'
                  % ', '.join(by_type.get(mdev_type, []))]
    if downtime and any(traits.mdev_type(t).is_nvidia
                        for t in info['enabled_mdev_types']):
        lines += ['', '[libvirt]'] + [
            '%s = %d' % item for item in novaconf.NVIDIA_DOWNTIME.items()]
    return '\n'.join(lines) + '\n'


def write_confs(cloud, directory):
    """Write ``nova-<host>.conf`` of each mdev host and the controller's
    ``controller.conf`` into ``directory``; answers their names.
    """
    directory = pathlib.Path(directory)
    written = []
    for host, info in sorted(cloud.hosts.items()):
        text = nova_conf(info)
        if text:
            (directory / ('nova-%s.conf' % host)).write_text(text)
            written.append('nova-%s.conf' % host)
    (directory / 'controller.conf').write_text(
        client.DEMO_CONTROLLER_CONF)
    written.append('controller.conf')
    return written


def boot_command(cloud, flavor='vgpu.nvidia-12', name='vm1'):
    """A curl command line that boots a server through the control API
    (the sandbox has no image service for 'openstack server create').
    """
    return "curl -s %s -d '%s'" % (cloud.control_url, json.dumps(
        {'op': 'boot', 'flavor': flavor, 'name': name}))


def describe(cloud):
    confs = write_confs(cloud, cloud.workdir)
    lines = [
        'The sandbox cloud is running. In another shell:',
        '',
        '    cd %s' % cloud.workdir,
        '    export OS_CLIENT_CONFIG_FILE=%s' % cloud.clouds_yaml,
        '    export OS_CLOUD=%s' % cloud.cloud_name,
        '    %s mdev provider list' % openstack_path(),
        '',
        'There: %s (each host\'s [devices] and [mdev_<type>], and the '
        'controller\'s [pci] alias).' % ', '.join(confs),
        'Boot a server of a flavor (no image service here, so not with '
        "'openstack server create'):",
        '',
        '    %s' % boot_command(cloud),
        '',
    ] + quota_lines(cloud) + [
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


def quota_lines(cloud: client.EmbeddedCloud) -> list[str]:
    """How to read the quotas, for a sandbox with a Keystone."""
    if not cloud.keystone_cloud:
        return []
    return ['GPU quotas (Nova enforces the limits of the sandbox\'s '
            'Keystone; log in to it with a password):', '',
            '    OS_CLOUD=%s %s mdev quota list --long' % (
                cloud.keystone_cloud, openstack_path()), '']


def with_limits(topology: str | None) -> bool:
    """Whether the cloud of ``topology`` (a JSON file, None for the demo
    one) gives Keystone limits: then it gets a Keystone whose limits Nova
    enforces (without limits Nova would refuse every server).
    """
    if topology is None:
        return True
    with open(topology) as source:
        return 'unified_limits' in json.load(source)


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
    with client.EmbeddedCloud(args.workdir, topology=args.topology,
                              keystone=with_limits(args.topology)) as cloud:
        wait(cloud)
    return 0


if __name__ == '__main__':
    sys.exit(main())
