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

"""``mdev config check`` rules: each with a file that triggers it and one
that does not, sysfs trees built like a node's /sys, Placement views.
"""

import pathlib

import pytest

from osc_mdev.features.config.check import mdev as configcheck
from osc_mdev.features.config.check import pci as configcheck_pci
from osc_mdev.local import conf_files as local_novaconf
from osc_mdev.local import sysfs as local_sysfs
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.pci import request as pci_request
from tests.fixtures import nova_driver
from tests.fixtures import sysfs

D2 = '[devices]\nenabled_mdev_types = nvidia-35, nvidia-36\n'
GOOD = D2 + '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'
# What Nova's vGPU guide asks of computes with NVIDIA types.
NVIDIA_DOWNTIME = ('[libvirt]\nlive_migration_downtime = 500000\n'
                   'live_migration_downtime_steps = 3\n'
                   'live_migration_downtime_delay = 3\n')


def check(tmp_path, text, virtual=None, sysfs_checked=False):
    path = tmp_path / 'nova.conf'
    path.write_text(text)
    conf = local_novaconf.parse_files([str(path)], virtual)
    return conf, list(conf.findings) + configcheck.file_findings(
        conf, sysfs_checked)


def messages(findings, severity=None):
    return [f.message for f in findings
            if severity is None or f.severity == severity]


# rule: (text that triggers it, severity, message fragment)
RULES = {
    'no mdev type': (
        '[DEFAULT]\ndebug = true\n', 'info', 'No mdev type is enabled'),
    'deprecated enabled_vgpu_types': (
        '[devices]\nenabled_vgpu_types = nvidia-35\n', 'info',
        'enabled_vgpu_types is the deprecated name'),
    'deprecated [vgpu_<type>]': (
        D2 + '[vgpu_nvidia-35]\ndevice_addresses = 0000:84:00.0\n', 'info',
        '[vgpu_nvidia-35] is the deprecated name of [mdev_nvidia-35]'),
    'old group shadowed by the new one': (
        GOOD + '[vgpu_nvidia-35]\ndevice_addresses = 0000:85:00.0\n',
        'warning', 'Ignored: [vgpu_nvidia-35] device_addresses = '
        '0000:85:00.0: [mdev_nvidia-35] device_addresses is set too (line '
        '4), and Nova takes that value, 0000:84:00.0; remove the old '
        'group.'),
    'mdev_class in the old group': (
        D2 + '[vgpu_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'
        'mdev_class = CUSTOM_X\n', 'warning',
        'Nova reads mdev_class only from [mdev_nvidia-35]'),
    'default type': (
        GOOD, 'info', 'Type nvidia-36 has no device_addresses: it is the '
        'default type, given to every device no other type lists.'),
    'group of a type not enabled': (
        GOOD + '[mdev_nvidia-99]\ndevice_addresses = 0000:99:00.0\n',
        'warning', 'type nvidia-99 is not in [devices] enabled_mdev_types'),
    'upper-case address': (
        D2 + '[mdev_nvidia-35]\ndevice_addresses = 0000:AF:00.0\n',
        'warning', 'Address 0000:AF:00.0 is accepted but matches no device'),
    'default type with a custom class': (
        GOOD + '[mdev_nvidia-36]\nmdev_class = CUSTOM_NV36\n', 'warning',
        'the devices that take it are reported as VGPU, not CUSTOM_NV36'),
    'mdev_class on the only type': (
        '[devices]\nenabled_mdev_types = nvidia-35\n[mdev_nvidia-35]\n'
        'device_addresses = 0000:84:00.0\nmdev_class = CUSTOM_A\n', 'info',
        'computes older than Nova 29.0.0 (2024.1) ignore it'),
    'second type without addresses': (
        '[devices]\nenabled_mdev_types = nvidia-35,nvidia-36\n', 'warning',
        'Nova does not use nvidia-36 at all'),
    'address Nova cannot parse': (
        D2 + '[mdev_nvidia-35]\ndevice_addresses = 84:00.0\n', 'error',
        "Device address '84:00.0' is neither"),
    'same address under two types': (
        GOOD + '[mdev_nvidia-36]\ndevice_addresses = 0000:84:00.0\n',
        'error', 'duplicate types for PCI ID 0000:84:00.0'),
    'mdev_class from the early spec': (
        GOOD + '[mdev_nvidia-36]\nmdev_class = mlx5\n', 'error',
        'mdev_class = mlx5 is refused'),
    'max_instances below 1': (
        GOOD + '[mdev_nvidia-35]\nmax_instances = 0\n', 'error',
        'max_instances = 0 is refused'),
    'virtual parent not verified': (
        D2 + '[mdev_nvidia-35]\ndevice_addresses = mtty_mtty\n', 'info',
        'mtty_mtty is taken as a virtual parent'),
}

# A file close to each trigger that must not raise it.
CLEAN = {
    'no mdev type': GOOD,
    'deprecated enabled_vgpu_types': GOOD,
    'deprecated [vgpu_<type>]': GOOD,
    'old group shadowed by the new one': D2 + (
        '[vgpu_nvidia-35]\ndevice_addresses = 0000:85:00.0\n'),
    'mdev_class in the old group': GOOD + (
        '[mdev_nvidia-35]\nmdev_class = CUSTOM_X\n'),
    'default type': GOOD + (
        '[mdev_nvidia-36]\ndevice_addresses = 0000:85:00.0\n'),
    'group of a type not enabled': GOOD,
    'upper-case address': GOOD,
    'default type with a custom class': GOOD + (
        '[mdev_nvidia-35]\nmdev_class = CUSTOM_NV35\n'),
    'mdev_class on the only type': (
        '[devices]\nenabled_mdev_types = nvidia-35,nvidia-36\n'
        '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'
        'mdev_class = CUSTOM_A\n'),
    'second type without addresses': GOOD,
    'address Nova cannot parse': GOOD,
    'same address under two types': GOOD + (
        '[mdev_nvidia-36]\ndevice_addresses = 0000:85:00.0\n'),
    'mdev_class from the early spec': GOOD + (
        '[mdev_nvidia-36]\nmdev_class = CUSTOM_MLX5\n'),
    'max_instances below 1': GOOD + '[mdev_nvidia-35]\nmax_instances = 1\n',
    'virtual parent not verified': GOOD,
}


@pytest.mark.parametrize('rule', sorted(RULES))
def test_rule_triggers(tmp_path, rule):
    text, severity, fragment = RULES[rule]
    _, findings = check(tmp_path, text)
    hits = [f for f in findings if fragment in f.message]
    assert len(hits) == 1, findings
    assert hits[0].severity == severity
    assert hits[0].where.startswith('[')


@pytest.mark.parametrize('rule', sorted(RULES))
def test_rule_stays_quiet(tmp_path, rule):
    _, findings = check(tmp_path, CLEAN[rule])
    assert not [f for f in findings if RULES[rule][2] in f.message]
    assert not [f for f in findings if f.severity == 'error']


def test_where_has_file_and_line(tmp_path: pathlib.Path) -> None:
    _, findings = check(tmp_path, RULES['mdev_class in the old group'][0])
    [hit] = [f for f in findings if f.severity == 'warning'
             and f.where.startswith('[vgpu_')]
    assert hit.where == '[vgpu_nvidia-35] mdev_class, %s:5' % (
        tmp_path / 'nova.conf')


def test_old_group_of_a_later_file_wins(tmp_path: pathlib.Path) -> None:
    first, second = tmp_path / '10.conf', tmp_path / '20.conf'
    first.write_text(GOOD)
    second.write_text('[vgpu_nvidia-35]\ndevice_addresses = 0000:85:00.0\n')
    conf = local_novaconf.parse_files([str(first), str(second)])
    assert conf.pgpu_type_mapping == {'0000:85:00.0': 'nvidia-35'}
    found = [f for f in configcheck.file_findings(conf)
             if f.severity == 'warning' and 'device_addresses' in f.where]
    assert [(f.where, f.message) for f in found] == [(
        '[mdev_nvidia-35] device_addresses, %s:4' % first,
        'Ignored: [mdev_nvidia-35] device_addresses = 0000:84:00.0: '
        '[vgpu_nvidia-35] device_addresses in a later file (%s:2) wins, '
        'with 0000:85:00.0: oslo.config reads the newest file first, under '
        'either name; remove one of them.' % second)]


def test_effective_without_devices(tmp_path):
    conf, _ = check(tmp_path, D2 + '[mdev_nvidia-35]\ndevice_addresses = '
                    '0000:84:00.0, 0000:3B:00.4\nmdev_class = CUSTOM_A\n')
    rows = [(r.device, r.mdev_type, r.resource_class)
            for r in configcheck.effective(conf)]
    assert rows == [('0000:3B:00.4', None, None),
                    ('0000:3b:00.4', 'nvidia-36', 'VGPU'),
                    ('0000:84:00.0', 'nvidia-35', 'CUSTOM_A'),
                    (configcheck.OTHER_DEVICES, 'nvidia-36', 'VGPU')]


# -- sysfs --------------------------------------------------------------------

@pytest.fixture
def node(tmp_path):
    """Two plain GPUs, an SR-IOV GPU with three VFs, and mtty."""
    return sysfs.build(tmp_path / 'sys', devices=[
        ('0000:84:00.0', {'nvidia-35': 4, 'nvidia-36': 2}, None),
        ('0000:85:00.0', {'nvidia-35': 4, 'nvidia-36': 2}, None),
        ('0000:41:00.0', {}, None),
        ('0000:41:00.4', {'nvidia-558': 1}, '0000:41:00.0'),
        ('0000:41:00.5', {'nvidia-558': 1}, '0000:41:00.0'),
        ('0000:41:00.6', {'nvidia-558': 1}, '0000:41:00.0'),
    ], virtual=[('mtty/mtty', {'mtty-1': 2})])


def sysfs_check(tmp_path, root, text):
    path = tmp_path / 'nova.conf'
    path.write_text(text)
    conf = local_novaconf.parse_files(
        [str(path)], local_sysfs.sysfs_virtual_parent(root))
    host = local_sysfs.read_host(root)
    return conf, configcheck.sysfs_findings(conf, host.mdev_parents(),
                                            host.devices)


SR = '[devices]\nenabled_mdev_types = nvidia-35, nvidia-558\n'


@pytest.mark.parametrize('text,fragment', [
    (SR + '[mdev_nvidia-35]\ndevice_addresses = 0000:86:00.0\n'
     '[mdev_nvidia-558]\ndevice_addresses = 0000:41:00.4\n',
     '0000:86:00.0 is not an mdev-capable device on this host'),
    (SR + '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'
     '[mdev_nvidia-558]\ndevice_addresses = 0000:85:00.0\n',
     '0000:85:00.0 does not offer type nvidia-558'),
    (SR + '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'
     'max_instances = 2\n[mdev_nvidia-558]\ndevice_addresses = '
     '0000:41:00.4\n',
     'max_instances = 2 but the 1 device(s) of type nvidia-35 offer 4'),
    (SR + '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'
     '[mdev_nvidia-558]\ndevice_addresses = 0000:41:00.0\n',
     '0000:41:00.0 is the physical function of an SR-IOV GPU'),
    (SR + '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'
     '[mdev_nvidia-558]\ndevice_addresses = 0000:41:00.7\n',
     'a virtual function that does not exist'),
    (SR + '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n',
     '0000:85:00.0 takes the default type nvidia-558, which it does not '
     'offer'),
])
def test_sysfs_findings(tmp_path, node, text, fragment):
    _, findings = sysfs_check(tmp_path, node, text)
    assert [f for f in findings if fragment in f.message], findings


def test_sysfs_clean(tmp_path, node):
    _, findings = sysfs_check(tmp_path, node, (
        '[devices]\nenabled_mdev_types = nvidia-558, nvidia-35, mtty-1\n'
        '[mdev_nvidia-558]\ndevice_addresses = 0000:41:00.4,0000:41:00.5,'
        '0000:41:00.6\nmax_instances = 3\n'
        '[mdev_mtty-1]\ndevice_addresses = mtty_mtty\n'))
    assert findings == []


def test_vf_listed_with_its_pf(tmp_path, node):
    # A PF that is an mdev parent itself and one of its VFs: build one.
    root = sysfs.build(tmp_path / 'sys2', devices=[
        ('0000:41:00.0', {'nvidia-558': 1}, None),
        ('0000:41:00.4', {'nvidia-558': 1}, '0000:41:00.0')])
    _, findings = sysfs_check(tmp_path, root, (
        '[devices]\nenabled_mdev_types = nvidia-558\n[mdev_nvidia-558]\n'
        'device_addresses = 0000:41:00.0,0000:41:00.4\n'))
    assert messages(findings) == [
        'Virtual function 0000:41:00.4 is listed together with its '
        'physical function 0000:41:00.0: list the virtual functions only.']


def test_virtual_parent_checked_in_sysfs(tmp_path, node):
    conf, _ = sysfs_check(tmp_path, node, (
        '[devices]\nenabled_mdev_types = mtty-1\n[mdev_mtty-1]\n'
        'device_addresses = mtty_nothere\n'))
    assert "'mtty_nothere' is neither" in conf.errors[0].message
    conf, _ = sysfs_check(tmp_path, node, (
        '[devices]\nenabled_mdev_types = mtty-1\n[mdev_mtty-1]\n'
        'device_addresses = mtty_mtty\n'))
    assert conf.errors == []
    assert conf.type_for('mtty_mtty') == 'mtty-1'


def test_no_mdev_bus(tmp_path):
    (tmp_path / 'empty').mkdir()
    conf, _ = check(tmp_path, GOOD)
    [finding] = configcheck.sysfs_findings(
        conf, local_sysfs.read_host(str(tmp_path / 'empty')).mdev_parents())
    # Nova starts (see the cross-check below): a warning, not an error.
    assert finding.severity == 'warning'
    assert 'nova-compute will start' in finding.message
    assert 'offers no mediated devices' in finding.message
    conf, _ = check(tmp_path, '[DEFAULT]\ndebug = true\n')
    [finding] = configcheck.sysfs_findings(
        conf, local_sysfs.read_host(str(tmp_path / 'empty')).mdev_parents())
    assert finding.severity == 'info'


@pytest.mark.nova
def test_no_mdev_bus_nova_starts_and_offers_nothing(tmp_path, monkeypatch):
    """With no mdev-capable device in libvirt (what a host without
    class/mdev_bus shows), Nova's driver takes the configuration and
    reports no GPU inventory: nova-compute starts and offers nothing.
    """
    path = tmp_path / 'nova.conf'
    path.write_text(GOOD)

    class NoMdevHost:
        def list_mdev_capable_devices(self, flags=0):
            return []

        def list_mediated_devices(self, flags=0):
            return []

    drv = nova_driver.driver(monkeypatch, [str(path)], str(tmp_path))
    assert drv.supported_vgpu_types == ['nvidia-35', 'nvidia-36']
    drv._host = NoMdevHost()
    assert drv._get_gpu_inventories() == {}


# -- Placement ------------------------------------------------------------

def pdev(address, rc='VGPU', traits=(), servers=(), total=4):
    nodedev = 'pci_' + address.replace(':', '_').replace('.', '_')
    return configcheck.PlacementDevice(nodedev, address, rc, total,
                                       tuple(traits), tuple(servers))


def test_placement_findings(tmp_path):
    conf, _ = check(tmp_path, (
        '[devices]\nenabled_mdev_types = nvidia-35, nvidia-36\n'
        '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0,0000:87:00.0\n'
        'mdev_class = CUSTOM_NV35\n'
        '[mdev_nvidia-36]\ndevice_addresses = 0000:85:00.0\n'))
    found = configcheck.placement_findings(conf, 'compute1', [
        pdev('0000:84:00.0', 'VGPU', ['CUSTOM_NVIDIA_36'], ['vm1 (u1)']),
        pdev('0000:85:00.0', 'VGPU', ['CUSTOM_NVIDIA_36']),
        pdev('0000:86:00.0', 'VGPU', [], ['vm2 (u2)'])])
    assert messages(found) == [
        'Placement has no device 0000:87:00.0 on host compute1: it does not '
        'exist there, offers no nvidia-35 instance, or nova-compute has not '
        'reported it yet.',
        'Device 0000:84:00.0 is VGPU in Placement but Nova will report '
        'CUSTOM_NV35 (type nvidia-35): its inventory changes class on '
        'restart. Placement refuses that while servers hold allocations '
        "there (vm1 (u1)): nova-compute's updates for the node fail until "
        'they move.',
        "Device 0000:84:00.0 carries CUSTOM_NVIDIA_36 but will be of type "
        "nvidia-35: run 'openstack mdev trait set --compute-conf "
        "compute1=FILE' after the restart to tag it CUSTOM_NVIDIA_35.",
        'Device 0000:86:00.0 (VGPU, total 4) gets no type from this file: '
        'nova-compute stops reporting it but does not delete its provider, '
        'so Placement keeps offering its old inventory and the scheduler '
        'can still pick it while Nova cannot create mdevs there; give it a '
        'type, or delete the provider once no server uses it. Servers with '
        'allocations there: vm2 (u2).']
    assert configcheck.placement_findings(conf, 'compute1', [
        pdev('0000:84:00.0', 'CUSTOM_NV35', ['CUSTOM_NVIDIA_35']),
        pdev('0000:85:00.0'), pdev('0000:87:00.0', 'CUSTOM_NV35')]) == []


def _pci(text, tmp_path):
    path = tmp_path / 'nova.conf'
    path.write_text(text)
    return pci_rules.pci_config(local_novaconf.load([str(path)]))


def test_alias_problem_by_class_traits_and_ids(tmp_path):
    pci = _pci("""[pci]
report_in_placement = True
device_spec = {"address": "0000:25:00.4", "resource_class": "A16",
    "traits": "blue"}
device_spec = {"vendor_id": "10de", "product_id": "2236"}
device_spec = {"address": "0000:41:00.0"}
""", tmp_path)
    alias = pci_request.Alias
    a16 = alias('a16', 'legacy', ({'resource_class': 'a16'},))
    red = alias('red', 'legacy', ({'resource_class': 'A16',
                                   'traits': 'red'},))
    ids = alias('ids', 'legacy', ({'vendor_id': '10de',
                                   'product_id': '2237'},))
    specs = pci.specs
    assert configcheck_pci.alias_problem(a16, specs, True) is None
    assert configcheck_pci.alias_problem(red, specs, True) == (
        'no device spec of class CUSTOM_A16 has trait CUSTOM_RED')
    # The third spec's devices get CUSTOM_PCI_<their ids>: any id fits.
    assert configcheck_pci.alias_problem(ids, specs, True) is None
    assert configcheck_pci.alias_problem(ids, specs[:2], True) == (
        'no device spec gives resource class CUSTOM_PCI_10DE_2237')
    # The PCI filter matches ids: a spec without ids matches any.
    assert configcheck_pci.alias_problem(ids, specs[:2], False) is None
    assert configcheck_pci.alias_problem(ids, specs[1:2], False) == (
        'no device spec matches vendor_id 10de and product_id 2237')
    assert configcheck_pci.alias_problem(a16, specs[:2], False) is None


def test_pci_placement_findings_without_devices(tmp_path):
    pci = _pci('[pci]\nreport_in_placement = True\n'
               'device_spec = {"address": "0000:41:00.0"}\n', tmp_path)
    placed = [configcheck_pci.PlacementPciProvider(
        'n_0000:41:00.0', 'CUSTOM_X', 1, 0,
        ('COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA'))]
    # Nothing is predicted without the devices; no finding is invented.
    assert configcheck_pci.pci_placement_findings(pci, 'n', placed) == []
    pci = _pci('[pci]\ndevice_spec = {"address": "0000:41:00.0"}\n',
               tmp_path)
    [error] = configcheck_pci.pci_placement_findings(pci, 'n', placed)
    assert error.severity == 'error'
    assert error.where == '[pci] report_in_placement'


# -- The rows of the command ------------------------------------------------

def test_report_rows_and_result(tmp_path: pathlib.Path) -> None:
    from osc_mdev.features.config.check import report as configreport
    from osc_mdev.nova.conf import settings as novaconf

    conf, found = check(tmp_path, GOOD + NVIDIA_DOWNTIME)
    files = conf.settings.files
    checked = configreport.scope(conf, sysfs_root='/sys', host='compute1')
    effects = configreport.device_effects(conf)
    columns, rows = configreport.report(found, effects, files, checked)
    assert columns == ('Severity', 'Where', 'Message')
    assert [r[0] for r in rows] == ['info', 'result']
    assert rows[-1][1] == files[0]
    assert rows[-1][2] == (
        "Checked the section and option names against the options of Nova "
        "%s, the mdev types nvidia-35 and nvidia-36, the devices under "
        "/sys and Placement's view of compute1. Nothing is wrong (1 note)."
        % configreport.nova_options.NOVA_VERSION)
    columns, rows = configreport.report(found, effects, files, checked,
                                        long=True)
    assert columns[3:] == ('Device', 'Mdev Type', 'Resource Class',
                           'Traits')
    assert [(r[0], r[3], r[4], r[5]) for r in rows] == [
        ('info', '', '', ''),
        ('effective', '0000:84:00.0', 'nvidia-35', 'VGPU'),
        ('effective', configcheck.OTHER_DEVICES, 'nvidia-36', 'VGPU'),
        ('result', '', '', '')]
    assert rows[1][1] == '[mdev_nvidia-35] device_addresses, %s:4' % files[0]
    assert rows[2][1] == '[devices] enabled_mdev_types, %s:2' % files[0]

    error = novaconf.Finding('error', '[x]', 'E.')
    warning = novaconf.Finding('warning', '[y]', 'W.')
    _, rows = configreport.report([warning, error, warning], [], files,
                                  ['x'])
    assert [r[0] for r in rows] == ['error', 'warning', 'warning', 'result']
    assert rows[-1][2] == ('Checked x. 1 error: nova-compute will refuse to '
                           'start with these files (and 2 warnings).')
    _, rows = configreport.report([warning], [], files, ['x'])
    assert rows[-1][2] == ('Checked x. 1 warning: nova-compute will start '
                           'but do something other than written.')


# -- [libvirt] live_migration_downtime* for NVIDIA types (Nova's vGPU
# guide) --------------------------------------------------------------------

@pytest.mark.parametrize('text, fragment', [
    ('[libvirt]\nvirt_type = kvm\n',
     'Types nvidia-35, nvidia-36 are NVIDIA vGPU types and nova-compute '
     'uses [libvirt] live_migration_downtime = 500, '
     'live_migration_downtime_steps = 10, live_migration_downtime_delay = '
     '75: NVIDIA vGPUs need live_migration_downtime = 500000'),
    # No [libvirt] section: nova-compute uses the same defaults.
    ('', 'nova-compute uses [libvirt] live_migration_downtime = 500, '
     'live_migration_downtime_steps = 10, live_migration_downtime_delay = '
     '75: '),
    (NVIDIA_DOWNTIME.replace('= 3\n', '= 10\n', 1),
     'uses [libvirt] live_migration_downtime_steps = 10:'),
    (NVIDIA_DOWNTIME.replace('= 500000', '= 50'),
     'live_migration_downtime = 50 (refused by oslo.config: '),
])
def test_nvidia_downtime_warning(tmp_path: pathlib.Path, text: str,
                                 fragment: str) -> None:
    _, findings = check(tmp_path, GOOD + text)
    found = [f for f in findings if 'NVIDIA vGPU' in f.message]
    assert len(found) == 1, findings
    assert found[0].severity == 'warning'
    assert fragment in found[0].message
    assert found[0].where.startswith('[libvirt]')


@pytest.mark.parametrize('text', [
    GOOD + NVIDIA_DOWNTIME,
    GOOD + NVIDIA_DOWNTIME.replace('500000', '600000'),
    '[devices]\nenabled_mdev_types = mlx5_core\n[libvirt]\n'
    'virt_type = kvm\n',
    '[devices]\nenabled_mdev_types = mlx5_core\n',
])
def test_nvidia_downtime_quiet(tmp_path: pathlib.Path, text: str) -> None:
    _, findings = check(tmp_path, text)
    assert not [f for f in findings if 'NVIDIA vGPU' in f.message]
