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

"""A guided tour of osc-mdev on an embedded cloud (``tox -e demo``).

Starts the embedded test cloud (real Nova API, conductor, scheduler and
five fake-libvirt compute hosts against a real Placement: four with
mdev-capable GPUs, one of them a node whose name is not its service host,
and one whose SR-IOV GPUs Nova reports through PCI in Placement; see
tests/cloud/server.py), then runs the commands an operator
would, printing each command line and its real output.

``--keep`` leaves the cloud running at the end (as ``tools/sandbox.py``
does) until Ctrl-C.
"""

import argparse
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.cloud import client  # noqa: E402


def openstack_command():
    found = shutil.which('openstack')
    return [found] if found else [sys.executable, '-m',
                                  'openstackclient.shell']


class Tour:
    def __init__(self, cloud, workdir):
        self.cloud = cloud
        self.workdir = workdir
        self.env = cloud.cli_environ(
            {k: v for k, v in os.environ.items() if not k.startswith('OS_')})
        self.failures = 0

    def say(self, text):
        print('\n# ' + text.replace('\n', '\n# '), flush=True)

    def run(self, *args, expect_failure=False):
        print('$ openstack ' + ' '.join(shlex.quote(a) for a in args),
              flush=True)
        proc = subprocess.run(openstack_command() + list(args),
                              env=self.env, capture_output=True, text=True,
                              cwd=self.workdir)
        sys.stdout.write(proc.stdout)
        sys.stdout.write(proc.stderr)
        sys.stdout.flush()
        if (proc.returncode != 0) != expect_failure:
            self.failures += 1
            print('(unexpected exit status %d)' % proc.returncode)
        return proc

    def node(self, host):
        """The compute node (root provider name) of a service host."""
        return self.cloud.hosts[host]['hypervisor_hostname']

    def nova_conf(self, host):
        info = self.cloud.hosts[host]
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
        path = self.workdir / ('nova-%s.conf' % host)
        path.write_text('\n'.join(lines) + '\n')
        return path


def tour(cloud, workdir):
    t = Tour(cloud, workdir)
    t.say('Every physical GPU Nova reports to Placement, with its usage:')
    t.run('mdev', 'provider', 'list')

    host = sorted(cloud.hosts)[1]
    conf = t.nova_conf(host)
    t.say('Tag the GPUs of %s with the trait of the vGPU type its '
          'nova.conf gives them\n(%s):\n%s'
          % (host, conf.name, conf.read_text().rstrip()))
    t.run('mdev', 'trait', 'set', '--from-nova-conf', conf.name,
          '--host', t.node(host))
    for other in sorted(cloud.hosts):
        if other != host and cloud.hosts[other]['enabled_mdev_types']:
            subprocess.run(
                openstack_command() + [
                    'mdev', 'trait', 'set', '--from-nova-conf',
                    t.nova_conf(other).name, '--host', t.node(other)],
                env=t.env, cwd=workdir, capture_output=True, check=True)
    t.say('(the other hosts were tagged the same way)')
    t.say('Before restarting nova-compute on %s with a nova.conf, check it '
          'as Nova will read it\nand against what Placement has for the '
          'host (no finding: they agree):' % host)
    t.run('mdev', 'config', 'check', conf.name, '--host', host, '--long')
    t.run('mdev', 'provider', 'list', '--trait', 'CUSTOM_NVIDIA_12')

    t.say('A flavor for one nvidia-12 vGPU, validated against the cloud:')
    t.run('flavor', 'create', '--vcpus', '1', '--ram', '512', '--disk',
          '1', 'vgpu.nvidia-12', '-c', 'name', '-c', 'id')
    t.run('mdev', 'flavor', 'configure', 'vgpu.nvidia-12',
          '--resource-class', 'VGPU', '--mdev-type', 'nvidia-12')
    t.run('mdev', 'flavor', 'show', 'vgpu.nvidia-12')
    t.say('Asking for something no GPU can give fails before anything is '
          'written:')
    t.run('mdev', 'flavor', 'configure', 'vgpu.nvidia-12',
          '--resource-class', 'VGPU', '--mdev-type', 'nvidia-99',
          expect_failure=True)

    t.say('Boot two servers with it (through the test cloud, which has '
          'no image service):')
    for server in cloud.control('boot', flavor='vgpu.nvidia-12', count=2,
                                name='demo-vm'):
        print('%(name)s: %(status)s on %(host)s' % server)

    t.say('Which physical GPU backs the server?')
    t.run('mdev', 'allocation', 'show', 'demo-vm-1', '--long')
    t.say("The fake hypervisor's own record of each mdev's parent device "
          "agrees:\n" + '\n'.join(
              '  server %s: %s:%s (%s)' % (m['server'], m['node'],
                                           m['pci_address'], m['mdev_type'])
              for m in cloud.control('mdev_truth')))
    host, node = next((h, i['hypervisor_hostname'])
                      for h, i in sorted(cloud.hosts.items())
                      if i['hypervisor_hostname'] != h)
    t.say('Compute node %s (the name Placement has) is service host %s '
          'in Nova;\nboot a server there:' % (node, host))
    for server in cloud.control('boot', flavor='vgpu.nvidia-12', count=1,
                                name='demo-fqdn', host=host):
        print('%(name)s: %(status)s on %(host)s' % server)
    t.run('mdev', 'allocation', 'show', 'demo-fqdn', '--long')
    t.say('Which servers sit on the mdev devices, cloud-wide?')
    t.run('mdev', 'allocation', 'list', '--long')
    t.run('mdev', 'provider', 'list', '--trait', 'CUSTOM_NVIDIA_12')
    audit_tour(t, cloud)
    pci_tour(t, cloud)
    durable_tour(t, cloud)
    return t.failures


def audit_tour(t, cloud):
    """Break the cloud on purpose, audit it and repair it."""
    import json
    import urllib.request
    import uuid

    rows = json.loads(t.run('mdev', 'provider', 'list', '--host',
                            'compute1', '-f', 'json').stdout)
    gpu = rows[-1]
    t.say("Two common accidents: 'resource provider trait set' replaces "
          "every trait,\nso the type trait of %s:%s goes, and an "
          "allocation outlives its server:" % (gpu['Host'], gpu['Device']))
    t.run('resource', 'provider', 'trait', 'set', '--trait', 'OWNER_NOVA',
          gpu['UUID'])
    body = json.dumps({
        'allocations': {gpu['UUID']: {'resources': {'VGPU': 1}}},
        'project_id': 'demo', 'user_id': 'demo',
        'consumer_generation': None, 'consumer_type': 'INSTANCE'}).encode()
    consumer = str(uuid.uuid4())
    urllib.request.urlopen(urllib.request.Request(
        '%s/allocations/%s' % (cloud.placement_url, consumer), data=body,
        method='PUT', headers={
            'X-Auth-Token': 'admin', 'Content-Type': 'application/json',
            'OpenStack-API-Version': 'placement 1.39'}), timeout=30)
    print('(PUT /allocations/%s: 1 x VGPU on %s:%s, no such server)'
          % (consumer, gpu['Host'], gpu['Device']))
    t.say('The audit finds both (exit status 1: an error-level finding):')
    t.run('mdev', 'audit', '-c', 'Severity', '-c', 'Check', '-c', 'Host',
          '-c', 'Device', '-c', 'Server', expect_failure=True)
    t.say('Repair them; the orphan goes only because Nova says it has no '
          'such server,\nand only if its allocations did not change '
          'meanwhile:')
    t.run('mdev', 'audit', '--fix', 'orphaned-allocation,lost-trait',
          '-c', 'Check', '-c', 'Device', '-c', 'Server', '-c', 'Repair')
    t.say('Nothing is left:')
    t.run('mdev', 'audit')


def pci_tour(t, cloud):
    """The PCI-in-Placement host of the mixed cloud."""
    conf = t.workdir / 'controller.conf'
    conf.write_text(client.DEMO_CONTROLLER_CONF)
    t.say('Host sriov1 has no mdev: Nova reports its SR-IOV GPUs through '
          'PCI in Placement,\none provider per PF holding its VFs. Both '
          'kinds in one table:')
    t.run('mdev', 'provider', 'list', '--kind', 'all')
    t.say("A flavor asks for two L40S VFs by the controller's [pci] alias, "
          'checked\nagainst the alias definitions and Placement:')
    cloud.control('create_flavor', name='vgpu.l40s-2')
    t.run('mdev', 'flavor', 'configure', 'vgpu.l40s-2', '--pci-alias',
          'l40s-vf:2', '--controller-conf', str(conf))
    t.run('mdev', 'capacity', '--flavor', 'vgpu.l40s-2', '--controller-conf',
          str(conf))
    for server in cloud.control('boot', flavor='vgpu.l40s-2',
                                name='demo-pci'):
        print('%(name)s: %(status)s on %(host)s' % server)
    t.run('mdev', 'allocation', 'show', 'demo-pci', '--kind', 'pci')
    t.say("The fake hypervisor's record of the VFs the server got:\n" +
          '\n'.join('  %s: VF %s of PF %s' % (
              d['node'], d['pci_address'], d['parent_addr'])
              for d in cloud.control('pci_truth')))
    t.say('Nova replaces the traits of these providers with the device '
          "spec's, so\nosc-mdev refuses to set them:")
    t.run('mdev', 'trait', 'set', '--trait', 'CUSTOM_POOL_A',
          'sriov1:0000:c1:00.0', expect_failure=True)


def durable_tour(t, cloud):
    """Type traits that survive Nova re-creating a GPU's provider."""
    host = node = 'compute1'
    t.say('Nova re-creates a GPU\'s provider (new UUID, no operator traits) '
          'when the GPU\nloses its last instance. Export the tags as '
          'nova-compute provider config files:')
    t.run('mdev', 'trait', 'export', '--output-dir', 'exports')
    exported = t.workdir / 'exports' / ('%s.yaml' % node)
    print(exported.read_text(), end='')
    t.say('Check the file as nova-compute will read it, and against '
          'Placement:')
    t.run('mdev', 'config', 'check', '--provider-config',
          'exports/%s.yaml' % node, '--host', node)
    installed = t.workdir / 'compute1-provider_config'
    installed.mkdir()
    (installed / exported.name).write_text(exported.read_text())
    loaded = cloud.control('provider_config', host=host,
                           location=str(installed))
    print('(installed in %s\'s provider_config_location and restarted '
          'nova-compute: it loaded %s)'
          % (host, ', '.join(loaded['providers'])))

    def show():
        t.run('mdev', 'provider', 'list', '--host', node, '-c', 'UUID',
              '-c', 'Device', '-c', 'Traits')

    show()
    cloud.control('reconfigure', host=host,
                  enabled_mdev_types=['nvidia-11'],
                  mdev={'nvidia-11': {'max_instances': 16}})
    cloud.control('reconfigure', host=host, enabled_mdev_types=['nvidia-11'])
    t.say('max_instances left the second GPU no instance, then gave it back: '
          'Nova deleted its\nprovider and created a new one (new UUID), '
          'with the exported traits:')
    show()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--keep', action='store_true',
                        help='keep the cloud running until Ctrl-C')
    args = parser.parse_args()
    missing = client.missing_modules()
    if missing:
        sys.exit('The demo needs %s; run it with "tox -e demo".'
                 % ', '.join(missing))
    with tempfile.TemporaryDirectory(prefix='osc-mdev-demo-') as tmp:
        workdir = pathlib.Path(tmp)
        print('Starting the embedded cloud (Nova API, conductor, scheduler, '
              'five compute hosts with fake GPUs, Placement)...',
              flush=True)
        started = time.monotonic()
        with client.EmbeddedCloud(workdir / 'cloud') as cloud:
            print('Cloud ready in %.0f s.' % (time.monotonic() - started))
            failures = tour(cloud, workdir)
            if args.keep:
                from tools import sandbox
                sandbox.wait(cloud)
    print('\nTour finished in %.0f s%s.' % (
        time.monotonic() - started,
        '' if not failures else ' with %d unexpected results' % failures))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
