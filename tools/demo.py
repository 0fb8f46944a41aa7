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
and one whose SR-IOV GPUs Nova reports through PCI in Placement, and a
real Keystone whose unified limits Nova enforces; see
tests/cloud/server.py), then runs the commands an operator
would, printing each command line and its real output.

The outputs the documentation shows are this tour's: each ``t.sample(NAME,
...)`` runs a command and records its output as
``doc/source/samples/NAME.txt`` (see tools/samples.py), rewritten only when
the command prints something else than the file holds; README.rst's
copies follow. tests/e2e/test_doc_samples.py runs the same tour and fails
when a sample no longer matches. To document a new command's output, add
one ``t.sample('<name>', 'mdev', ...)`` line where the tour has the state
to show, run ``tox -e demo``, and include the file in its page::

    .. literalinclude:: /samples/<name>.txt
       :language: console

``--keep`` leaves the cloud running at the end (as ``tools/sandbox.py``
does) until Ctrl-C; ``--no-samples`` writes nothing.
"""

import argparse
import copy
import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.cloud import client  # noqa: E402
from tools import samples  # noqa: E402
from tools import sandbox  # noqa: E402


#: The demo cloud's one-time-use device: a whole GPU of sriov1 (after its
#: PFs), which Nova keeps from the next server until it is cleaned.
ONE_TIME_USE = {'vendor_id': '10de', 'product_id': '2335'}
#: The controller's ``[pci] alias`` of that GPU.
H200_ALIAS = dict(name='h200', **ONE_TIME_USE, device_type='type-PCI')


def topology():
    """The demo cloud: the embedded cloud's demo topology
    (tests/cloud/topologies.py) with a one-time-use whole GPU on sriov1,
    ``[pci] alias`` h200 for it.
    """
    from tests.cloud import topologies

    demo = copy.deepcopy(topologies.DEMO_TOPOLOGY)
    host, = (h for h in demo['hosts'] if h['name'] == 'sriov1')
    host['pci']['whole'] = [dict(ONE_TIME_USE, count=1)]
    host['pci']['device_spec'].append(
        dict(ONE_TIME_USE, one_time_use='true'))
    demo['pci_alias'].append(H200_ALIAS)
    return demo


def controller_conf():
    """The controller's nova.conf of the demo cloud: the embedded cloud's
    demo topology's, with the alias h200 of the one-time-use GPU.
    """
    pci, blank, rest = client.DEMO_CONTROLLER_CONF.partition('\n\n')
    assert pci.startswith('[pci]\n') and blank, \
        'the controller nova.conf does not start with its [pci] section'
    return '%s\nalias = %s\n\n%s' % (pci, json.dumps(H200_ALIAS), rest)


def openstack_command():
    found = shutil.which('openstack')
    return [found] if found else [sys.executable, '-m',
                                  'openstackclient.shell']


class Tour:
    """Runs the tour's commands on ``cloud`` with ``workdir`` as the
    current directory; hands each sample to ``recorder`` (a
    tools.samples.Recorder), if any.
    """

    def __init__(self, cloud, workdir, recorder=None):
        self.cloud = cloud
        self.workdir = workdir
        self.recorder = recorder
        self.env = cloud.cli_environ(
            {k: v for k, v in os.environ.items() if not k.startswith('OS_')})
        self.failures = 0
        self.names = {}

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

    def sample(self, name, *args, expect_failure=False):
        """``run`` the command and record its output as sample ``name``.
        """
        proc = self.run(*args, expect_failure=expect_failure)
        self.record(name, samples.sample_text(
            'openstack ' + ' '.join(shlex.quote(a) for a in args),
            proc.stdout, proc.stderr))
        return proc

    def show_file(self, name, path):
        """Print a file of the work directory; record it as sample
        ``name`` (``$ cat FILE`` and its text).
        """
        path = pathlib.Path(path)
        text = samples.sample_text('cat %s' % path.name,
                                   path.read_text(), '')
        print(text, end='')
        self.record(name, text)

    def shell(self, name, *commands):
        """Run commands other than ``openstack`` (argument lists) in the
        work directory; record them and their output as one sample
        ``name``.
        """
        text = ''
        for argv in commands:
            proc = subprocess.run(argv, cwd=self.workdir, text=True,
                                  capture_output=True,
                                  env=dict(self.env, LC_ALL='C'))
            if proc.returncode != 0:
                self.failures += 1
            text += samples.sample_text(
                ' '.join(shlex.quote(a) for a in argv), proc.stdout,
                proc.stderr)
        print(text, end='')
        self.record(name, text)

    def record(self, name, text):
        if self.recorder is not None:
            names = samples.cloud_names(self.cloud)
            names.update(self.names)
            self.recorder.record(name, text, names, self.workdir)

    def boot(self, flavor, name, host, count=1):
        """Boot servers of ``flavor`` on service host ``host`` through
        the cloud's control API (it has no image service).
        """
        servers = self.cloud.control('boot', flavor=flavor, count=count,
                                     name=name, host=host)
        for server in servers:
            print('%(name)s: %(status)s on %(host)s' % server)
            if server['status'] != 'ACTIVE':
                self.failures += 1
        return servers

    def sysfs(self, host, mdevs=(), name=None):
        """A copy of the /sys of ``host``'s mdev GPUs in the work
        directory (``name``, ``sys-<host>`` by default), for ``config
        check --sysfs``, with ``mdevs`` (entries of the cloud's
        ``mdev_truth``) on their parents.
        """
        from tests.fixtures import sysfs

        root = self.workdir / (name or 'sys-%s' % host)
        sysfs.build(root, devices=[
            (gpu['pci_address'], gpu['offers'], None)
            for gpu in self.cloud.hosts[host]['gpus']], mdevs=[
            (m['mdev_uuid'], m['pci_address'], m['mdev_type'])
            for m in mdevs])
        return root

    def node(self, host):
        """The compute node (root provider name) of a service host."""
        return self.cloud.hosts[host]['hypervisor_hostname']

    def nova_conf(self, host):
        path = self.workdir / ('nova-%s.conf' % host)
        path.write_text(sandbox.nova_conf(self.cloud.hosts[host]))
        return path


def tour(cloud, workdir):
    return tour_with(Tour(cloud, workdir))


def tour_with(t):
    """The tour, on the cloud of ``t``; answers the number of commands
    that ended otherwise than expected.
    """
    cloud = t.cloud
    t.say('Every physical GPU Nova reports to Placement, with its usage:')
    t.sample('provider-list', 'mdev', 'provider', 'list')

    host = 'compute2'
    sys_root = t.sysfs(host)
    sysfs_tour(t, sys_root)
    t.say('A nova.conf for %s with a mistake, checked on the host before '
          'nova-compute\nreads it (%s is a copy of its /sys):'
          % (host, sys_root.name))
    typo = t.workdir / 'nova-typo.conf'
    typo.write_text(sandbox.nova_conf(cloud.hosts[host]).replace(
        '= 0000:84:00.0', '= 84:00.0'))
    t.show_file('nova-conf-typo', typo)
    t.sample('config-check-error', 'mdev', 'config', 'check', typo.name,
             '--sysfs', sys_root.name, expect_failure=True)
    conf = t.nova_conf(host)
    t.say("The vGPU types of %s's GPUs as its nova.conf has them:" % host)
    t.show_file('nova-conf', conf)
    t.sample('config-check-sysfs', 'mdev', 'config', 'check', conf.name,
             '--sysfs', sys_root.name, '--long')
    t.say('Check it against what Placement has for the host:')
    t.sample('config-check-host', 'mdev', 'config', 'check', conf.name,
             '--host', host, '--long')
    t.say('Tag each GPU with the trait of its type (see it first with '
          '--dry-run):')
    t.sample('trait-set-dry-run', 'mdev', 'trait', 'set',
             '--compute-conf', '%s=%s' % (t.node(host), conf.name),
             '--dry-run')
    t.sample('trait-set-compute-conf', 'mdev', 'trait', 'set',
             '--compute-conf', '%s=%s' % (t.node(host), conf.name))
    for other in sorted(cloud.hosts):
        if other != host and cloud.hosts[other]['enabled_mdev_types']:
            subprocess.run(
                openstack_command() + [
                    'mdev', 'trait', 'set', '--compute-conf', '%s=%s' % (
                        t.node(other), t.nova_conf(other).name)],
                env=t.env, cwd=t.workdir, capture_output=True, check=True)
    t.say('(the other hosts were tagged the same way)')
    t.sample('provider-list-trait', 'mdev', 'provider', 'list',
             '--require-trait', 'CUSTOM_NVIDIA_12')

    t.say('A flavor for one nvidia-12 vGPU, validated against the cloud:')
    t.run('flavor', 'create', '--vcpus', '1', '--ram', '512', '--disk',
          '1', 'vgpu.nvidia-12', '-c', 'name')
    t.sample('flavor-configure', 'mdev', 'flavor', 'configure',
             'vgpu.nvidia-12', '--resource-class', 'VGPU', '--mdev-type',
             'nvidia-12')
    t.sample('flavor-show', 'mdev', 'flavor', 'show', 'vgpu.nvidia-12')
    t.say('Asking for something no GPU can give fails before anything is '
          'written:')
    t.sample('flavor-configure-refused', 'mdev', 'flavor', 'configure',
             'vgpu.nvidia-12', '--resource-class', 'VGPU', '--mdev-type',
             'nvidia-99', expect_failure=True)

    t.say('Boot servers with it (through the control API of the test '
          'cloud, which has\nno image service):')
    t.boot('vgpu.nvidia-12', 'demo-vm-1', 'compute2')
    t.boot('vgpu.nvidia-12', 'demo-vm-2', 'gpu_node.rack3')

    t.say('Which physical GPU backs the server?')
    t.sample('allocation-show', 'mdev', 'allocation', 'show', 'demo-vm-1')
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
    t.boot('vgpu.nvidia-12', 'demo-fqdn', host)
    t.sample('allocation-show-long', 'mdev', 'allocation', 'show',
             'demo-fqdn', '--long')
    t.say('Which servers sit on the mdev devices, cloud-wide, and on one '
          'GPU?')
    t.sample('allocation-list', 'mdev', 'allocation', 'list', '--long')
    t.sample('allocation-list-device', 'mdev', 'allocation', 'list',
             '--device', '%s:0000:25:01.0' % node)
    t.sample('provider-show', 'mdev', 'provider', 'show',
             '%s:0000:25:01.0' % node)
    t.sample('provider-list-json', 'mdev', 'provider', 'list', '--host',
             'compute2', '-f', 'json')
    capacity_tour(t, cloud)
    audit_tour(t, cloud)
    pci_tour(t, cloud)
    errors_tour(t)
    durable_tour(t, cloud)
    migration_tour(t, cloud)
    config_check_tour(t, cloud)
    host_check_tour(t, cloud)
    fleet_tour(t, cloud)
    drain_tour(t, cloud)
    tags_tour(t)
    quota_tour(t, cloud)
    generate_tour(t)
    type_change_tour(t, cloud)
    one_time_use_tour(t, cloud)
    return t.failures


def sysfs_tour(t, root):
    """What the kernel of a GPU host lists: the mdev-capable devices and
    the types they offer (doc/source/admin/walkthrough.rst).
    """
    t.say('On the host, the kernel lists the mdev-capable devices and the '
          'types each offers\n(%s is a copy of its /sys):' % root.name)
    bus = '%s/class/mdev_bus/' % root.name
    first = sorted(p.name for p in (root / 'class' / 'mdev_bus').iterdir())
    types = '%s%s/mdev_supported_types/' % (bus, first[0])
    t.shell('sysfs-mdev-bus', ['ls', bus], ['ls', types],
            ['cat', types + 'nvidia-11/available_instances'])


def generate_tour(t):
    """A compute node with two NVIDIA L4 GPUs whose vGPUs are SR-IOV
    virtual functions (vGPU 17 and later), VFs enabled and untyped as
    after sriov-manage -e, and the files ``config generate`` writes for
    it (doc/source/admin/sriov-vgpus.rst). It needs no cloud.
    """
    from tests.fixtures import sysfs

    root = t.workdir / 'sys-gpu5'
    sysfs.build(root, vgpu_gpus=[
        sysfs.VgpuGpu('0000:25:00.0', numvfs=4, totalvfs=32),
        sysfs.VgpuGpu('0000:26:00.0', numvfs=4, totalvfs=32)])
    vf = '%s/bus/pci/devices/0000:25:00.4/nvidia/' % root.name
    t.say('A GPU whose vGPUs are virtual functions: the types a VF can '
          'take, and its own\n(%s is a copy of the /sys of gpu5):'
          % root.name)
    t.shell('sysfs-vgpu-types', ['cat', vf + 'creatable_vgpu_types'],
            ['cat', vf + 'current_vgpu_type'])
    t.say('Three L4-8Q vGPUs on one GPU, L4-4Q on every VF of the other:')
    types = ['--type', '0000:25:00.0=L4-8Q:3', '--type',
             '0000:26:00.0=L4-4Q']
    t.sample('config-generate', 'mdev', 'config', 'generate', '--sysfs',
             root.name, *types, '--output-dir', 'vgpu')
    for name, path in (('config-generate-compute',
                        'nova-compute-vgpu.conf'),
                       ('config-generate-controller',
                        'nova-controller-vgpu.conf'),
                       ('config-generate-unit',
                        'osc-mdev-vgpu-types.service')):
        t.shell(name, ['cat', 'vgpu/' + path])
    t.say("The same options as the deployment tools read them, the node's "
          "files named after\nits name in their inventory:")
    for layout, directory in (('kolla-ansible', 'kolla'),
                              ('openstack-ansible', 'openstack_deploy')):
        t.sample('config-generate-%s' % layout, 'mdev', 'config',
                 'generate', '--sysfs', root.name, *types, '--layout',
                 layout, '--inventory-host', 'gpu5', '--output-dir',
                 directory)
    t.say('A type the GPU cannot create is refused; nothing is written:')
    t.sample('config-generate-refused', 'mdev', 'config', 'generate',
             '--sysfs', root.name, '--type', '0000:25:00.0=A16-8Q',
             '--output-dir', 'vgpu', expect_failure=True)


def capacity_tour(t, cloud):
    """Room left for a flavor, and why a flavor gets NoValidHost."""
    t.say('How many more servers of the flavor fit, and where?')
    t.sample('capacity', 'mdev', 'capacity', '--flavor', 'vgpu.nvidia-12',
             '--long')
    t.say('The same figures for Prometheus, every minute from cron, with '
          'the servers on\neach GPU and the types as compute2\'s nova.conf '
          'names them:')
    t.sample('metrics', 'mdev', 'metrics', '--flavor', 'vgpu.nvidia-12',
             '--allocations', '--compute-conf',
             'compute2=%s' % t.nova_conf('compute2').name)
    t.say('A flavor asking a trait no GPU has gets NoValidHost; the '
          'explainer says why\nand what would change it:')
    cloud.control('create_flavor', name='vgpu.gold', vcpus=2, ram=2048,
                  disk=20, extra_specs={'resources:VGPU': '1',
                                        'trait:CUSTOM_GOLD': 'required'})
    t.sample('capacity-explain', 'mdev', 'capacity', '--flavor',
             'vgpu.gold', '--explain')
    t.sample('flavor-show-problem', 'mdev', 'flavor', 'show', 'vgpu.gold')
    t.say('A flavor written with a named request group, read as Nova '
          'reads it:')
    cloud.control('create_flavor', name='vgpu.named', vcpus=2, ram=2048,
                  disk=20, extra_specs={
                      'resources_GPU:VGPU': '1',
                      'trait_GPU:CUSTOM_NVIDIA_12': 'required'})
    t.sample('flavor-show-named', 'mdev', 'flavor', 'show', 'vgpu.named')
    t.sample('flavor-configure-named', 'mdev', 'flavor', 'configure',
             'vgpu.named', '--resource-class', 'VGPU', '--mdev-type',
             'nvidia-12', '--dry-run')
    t.say('One request for several servers (server create --min N '
          '--max N): the scheduler\nclaims only the first candidate of '
          'each host, so fewer fit in one request:')
    cloud.control('create_flavor', name='vgpu.big', extra_specs={
        'resources:VGPU': '8', 'trait:CUSTOM_NVIDIA_11': 'required'})
    t.sample('capacity-count', 'mdev', 'capacity', '--flavor', 'vgpu.big',
             '--count', '8')


def audit_tour(t, cloud):
    """Break the cloud on purpose, audit it and repair it."""
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
    t.names[consumer] = 'consumer without a server'
    urllib.request.urlopen(urllib.request.Request(
        '%s/allocations/%s' % (cloud.placement_url, consumer), data=body,
        method='PUT', headers={
            'X-Auth-Token': 'admin', 'Content-Type': 'application/json',
            'OpenStack-API-Version': 'placement 1.39'}), timeout=30)
    print('(PUT /allocations/%s: 1 x VGPU on %s:%s, no such server)'
          % (consumer, gpu['Host'], gpu['Device']))
    t.say('The audit finds both, and the flavor no host can serve (exit '
          'status 1:\nan error-level finding):')
    t.sample('audit', 'mdev', 'audit', '-c', 'Severity', '-c', 'Check',
             '-c', 'Host', '-c', 'Device', '-c', 'Server',
             expect_failure=True)
    t.sample('audit-yaml', 'mdev', 'audit', '--host', 'compute1', '-f',
             'yaml', expect_failure=True)
    t.say('Repair them; the orphan goes only because Nova says it has no '
          'such server,\nand only if its allocations did not change '
          'meanwhile:')
    t.sample('audit-fix-dry-run', 'mdev', 'audit', '--fix',
             'orphaned-allocation,lost-trait', '--dry-run', '-c', 'Check',
             '-c', 'Device', '-c', 'Server', '-c', 'Repair',
             expect_failure=True)
    t.sample('audit-fix', 'mdev', 'audit', '--fix',
             'orphaned-allocation,lost-trait', '-c', 'Check', '-c',
             'Device', '-c', 'Server', '-c', 'Repair')
    t.say('Only the flavor is left; tag a GPU with its trait:')
    t.run('mdev', 'trait', 'set', '--trait', 'CUSTOM_GOLD',
          'compute1:0000:81:00.0')
    t.run('mdev', 'audit')


def pci_tour(t, cloud):
    """The PCI-in-Placement host of the mixed cloud."""
    conf = t.workdir / 'controller.conf'
    conf.write_text(controller_conf())
    t.say('Host sriov1 has no mdev: Nova reports its SR-IOV GPUs through '
          'PCI in Placement,\none provider per PF holding its VFs. Both '
          'kinds in one table:')
    t.sample('provider-list-kind-all', 'mdev', 'provider', 'list',
             '--kind', 'all')
    t.say("A flavor asks for two L40S VFs by the controller's [pci] alias, "
          'checked\nagainst the alias definitions and Placement:')
    t.show_file('controller-conf', conf)
    cloud.control('create_flavor', name='vgpu.l40s-2', vcpus=4, ram=8192,
                  disk=20, extra_specs={'group_policy': 'isolate'})
    t.sample('flavor-configure-pci', 'mdev', 'flavor', 'configure',
             'vgpu.l40s-2', '--pci-alias', 'l40s-vf:2', '--controller-conf',
             conf.name)
    t.sample('capacity-pci', 'mdev', 'capacity', '--flavor', 'vgpu.l40s-2',
             '--controller-conf', conf.name, '--long')
    t.boot('vgpu.l40s-2', 'demo-pci', 'sriov1')
    t.sample('allocation-show-pci', 'mdev', 'allocation', 'show',
             'demo-pci', '--kind', 'pci')
    t.say("The fake hypervisor's record of the VFs the server got:\n" +
          '\n'.join('  %s: VF %s of PF %s' % (
              d['node'], d['pci_address'], d['parent_addr'])
              for d in cloud.control('pci_truth')))
    t.say('Nova replaces the traits of these providers with the device '
          "spec's, so\nosc-mdev refuses to set them:")
    t.sample('trait-set-pci-refused', 'mdev', 'trait', 'set', '--trait',
             'CUSTOM_POOL_A', 'sriov1:0000:c1:00.0', expect_failure=True)


def errors_tour(t):
    """Bad input: one line, exit status 1, nothing written."""
    t.say('Bad input is one line and exit status 1; nothing is written:')
    t.sample('error-unknown-device', 'mdev', 'provider', 'show',
             'compute1:0000:99:00.0', expect_failure=True)
    t.sample('error-trait-name', 'mdev', 'provider', 'list',
             '--require-trait', 'nvidia-35', expect_failure=True)
    t.sample('trait-unset-owner-refused', 'mdev', 'trait', 'unset',
             '--trait', 'OWNER_NOVA', '--all', expect_failure=True)


def migration_tour(t, cloud):
    """Drain a GPU host: plan the live migrations, run them."""
    import json

    node = 'gpu4.dc2.example.net'
    t.say('Maintenance on %s: where can its servers go? Nova live-migrates '
          'mdevs only\nwith libvirt 8.6.0 and QEMU 8.1.0 on both hosts; '
          'these run 8.0.0 and 6.2.0:' % node)
    t.sample('migration-check', 'mdev', 'migration', 'check', 'demo-fqdn',
             '-c', 'Host', '-c', 'Live', '-c', 'Cold', '-c', 'Reason')
    for host, info in sorted(cloud.hosts.items()):
        if info['enabled_mdev_types']:
            cloud.control('hypervisor_versions', host=host,
                          libvirt_version='8.6.0', qemu_version='8.1.0')
    t.say('(the GPU hosts were upgraded to libvirt 8.6.0 and QEMU 8.1.0)\n'
          'Plan live migrations for every server with an mdev on %s:' % node)
    t.sample('migration-plan', 'mdev', 'migration', 'plan', '--host', node,
             '--live', '-c', 'Name', '-c', 'Target Host', '-c', 'Kind',
             '-c', 'Command', '-c', 'Not Checked')
    rows = json.loads(subprocess.run(
        openstack_command() + ['mdev', 'migration', 'plan', '--host', node,
                               '--live', '-f', 'json'],
        env=t.env, cwd=t.workdir, capture_output=True, text=True).stdout)
    t.say('Run the planned commands:')
    for row in rows:
        if row['Command']:
            t.run(*shlex.split(row['Command'])[1:])
    moved = {row['Server'] for row in rows if row['Command']}
    t.say("The fake hypervisor's record of the moved servers' mdevs:\n" +
          '\n'.join('  server %s: %s:%s (%s)' % (
              m['server'], m['node'], m['pci_address'], m['mdev_type'])
              for m in cloud.control('mdev_truth') if m['server'] in moved))
    t.run('mdev', 'migration', 'plan', '--host', node)


def durable_tour(t, cloud):
    """Type traits that survive Nova re-creating a GPU's provider."""
    host = node = 'compute1'
    t.say('Nova re-creates a GPU\'s provider (new UUID, no operator traits) '
          'when the GPU\nloses its last instance. Export the tags as '
          'nova-compute provider config files:')
    t.sample('trait-export', 'mdev', 'trait', 'export',
             '--provider-config-dir', 'exports')
    exported = t.workdir / 'exports' / ('%s.yaml' % node)
    t.show_file('trait-export-file', exported)
    t.say('Check the file as nova-compute will read it, and against '
          'Placement:')
    t.sample('config-check-provider-config', 'mdev', 'config', 'check',
             '--provider-config', 'exports/%s.yaml' % node, '--host', node)
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


def config_check_tour(t, cloud):
    """``config check`` on whole nova.conf files: a clean one, an option
    name Nova does not read, and the live-migration settings NVIDIA vGPUs
    need (doc/source/admin/config-check.rst).
    """
    host = 'compute2'
    devices = sandbox.nova_conf(cloud.hosts[host], downtime=False)
    head = '[DEFAULT]\nhost = %s\n\n[libvirt]\nvirt_type = kvm\n' % host
    downtime = ('live_migration_downtime = 500000\n'
                'live_migration_downtime_steps = 3\n'
                'live_migration_downtime_delay = 3\n')
    conf = t.workdir / 'nova.conf'
    conf.write_text(head + downtime + '\n' + devices)
    t.say("The whole nova.conf of %s; a clean file gives the result row "
          "alone:" % host)
    t.show_file('nova-conf-whole', conf)
    t.sample('config-check-clean', 'mdev', 'config', 'check', conf.name,
             '-f', 'value', '-c', 'Message')
    names = t.workdir / 'nova-names.conf'
    names.write_text(conf.read_text().replace(
        '= 0000:84:01.0\n', '= 0000:84:01.0\nmdev_clas = CUSTOM_NVIDIA_12\n'))
    t.say('An option name Nova does not know is ignored by nova-compute '
          'without a word;\nthe check names it (mdev_clas under '
          '[mdev_nvidia-12]):')
    t.sample('config-check-names', 'mdev', 'config', 'check', names.name,
             '--max-width', '100')
    t.sample('config-check-json', 'mdev', 'config', 'check', names.name,
             '--long', '-f', 'json')
    untuned = t.workdir / 'nova-untuned.conf'
    untuned.write_text(head + '\n' + devices)
    t.say('NVIDIA vGPUs need other live-migration downtime settings than '
          "Nova's defaults:")
    t.show_file('nova-conf-untuned', untuned)
    t.sample('config-check-downtime', 'mdev', 'config', 'check',
             untuned.name, '-f', 'yaml')


def host_check_tour(t, cloud):
    """``config check --sysfs --host`` on the hosts themselves: a GPU
    host that lost an mdev, and the SR-IOV vGPU host, typed and as after
    a reboot (doc/source/cli/config.rst).
    """
    host = 'compute2'
    mdevs = [m for m in cloud.control('mdev_truth') if m['host'] == host]
    root = t.sysfs(host, mdevs=mdevs[1:], name='sys-%s-lost' % host)
    t.say('%s rebooted and one mdev did not come back: its tree (%s) has '
          '%d mdev(s)\nwhere the fake hypervisor has %d:'
          % (host, root.name, len(mdevs) - 1, len(mdevs)))
    t.sample('config-check-lost-mdev', 'mdev', 'config', 'check',
             t.nova_conf(host).name, '--sysfs', root.name, '--host',
             t.node(host), '-f', 'yaml')

    host = 'sriov1'
    info = cloud.hosts[host]
    conf = t.workdir / ('nova-%s.conf' % host)
    conf.write_text(sandbox.pci_nova_conf(info))
    root = pathlib.Path(sandbox.write_vgpu_sysfs(
        info, t.workdir / ('sys-%s' % host)))
    first = sandbox.vgpu_gpus(info)[0]
    pf, vf = first.pf, first.vfs[0]
    devices = '%s/bus/pci/devices/' % root.name
    t.say('Host %s has SR-IOV vGPUs: each VF has the vGPU type written to '
          'its\nnvidia/current_vgpu_type (%s is a copy of its /sys):'
          % (host, root.name))
    t.shell('sysfs-vgpu-vf', ['ls', devices + pf],
            ['cat', devices + vf + '/nvidia/current_vgpu_type'])
    t.show_file('nova-conf-sriov1', conf)
    t.say('Every VF Nova offers has the type of its class:')
    t.sample('config-check-vgpu', 'mdev', 'config', 'check', conf.name,
             '--sysfs', root.name, '--host', t.node(host), '-f', 'yaml')
    reboot = pathlib.Path(sandbox.write_vgpu_sysfs(
        info, t.workdir / ('sys-%s-reboot' % host), typed=False))
    t.say('After a reboot every VF is back at type 0 (%s), while Nova '
          'still offers them\nand Placement holds those of demo-pci:'
          % reboot.name)
    devices = '%s/bus/pci/devices/' % reboot.name
    t.shell('sysfs-vgpu-reboot',
            ['cat', devices + vf + '/nvidia/current_vgpu_type'],
            ['cat', devices + vf + '/nvidia/creatable_vgpu_types'])
    t.sample('config-check-vgpu-reboot', 'mdev', 'config', 'check',
             conf.name, '--sysfs', reboot.name, '--host', t.node(host),
             '-f', 'yaml')


def fleet_tour(t, cloud):
    """Every node's snapshot checked at once on the controller: the host
    trees of host_check_tour, after the reboot (doc/source/admin/fleet.rst,
    doc/source/cli/host.rst).
    """
    t.say('The same checks for a fleet: each node takes its snapshot (no '
          'credentials, no\nnetwork), the controller checks them all '
          'against one read of Placement:')
    snapshots = t.workdir / 'snapshots'
    snapshots.mkdir()
    nodes = (('compute2', 'nova-compute2.conf', 'sys-compute2-lost'),
             ('gpu4', 'nova-gpu4.conf', 'sys-gpu4'),
             ('sriov1', 'nova-sriov1.conf', 'sys-sriov1-reboot'))
    for host, conf, root in nodes:
        if not (t.workdir / root).exists():
            t.sysfs(host, mdevs=[m for m in cloud.control('mdev_truth')
                                 if m['host'] == host], name=root)
        if not (t.workdir / conf).exists():
            t.nova_conf(host)
        libvirt = t.workdir / ('qemu-%s' % host)
        libvirt.mkdir()
        args = ('mdev', 'host', 'snapshot', conf, '--sysfs', root,
                '--libvirt-dir', libvirt.name, '--node-name', t.node(host),
                '--output', 'snapshots/%s.json' % host)
        if host == 'sriov1':
            t.sample('host-snapshot', *args)
        else:
            t.run(*args)
    t.sample('config-check-snapshot-dir', 'mdev', 'config', 'check',
             '--snapshot-dir', snapshots.name, '-c', 'Node', '-c',
             'Severity', '-c', 'Message', '--max-width',
             '120')


def type_change_tour(t, cloud):
    """The plan of a GPU's type change (doc/source/admin/change-type.rst).
    """
    host = 'compute2'
    t.say("Give %s's nvidia-11 GPU the type nvidia-12: the plan (it writes "
          "nothing):" % host)
    t.sample('type-change-plan', 'mdev', 'type', 'change',
             '%s:0000:84:00.0' % host, '--to', 'nvidia-12', '--max-width',
             '100',
             '--compute-conf', '%s=%s' % (t.node(host),
                                          t.nova_conf(host).name))


def one_time_use_tour(t, cloud):
    """A one-time-use device used once, waiting to be cleaned, released
    (doc/source/admin/one-time-use.rst).
    """
    device = 'sriov1:0000:c1:03.0'
    t.say('%s is a whole GPU whose device_spec sets one_time_use: a server '
          'uses it once,\nthen Nova keeps it from the next one until it '
          'is released:' % device)
    cloud.control('create_flavor', name='h200', vcpus=4, ram=8192, disk=20,
                  extra_specs={'pci_passthrough:alias': 'h200:1'})
    server, = t.boot('h200', 'demo-once', 'sriov1')
    cloud.control('delete', server=server['id'])
    cloud.control('periodic')
    print('(demo-once deleted)')
    t.sample('provider-list-state', 'mdev', 'provider', 'list', '--kind',
             'all', '--host', 'sriov1', '-c', 'Device', '-c', 'Kind', '-c',
             'Resource Class', '-c', 'Used', '-c', 'Free', '-c', 'State')
    t.say('Once the device is cleaned, give it back:')
    t.sample('provider-release-dry-run', 'mdev', 'provider', 'release',
             '--all', '--dry-run')
    t.sample('provider-release', 'mdev', 'provider', 'release', device)


def drain_tour(t, cloud):
    """Drain a GPU host: check its servers, plan them jointly, run the
    plan (doc/source/admin/migration.rst). Every request names its type
    or has a single device to land on, so that no answer depends on the
    order in which Placement lists equal devices.
    """
    source, tight, old = 'gpu4', 'gpu_node.rack3', 'compute2'
    node = t.node(source)
    cloud.control('create_flavor', name='vgpu.any',
                  extra_specs={'resources:VGPU': '1'})
    cloud.control('create_flavor', name='vgpu.nvidia-12x5', extra_specs={
        'resources:VGPU': '5', 'trait:CUSTOM_NVIDIA_12': 'required'})
    t.say('Drain %s again: three training servers of vgpu.nvidia-12 run '
          'there.' % node)
    t.boot('vgpu.nvidia-12', 'train', source, count=3)
    t.say("Five more mdevs are used on %s's nvidia-12 GPU, and %s is "
          'back on libvirt 8.0.0\nand QEMU 6.2.0:' % (tight, old))
    t.boot('vgpu.nvidia-12x5', 'busy', tight)
    cloud.control('hypervisor_versions', host=old,
                  libvirt_version='8.0.0', qemu_version='6.2.0')
    cloud.control('set_service', host=source, disabled=True,
                  reason='maintenance')
    t.say('(nova-compute of %s disabled: no new server lands there)'
          % source)
    t.sample('drain-check', 'mdev', 'migration', 'check', 'train-1', '-c',
             'Host', '-c', 'Live', '-c', 'Cold', '-c', 'Devices', '-c',
             'Reason')
    t.sample('drain-check-not-checked', 'mdev', 'migration', 'check',
             'train-1', '--target', tight, '-f', 'yaml', '-c',
             'Not Checked')
    t.say('A server whose flavor asks for any VGPU, on an nvidia-11 GPU of '
          'compute1; the one\nVGPU device of %s is an nvidia-12:' % tight)
    t.boot('vgpu.any', 'render', 'compute1')
    t.sample('drain-check-any-type', 'mdev', 'migration', 'check',
             'render', '--target', tight, '-f', 'yaml',
             expect_failure=True)
    t.say('Plan the whole host, first onto two nodes only, then onto any:')
    t.sample('drain-plan-targets', 'mdev', 'migration', 'plan', '--host',
             node, '--live', '--target', old, '--target', tight, '-c',
             'Name', '-c', 'Target Host', '-c', 'Kind', '-c', 'Reason',
             expect_failure=True)
    t.sample('drain-plan', 'mdev', 'migration', 'plan', '--host', node,
             '-c', 'Name', '-c', 'Target Host', '-c', 'Kind')
    plan = t.sample('drain-plan-commands', 'mdev', 'migration', 'plan',
                    '--host', node, '-f', 'value', '-c', 'Command')
    t.say('Run the commands in order:')
    for i, line in enumerate(plan.stdout.splitlines()):
        for j, command in enumerate(line.split(' && ')):
            args = shlex.split(command)[1:]
            if i == 0 and j == 0:
                t.sample('drain-migrate', *args)
            else:
                t.run(*args)
    t.sample('drain-plan-empty', 'mdev', 'migration', 'plan', '--host',
             node)
    t.sample('drain-allocations', 'mdev', 'allocation', 'list', '--host',
             old, '-c', 'Server Name', '-c', 'Host', '-c', 'Device',
             '--sort-column', 'Server Name')
    cloud.control('set_service', host=source, disabled=False)
    t.say('(nova-compute of %s enabled again)' % source)


def tags_tour(t):
    """A trait set by hand, the provider config file that lacks it, and
    the trait removed again (doc/source/admin/tag-gpus.rst, audit.rst).
    """
    node, device = 'compute1', 'compute1:0000:81:01.0'
    t.say('Tag one GPU by hand; the trait is not in the exported provider '
          'config file,\nso the audit says it would be lost if Nova '
          're-created the provider:')
    t.sample('trait-set-device', 'mdev', 'trait', 'set', '--trait',
             'CUSTOM_TRAINING', device)
    t.sample('audit-provider-config', 'mdev', 'audit', '--host', node,
             '--provider-config', '%s=exports/%s.yaml' % (node, node),
             '-c', 'Severity', '-c', 'Check', '-c', 'Device', '-c',
             'Message')
    t.sample('trait-unset-device', 'mdev', 'trait', 'unset', '--trait',
             'CUSTOM_TRAINING', device)


# -- GPU quotas ---------------------------------------------------------------

QUOTA_CONF = """[quota]
driver = nova.quota.UnifiedLimitsDriver
unified_limits_resource_strategy = require
unified_limits_resource_list = servers
"""


def quota_tour(t: Tour, cloud: client.EmbeddedCloud) -> None:
    """GPU quotas: Nova's unified limits in the cloud's Keystone, read
    with a password login to it (the ``keystone_cloud`` entry).
    """
    token_env = t.env
    t.env = cloud.cli_environ(
        {k: v for k, v in os.environ.items() if not k.startswith('OS_')},
        cloud=cloud.keystone_cloud)
    try:
        _quota_steps(t, cloud)
    finally:
        t.env = token_env


def _quota_steps(t: Tour, cloud: client.EmbeddedCloud) -> None:
    t.say('Nova enforces the unified limits of the cloud\'s Keystone. Two '
          'projects boot\nservers of the flavor (as their members):')
    for project, count in (('ml-team', 2), ('render-farm', 1)):
        for server in cloud.control(
                'boot', flavor='vgpu.nvidia-12', count=count,
                name='%s-vm' % project, project=cloud.projects[project]):
            print('%s (%s): %s on %s' % (server['name'], project,
                                         server['status'], server['host']))
            if server['status'] != 'ACTIVE':
                t.failures += 1
    try:
        cloud.control('boot', flavor='vgpu.nvidia-12', name='one-more',
                      project=cloud.projects['render-farm'])
        t.failures += 1
        print('(render-farm booted one more server: unexpected)')
    except client.CloudError as exc:
        print('one-more (render-farm): refused by Nova with HTTP %s '
              '(quota exceeded)' % exc.nova_status)
    conf = t.workdir / 'nova-api.conf'
    conf.write_text(QUOTA_CONF)
    t.say("Who holds the GPUs, against which limits? With the [quota] "
          "options of the\ncontroller's nova.conf:")
    t.show_file('quota-conf', conf)
    t.sample('quota-list', 'mdev', 'quota', 'list', '--controller-conf',
             conf.name, '--long')
    t.say('How many more servers of the flavor each project can boot, and '
          'what stops it:')
    t.sample('quota-list-flavor', 'mdev', 'quota', 'list', '--flavor',
             'vgpu.nvidia-12', '--controller-conf', conf.name, '--long')


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--keep', action='store_true',
                        help='keep the cloud running until Ctrl-C')
    parser.add_argument('--no-samples', action='store_true',
                        help='write no sample of the documentation')
    parser.add_argument('--all-samples', action='store_true',
                        help='rewrite every sample, not only those whose '
                             'output changed (one cloud for all of them)')
    args = parser.parse_args()
    missing = client.missing_modules()
    if missing:
        sys.exit('The demo needs %s; run it with "tox -e demo".'
                 % ', '.join(missing))
    with tempfile.TemporaryDirectory(prefix='osc-mdev-demo-') as tmp:
        workdir = pathlib.Path(tmp)
        print('Starting the embedded cloud (Nova API, conductor, scheduler, '
              'five compute hosts with fake GPUs, Placement, Keystone)...',
              flush=True)
        started = time.monotonic()
        with client.EmbeddedCloud(workdir / 'cloud', topology=topology(),
                                  keystone=True) as cloud:
            print('Cloud ready in %.0f s.' % (time.monotonic() - started))
            writer = None if args.no_samples else samples.Writer(
                rewrite=args.all_samples)
            failures = tour_with(Tour(cloud, workdir, recorder=writer))
            if writer is not None:
                written = writer.finish()
                print('\nSamples of the documentation (%s): %s.' % (
                    writer.directory.relative_to(samples.REPO),
                    'updated ' + ', '.join(written) if written
                    else 'unchanged'))
            if args.keep:
                sandbox.wait(cloud)
    print('\nTour finished in %.0f s%s.' % (
        time.monotonic() - started,
        '' if not failures else ' with %d unexpected results' % failures))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
