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

"""``openstack mdev config check`` with the real CLI, real Placement."""

import json
import pathlib
import re
import uuid

import pytest

from tests.fixtures import cli
from tests.fixtures.placement_data import Gpu
from tests.fixtures import sysfs


@pytest.fixture(scope='module')
def auth(placement_url):
    return cli.admin_token_args(placement_url)


def check(*args, auth=()):
    return cli.openstack(*auth, 'mdev', 'config', 'check', *args)


FINDINGS = ('error', 'warning', 'info')


def findings(rows):
    """The finding rows of ``-f json`` (not the effective and result
    rows).
    """
    return [{k: r[k] for k in ('Severity', 'Where', 'Message')}
            for r in rows if r['Severity'] in FINDINGS]


def effective(rows, start=''):
    """The effective rows of ``--long -f json`` whose Message starts with
    ``start``.
    """
    return [r for r in rows if r['Severity'] == 'effective'
            and r['Message'].startswith(start)]


def devices(rows):
    """The mdev devices of the effective result, as the old Devices
    table had them: Device, Mdev Type, Resource Class, Why.
    """
    return [{'Device': r['Device'], 'Mdev Type': r['Mdev Type'],
             'Resource Class': r['Resource Class'],
             'Why': r['Message'][0].lower() + r['Message'][1:-1]}
            for r in rows if r['Severity'] == 'effective'
            and not r['Message'].startswith('PCI ')]


# What Nova's vGPU guide asks of computes with NVIDIA vGPU types.
NVIDIA_DOWNTIME = """
[libvirt]
live_migration_downtime = 500000
live_migration_downtime_steps = 3
live_migration_downtime_delay = 3
"""

GOOD = """[DEFAULT]
host = compute1

[devices]
enabled_mdev_types = nvidia-35, nvidia-36

[mdev_nvidia-35]
device_addresses = 0000:84:00.0
mdev_class = CUSTOM_NV35
""" + NVIDIA_DOWNTIME


def write(tmp_path, text, name='nova.conf'):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_good_file_exits_0_without_credentials(
        tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, GOOD)
    result = check(path, '--long', '-f', 'json')
    assert result.rc == 0, result.stderr
    rows = result.json()
    assert findings(rows) == [{
        'Severity': 'info', 'Where': '[devices] enabled_mdev_types, %s:5'
        % path, 'Message': 'Type nvidia-36 has no device_addresses: it is '
        'the default type, given to every device no other type lists.'}]
    assert devices(rows) == [
        {'Device': '0000:84:00.0', 'Mdev Type': 'nvidia-35',
         'Resource Class': 'CUSTOM_NV35',
         'Why': 'listed under [mdev_nvidia-35]'},
        {'Device': '(any other device)', 'Mdev Type': 'nvidia-36',
         'Resource Class': 'VGPU', 'Why': 'default type'}]


def test_errors_exit_1_with_every_finding(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, GOOD.replace('0000:84:00.0', '84:00.0') +
                 '[mdev_nvidia-36]\nmdev_class = mlx5\n'
                 '[vgpu_nvidia-36]\nmax_instances = 2\n')
    result = check(path, '-f', 'value', '-c', 'Severity', '-c', 'Where')
    assert result.rc == 1
    assert result.stdout.splitlines() == [
        'error [mdev_nvidia-35] device_addresses, %s:8' % path,
        'error [mdev_nvidia-36] mdev_class, %s:16' % path,
        'warning [vgpu_nvidia-36] max_instances, %s:18' % path,
        'info [mdev_nvidia-36], %s:15' % path,
        'result %s' % path]
    assert result.stderr.strip() == (
        '2 error(s): nova-compute will refuse to start with this '
        'configuration.')


def test_post_copy_with_vgpus_exits_1(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, GOOD + '[libvirt]\n'
                 'live_migration_downtime = 500000\n'
                 'live_migration_downtime_steps = 3\n'
                 'live_migration_downtime_delay = 3\n'
                 'live_migration_permit_post_copy = True\n')
    result = check(path, '-f', 'value', '-c', 'Severity', '-c', 'Where')
    assert result.rc == 1
    assert result.stdout.splitlines()[0] == (
        'error [libvirt] live_migration_permit_post_copy, %s:%d'
        % (path, GOOD.count('\n') + 5))
    assert result.stderr.strip() == (
        '1 error(s): nova-compute will start, but live migrations of '
        'servers with VFIO devices fail.')


def test_long_table(tmp_path):
    path = write(tmp_path, GOOD.replace('0000:84:00.0', '0000:3B:00.4'))
    result = check(path, '--long')
    assert result.rc == 0, result.stderr
    assert re.search(r'^\| warning +\| \[mdev_nvidia-35\] device_addresses',
                     result.stdout, re.M)
    assert re.search(r'\| 0000:3b:00\.4 +\| nvidia-36 +\| VGPU +\|',
                     result.stdout)
    assert '| Device ' in result.stdout


def test_no_mdev_options_is_info(tmp_path):
    result = check(write(tmp_path, '[DEFAULT]\ndebug = true\n'), '-f',
                   'json')
    assert result.rc == 0
    assert [f['Severity'] for f in findings(result.json())] == ['info']


def test_files_in_order_and_directory(tmp_path):
    first = write(tmp_path, GOOD)
    conf_d = tmp_path / 'nova.conf.d'
    conf_d.mkdir()
    write(conf_d, '[mdev_nvidia-35]\ndevice_addresses = 0000:85:00.0\n',
          '50-gpu.conf')
    write(conf_d, '[mdev_nvidia-35]\ndevice_addresses = 0000:86:00.0\n',
          '90-gpu.conf')
    found = devices(check(first, str(conf_d), '--long', '-f', 'json').json())
    assert found[0]['Device'] == '0000:86:00.0'
    # The directory first: nova.conf comes later and wins.
    found = devices(check(str(conf_d), first, '--long', '-f', 'json').json())
    assert found[0]['Device'] == '0000:84:00.0'


@pytest.mark.parametrize('make,fragment', [
    (lambda p: None, 'Cannot read'),
    (lambda p: p.write_bytes(b'\x89PNG\r\n\x1a\n\x00\x00'), 'binary file'),
    (lambda p: p.write_bytes(b'[devices]\n\xff\xfe\n'), 'not UTF-8'),
    (lambda p: p.write_text(''), 'is empty'),
    (lambda p: p.write_bytes(b'#' * (10 * 1024 * 1024 + 1)),
     'larger than 10 MB'),
    (lambda p: p.mkdir(), 'directory with no .conf file'),
    (lambda p: p.write_text('enabled_mdev_types = a\n'),
     'line 1 cannot be parsed'),
])
def test_bad_input(tmp_path, make, fragment):
    path = tmp_path / 'nova.conf'
    make(path)
    cli.assert_one_line_error(check(str(path)), str(path), fragment)


def test_sysfs(tmp_path):
    root = sysfs.build(tmp_path / 'sys', devices=[
        ('0000:84:00.0', {'nvidia-35': 4}, None),
        ('0000:85:00.0', {'nvidia-36': 2}, None)])
    path = write(tmp_path, GOOD.replace('0000:84:00.0',
                                        '0000:84:00.0, 0000:86:00.0'))
    result = check(path, '--sysfs', root, '--long', '-f', 'json')
    assert result.rc == 0, result.stderr
    rows = result.json()
    assert [f['Message'] for f in findings(rows)
            if f['Severity'] == 'warning'] == [
        '0000:86:00.0 is not an mdev-capable device on this host (not in '
        'class/mdev_bus): Nova will report nothing for it.']
    assert [(d['Device'], d['Mdev Type']) for d in devices(rows)] == [
        ('0000:84:00.0', 'nvidia-35'), ('0000:85:00.0', 'nvidia-36'),
        ('0000:86:00.0', 'nvidia-35')]
    cli.assert_one_line_error(check(path, '--sysfs', str(tmp_path / 'no')),
                              '--sysfs', 'is not a directory')


@pytest.fixture
def node(placement, request):
    name = 'cfg-%s.example.com' % request.node.name[-30:].replace(
        '[', '-').replace(']', '').replace('_', '-')
    gpus = [Gpu('pci_0000_84_00_0', 'VGPU', 4, ('CUSTOM_NVIDIA_36',)),
            Gpu('pci_0000_85_00_0', 'VGPU', 4, ('CUSTOM_NVIDIA_36',)),
            Gpu('pci_0000_86_00_0', 'CUSTOM_OLD', 2)]
    root = placement.add_compute_node(name, gpus)
    return name, root, gpus


def test_host_compares_with_placement(placement, auth, node, tmp_path):
    name, root, gpus = node
    server = placement.boot_server(root, gpus[2])
    path = write(tmp_path, """
[devices]
enabled_mdev_types = nvidia-35, nvidia-36
[mdev_nvidia-35]
device_addresses = 0000:84:00.0,0000:87:00.0
mdev_class = CUSTOM_NV35
[mdev_nvidia-36]
device_addresses = 0000:85:00.0
""")
    result = check(path, '--host', name, '--long', '-f', 'json', auth=auth)
    assert result.rc == 0, result.stderr
    rows = result.json()
    placement_rows = [f for f in findings(rows)
                      if f['Where'] == 'Placement, host %s' % name]
    assert [f['Message'] for f in placement_rows] == [
        'Device 0000:84:00.0 is VGPU in Placement but Nova will report '
        'CUSTOM_NV35 (type nvidia-35): its inventory changes class on '
        'restart.',
        "Device 0000:84:00.0 carries CUSTOM_NVIDIA_36 but will be of type "
        "nvidia-35: run 'openstack mdev trait set --compute-conf %s=FILE' "
        "after the restart to tag it CUSTOM_NVIDIA_35." % name,
        'Device 0000:86:00.0 (CUSTOM_OLD, total 2) gets no type from this '
        'file: nova-compute stops reporting it but does not delete its '
        'provider, so Placement keeps offering its old inventory and the '
        'scheduler can still pick it while Nova cannot create mdevs there; '
        'give it a type, or delete the provider once no server uses it. '
        'Servers with allocations there: %s.' % server]
    assert [f['Message'] for f in findings(rows) if f['Message'].startswith(
        'Placement has no device')] == [
        'Placement has no device 0000:87:00.0 on host %s: it does not exist '
        'there, offers no nvidia-35 instance, or nova-compute has not '
        'reported it yet.' % name]
    assert [(d['Device'], d['Mdev Type'], d['Resource Class'])
            for d in devices(rows)] == [
        ('0000:84:00.0', 'nvidia-35', 'CUSTOM_NV35'),
        ('0000:85:00.0', 'nvidia-36', 'VGPU'),
        ('0000:86:00.0', None, None),
        ('0000:87:00.0', 'nvidia-35', 'CUSTOM_NV35')]


#: The file the node's providers were made from.
MATCHING = """
[devices]
enabled_mdev_types = nvidia-36, nvidia-37
[mdev_nvidia-36]
device_addresses = 0000:84:00.0,0000:85:00.0
[mdev_nvidia-37]
device_addresses = 0000:86:00.0
mdev_class = CUSTOM_OLD
""" + NVIDIA_DOWNTIME


def test_host_matching_file_is_clean(placement: object, auth: tuple,
                                     node: tuple,
                                     tmp_path: pathlib.Path) -> None:
    name, root, gpus = node
    path = write(tmp_path, MATCHING)
    result = check(path, '--host', name, '-f', 'json', auth=auth)
    assert findings(result.json()) == []
    [verdict] = [r for r in result.json() if r['Severity'] == 'result']
    assert verdict['Message'].endswith('. Nothing is wrong.')
    assert "Placement's view of %s" % name in verdict['Message']


def test_host_with_sysfs_names_a_gpu_that_lost_an_mdev(
        placement: object, auth: tuple, node: tuple,
        tmp_path: pathlib.Path) -> None:
    # Placement holds two VGPUs on 0000:84:00.0 and one on 0000:85:00.0;
    # the host has one mdev on each: one mdev of 0000:84:00.0 is gone.
    name, root, gpus = node
    lost = sorted([placement.boot_server(root, gpus[0]),
                   placement.boot_server(root, gpus[0])])
    placement.boot_server(root, gpus[1])
    path = write(tmp_path, MATCHING)
    root_dir = sysfs.build(tmp_path / 'sys', devices=[
        ('0000:84:00.0', {'nvidia-36': 3}, None),
        ('0000:85:00.0', {'nvidia-36': 3}, None),
        ('0000:86:00.0', {'nvidia-37': 2}, None)], mdevs=[
        (str(uuid.uuid4()), '0000:84:00.0', 'nvidia-36'),
        (str(uuid.uuid4()), '0000:85:00.0', 'nvidia-36')])
    result = check(path, '--sysfs', root_dir, '--host', name, '-f', 'json',
                   auth=auth)
    assert result.rc == 0, result.stderr
    assert findings(result.json()) == [{
        'Severity': 'warning', 'Where': 'Placement, host %s' % name,
        'Message': 'GPU 0000:84:00.0 has 1 mdev but Placement holds 2 VGPU '
        'there, for servers %s and %s: 1 of their 2 mdevs is gone, as '
        'after a reboot that did not keep the mdevs; a server without its '
        "mdev does not start: create it again with the UUID of the server's "
        "libvirt domain (its <hostdev type='mdev'>)." % tuple(lost)}]
    [verdict] = [r for r in result.json() if r['Severity'] == 'result']
    assert verdict['Message'].endswith(
        ': nova-compute will start but do something other than written.')


def test_host_errors(placement, auth, tmp_path):
    path = write(tmp_path, GOOD)
    cli.assert_one_line_error(
        check(path, '--host', 'no-such-node', auth=auth),
        "No compute host named 'no-such-node'")
    cli.assert_one_line_error(
        check(path, '--host', 'x', '--os-auth-type', 'password'),
        '--host needs cloud credentials')


# -- [pci]: PCI devices in Placement -----------------------------------------

PF, VF4, VF5 = '0000:25:00.0', '0000:25:00.4', '0000:25:00.5'
PCI_GOOD = """[pci]
report_in_placement = True
device_spec = {"vendor_id": "10de", "product_id": "25b6",
    "address": "0000:25:00.*", "resource_class": "CUSTOM_A16_16A"}
alias = {"name": "a16", "device_type": "type-VF",
    "resource_class": "CUSTOM_A16_16A"}

[filter_scheduler]
pci_in_placement = True
"""


def pci_sysfs(tmp_path):
    """One SR-IOV GPU: PF 0000:25:00.0 (10de:2236) with VFs .4 and .5
    (10de:25b6).
    """
    return sysfs.build(tmp_path / 'sys', devices=[
        (PF, {}, None), (VF4, {}, PF), (VF5, {}, PF)],
        ids={PF: ('10de', '2236'), VF4: ('10de', '25b6'),
             VF5: ('10de', '25b6')})


def test_pci_good_file_shows_specs_providers_and_aliases(tmp_path):
    path = write(tmp_path, PCI_GOOD)
    result = check(path, '--sysfs', pci_sysfs(tmp_path), '--long', '-f',
                   'json')
    assert result.rc == 0, result.stderr
    rows = result.json()
    assert [f for f in findings(rows) if f['Severity'] != 'info'] == []
    assert [(r['Device'], r['Where'], r['Resource Class'], r['Traits'])
            for r in effective(rows, 'PCI device spec')] == [(
                'address 0000:25:00.* 10de:25b6',
                '[pci] device_spec, %s:3' % path, 'CUSTOM_A16_16A',
                'COMPUTE_MANAGED_PCI_DEVICE')]
    assert [(r['Device'], r['Message'], r['Resource Class'], r['Traits'])
            for r in effective(rows, 'PCI provider')] == [(
                '<node>_0000:25:00.0',
                'PCI provider Nova makes of %s, %s.' % (VF4, VF5),
                'CUSTOM_A16_16A', 'COMPUTE_MANAGED_PCI_DEVICE')]
    assert [(r['Message'], r['Where'])
            for r in effective(rows, 'PCI alias')] == [(
                'PCI alias a16: 1 request group of CUSTOM_A16_16A:1; '
                'type-VF; numa_policy legacy.',
                '[pci] alias, %s:5' % path)]


def test_pci_vfs_of_one_pf_with_different_classes_is_an_error(tmp_path):
    path = write(tmp_path, """[pci]
report_in_placement = True
device_spec = {"address": "%s", "resource_class": "A16_16A"}
device_spec = {"address": "%s", "resource_class": "A16_8A"}
""" % (VF4, VF5))
    result = check(path, '--sysfs', pci_sysfs(tmp_path), '-f', 'json')
    assert result.rc == 1
    [error] = [f for f in json.loads(result.stdout)
               if f['Severity'] == 'error']
    assert 'PlacementPciMixedResourceClassException' in error['Message']
    assert 'CUSTOM_A16_8A for %s and CUSTOM_A16_16A for %s' % (
        VF5, VF4) in error['Message']
    assert '1 error(s)' in result.stderr


def test_pci_pf_and_its_vfs_is_an_error(tmp_path):
    path = write(tmp_path, """[pci]
report_in_placement = True
device_spec = [{"address": "%s"}, {"address": "%s"}]
""" % (PF, VF4))
    result = check(path, '--sysfs', pci_sysfs(tmp_path), '-f', 'json')
    assert result.rc == 1
    # The PF's address matches its VFs too (it is a PF in sysfs): both
    # VFs clash with it.
    errors = [f['Message'] for f in json.loads(result.stdout)
              if f['Severity'] == 'error']
    assert len(errors) == 2
    assert all('PlacementPciDependentDeviceException' in e for e in errors)
    assert 'both %s and %s are listed' % (VF5, PF) in errors[1]


def test_pci_pf_named_by_address_fields_matches_its_vfs(tmp_path):
    # The fields of a PF's address, as regular expressions that are plain
    # hex: Nova takes them for the PF's address, so its VFs match too.
    path = write(tmp_path, """[pci]
report_in_placement = True
device_spec = {"address": {"domain": "0000", "bus": "25", "slot": "00",
    "function": "0"}}
""")
    result = check(path, '--sysfs', pci_sysfs(tmp_path), '-f', 'json')
    assert result.rc == 1
    errors = [f['Message'] for f in json.loads(result.stdout)
              if f['Severity'] == 'error']
    assert len(errors) == 2
    assert all('PlacementPciDependentDeviceException' in e for e in errors)


@pytest.mark.parametrize('text,severity,fragment', [
    ('[pci]\ndevice_spec = {"vendor_id": "10de",}\n', 'error',
     'invalid [pci] device_spec (not valid JSON'),
    ('[pci]\ndevice_spec = {"address": "0000:25:00.8"}\n', 'error',
     'function 8 is greater than the maximum 7'),
    ('[pci]\ndevice_spec = {"address": "0000:25:00. "}\n', 'error',
     "function '' is not a hex number"),
    ('[pci]\nalias = {"name": "a16", "resource-class": "X"}\n', 'error',
     "Additional properties are not allowed ('resource-class' unexpected)"),
    ('[pci]\nalias = {"name": "a16", "resource_class": "X"}\n', 'error',
     'alias a16 has no vendor_id and product_id'),
    ('[pci]\nreport_in_placement = True\ndevice_spec = {"devname": "eth0"}\n',
     'error', 'PCI in Placement does not support devname'),
    ('[pci]\nreport_in_placement = True\ndevice_spec = {"devname": "eth0", '
     '"physical_network": "physnet1"}\n',
     'error', 'PCI in Placement does not support devname (eth0)'),
    ('[pci]\nreport_in_placement = True\n'
     'device_spec = {"address": "0000:25:00.4", "traits": "a,,b"}\n',
     'error', "trait 'CUSTOM_' has nothing after CUSTOM_"),
    ('[pci]\nreport_in_placement = True\n'
     'device_spec = {"address": "0000:25:00.4", "traits": "blue, big"}\n',
     'warning', "Nova makes CUSTOM__BIG of it, not CUSTOM_BIG"),
    ('[pci]\nreport_in_placement = True\n'
     'device_spec = {"address": "0000:25:00.4", '
     '"traits": "hw_gpu_api_vulkan"}\n',
     'warning', 'reports the custom trait CUSTOM_HW_GPU_API_VULKAN'),
    ('[pci]\nreport_in_placement = True\n'
     'device_spec = {"address": "0000:25:00.4"}\n', 'warning',
     'the scheduler ignores the PCI devices in Placement'),
    ('[pci]\ndevice_spec = {"address": "0000:25:00.4", '
     '"resource_class": "X"}\n', 'warning',
     'Ignored: resource_class is only used with [pci] report_in_placement'),
    ('[pci]\nreport_in_placement = True\n'
     'device_spec = {"address": "0000:25:00.4", "resource_class": "A16"}\n'
     'alias = {"name": "big", "resource_class": "A40"}\n'
     '[filter_scheduler]\npci_in_placement = True\n', 'warning',
     'Alias big cannot be served by this node: no device spec gives '
     'resource class CUSTOM_A40'),
    ('[pci]\ndevice_spec = {"vendor_id": "10de", "product_id": "2236"}\n'
     'alias = {"name": "a10", "vendor_id": "10de", "product_id": "2237"}\n',
     'warning', 'no device spec matches vendor_id 10de and product_id 2237'),
    ('[pci]\npassthrough_whitelist = {"address": "0000:25:00.4"}\n', 'info',
     'passthrough_whitelist is the deprecated name of [pci] device_spec'),
])
def test_pci_findings(tmp_path, text, severity, fragment):
    path = write(tmp_path, text)
    result = check(path, '-f', 'json')
    assert result.rc == (1 if severity == 'error' else 0), result.stderr
    found = [f['Message'] for f in json.loads(result.stdout)
             if f['Severity'] == severity]
    assert any(fragment in m for m in found), found


def test_pci_long_table(tmp_path):
    path = write(tmp_path, PCI_GOOD)
    result = check(path, '--long')
    assert result.rc == 0, result.stderr
    assert '| PCI device spec: ' in result.stdout
    assert '| PCI alias a16: ' in result.stdout
    assert '| CUSTOM_A16_16A' in result.stdout
    # Without devices known, no providers, and no mdev device rows.
    assert '| PCI provider ' not in result.stdout
    rows = check(path, '--long', '-f', 'json').json()
    assert [r['Message'].split(':')[0] for r in effective(rows)] == [
        'PCI device spec', 'PCI alias a16']


@pytest.fixture
def pci_node(placement, request):
    """A compute node with the providers nova-compute makes with [pci]
    report_in_placement: the PF 0000:25:00.0 holding two VFs
    (CUSTOM_A16_16A, one in use, an operator's CUSTOM_HAND trait) and the
    whole GPU 0000:41:00.0 (CUSTOM_PCI_10DE_2236).
    """
    name = 'pci-%s.example.com' % request.node.name[-20:].replace(
        '[', '-').replace(']', '').replace('_', '-')
    root = placement.create_provider(name)
    placement.set_inventory(root, {'VCPU': {'total': 8}})
    placement.set_traits(root, ['OWNER_NOVA'])
    vfs = placement.create_provider('%s_0000:25:00.0' % name, root)
    placement.set_inventory(vfs, {'CUSTOM_A16_16A': {'total': 2,
                                                     'max_unit': 2}})
    placement.set_traits(vfs, ['COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA',
                               'CUSTOM_HAND'])
    gpu = placement.create_provider('%s_0000:41:00.0' % name, root)
    placement.set_inventory(gpu, {'CUSTOM_PCI_10DE_2236': {'total': 1}})
    placement.set_traits(gpu, ['COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA'])
    placement.allocate(str(uuid.uuid4()), {vfs: {'CUSTOM_A16_16A': 1}})
    return name


def test_pci_host_turning_report_in_placement_off_is_an_error(
        pci_node, auth, tmp_path):
    path = write(tmp_path, '[pci]\nreport_in_placement = False\n'
                 'device_spec = {"address": "0000:41:00.0"}\n')
    result = check(path, '--host', pci_node, '-f', 'json', auth=auth)
    assert result.rc == 1
    [error] = [f for f in json.loads(result.stdout)
               if f['Severity'] == 'error']
    assert error['Where'] == '[pci] report_in_placement, %s:2' % path
    assert 'Placement has 2 PCI provider(s) of %s' % pci_node in \
        error['Message']
    assert 'Nova cannot turn it off again' in error['Message']


def test_pci_host_predicts_the_restart(pci_node, auth, tmp_path):
    # The VFs get another class, the whole GPU is no longer listed.
    path = write(tmp_path, """[pci]
report_in_placement = True
device_spec = {"address": "0000:25:00.*", "product_id": "25b6",
    "resource_class": "A16_8A"}
""")
    result = check(path, '--host', pci_node, '--sysfs', pci_sysfs(tmp_path),
                   '-f', 'json', auth=auth)
    assert result.rc == 0, result.stderr
    messages = [f['Message'] for f in findings(result.json())
                if f['Where'] == 'Placement, host %s' % pci_node]
    assert messages == [
        'Provider %s_0000:25:00.0 is CUSTOM_A16_16A in Placement but Nova '
        'will report CUSTOM_A16_8A: its inventory changes class on '
        "restart. 1 in use: Placement refuses the change while servers "
        "hold allocations there, so nova-compute's updates of the node "
        'fail until they go.' % pci_node,
        'Provider %s_0000:25:00.0 carries CUSTOM_HAND, which nova-compute '
        'removes when it restarts: it sets the traits of PCI providers '
        "from [pci] device_spec only; put them in the spec's traits."
        % pci_node,
        'Provider %s_0000:41:00.0 (CUSTOM_PCI_10DE_2236, total 1) matches '
        'no device spec any more: nova-compute removes it on restart.'
        % pci_node]


GPU = '0000:41:00.0'


@pytest.fixture
def one_time_use_node(placement, request):
    """A compute node whose whole GPU 0000:41:00.0 (10de:2236) Nova
    reports as it does for a device spec with ``one_time_use``: with
    HW_PCI_ONE_TIME_USE besides its own traits (nova-compute's
    ``PciResourceProvider.add_parent``, cross-checked in
    tests/unit/test_novaconf_pci.py).
    """
    placement.require_trait('HW_PCI_ONE_TIME_USE')
    name = 'otu-%s.example.com' % request.node.name[-20:].replace('_', '-')
    root = placement.create_provider(name)
    placement.set_inventory(root, {'VCPU': {'total': 8}})
    placement.set_traits(root, ['OWNER_NOVA'])
    gpu = placement.create_provider('%s_%s' % (name, GPU), root)
    placement.set_inventory(gpu, {'CUSTOM_A100': {'total': 1}})
    placement.set_traits(gpu, ['COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA',
                               'HW_PCI_ONE_TIME_USE', 'CUSTOM_BLUE'])
    return name


def test_pci_host_one_time_use_device_keeps_its_trait(
        one_time_use_node, auth, tmp_path):
    path = write(tmp_path, """[pci]
report_in_placement = True
device_spec = {"address": "0000:41:00.0", "resource_class": "A100",
    "traits": "blue", "one_time_use": true}
alias = {"name": "fresh-a100", "resource_class": "A100",
    "traits": "HW_PCI_ONE_TIME_USE"}

[filter_scheduler]
pci_in_placement = True
""")
    tree = sysfs.build(tmp_path / 'sys', devices=[(GPU, {}, None)],
                       ids={GPU: ('10de', '2236')})
    result = check(path, '--host', one_time_use_node, '--sysfs', tree,
                   '--long', '-f', 'json', auth=auth)
    assert result.rc == 0, result.stderr
    rows = result.json()
    # Nothing changes on restart, and the alias asking for a device never
    # used before is served.
    assert [f['Message'] for f in findings(rows)
            if f['Severity'] != 'info'] == []
    traits = 'COMPUTE_MANAGED_PCI_DEVICE, CUSTOM_BLUE, HW_PCI_ONE_TIME_USE'
    assert [(r['Resource Class'], r['Traits'])
            for r in effective(rows, 'PCI device spec') +
            effective(rows, 'PCI provider')] == [('CUSTOM_A100', traits)] * 2


# -- SR-IOV vGPUs: VFs typed through sysfs ----------------------------------

def vgpu_conf(tmp_path, vfs, rc='CUSTOM_NVIDIA_L4_8Q'):
    """A compute's nova.conf as Nova's PCI passthrough guide writes it for
    NVIDIA VFs: one device_spec per VF, the type's class, managed no.
    """
    return write(tmp_path, '[pci]\nreport_in_placement = True\n' + ''.join(
        'device_spec = {"vendor_id": "10de", "address": "%s", '
        '"resource_class": "%s", "managed": "no"}\n' % (vf, rc)
        for vf in vfs) + '[filter_scheduler]\npci_in_placement = True\n')


def test_vgpu_vfs_clean_host_says_so(tmp_path):
    l4 = sysfs.VgpuGpu('0000:25:00.0', numvfs=4, current={0: 1162, 1: 1162},
                       header=True)
    root = sysfs.build(tmp_path / 'sys', vgpu_gpus=[l4])
    result = check(vgpu_conf(tmp_path, l4.vfs[:2]), '--sysfs', root, '-f',
                   'json')
    assert result.rc == 0, result.stderr
    assert [f for f in findings(result.json())
            if f['Severity'] != 'info'] == []
    [verdict] = [r for r in result.json() if r['Severity'] == 'result']
    assert ('the devices under %s and the vGPU types of the 4 VFs of GPU '
            '0000:25:00.0 (all 2 offered, each typed as its class says). '
            'Nothing is wrong (1 note).' % root) in verdict['Message']


def test_vgpu_vfs_after_a_reboot_and_misnamed(tmp_path):
    # GPU A lost its types in a reboot; GPU B is typed L4-4Q under the
    # class of L4-8Q.
    gpu_a = sysfs.VgpuGpu('0000:25:00.0', numvfs=2)
    gpu_b = sysfs.VgpuGpu('0000:26:00.0', numvfs=2, current={0: 1161})
    root = sysfs.build(tmp_path / 'sys', vgpu_gpus=[gpu_a, gpu_b])
    path = vgpu_conf(tmp_path, gpu_a.vfs + gpu_b.vfs[:1])
    result = check(path, '--sysfs', root, '-f', 'json')
    assert result.rc == 0, result.stderr
    assert [(f['Severity'], f['Message'].split(': ')[0])
            for f in findings(result.json()) if f['Severity'] != 'info'] == [
        ('warning', 'VFs 0000:25:00.4, 0000:25:00.5 of GPU 0000:25:00.0 '
         'are offered as CUSTOM_NVIDIA_L4_8Q but have no vGPU type '
         '(current_vgpu_type 0), as after a reboot'),
        ('warning', 'Class CUSTOM_NVIDIA_L4_8Q is named after NVIDIA L4-8Q '
         '(1162), but a VF offered as it has another type')]


def test_vgpu_vfs_held_by_servers_after_a_reboot(placement, auth,
                                                 tmp_path):
    # Placement holds two of the GPU's VFs; after a reboot none is typed.
    name = 'vf-node.example.com'
    root = placement.add_compute_node(name)
    provider = placement.add_pci_device(root, name, '0000:25:00.0',
                                        'CUSTOM_NVIDIA_L4_8Q', total=2)
    servers = sorted(placement.boot_server(root, provider)
                     for _ in range(2))
    l4 = sysfs.VgpuGpu('0000:25:00.0', numvfs=2)
    root_dir = sysfs.build(tmp_path / 'sys', vgpu_gpus=[l4])
    result = check(vgpu_conf(tmp_path, l4.vfs), '--sysfs', root_dir,
                   '--host', name, '-f', 'json', auth=auth)
    assert result.rc == 0, result.stderr
    assert [f['Message'] for f in findings(result.json())
            if f['Where'] == 'Placement, host %s' % name] == [
        'Provider %s_0000:25:00.0 (GPU 0000:25:00.0) has 2 '
        'CUSTOM_NVIDIA_L4_8Q in use, for servers %s and %s, but only 0 of '
        'its VFs have NVIDIA L4-8Q (1162), as after a reboot: a server '
        'given a VF without it does not start. Re-apply the types before '
        'nova-compute starts.' % (name, *servers)]


# -- An OSC lister: every format, -c, --long; the result row --------------

CLEAN = """[DEFAULT]
host = compute1
""" + NVIDIA_DOWNTIME + """
[devices]
enabled_mdev_types = nvidia-35

[mdev_nvidia-35]
device_addresses = 0000:84:00.0
"""
VERDICT = ('Checked the section and option names against the options of '
           'Nova %s and the mdev type nvidia-35. Nothing is wrong.')


def test_a_clean_file_is_one_result_row_in_every_format(tmp_path):
    import yaml

    from osc_mdev.nova.conf import options as nova_options

    path = write(tmp_path, CLEAN)
    verdict = VERDICT % nova_options.NOVA_VERSION
    row = {'Severity': 'result', 'Where': path, 'Message': verdict}
    table = check(path)
    assert table.rc == 0, table.stderr
    lines = table.stdout.splitlines()
    assert len(lines) == 5 and lines[3].startswith('| result   | %s' % path)
    assert verdict in lines[3]
    assert check(path, '-f', 'json').json() == [row]
    assert yaml.safe_load(check(path, '-f', 'yaml').stdout) == [row]
    assert check(path, '-f', 'csv').stdout.splitlines() == [
        '"Severity","Where","Message"',
        '"result","%s","%s"' % (path, verdict)]
    assert check(path, '-f', 'value').stdout == 'result %s %s\n' % (
        path, verdict)
    assert check(path, '-f', 'value', '-c', 'Message').stdout == (
        verdict + '\n')


@pytest.mark.parametrize('fmt', ['table', 'json', 'yaml', 'csv', 'value'])
def test_long_and_columns_in_every_format(tmp_path, fmt):
    path = write(tmp_path, CLEAN + 'mdev_clas = CUSTOM_A\n')
    result = check(path, '--long', '-f', fmt, '-c', 'Severity', '-c',
                   'Device', '-c', 'Resource Class')
    assert result.rc == 0, result.stderr
    rows = check(path, '--long', '-f', 'json', '-c', 'Severity', '-c',
                 'Device', '-c', 'Resource Class').json()
    assert rows == [
        {'Severity': 'warning', 'Device': '', 'Resource Class': ''},
        {'Severity': 'effective', 'Device': '0000:84:00.0',
         'Resource Class': 'VGPU'},
        {'Severity': 'result', 'Device': '', 'Resource Class': ''}]
    for word in ('warning', 'effective', '0000:84:00.0', 'VGPU', 'result'):
        assert word in result.stdout
    assert 'mdev_clas' not in result.stdout      # no Message column
    # Without --long there are no device columns to pick.
    narrow = check(path, '-f', fmt, '-c', 'Severity', '-c', 'Message')
    assert narrow.rc == 0, narrow.stderr
    assert 'mdev_class?' in narrow.stdout          # yaml wraps lines
    assert '0000:84:00.0' not in narrow.stdout


def test_the_slips_of_a_hand_written_file(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, """[DEFAULT]
host = compute1

[devices]
enabled_mdev_types = nvidia-35, nvidia-36
enabled_vgpu_types = nvidia-35

[device]
enabled_mdev_type = nvidia-36

[mdev_nvidia-35]
device_address = 0000:84:00.0
mdev_clas = CUSTOM_NV35

[mdev-nvidia-36]
device_addresses = 0000:85:00.0
""" + NVIDIA_DOWNTIME)
    result = check(path, '-f', 'json')
    assert result.rc == 0, result.stderr
    warnings = [(f['Where'].split(',')[0], f['Message'])
                for f in findings(result.json())
                if f['Severity'] == 'warning']
    for where, fragment in [
            ('[devices] enabled_vgpu_types',
             'Ignored: enabled_vgpu_types = nvidia-35 is the deprecated '
             'name of enabled_mdev_types, which is set too (line 5), and '
             'Nova takes that value, nvidia-35, nvidia-36; remove one of '
             'them.'),
            ('[device]', 'did you mean [devices]?'),
            ('[mdev_nvidia-35] device_address',
             'did you mean device_addresses?'),
            ('[mdev_nvidia-35] mdev_clas', 'did you mean mdev_class?'),
            ('[mdev-nvidia-36]', 'did you mean [mdev_nvidia-36]?')]:
        assert [m for w, m in warnings if w == where and fragment in m], (
            where, warnings)
    [verdict] = [r for r in result.json() if r['Severity'] == 'result']
    assert '6 warnings: nova-compute will start but do something other ' \
        'than written' in verdict['Message']


def test_no_mdev_bus_is_a_warning_and_exit_0(tmp_path):
    root = tmp_path / 'sys'
    (root / 'bus' / 'pci' / 'devices').mkdir(parents=True)
    path = write(tmp_path, CLEAN)
    result = check(path, '--sysfs', str(root), '-f', 'json')
    assert result.rc == 0, result.stderr
    [warning] = findings(result.json())
    assert warning['Severity'] == 'warning'
    assert warning['Where'] == 'class/mdev_bus'
    assert 'nova-compute will start' in warning['Message']
    assert result.stderr == ''
