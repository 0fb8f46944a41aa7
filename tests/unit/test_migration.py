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

"""The migration rules, each run next to the Nova function it mirrors
(marked ``nova``), and the verdicts and plans built on them.
"""

import dataclasses
import datetime
import pathlib
import types

import pytest

from osc_mdev.cloud import explanation
from osc_mdev.cloud import fit as capacity
from osc_mdev.cloud import payloads as nova_payloads
from osc_mdev.cloud import traits
from osc_mdev.features.migration import model as migration_model
from osc_mdev.features.migration import plan as migration_plan
from osc_mdev.features.migration import verdict as migration_verdict
from osc_mdev.nova import migration as migration_rules
from osc_mdev.nova import objects
from osc_mdev.nova.pci import request as pci_request
from osc_mdev.nova.scheduler import request_filter
from osc_mdev.nova.scheduler import utils as rr
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver


def request_of(flavor, pci_config=None, booted_from_volume=False):
    """The request of a flavor as Nova's API gives it, built as every
    command builds it.
    """
    return rr.request_for(nova_payloads.flavor(flavor), pci_config,
                          booted_from_volume)


# -- the rules, against Nova's own functions --------------------------------

VERSIONS = [
    # (libvirt, QEMU, type)
    ((8, 6, 0), (8, 1, 0), 'QEMU'),
    ((8, 5, 0), (8, 1, 0), 'QEMU'),
    ((8, 6, 0), (8, 0, 0), 'QEMU'),
    ((10, 0, 0), (9, 2, 0), 'QEMU'),
    ((8, 0, 0), (6, 2, 0), 'QEMU'),
    ((8, 6, 0), (8, 1, 0), 'LXC'),
    ((8, 6, 1), (8, 0, 999), 'QEMU'),
]


def _int(version):
    return version[0] * 1000000 + version[1] * 1000 + version[2]


@pytest.mark.nova
@pytest.mark.parametrize('libvirt, qemu, hv_type', VERSIONS)
def test_mdev_live_migration_versions_as_nova(libvirt, qemu, hv_type):
    from nova.virt.libvirt import driver
    from nova.virt.libvirt import host

    connection = types.SimpleNamespace(
        getLibVersion=lambda: _int(libvirt), getVersion=lambda: _int(qemu),
        getType=lambda: hv_type)
    libvirt_host = object.__new__(host.Host)
    libvirt_host.get_connection = lambda: connection
    drv = object.__new__(driver.LibvirtDriver)
    drv._host = libvirt_host
    assert driver.MIN_MDEV_LIVEMIG_LIBVIRT_VERSION == \
        migration_rules.MIN_MDEV_LIVEMIG_LIBVIRT_VERSION
    assert driver.MIN_MDEV_LIVEMIG_QEMU_VERSION == \
        migration_rules.MIN_MDEV_LIVEMIG_QEMU_VERSION
    assert migration_rules.host_can_support_mdev_live_migration(
        qemu, libvirt, hv_type) == \
        drv._host_can_support_mdev_live_migration()


def test_libvirt_version_unknown_leans_on_qemu():
    assert migration_rules.host_can_support_mdev_live_migration((8, 1, 0))
    assert not migration_rules.host_can_support_mdev_live_migration((8, 0, 9))


# The controller's files: what nova-conductor reads for
# [workarounds] skip_hypervisor_version_check_on_lm.
CONDUCTOR_FILES = {
    'unset': ['[DEFAULT]\ndebug = true\n'],
    'True': ['[workarounds]\nskip_hypervisor_version_check_on_lm = True\n'],
    'yes': ['[workarounds]\nskip_hypervisor_version_check_on_lm = yes\n'],
    'False': ['[workarounds]\nskip_hypervisor_version_check_on_lm = '
              'False\n'],
    'upper-case group, on': [
        '[WORKAROUNDS]\nskip_hypervisor_version_check_on_lm = on\n'],
    'on, then off in a later file': [
        '[workarounds]\nskip_hypervisor_version_check_on_lm = 1\n',
        '[workarounds]\nskip_hypervisor_version_check_on_lm = 0\n'],
}
HYPERVISORS = [
    (('QEMU', 8001000), ('QEMU', 8001000)),
    (('QEMU', 9000000), ('QEMU', 8001000)),
    (('QEMU', 8001000), ('QEMU', 6002000)),
    (('QEMU', 8001000), ('QEMU', 9000000)),
    (('QEMU', 8001000), ('VMware vCenter Server', 8001000)),
    (('QEMU', 8001000), ('VMware vCenter Server', 6002000)),
]


def nova_check_compatible(monkeypatch: pytest.MonkeyPatch, paths: list,
                          source: tuple, dest: tuple) -> str | None:
    """Nova's own ``_check_compatible_with_source_hypervisor``, its CONF
    read from ``paths`` with Nova's option definitions, as nova-conductor
    reads its files: None or the refusal.
    """
    from nova.conductor.tasks import live_migrate
    from nova import exception
    from tests.fixtures import nova_driver

    monkeypatch.setattr(live_migrate, 'CONF',
                        nova_driver.nova_config(paths))
    task = object.__new__(live_migrate.LiveMigrationTask)
    task.source = 'src'
    info = {'src': source, 'dst': dest}
    task._get_compute_info = lambda host: types.SimpleNamespace(
        hypervisor_type=info[host][0], hypervisor_version=info[host][1])
    try:
        task._check_compatible_with_source_hypervisor('dst')
    except (exception.InvalidHypervisorType,
            exception.DestinationHypervisorTooOld) as exc:
        return str(exc)
    return None


@pytest.mark.nova
@pytest.mark.parametrize('source, dest', HYPERVISORS)
@pytest.mark.parametrize('files', sorted(CONDUCTOR_FILES))
def test_conductor_files_as_nova(tmp_path: pathlib.Path,
                                 monkeypatch: pytest.MonkeyPatch,
                                 files: str, source: tuple,
                                 dest: tuple) -> None:
    """The controller's files read as nova-conductor reads them, and the
    versions judged as its check judges them, on the same inputs.
    """
    from osc_mdev.local import conf_files as local_novaconf
    from tests.fixtures import nova_driver

    paths = nova_driver.write_files(tmp_path, CONDUCTOR_FILES[files])
    nova = nova_check_compatible(monkeypatch, paths, source, dest)
    skip = migration_rules.skips_hypervisor_version_check(
        local_novaconf.load(paths))
    assert skip == nova_driver.nova_config(paths).workarounds[
        'skip_hypervisor_version_check_on_lm']
    ours = migration_rules.compatible_with_source_hypervisor(
        source[0], migration_rules.version_tuple(source[1]), dest[0],
        migration_rules.version_tuple(dest[1]), skip)
    assert ours == nova


# A compute's files: what its libvirt driver reads for [libvirt]
# live_migration_permit_post_copy.
POST_COPY_FILES = {
    'unset': ['[DEFAULT]\ndebug = true\n'],
    'no [libvirt] option': ['[libvirt]\nvirt_type = kvm\n'],
    'True': ['[libvirt]\nlive_migration_permit_post_copy = True\n'],
    'yes': ['[libvirt]\nlive_migration_permit_post_copy = yes\n'],
    'False': ['[libvirt]\nlive_migration_permit_post_copy = False\n'],
    'upper-case group, on': [
        '[LIBVIRT]\nlive_migration_permit_post_copy = on\n'],
    'on, then off in a later file': [
        '[libvirt]\nlive_migration_permit_post_copy = 1\n',
        '[libvirt]\nlive_migration_permit_post_copy = 0\n'],
    'off, then on in a later file': [
        '[libvirt]\nlive_migration_permit_post_copy = false\n',
        '[libvirt]\nlive_migration_permit_post_copy = true\n'],
}


class _MigrateData:
    """What ``_live_migration_operation`` reads of its migrate data."""

    block_migration = False
    serial_listen_addr = '127.0.0.1'
    target_connect_addr = None

    def __contains__(self, name: str) -> bool:
        return name == 'target_connect_addr'


def nova_migrate_flags(monkeypatch: pytest.MonkeyPatch, paths: list,
                       vm_state: str) -> int:
    """The flags Nova's own libvirt driver hands libvirt's migrate call
    for a live migration it runs as the source, its CONF read from
    ``paths`` with Nova's option definitions: ``_parse_migration_flags``
    as ``init_host`` runs it, then ``_live_migration_operation`` up to
    ``guest.migrate``.
    """
    from nova.virt.libvirt import driver
    from tests.fixtures import nova_driver

    monkeypatch.setattr(driver, 'CONF', nova_driver.nova_config(
        paths, nova_driver.MODULES + ('serial_console',)))
    monkeypatch.setattr(driver, 'libvirt', nova_driver.fake_libvirt())
    monkeypatch.setattr(driver.libvirt_migrate, 'get_updated_guest_xml',
                        lambda *args, **kwargs: None)
    drv = object.__new__(driver.LibvirtDriver)
    drv._parse_migration_flags()
    drv._live_migration_uri = lambda dest: 'qemu+tcp://%s/system' % dest
    called = {}

    def migrate(uri, **kwargs):
        called.update(kwargs)

    guest = types.SimpleNamespace(migrate=migrate)
    instance = types.SimpleNamespace(vm_state=vm_state, uuid='s1')
    drv._live_migration_operation(None, instance, 'dst', False,
                                  _MigrateData(), guest, [])
    assert drv._is_post_copy_enabled(drv._live_migration_flags) == \
        drv._is_post_copy_enabled(drv._block_migration_flags)
    return called['flags']


@pytest.mark.nova
@pytest.mark.parametrize('vm_state', ['active', 'paused'])
@pytest.mark.parametrize('files', sorted(POST_COPY_FILES))
def test_post_copy_as_nova(tmp_path: pathlib.Path,
                           monkeypatch: pytest.MonkeyPatch, files: str,
                           vm_state: str) -> None:
    """A source's files read as its libvirt driver reads them, and
    whether it asks libvirt for post-copy (``VIR_MIGRATE_POSTCOPY``) as
    its driver decides, on the same inputs.
    """
    from nova.virt.libvirt import driver
    from osc_mdev.local import conf_files as local_novaconf
    from tests.fixtures import nova_driver

    paths = nova_driver.write_files(tmp_path, POST_COPY_FILES[files])
    flags = nova_migrate_flags(monkeypatch, paths, vm_state)
    setting = libvirt_driver.post_copy_setting(local_novaconf.load(paths))
    assert setting == nova_driver.nova_config(paths).libvirt[
        'live_migration_permit_post_copy']
    drv = object.__new__(driver.LibvirtDriver)
    assert migration_rules.post_copy_requested(setting, vm_state) == \
        drv._is_post_copy_enabled(flags)
    drv._parse_migration_flags()
    assert migration_rules.post_copy_enabled(setting) == \
        drv._is_post_copy_enabled(drv._live_migration_flags)


def test_conductor_value_nova_refuses(tmp_path: pathlib.Path) -> None:
    from osc_mdev.local import conf_files as local_novaconf
    from osc_mdev.nova.conf import settings as novaconf

    path = tmp_path / 'nova.conf'
    path.write_text('[workarounds]\nskip_hypervisor_version_check_on_lm = '
                    'maybe\n')
    with pytest.raises(novaconf.NovaConfError) as err:
        migration_rules.skips_hypervisor_version_check(
            local_novaconf.load([str(path)]))
    assert str(err.value) == (
        '[workarounds] skip_hypervisor_version_check_on_lm, %s:2: the value '
        "maybe is refused by oslo.config (Unexpected boolean value 'maybe'), "
        'so nova-conductor cannot read it; write True or False' % path)


MAPPINGS = {
    'one type, mapped': ({'s1': 'nvidia-11'}, ['nvidia-11', 'nvidia-12'],
                         {'d1': 'nvidia-11'}),
    'one type, another given': ({'s1': 'nvidia-11'},
                                ['nvidia-11', 'nvidia-12'],
                                {'d1': 'nvidia-12'}),
    'not enabled': ({'s1': 'nvidia-11'}, ['nvidia-12'], {'d1': 'nvidia-12'}),
    'two of one type': ({'s1': 'nvidia-11', 's2': 'nvidia-11'},
                        ['nvidia-11'], {'d1': 'nvidia-11',
                                        'd2': 'nvidia-11'}),
    'two types, one short': ({'s1': 'nvidia-11', 's2': 'nvidia-12'},
                             ['nvidia-11', 'nvidia-12'],
                             {'d1': 'nvidia-11', 'd2': 'nvidia-11'}),
    'two types, both': ({'s1': 'nvidia-11', 's2': 'nvidia-12'},
                        ['nvidia-12', 'nvidia-11'],
                        {'d1': 'nvidia-12', 'd2': 'nvidia-11'}),
    'fewer given': ({'s1': 'nvidia-11', 's2': 'nvidia-11'}, ['nvidia-11'],
                    {'d1': 'nvidia-11'}),
}


@pytest.mark.nova
@pytest.mark.parametrize('name', sorted(MAPPINGS))
def test_target_mdevs_as_nova(name):
    from nova import exception
    from nova import objects
    from nova.virt.libvirt import driver

    objects.register_all()
    source, supported, dest = MAPPINGS[name]
    drv = object.__new__(driver.LibvirtDriver)
    drv.supported_vgpu_types = supported
    drv._allocate_mdevs = lambda allocs: list(dest)
    drv._get_mdev_types_from_uuids = lambda uuids: {
        u: dest[u] for u in uuids}
    drv.instance_claimed_mdevs = {}
    data = objects.LibvirtLiveMigrateData(source_mdev_types=dict(source))
    try:
        got = drv.check_source_migrate_data_at_dest(
            None, types.SimpleNamespace(uuid='server'), data, None, None, {})
        nova = ('mapped', dict(got.target_mdevs))
    except exception.MigrationPreCheckError as exc:
        nova = ('refused', 'not supported' if 'not supported' in str(exc)
                else 'not fully mapped')

    refusal = migration_rules.unsupported_mdev_types(source, supported)
    if refusal:
        ours = ('refused', 'not supported')
        assert refusal in str(nova_reason(drv, source, dest, data))
    else:
        mapped = migration_rules.target_mdevs(source, dest)
        ours = (('mapped', mapped) if len(mapped) == len(source)
                else ('refused', 'not fully mapped'))
    assert ours == nova


def nova_reason(drv, source, dest, data):
    from nova import exception
    from nova import objects

    try:
        drv.check_source_migrate_data_at_dest(
            None, types.SimpleNamespace(uuid='server'),
            objects.LibvirtLiveMigrateData(source_mdev_types=dict(source)),
            None, None, {})
    except exception.MigrationPreCheckError as exc:
        return exc
    return None


@pytest.mark.nova
@pytest.mark.parametrize('vm_state, task_state', [
    ('active', None), ('paused', None), ('stopped', None),
    ('error', None), ('active', 'migrating'), ('suspended', None),
])
def test_vm_state_as_nova(vm_state, task_state):
    from nova.compute import api
    from nova import exception

    instance = types.SimpleNamespace(
        vm_state=vm_state, task_state=task_state, uuid='server',
        launched_at=datetime.datetime(2026, 1, 1))
    for kind, states, method in (
            (migration_rules.LIVE, ['active', 'paused'], 'live_migrate'),
            (migration_rules.COLD, ['active', 'stopped'], 'resize')):
        def call(self, context, instance):
            return True
        call.__name__ = method
        checked = api.check_instance_state(vm_state=states)(call)
        try:
            nova = checked(None, None, instance)
        except exception.InstanceInvalidState:
            nova = False
        ours = migration_rules.vm_state_allows(kind, vm_state, task_state)
        assert (ours is None) == bool(nova), (kind, ours)


@pytest.mark.nova
@pytest.mark.parametrize('flags', [['true'], ['false'], [None],
                                   ['true', 'true'], ['true', None]])
def test_pci_live_migratable_as_nova(flags, monkeypatch):
    from nova.conductor.tasks import live_migrate
    from nova import exception
    from nova import objects

    objects.register_all()
    aliases, requests = [], []
    for n, flag in enumerate(flags):
        spec = {'vendor_id': '10de', 'product_id': '26b9'}
        if flag is not None:
            spec['live_migratable'] = flag
        aliases.append(pci_request.Alias('a%d' % n, 'legacy', (spec,)))
        requests.append(objects.InstancePCIRequest(
            count=1, spec=[dict(spec)], alias_name='a%d' % n))
    task = object.__new__(live_migrate.LiveMigrationTask)
    task.instance = types.SimpleNamespace(
        pci_requests=objects.InstancePCIRequests(requests=requests))
    # InstancePCIRequests.neutron_requests() is all([]), true, without
    # port requests: Nova goes on to the port checks, which a cloud with
    # Neutron's port binding extension and current computes passes.
    task.context = None
    task.network_api = types.SimpleNamespace(
        has_port_binding_extension=lambda context: True)
    monkeypatch.setattr(live_migrate, 'supports_vif_related_pci_allocations',
                        lambda context, host: True)
    try:
        task._check_can_migrate_pci('src', 'dst')
        nova = None
    except exception.MigrationPreCheckError as exc:
        nova = exc.kwargs['reason']
    assert migration_rules.pci_request_live_migratable(aliases) == nova


@pytest.mark.parametrize('values, off', [
    ({'live_migration_downtime': 500, 'live_migration_downtime_steps': 10,
      'live_migration_downtime_delay': 75}, 3),
    ({'live_migration_downtime': 500000,
      'live_migration_downtime_steps': 3,
      'live_migration_downtime_delay': 3}, 0),
    ({'live_migration_downtime': 600000,
      'live_migration_downtime_steps': 3,
      'live_migration_downtime_delay': 5}, 1),
    ({'live_migration_downtime': None,
      'live_migration_downtime_steps': 3,
      'live_migration_downtime_delay': 3}, 1),
])
def test_downtime_of_nvidia_guide(values, off):
    problem = libvirt_driver.downtime_problem(values)
    assert (problem.count(' = ') if problem else 0) == off


def test_version_tuple_is_novas_integer():
    assert migration_rules.version_tuple(8001000) == (8, 1, 0)
    assert migration_rules.version_tuple(10002003) == (10, 2, 3)
    assert migration_rules.version_tuple(None) is None


# -- types of devices -------------------------------------------------------

@pytest.mark.parametrize('device_traits, prefix, key', [
    ({'CUSTOM_NVIDIA_11', 'OWNER_NOVA'}, 'CUSTOM_', 'NVIDIA_11'),
    ({'OWNER_NOVA'}, 'CUSTOM_', None),
    ({'CUSTOM_NVIDIA_11', 'CUSTOM_NVIDIA_12'}, 'CUSTOM_', None),
    ({'CUSTOM_GPU_POOL_A', 'CUSTOM_NVIDIA_35'}, 'CUSTOM_', 'NVIDIA_35'),
    ({'CUSTOM_VGPU_NVIDIA_35'}, 'CUSTOM_VGPU_', 'NVIDIA_35'),
    # With the default prefix, whatever stands between CUSTOM_ and the
    # driver (traits.type_key, the rule audit and metrics use too).
    ({'CUSTOM_VGPU_NVIDIA_35'}, 'CUSTOM_', 'NVIDIA_35'),
    ({'CUSTOM_MLX5_CORE'}, 'CUSTOM_', 'MLX5_CORE'),
])
def test_type_of_traits(device_traits, prefix, key):
    found = traits.mdev_type_of_traits(device_traits, prefix)
    assert (found.key if found else None) == key
    if key:
        assert found.name in device_traits and found.name.endswith(key)
        assert traits.mdev_type(key.lower().replace('_', '-', 1),
                                prefix).key == key


# -- verdicts ---------------------------------------------------------------

N11 = traits.mdev_type('nvidia-11')
N12 = traits.mdev_type('nvidia-12')


def device(uuid, address, used=0, total=16, rc='VGPU', extra=()):
    return capacity.Provider(
        uuid, 'node_' + address, {rc: capacity.Inventory(total=total,
                                                         max_unit=total)},
        {rc: used}, frozenset({'OWNER_NOVA'} | set(extra)), address)


def node(name, devices, version=(8, 1, 0), status='enabled', state='up',
         root_free=True, conf=None):
    root = capacity.Provider(
        'root-' + name, name,
        {'VCPU': capacity.Inventory(total=16, max_unit=16),
         'MEMORY_MB': capacity.Inventory(total=8192, max_unit=8192),
         'DISK_GB': capacity.Inventory(total=100, max_unit=100)},
        {} if root_free else {'MEMORY_MB': 8192},
        frozenset({'OWNER_NOVA'}))
    tree = capacity.Host(name, root, tuple(d for d, _ in devices))
    return migration_model.Node(
        name, tree,
        objects.Hypervisor(name, name, status, state, 'QEMU', version),
        {d.uuid: t for d, t in devices}, {d.uuid: 'pci_' + d.device
                                          for d, _ in devices}, conf)


FLAVOR = {'vcpus': 1, 'ram': 512, 'disk': 1,
          'extra_specs': {'resources:VGPU': '1'}}


def server(mdev_type=N11, flavor=FLAVOR, vm_state='active'):
    request = request_of(flavor)
    return migration_model.Server(
        'srv', 'vm', vm_state, None, 'src', 'f', request, None,
        (migration_model.Held('src:0000:81:00.0', 'src-gpu', 'VGPU', 1,
                              mdev_type),))


SOURCE = node('src', [(device('src-gpu', '0000:81:00.0', used=1), N11)])


def judge(target, first=migration_verdict.NOT_ASKED, **kwargs):
    return migration_verdict.judge(kwargs.pop('srv', None) or server(),
                                   SOURCE, target, first, **kwargs)


def test_same_type_with_room_is_yes_with_its_device():
    target = node('dst', [(device('d1', '0000:82:00.0'), N11)])
    verdict = judge(target, {'d1': {'VGPU': 1}})
    assert (verdict.live, verdict.cold) == ('yes', 'yes')
    assert verdict.devices == ('dst:0000:82:00.0',)
    assert verdict.reason == ''
    assert any('libvirt >= 8.6.0' in n for n in verdict.not_checked)


def test_another_type_only_is_refused_in_novas_words():
    target = node('dst', [(device('d1', '0000:82:00.0'), N12)])
    verdict = judge(target, {'d1': {'VGPU': 1}})
    assert (verdict.live, verdict.cold) == ('no', 'no')
    assert 'are not supported by this compute' in verdict.live_refusal
    assert 'give the server a nvidia-12 vGPU' in verdict.cold_refusal
    assert verdict.devices == ()


def test_full_device_of_the_type_and_room_on_another():
    target = node('dst', [(device('d1', '0000:82:00.0', used=16), N11),
                          (device('d2', '0000:82:01.0'), N12)])
    verdict = judge(target, {'d2': {'VGPU': 1}})
    assert verdict.live == 'no'
    assert 'not fully mapped' in verdict.live_refusal
    assert 'no nvidia-11 device with room' in verdict.live_refusal


def test_placement_picks_the_right_type_now_is_a_warning():
    target = node('dst', [(device('d1', '0000:82:00.0'), N11),
                          (device('d2', '0000:82:01.0'), N12)])
    verdict = judge(target, {'d1': {'VGPU': 1}})
    assert (verdict.live, verdict.cold) == ('yes', 'yes')
    assert verdict.reason.startswith('warning: the flavor lets Placement '
                                     'pick dst:0000:82:01.0 (nvidia-12)')
    strict = judge(target, {'d1': {'VGPU': 1}}, strict_types=True)
    assert (strict.live, strict.cold) == ('no', 'no')


def test_flavor_asking_for_the_type_is_safe():
    flavor = dict(FLAVOR, extra_specs={
        'resources:VGPU': '1', 'trait:CUSTOM_NVIDIA_11': 'required'})
    target = node('dst', [
        (device('d1', '0000:82:00.0', extra={'CUSTOM_NVIDIA_11'}), N11),
        (device('d2', '0000:82:01.0', extra={'CUSTOM_NVIDIA_12'}), N12)])
    verdict = judge(target, {'d1': {'VGPU': 1}}, srv=server(flavor=flavor),
                    strict_types=True)
    assert (verdict.live, verdict.cold) == ('yes', 'yes')
    assert verdict.reason == ''


def test_old_hypervisor_refuses_live_only():
    target = node('dst', [(device('d1', '0000:82:00.0'), N11)],
                  version=(8, 0, 0))
    verdict = judge(target, {'d1': {'VGPU': 1}})
    assert (verdict.live, verdict.cold) == ('no', 'yes')
    assert verdict.reason.startswith(
        'live: The instance requires a newer hypervisor version')
    assert not any('libvirt' in n for n in verdict.not_checked)


def test_skipped_version_check_lets_an_older_target_through() -> None:
    source = node('src', [(device('src-gpu', '0000:81:00.0', used=1), N11)],
                  version=(9, 0, 0))
    target = node('dst', [(device('d1', '0000:82:00.0'), N11)],
                  version=(8, 1, 0))
    refused = migration_verdict.judge(server(), source, target,
                                      {'d1': {'VGPU': 1}})
    assert (refused.live, refused.cold) == ('no', 'yes')
    assert 'requires a newer hypervisor version' in refused.live_refusal
    verdict = migration_verdict.judge(server(), source, target,
                                      {'d1': {'VGPU': 1}},
                                      skip_version_check=True)
    assert (verdict.live, verdict.cold) == ('yes', 'yes')
    assert verdict.reason == (
        'warning: QEMU 8.1.0 here is older than 9.0.0 on the source: the '
        'conductor lets it through only because of [workarounds] '
        'skip_hypervisor_version_check_on_lm')
    # Nova's own mdev check does not depend on it.
    old = node('dst', [(device('d1', '0000:82:00.0'), N11)],
               version=(8, 0, 0))
    verdict = migration_verdict.judge(server(), source, old,
                                      {'d1': {'VGPU': 1}},
                                      skip_version_check=True)
    assert verdict.live == 'no'
    assert 'compute service target are too old' in verdict.live_refusal


def test_skipped_version_check_needs_no_versions() -> None:
    unknown = node('dst', [(device('d1', '0000:82:00.0'), N11)],
                   version=None)
    noted = judge(unknown, {'d1': {'VGPU': 1}})
    assert 'hypervisor versions (not shown for dst)' in noted.not_checked
    skipped = judge(unknown, {'d1': {'VGPU': 1}}, skip_version_check=True)
    assert skipped.live == 'yes'
    assert not any('hypervisor versions' in n for n in skipped.not_checked)


def test_newer_but_too_old_for_mdevs():
    source = node('src', [(device('src-gpu', '0000:81:00.0', used=1), N11)],
                  version=(7, 2, 0))
    target = node('dst', [(device('d1', '0000:82:00.0'), N11)],
                  version=(8, 0, 0))
    verdict = migration_verdict.judge(server(), source, target,
                                      {'d1': {'VGPU': 1}})
    assert verdict.live == 'no'
    assert 'compute service source are too old' in verdict.live_refusal


@pytest.mark.parametrize('status, state, words', [
    ('disabled', 'up', 'is disabled'), ('enabled', 'down', 'is down')])
def test_service_disabled_or_down(status, state, words):
    target = node('dst', [(device('d1', '0000:82:00.0'), N11)],
                  status=status, state=state)
    verdict = judge(target)
    assert (verdict.live, verdict.cold) == ('no', 'no')
    assert words in verdict.reason


def test_root_short():
    target = node('dst', [(device('d1', '0000:82:00.0'), N11)],
                  root_free=False)
    verdict = judge(target, None)
    assert verdict.reason.startswith('No valid host: root resources short: '
                                     'MEMORY_MB 512 asked, 0 free')


# Targets where the scheduler refuses the server, each for the reason of
# one kind of explainer step: (target, server's extra specs, kind).
REFUSED_BY = {
    'room': (lambda: node('dst', [(device('d1', '0000:82:00.0', used=16),
                                   N11)]), {}, explanation.Kind.ROOM),
    'root room': (lambda: node('dst', [(device('d1', '0000:82:00.0'), N11)],
                               root_free=False), {},
                  explanation.Kind.ROOT_ROOM),
    'required trait': (
        lambda: node('dst', [(device('d1', '0000:82:00.0'), N11)]),
        {'trait:CUSTOM_NVIDIA_11': 'required'},
        explanation.Kind.REQUIRED_TRAIT),
    'forbidden trait': (
        lambda: node('dst', [(device('d1', '0000:82:00.0',
                                     extra={'CUSTOM_SLOW'}), N11)]),
        {'trait:CUSTOM_SLOW': 'forbidden'},
        explanation.Kind.FORBIDDEN_TRAIT),
    'offers': (lambda: node('dst', [(device('d1', '0000:82:00.0',
                                            rc='CUSTOM_A16'), N11)]),
               {}, explanation.Kind.OFFERS),
    'units': (lambda: node('dst', [(_steps_of_two(
        device('d1', '0000:82:00.0')), N11)]), {}, explanation.Kind.UNITS),
    'service enabled': (lambda: _with_root_traits(
        node('dst', [(device('d1', '0000:82:00.0'), N11)]),
        {'OWNER_NOVA', 'COMPUTE_STATUS_DISABLED'}), {},
        explanation.Kind.SERVICE_ENABLED),
    'root trait': (lambda: _with_root_traits(
        node('dst', [(device('d1', '0000:82:00.0'), N11)]), set()), {},
        explanation.Kind.ROOT_TRAIT),
}


def _steps_of_two(gpu):
    return dataclasses.replace(gpu, inventories={'VGPU': capacity.Inventory(
        total=16, max_unit=16, step_size=2)})


def _with_root_traits(target, root_traits):
    tree = target.tree
    return dataclasses.replace(target, tree=dataclasses.replace(
        tree, root=dataclasses.replace(tree.root,
                                       traits=frozenset(root_traits))))


def _refused(case):
    """The verdict on the case's target, and the kind of the step that
    rules it out.
    """
    make, specs, _ = REFUSED_BY[case]
    flavor = dict(FLAVOR, extra_specs=dict(FLAVOR['extra_specs'], **specs))
    target, srv = make(), server(flavor=flavor)
    steps, _ = explanation.explain(request_filter.process_reqspec(srv.request),
                                   [target.tree])
    kind = next(s.kind for s in steps if s.hosts_out)
    return judge(target, None, srv=srv), kind


@pytest.mark.parametrize('case', sorted(REFUSED_BY))
def test_rewording_the_explainer_changes_no_decision(monkeypatch, case):
    """Migration reads the kind of the explainer's step, never its words:
    with every sentence reworded, each refusal is the same, and a step
    migration does not word itself reads as the renderer words it.
    """
    before, kind = _refused(case)
    assert kind == REFUSED_BY[case][2]
    assert before.live_refusal.startswith('No valid host: ')
    reworded = {k: (lambda subject, k=k: 'REWORDED %s of %r' % (
        k.name, subject)) for k in explanation.Kind}
    monkeypatch.setattr(explanation, 'SENTENCES', reworded)
    after, _ = _refused(case)
    assert (after.live, after.cold) == (before.live, before.cold) == (
        'no', 'no')
    if 'REWORDED' in after.live_refusal:
        # Said in the explainer's words: the step's own sentence.
        assert after.live_refusal.startswith(
            'No valid host: REWORDED %s of ' % kind.name)
        assert kind in (explanation.Kind.UNITS,
                        explanation.Kind.ROOT_TRAIT)
    else:
        assert after.live_refusal == before.live_refusal
        assert after.reason == before.reason


def test_placement_without_candidate_is_no():
    target = node('dst', [(device('d1', '0000:82:00.0'), N11)])
    verdict = judge(target, None)
    assert (verdict.live, verdict.cold) == ('no', 'no')
    assert 'Placement returns no allocation candidate' in verdict.reason


def test_stopped_server_moves_cold_only():
    target = node('dst', [(device('d1', '0000:82:00.0'), N11)])
    verdict = judge(target, {'d1': {'VGPU': 1}},
                    srv=server(vm_state='stopped'))
    assert (verdict.live, verdict.cold) == ('no', 'yes')
    assert 'vm_state stopped' in verdict.reason


def test_unknown_types_are_said():
    target = node('dst', [(device('d1', '0000:82:00.0'), None)])
    verdict = judge(target, {'d1': {'VGPU': 1}}, srv=server(mdev_type=None))
    assert (verdict.live, verdict.cold) == ('yes', 'yes')
    assert any('the mdev type of src:0000:81:00.0' in n
               for n in verdict.not_checked)


def test_downtime_warning_with_compute_conf():
    conf = migration_model.Conf((N11,), lambda nodedev: N11, {
        'live_migration_downtime': 500, 'live_migration_downtime_steps': 10,
        'live_migration_downtime_delay': 75})
    target = node('dst', [(device('d1', '0000:82:00.0'), N11)], conf=conf)
    verdict = judge(target, {'d1': {'VGPU': 1}})
    assert verdict.live == 'yes'
    assert 'live_migration_downtime = 500,' in verdict.reason
    assert any('live_migration_downtime* of src' in n
               for n in verdict.not_checked)


def post_copy_conf(post_copy):
    return migration_model.Conf((N11,), lambda nodedev: N11, dict(
        libvirt_driver.NVIDIA_DOWNTIME), post_copy)


def test_post_copy_on_the_source_refuses_the_live_move():
    source = dataclasses.replace(SOURCE, conf=post_copy_conf(True))
    target = node('dst', [(device('d1', '0000:82:00.0'), N11)],
                  conf=post_copy_conf(False))
    verdict = migration_verdict.judge(server(), source, target,
                                      {'d1': {'VGPU': 1}})
    assert (verdict.live, verdict.cold) == ('no', 'yes')
    assert verdict.live_refusal.startswith(
        '[libvirt] live_migration_permit_post_copy = True on the source '
        'src: Nova asks for post-copy, which QEMU refuses')
    assert migration_rules.QEMU_POST_COPY_REFUSAL in verdict.live_refusal
    # Nova takes post-copy off for a paused server.
    verdict = migration_verdict.judge(server(vm_state='paused'), source,
                                      target, {'d1': {'VGPU': 1}})
    assert (verdict.live, verdict.cold) == ('yes', 'no')
    assert 'post_copy' not in verdict.reason
    # The plan moves the server cold, as Nova can.
    [move] = migration_plan.plan(servers(1), source, [target])
    assert (move.node, move.kind) == ('dst', 'cold')
    [move] = migration_plan.plan(servers(1), source, [target],
                                 kinds=('live',))
    assert move.node is None
    assert 'live_migration_permit_post_copy = True on the source' in \
        move.reason


def test_post_copy_refusal_comes_after_novas_prechecks():
    source = dataclasses.replace(SOURCE, conf=post_copy_conf(True))
    old = node('dst', [(device('d1', '0000:82:00.0'), N11)],
               version=(6, 2, 0), conf=post_copy_conf(False))
    verdict = migration_verdict.judge(server(), source, old,
                                      {'d1': {'VGPU': 1}})
    assert verdict.live == 'no'
    assert 'newer hypervisor version' in verdict.live_refusal


def test_post_copy_on_the_target_is_a_warning_only():
    source = dataclasses.replace(SOURCE, conf=post_copy_conf(False))
    target = node('dst', [(device('d1', '0000:82:00.0'), N11)],
                  conf=post_copy_conf(True))
    verdict = migration_verdict.judge(server(), source, target,
                                      {'d1': {'VGPU': 1}})
    assert (verdict.live, verdict.cold) == ('yes', 'yes')
    assert verdict.reason == (
        'warning: [libvirt] live_migration_permit_post_copy = True on dst: '
        "this move is not concerned (the source's setting decides), but a "
        'live migration of the server away from dst would fail (QEMU '
        'refuses post-copy with VFIO devices); set it to False there')
    assert not any('post_copy' in n for n in verdict.not_checked)


def test_post_copy_of_a_source_without_its_conf_is_not_checked():
    target = node('dst', [(device('d1', '0000:82:00.0'), N11)])
    verdict = judge(target, {'d1': {'VGPU': 1}})
    assert verdict.live == 'yes'
    assert '[libvirt] live_migration_permit_post_copy of src (give its ' \
        'nova.conf)' in verdict.not_checked


def test_post_copy_with_a_pci_device():
    request = request_of({'vcpus': 1, 'ram': 512, 'disk': 1,
                          'extra_specs': {'resources:CUSTOM_A16': '1'}})
    pci_server = migration_model.Server(
        'srv', 'vm', 'active', None, 'src', 'f', request, None,
        (migration_model.Held('src:0000:41:00.4', 'src-vf', 'CUSTOM_A16',
                              1, None, 'pci'),))
    source = node('src', [], conf=post_copy_conf(True))
    target = node('dst', [(device('d1', '0000:42:00.4', rc='CUSTOM_A16'),
                           None)])
    target = dataclasses.replace(target, nodedevs={}, types={})
    verdict = migration_verdict.judge(pci_server, source, target,
                                      {'d1': {'CUSTOM_A16': 1}})
    assert verdict.live == 'no'
    assert 'live_migration_permit_post_copy = True on the source src' in \
        verdict.live_refusal
    # A server with no device is not concerned.
    plain = migration_model.Server(
        'srv', 'vm', 'active', None, 'src', 'f', request_of(
            {'vcpus': 1, 'ram': 512, 'disk': 1, 'extra_specs': {}}), None)
    verdict = migration_verdict.judge(plain, source, target)
    assert verdict.live == 'yes', verdict.reason


# -- plans ------------------------------------------------------------------

def servers(count, flavor=FLAVOR):
    request = request_of(flavor)
    return [migration_model.Server(
        's%d' % n, 'vm%d' % n, 'active', None, 'src', 'f', request, None,
        (migration_model.Held('src:0000:81:00.0', 'src-gpu', 'VGPU', 1, N11),))
        for n in range(count)]


def test_plan_is_joint_and_best_fit():
    small = node('a', [(device('a1', '0000:82:00.0', used=14), N11)])
    large = node('b', [(device('b1', '0000:83:00.0', used=10), N11)])
    moves = migration_plan.plan(servers(6), SOURCE, [small, large])
    assert [m.node for m in moves].count('a') == 2
    assert [m.node for m in moves].count('b') == 4
    assert all(m.kind == 'live' for m in moves)
    moves = migration_plan.plan(servers(9), SOURCE, [small, large])
    stuck = [m for m in moves if m.node is None]
    assert len(stuck) == 1
    assert 'no device with room for 1 VGPU' in stuck[0].reason


def test_plan_moves_cold_where_live_cannot():
    old = node('a', [(device('a1', '0000:82:00.0'), N11)],
               version=(6, 2, 0))
    moves = migration_plan.plan(servers(1), SOURCE, [old])
    assert (moves[0].node, moves[0].kind) == ('a', 'cold')
    moves = migration_plan.plan(servers(1), SOURCE, [old], kinds=('live',))
    assert moves[0].node is None
    assert 'newer hypervisor version' in moves[0].reason


def test_plan_carries_the_caveats_of_check() -> None:
    """Each planned move says what ``migration check`` says for that
    target and kind: Not Checked and the warnings.
    """
    conf = migration_model.Conf((N11,), lambda nodedev: N11, {
        'live_migration_downtime': 500, 'live_migration_downtime_steps': 10,
        'live_migration_downtime_delay': 75})
    target = node('a', [(device('a1', '0000:82:00.0'), N11)], conf=conf)
    verdict = migration_verdict.judge(servers(1)[0], SOURCE, target)
    [move] = migration_plan.plan(servers(1), SOURCE, [target])
    assert (move.node, move.kind) == ('a', 'live')
    assert move.not_checked == verdict.not_checked
    assert any(n.startswith('libvirt >= 8.6.0') for n in move.not_checked)
    assert move.reason == verdict.reason
    assert move.reason.startswith('warning: [libvirt] '
                                  'live_migration_downtime = 500')
    # A cold move leans on neither.
    [move] = migration_plan.plan(servers(1), SOURCE, [target], kinds=('cold',))
    assert (move.kind, move.not_checked, move.reason) == ('cold', (), '')


def test_plan_with_the_version_check_skipped() -> None:
    source = node('src', [(device('src-gpu', '0000:81:00.0', used=1), N11)],
                  version=(9, 0, 0))
    old = node('a', [(device('a1', '0000:82:00.0'), N11)],
               version=(8, 1, 0))
    [move] = migration_plan.plan(servers(1), source, [old], kinds=('live',))
    assert move.node is None
    [move] = migration_plan.plan(servers(1), source, [old],
                                 kinds=('live',), skip_version_check=True)
    assert (move.node, move.kind) == ('a', 'live')
    assert 'skip_hypervisor_version_check_on_lm' in move.reason


def test_plan_names_what_would_free_room():
    flavor = dict(FLAVOR, extra_specs={
        'resources:VGPU': '1', 'trait:CUSTOM_NVIDIA_11': 'required'})
    untagged = node('a', [(device('a1', '0000:82:00.0'), N11)])
    moves = migration_plan.plan(
        servers(1, flavor), SOURCE, [untagged],
        fix=lambda s, nodes: migration_plan.smallest_fix(s, nodes))
    assert moves[0].node is None
    assert 'tag a:0000:82:00.0 with CUSTOM_NVIDIA_11' in moves[0].reason


def test_commands_name_the_service_host():
    assert migration_plan.command('live', 'gpu2', 'X') == (
        'openstack --os-compute-api-version 2.30 server migrate '
        '--live-migration --host gpu2 --wait X')
    assert migration_plan.command('cold', 'gpu2', 'X').endswith(
        '--host gpu2 --wait X && openstack server migration confirm X')


NOVA_DEFAULT_DOWNTIME = {'live_migration_downtime': 500,
                         'live_migration_downtime_steps': 10,
                         'live_migration_downtime_delay': 75}


@pytest.mark.parametrize('text, values', [
    # No [libvirt] section: nova-compute uses Nova's defaults all the same.
    ('[devices]\nenabled_mdev_types = nvidia-12\n', NOVA_DEFAULT_DOWNTIME),
    ('[libvirt]\nvirt_type = kvm\n[devices]\nenabled_mdev_types = '
     'nvidia-12\n', NOVA_DEFAULT_DOWNTIME),
    ('[libvirt]\nlive_migration_downtime = 500\n'
     'live_migration_downtime_steps = 10\n[devices]\n'
     'enabled_mdev_types = nvidia-12\n', NOVA_DEFAULT_DOWNTIME),
])
def test_compute_conf_downtime(tmp_path: pathlib.Path, text: str,
                               values: dict) -> None:
    from osc_mdev.local import conf_files as local_novaconf

    path = tmp_path / 'nova.conf'
    path.write_text(text)
    conf = migration_model.conf_from(local_novaconf.parse_files([str(path)]))
    assert conf.downtime == values
    assert conf.supported == (N12,)
    assert conf.type_of('pci_0000_84_00_0') == N12
    target = node('dst', [(device('d1', '0000:82:00.0'), N12)], conf=conf)
    verdict = migration_verdict.judge(server(N12), SOURCE, target,
                                      {'d1': {'VGPU': 1}})
    assert verdict.live == 'yes'
    assert 'live_migration_downtime = 500, live_migration_downtime_steps = ' \
        '10, live_migration_downtime_delay = 75 on dst' in verdict.reason
    assert not any('dst' in n for n in verdict.not_checked)


def test_plan_ignores_nodes_without_the_class():
    cpu_only = node('cpu', [])
    mlx = node('mlx', [(device('m1', '0000:3b:00.0', rc='CUSTOM_MLX5'),
                        None)])
    assert not migration_model.offers(servers(1)[0].request, cpu_only)
    moves = migration_plan.plan(servers(1), SOURCE, [cpu_only, mlx])
    assert moves[0].node is None
    assert moves[0].reason == ('no other compute node has a device of '
                               'VGPU')


def test_inputs_read_the_conductor_option_from_the_controller(
        tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    from osc_mdev.base import errors
    from osc_mdev.features.migration import reads as usecase
    from osc_mdev.v1 import errors as v1_errors

    compute = tmp_path / 'gpu1.conf'
    compute.write_text('[devices]\nenabled_mdev_types = nvidia-11\n'
                       '[workarounds]\n'
                       'skip_hypervisor_version_check_on_lm = True\n')
    controller = tmp_path / 'controller.conf'
    controller.write_text('[workarounds]\n'
                          'skip_hypervisor_version_check_on_lm = True\n')
    # nova-compute does not read it: without the controller's files the
    # conductor's default holds, and the compute's line is named.
    inputs = usecase.read_inputs([('gpu1', str(compute))], [])
    assert (inputs.skip_version_check, inputs.pci_config) == (False, None)
    assert list(inputs.confs) == ['gpu1']
    assert list(inputs.conductor_only) == ['gpu1']
    assert '%s:4' % compute in inputs.conductor_only['gpu1']
    inputs = usecase.read_inputs([('gpu1', str(compute))], [str(controller)])
    assert inputs.skip_version_check is True
    assert inputs.conductor_only == {}
    assert (inputs.pci_config.aliases,
            inputs.pci_config.pci_in_placement) == ({}, False)
    assert caplog.text == ''
    controller.write_text('[workarounds]\n'
                          'skip_hypervisor_version_check_on_lm = maybe\n')
    with pytest.raises(errors.Invalid) as err:
        usecase.read_inputs([], [str(controller)])
    assert err.value.data['parameter'] == 'controller_conf'
    assert err.value.worded(v1_errors.option).startswith(
        '--controller-conf: [workarounds] '
        'skip_hypervisor_version_check_on_lm, %s:2: the value maybe is '
        'refused' % controller)
