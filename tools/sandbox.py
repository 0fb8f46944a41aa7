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
writes the nova.conf of each compute host (``nova-<host>.conf``), a copy
of the /sys of the host with SR-IOV vGPUs (``sys-<host>``, for ``config
check --sysfs``) and the controller's nova.conf (``controller.conf``)
into its work directory, prints how to point ``openstack`` at it and how
to boot a server, and serves until Ctrl-C.
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

from osc_mdev.cloud import traits  # noqa: E402
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver  # noqa: E402
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
            '%s = %d' % item
            for item in libvirt_driver.NVIDIA_DOWNTIME.items()]
    return '\n'.join(lines) + '\n'


#: The vGPU types of the demo's SR-IOV GPUs (vGPU 17 and later) by the
#: product id of their VFs, as ``creatable_vgpu_types`` lists them (the
#: numbers are the demo's), and the one each VF of the host has: four
#: L40S-12Q fill an L40S, two H100XM-40C an H100.
VGPU_TYPES = {
    '26b9': (((1204, 'NVIDIA L40S-1Q'), (1205, 'NVIDIA L40S-2Q'),
              (1206, 'NVIDIA L40S-4Q'), (1207, 'NVIDIA L40S-6Q'),
              (1208, 'NVIDIA L40S-8Q'), (1209, 'NVIDIA L40S-12Q'),
              (1210, 'NVIDIA L40S-16Q'), (1211, 'NVIDIA L40S-24Q'),
              (1212, 'NVIDIA L40S-48Q')), 1209),
    '2330': (((1291, 'NVIDIA H100XM-10C'), (1292, 'NVIDIA H100XM-20C'),
              (1293, 'NVIDIA H100XM-40C'), (1294, 'NVIDIA H100XM-80C')),
             1293),
}


def pci_nova_conf(info):
    """The ``[pci]`` part of the nova.conf of a compute host whose GPUs
    Nova reports through PCI in Placement, as the cloud runs it (its
    device specs), with ``[filter_scheduler] pci_in_placement``; None for
    a host without.
    """
    specs = info.get('pci', {}).get('device_spec')
    if not specs:
        return None
    lines = ['[pci]', 'report_in_placement = True'] + [
        'device_spec = %s' % json.dumps(spec) for spec in specs]
    return '\n'.join(lines + ['', '[filter_scheduler]',
                              'pci_in_placement = True']) + '\n'


def vgpu_gpus(info, typed=True):
    """The host's SR-IOV GPUs as tests.fixtures.sysfs builds them: each
    PF with its VFs where the cloud has them, every VF of the type
    ``VGPU_TYPES`` gives its product (``typed``), or none, as after a
    reboot.
    """
    from tests.fixtures import sysfs

    devices = info.get('pci', {}).get('devices', [])
    gpus = []
    for pf in (d for d in devices if d['dev_type'] == 'type-PF'):
        vfs = sorted((d for d in devices
                      if d['parent_addr'] == pf['pci_address']),
                     key=lambda d: d['pci_address'])
        if not vfs or vfs[0]['product_id'] not in VGPU_TYPES:
            continue
        types, number = VGPU_TYPES[vfs[0]['product_id']]
        # The cloud puts a PF at function 0 of its slot, its VFs after it.
        first = (int(vfs[0]['pci_address'].split('.')[1]) -
                 int(pf['pci_address'].split('.')[1]))
        gpu = sysfs.VgpuGpu(
            pf['pci_address'], numvfs=len(vfs), totalvfs=len(vfs),
            offset=first, product_id=pf['product_id'],
            vf_product_id=vfs[0]['product_id'], types=types,
            current={i: number for i in range(len(vfs))} if typed else {},
            full=typed)
        assert gpu.vfs == [vf['pci_address'] for vf in vfs], gpu
        gpus.append(gpu)
    return gpus


def write_vgpu_sysfs(info, root, typed=True):
    """A copy of the /sys of a host's SR-IOV GPUs and whole PCI devices
    under ``root``, its VFs typed (``typed``) or not, as after a reboot;
    answers its path.
    """
    from tests.fixtures import sysfs

    whole = [d for d in info.get('pci', {}).get('devices', [])
             if d['dev_type'] == 'type-PCI']
    return sysfs.build(
        root, devices=[(d['pci_address'], {}, None) for d in whole],
        ids={d['pci_address']: (d['vendor_id'], d['product_id'])
             for d in whole},
        vgpu_gpus=vgpu_gpus(info, typed))


def write_confs(cloud, directory, controller_conf=None):
    """Write ``nova-<host>.conf`` of each mdev or PCI host and the
    controller's ``controller.conf`` (``controller_conf``, by default the
    demo topology's) into ``directory``, and for a host with SR-IOV GPUs
    a copy of its /sys (``sys-<host>``); answers their names.
    """
    directory = pathlib.Path(directory)
    written = []
    for host, info in sorted(cloud.hosts.items()):
        text = nova_conf(info) or pci_nova_conf(info)
        if text:
            (directory / ('nova-%s.conf' % host)).write_text(text)
            written.append('nova-%s.conf' % host)
        if vgpu_gpus(info):
            root = directory / ('sys-%s' % host)
            if not root.exists():
                write_vgpu_sysfs(info, root)
            written.append('sys-%s' % host)
    (directory / 'controller.conf').write_text(
        controller_conf or client.DEMO_CONTROLLER_CONF)
    written.append('controller.conf')
    return written


def boot_command(cloud, flavor='vgpu.nvidia-12', name='vm1'):
    """A curl command line that boots a server through the control API
    (the sandbox has no image service for 'openstack server create').
    """
    return "curl -s %s -d '%s'" % (cloud.control_url, json.dumps(
        {'op': 'boot', 'flavor': flavor, 'name': name}))


def describe(cloud, controller_conf=None):
    confs = write_confs(cloud, cloud.workdir, controller_conf)
    lines = [
        'The sandbox cloud is running. In another shell:',
        '',
        '    cd %s' % cloud.workdir,
        '    export OS_CLIENT_CONFIG_FILE=%s' % cloud.clouds_yaml,
        '    export OS_CLOUD=%s' % cloud.cloud_name,
        '    %s mdev provider list' % openstack_path(),
        '',
        'There: %s (each host\'s [devices] and [mdev_<type>] or [pci], '
        'a copy of the /sys of the SR-IOV GPU host, and the controller\'s '
        '[pci] alias).' % ', '.join(confs),
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


def wait(cloud, controller_conf=None):
    print('\n' + describe(cloud, controller_conf), flush=True)
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
    # The demo cloud's topology, the one the documentation's samples come
    # from, unless another is given.
    from tools import demo
    topology = args.topology or demo.topology()
    with client.EmbeddedCloud(args.workdir, topology=topology,
                              keystone=with_limits(args.topology)) as cloud:
        wait(cloud, None if args.topology else demo.controller_conf())
    return 0


if __name__ == '__main__':
    sys.exit(main())
