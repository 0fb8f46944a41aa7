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

"""``openstack mdev trait set/unset`` against a real Placement."""

import subprocess
import sys
import threading
import time
import uuid

import pytest

from tests.fixtures import cli
from tests.fixtures import placement_data
from tests.fixtures.placement_data import Gpu


@pytest.fixture
def host(placement, request):
    """A fresh compute host with three GPUs for each test."""
    name = 'trait-%s.example_com' % uuid.uuid4().hex[:12]
    gpus = [Gpu('pci_0000_84_00_0', 'VGPU', 4, ('CUSTOM_KEEP_ME',)),
            Gpu('pci_0000_85_00_0', 'VGPU', 4),
            Gpu('pci_0000_86_00_0', 'CUSTOM_MLX5', 8)]
    placement.add_compute_node(name, gpus)
    return name, gpus


def traits(placement, gpu):
    return set(placement.get_traits(gpu.uuid))


def mdev(auth, *args):
    return cli.openstack(*auth, 'mdev', *args)


def generations(placement, gpus):
    return [placement.generation(g.uuid) for g in gpus]


def test_set_adds_and_keeps_existing(placement, auth, host):
    name, gpus = host
    result = mdev(auth, 'trait', 'set', '--trait', 'CUSTOM_NVIDIA_11',
                  '-f', 'json', '%s:0000:84:00.0' % name)
    assert result.rc == 0, result.stderr
    assert result.json() == [{
        'Device': '0000:84:00.0', 'Host': name,
        'Traits': ['CUSTOM_KEEP_ME', 'CUSTOM_NVIDIA_11', 'OWNER_NOVA'],
        'Result': 'added CUSTOM_NVIDIA_11'}]
    assert traits(placement, gpus[0]) == {
        'OWNER_NOVA', 'CUSTOM_KEEP_ME', 'CUSTOM_NVIDIA_11'}
    # The other devices are untouched.
    assert traits(placement, gpus[1]) == {'OWNER_NOVA'}
    # Running it again changes nothing and says so.
    again = mdev(auth, 'trait', 'set', '--trait', 'CUSTOM_NVIDIA_11',
                 '-f', 'json', gpus[0].uuid).json()
    assert again[0]['Result'] == 'unchanged'


def test_set_by_host_and_class_selectors(placement, auth, host):
    name, gpus = host
    result = mdev(auth, 'trait', 'set', '--trait', 'CUSTOM_POOL_A',
                  '--trait', 'CUSTOM_POOL_B', '--host', name,
                  '--resource-class', 'VGPU', '-f', 'json').json()
    assert [r['Device'] for r in result] == ['0000:84:00.0', '0000:85:00.0']
    for gpu in gpus[:2]:
        assert {'CUSTOM_POOL_A', 'CUSTOM_POOL_B', 'OWNER_NOVA'} <= traits(
            placement, gpu)
    assert traits(placement, gpus[2]) == {'OWNER_NOVA'}


def test_set_creates_missing_custom_trait(placement, auth, host):
    name, gpus = host
    new = 'CUSTOM_BRAND_NEW_%d' % int(time.time() * 1000)
    placement.request('GET', '/traits/%s' % new, ok=(404,))
    result = mdev(auth, 'trait', 'set', '--trait', new, gpus[1].name)
    assert result.rc == 0, result.stderr
    placement.request('GET', '/traits/%s' % new, ok=(204,))
    assert new in traits(placement, gpus[1])


def test_unset_removes_only_named(placement, auth, host):
    name, gpus = host
    placement.set_traits(gpus[0].uuid, [
        'OWNER_NOVA', 'CUSTOM_KEEP_ME', 'CUSTOM_DROP_ME'])
    result = mdev(auth, 'trait', 'unset', '--trait', 'CUSTOM_DROP_ME',
                  '--host', name, '-f', 'json').json()
    assert [r['Result'] for r in result] == [
        'removed CUSTOM_DROP_ME', 'unchanged', 'unchanged']
    assert traits(placement, gpus[0]) == {'OWNER_NOVA', 'CUSTOM_KEEP_ME'}


def test_replace_keeps_owner_traits_unless_forced(placement, auth, host):
    name, gpus = host
    mdev(auth, 'trait', 'set', '--replace', '--trait', 'CUSTOM_ONLY',
         gpus[0].uuid)
    assert traits(placement, gpus[0]) == {'OWNER_NOVA', 'CUSTOM_ONLY'}
    mdev(auth, 'trait', 'set', '--replace', '--force', '--trait',
         'CUSTOM_ONLY', gpus[0].uuid)
    assert traits(placement, gpus[0]) == {'CUSTOM_ONLY'}


def test_unset_owner_trait_needs_force(placement, auth, host):
    name, gpus = host
    before = generations(placement, gpus)
    result = mdev(auth, 'trait', 'unset', '--trait', 'OWNER_NOVA',
                  '--host', name)
    assert result.rc == 1
    assert 'add --force' in result.stderr
    assert generations(placement, gpus) == before
    forced = mdev(auth, 'trait', 'unset', '--trait', 'OWNER_NOVA', '--force',
                  gpus[1].uuid)
    assert forced.rc == 0, forced.stderr
    assert traits(placement, gpus[1]) == set()


def test_dry_run_writes_nothing(placement, auth, host):
    name, gpus = host
    before = generations(placement, gpus)
    trait = 'CUSTOM_DRY_%d' % int(time.time() * 1000)
    result = mdev(auth, 'trait', 'set', '--trait', trait, '--host', name,
                  '--dry-run', '-f', 'json').json()
    assert result[0] == {
        'Device': '0000:84:00.0', 'Host': name,
        'Current Traits': ['CUSTOM_KEEP_ME', 'OWNER_NOVA'],
        'Traits': sorted(['CUSTOM_KEEP_ME', trait, 'OWNER_NOVA']),
        'Result': 'would add %s' % trait}
    assert len(result) == 3
    unset = mdev(auth, 'trait', 'unset', '--trait', 'CUSTOM_KEEP_ME',
                 '--all', '--dry-run', '-f', 'json')
    assert unset.rc == 0, unset.stderr
    assert generations(placement, gpus) == before
    # Not even the custom trait was created.
    placement.request('GET', '/traits/%s' % trait, ok=(404,))


@pytest.mark.parametrize('args,fragment', [
    (['set', '--trait', 'custom_lower', '--all'], 'not a valid trait name'),
    (['set', '--trait', 'CUSTOM_A-B', '--all'], 'not a valid'),
    (['set', '--trait', 'NOT_A_STANDARD_TRAIT', '--all'],
     'neither a standard trait nor known to Placement'),
    (['set', '--trait', 'CUSTOM_OK'],
     'Name the devices to change, or select them'),
    (['set', '--all'], 'Give at least one --trait'),
    (['set', '--trait', 'CUSTOM_OK', '--host', 'no-such-host'],
     "No compute host named 'no-such-host'"),
    (['set', '--trait', 'CUSTOM_OK', '--resource-class', 'CUSTOM_NONE_HERE'],
     'No mdev device with resource class CUSTOM_NONE_HERE'),
    (['set', '--trait', 'CUSTOM_OK', '--resource-class', 'PGPU'],
     'not an mdev resource class'),
    (['set', '--trait', 'CUSTOM_OK', 'nohost:0000:84:00.0'],
     'no host named nohost'),
    (['set', '--trait', 'CUSTOM_OK', 'HOST:0000:84:00'],
     'is not a PCI address'),
    (['set', '--trait', 'CUSTOM_OK', '--force', '--all'],
     '--force only has a meaning with --replace'),
    # Contradictory selectors: --all stands alone, named devices must
    # match the options.
    (['set', '--trait', 'CUSTOM_OK', '--all', '--host', 'HOST'],
     '--all selects every device and cannot be combined with --host'),
    (['set', '--trait', 'CUSTOM_OK', '--all', '--resource-class', 'VGPU'],
     'cannot be combined with --resource-class'),
    (['set', '--trait', 'CUSTOM_OK', '--all', 'HOST:0000:84:00.0'],
     'cannot be combined with device names'),
    (['unset', '--trait', 'CUSTOM_KEEP_ME', '--all', '--host', 'HOST'],
     'cannot be combined with --host'),
    (['set', '--trait', 'CUSTOM_OK', 'HOST:0000:84:00.0', '--host',
      'OTHER'], "is on host HOST, not on OTHER given with --host"),
    (['set', '--trait', 'CUSTOM_OK', 'HOST:0000:86:00.0',
      '--resource-class', 'VGPU'],
     'has resource class CUSTOM_MLX5, not VGPU given with '
     '--resource-class'),
])
def test_bad_input_writes_nothing(placement, auth, host, args, fragment):
    name, gpus = host
    other = [Gpu('pci_0000_84_00_0', 'VGPU', 4)]
    placement.add_compute_node('other-%s' % name, other)
    args = [a.replace('HOST', name).replace('OTHER', 'other-%s' % name)
            for a in args]
    fragment = fragment.replace('HOST', name).replace('OTHER',
                                                      'other-%s' % name)
    before = generations(placement, gpus + other)
    result = mdev(auth, 'trait', *args)
    assert result.rc == 1
    assert result.stdout == ''
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and 'Traceback' not in result.stderr
    assert fragment in lines[0]
    assert generations(placement, gpus + other) == before
    placement.request('GET', '/traits/CUSTOM_OK', ok=(404,))


def test_failure_on_one_device_is_reported_and_exit_1(
        placement, auth, host, monkeypatch):
    # A device deleted between selection and update fails alone.
    from osc_mdev.cloud import reads as devices

    name, gpus = host
    real = devices.select_devices

    def select_then_delete(*args, **kwargs):
        selected = real(*args, **kwargs)
        placement.request('DELETE', '/resource_providers/%s' % gpus[1].uuid)
        return selected

    monkeypatch.setattr(devices, 'select_devices', select_then_delete)
    result = mdev(auth, 'trait', 'set', '--trait', 'CUSTOM_PARTIAL',
                  '--host', name, '-f', 'json')
    assert result.rc == 1
    rows = __import__('json').loads(result.stdout)
    assert [r['Result'] for r in rows] == [
        'added CUSTOM_PARTIAL', 'failed: the device was deleted meanwhile',
        'added CUSTOM_PARTIAL']
    assert '1 of the devices could not be changed' in result.stderr
    assert 'CUSTOM_PARTIAL' in traits(placement, gpus[2])


NOVA_CONF = """
[devices]
enabled_mdev_types = nvidia-35,nvidia-36,mlx5_core
[mdev_nvidia-35]
device_addresses = 0000:84:00.0
[vgpu_nvidia-36]
device_addresses = 0000:85:00.0
[mdev_mlx5_core]
mdev_class = CUSTOM_MLX5
"""


def test_compute_conf(placement, auth, host, tmp_path):
    name, gpus = host
    conf = tmp_path / 'nova.conf'
    conf.write_text(NOVA_CONF)
    # A stale type tag from an earlier configuration goes away.
    placement.set_traits(gpus[0].uuid, ['OWNER_NOVA', 'CUSTOM_NVIDIA_36'])
    result = mdev(auth, 'trait', 'set', '--compute-conf',
                  '%s=%s' % (name, conf), '-f', 'json')
    assert result.rc == 0, result.stderr
    assert traits(placement, gpus[0]) == {'OWNER_NOVA', 'CUSTOM_NVIDIA_35'}
    assert traits(placement, gpus[1]) == {'OWNER_NOVA', 'CUSTOM_NVIDIA_36'}
    # Unlisted: the default type (the one without device_addresses).
    assert traits(placement, gpus[2]) == {'OWNER_NOVA', 'CUSTOM_MLX5_CORE'}
    prefixed = mdev(auth, 'trait', 'set', '--compute-conf',
                    '%s=%s' % (name, conf), '--trait-prefix', 'CUSTOM_TYPE_',
                    '--dry-run', '-f', 'json').json()
    assert prefixed[0]['Result'] == 'would add CUSTOM_TYPE_NVIDIA_35'


def test_compute_conf_of_several_hosts(placement, auth, host, tmp_path):
    """Each host's devices get the types of its own nova.conf; a device
    on a host no file describes is refused before anything is written.
    """
    name, gpus = host
    other = 'trait-%s.example_com' % uuid.uuid4().hex[:12]
    other_gpus = [Gpu('pci_0000_84_00_0', 'VGPU', 4)]
    placement.add_compute_node(other, other_gpus)
    conf = tmp_path / 'nova.conf'
    conf.write_text(NOVA_CONF)
    other_conf = tmp_path / 'other.conf'
    other_conf.write_text('[devices]\nenabled_mdev_types = nvidia-11\n')
    before = generations(placement, gpus + other_gpus)
    cli.assert_one_line_error(
        mdev(auth, 'trait', 'set', '--compute-conf', '%s=%s' % (name, conf),
             '--host', other),
        'is on host %s, which no --compute-conf describes' % other)
    assert generations(placement, gpus + other_gpus) == before
    result = mdev(auth, 'trait', 'set', '--compute-conf',
                  '%s=%s' % (name, conf), '--compute-conf',
                  '%s=%s' % (other, other_conf), '-f', 'json')
    assert result.rc == 0, result.stderr
    assert [r['Host'] for r in result.json()] == sorted([name] * 3 + [other])
    assert traits(placement, gpus[1]) == {'OWNER_NOVA', 'CUSTOM_NVIDIA_36'}
    assert traits(placement, other_gpus[0]) == {'OWNER_NOVA',
                                                'CUSTOM_NVIDIA_11'}


def test_compute_conf_without_default_skips_unlisted(
        placement, auth, host, tmp_path):
    name, gpus = host
    conf = tmp_path / 'nova.conf'
    conf.write_text('[devices]\nenabled_vgpu_types = nvidia-11\n'
                    '[vgpu_nvidia-11]\ndevice_addresses = 0000:84:00.0\n')
    result = mdev(auth, 'trait', 'set', '--compute-conf',
                  '%s=%s' % (name, conf), '-f', 'json').json()
    assert [r['Result'] for r in result] == [
        'added CUSTOM_NVIDIA_11',
        'skipped: no mdev type for it in %s' % conf,
        'skipped: no mdev type for it in %s' % conf]


def test_compute_conf_nova_would_refuse(placement, auth, host, tmp_path):
    name, gpus = host
    conf = tmp_path / 'nova.conf'
    conf.write_text(NOVA_CONF.replace(
        'device_addresses = 0000:85:00.0',
        'device_addresses = 0000:85:00.0,0000:84:00.0'))
    before = generations(placement, gpus)
    result = mdev(auth, 'trait', 'set', '--compute-conf',
                  '%s=%s' % (name, conf))
    assert result.rc == 1
    assert 'duplicate types for PCI ID 0000:84:00.0' in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert generations(placement, gpus) == before


def test_compute_conf_short_address_refused(placement, auth, host,
                                            tmp_path):
    name, gpus = host
    conf = tmp_path / 'nova.conf'
    conf.write_text(NOVA_CONF.replace('device_addresses = 0000:84:00.0',
                                      'device_addresses = 84:00.0'))
    before = generations(placement, gpus)
    line = cli.assert_one_line_error(
        mdev(auth, 'trait', 'set', '--compute-conf',
             '%s=%s' % (name, conf)),
        "'84:00.0'", 'nova-compute refuses to start', str(conf))
    assert '[mdev_nvidia-35] device_addresses, %s:5' % conf in line
    assert generations(placement, gpus) == before


def test_compute_conf_upper_case_address_takes_default_type(
        placement, auth, host, tmp_path):
    name, gpus = host
    conf = tmp_path / 'nova.conf'
    conf.write_text(NOVA_CONF.replace('device_addresses = 0000:84:00.0',
                                      'device_addresses = 0000:84:00.0,'
                                      '0000:86:00.0').replace(
        'device_addresses = 0000:85:00.0', 'device_addresses = 0000:8A:00.0'))
    result = mdev(auth, 'trait', 'set', '--compute-conf',
                  '%s=%s' % (name, conf), '-f', 'json')
    assert result.rc == 0, result.stderr
    # Nova compares 0000:8A:00.0 literally with libvirt's 0000:8a:00.0:
    # it matches nothing, and no device is nvidia-36 any more.
    assert [r['Device'] for r in result.json()] == [
        '0000:84:00.0', '0000:85:00.0', '0000:86:00.0']
    assert traits(placement, gpus[0]) == {'OWNER_NOVA', 'CUSTOM_KEEP_ME',
                                          'CUSTOM_NVIDIA_35'}
    assert traits(placement, gpus[1]) == {'OWNER_NOVA', 'CUSTOM_MLX5_CORE'}
    assert traits(placement, gpus[2]) == {'OWNER_NOVA', 'CUSTOM_NVIDIA_35'}
    assert result.stderr.strip() == (
        "Note: 0000:8A:00.0 in [mdev_nvidia-36] device_addresses matches no "
        "device: Nova compares it literally with libvirt's 0000:8a:00.0, so "
        "that device takes the default type mlx5_core; write it as "
        "0000:8a:00.0.")


@pytest.mark.parametrize('content,problem', [
    (b'\x00\x01binary\xff', 'is a binary file, not a nova.conf'),
    (b'[devices]\nenabled_mdev_types = \xe9\n', 'is not UTF-8 text'),
    (b'', 'is empty'),
    (None, 'is a directory, not a nova.conf file'),
])
def test_compute_conf_not_a_nova_conf(placement, auth, host, tmp_path,
                                      content, problem):
    name, gpus = host
    conf = tmp_path / 'nova.conf'
    if content is None:
        conf.mkdir()
    else:
        conf.write_bytes(content)
    before = generations(placement, gpus)
    cli.assert_one_line_error(
        mdev(auth, 'trait', 'set', '--compute-conf',
             '%s=%s' % (name, conf)), str(conf), problem)
    assert generations(placement, gpus) == before


def test_from_nova_conf_is_refused(placement, auth, host, tmp_path):
    """The old spelling of --compute-conf is gone: refused, nothing
    written.
    """
    name, gpus = host
    conf = tmp_path / 'nova.conf'
    conf.write_text(NOVA_CONF)
    before = generations(placement, gpus)
    result = mdev(auth, 'trait', 'set', '--from-nova-conf', str(conf),
                  '--host', name)
    assert result.rc == 1
    assert 'Unrecognized arguments: --from-nova-conf' in result.stderr
    assert generations(placement, gpus) == before


class NovaLikeWriter(threading.Thread):
    """Bumps provider generations the way nova-compute's periodic does:
    re-PUTs inventory and re-reads/re-writes its own traits.
    """

    def __init__(self, url, gpus):
        super().__init__(daemon=True)
        self.placement = placement_data.Placement(url)
        self.gpus = gpus
        self.stop = threading.Event()
        self.writes = 0

    def run(self):
        self.placement.ensure_trait('CUSTOM_NOVA_SIDE')
        while not self.stop.is_set():
            for gpu in self.gpus:
                try:
                    self.placement.set_inventory(gpu.uuid, {
                        gpu.resource_class: {'total': gpu.total,
                                             'max_unit': gpu.total}})
                    # Read-modify-write with the generation read alongside
                    # the traits, as Placement clients must.
                    path = '/resource_providers/%s/traits' % gpu.uuid
                    body = self.placement.request('GET', path)
                    self.placement.request('PUT', path, json={
                        'resource_provider_generation':
                            body['resource_provider_generation'],
                        'traits': sorted(
                            set(body['traits']) | {'CUSTOM_NOVA_SIDE'})})
                    self.writes += 1
                except placement_data.PlacementError:
                    pass  # lost a race itself; try again next round


def test_concurrent_sets_lose_nothing(placement, placement_url, auth, host):
    name, gpus = host
    before = placement_data.server_stats(placement_url)['status']
    writer = NovaLikeWriter(placement_url, gpus)
    writer.start()
    procs = [subprocess.Popen(
        [sys.executable, '-m', 'openstackclient.shell', *auth, 'mdev',
         'trait', 'set', '--trait', 'CUSTOM_RACE_%d' % i, '--host', name,
         '-f', 'json'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(8)]
    outputs = [p.communicate(timeout=300) for p in procs]
    writer.stop.set()
    writer.join(30)
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err
        assert '409' not in out + err and 'Conflict' not in out + err
    for gpu in gpus:
        expected = {'CUSTOM_RACE_%d' % i for i in range(8)} | {
            'OWNER_NOVA', 'CUSTOM_NOVA_SIDE'}
        assert expected <= traits(placement, gpu)
    assert 'CUSTOM_KEEP_ME' in traits(placement, gpus[0])
    after = placement_data.server_stats(placement_url)['status']
    # The race was real: Placement refused stale generations meanwhile.
    conflicts = after.get('409', 0) - before.get('409', 0)
    print('409 answers during the race: %d; competing writes: %d'
          % (conflicts, writer.writes))
    assert conflicts > 0
    assert writer.writes > 0


def test_progress_line_on_a_terminal_only(placement, auth):
    # 24 devices: enough for the progress line, shown only on a terminal.
    import os
    import pty

    name = 'trait-progress.example'
    gpus = [Gpu('pci_0000_%02x_00_0' % (0x40 + i), 'VGPU', 2)
            for i in range(24)]
    placement.add_compute_node(name, gpus)
    command = [sys.executable, '-m', 'openstackclient.shell', *auth, 'mdev',
               'trait', 'set', '--trait', 'CUSTOM_PROGRESS', '--host', name,
               '-f', 'value', '-c', 'Result']
    master, slave = pty.openpty()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=slave,
                            text=True)
    os.close(slave)
    out, _ = proc.communicate(timeout=120)
    seen = b''
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.returncode == 0
    assert out.splitlines() == ['added CUSTOM_PROGRESS'] * 24
    assert b'Updating traits: 24/24 devices' in seen
    # Not a terminal: no progress line.
    quiet = subprocess.run(command, capture_output=True, text=True,
                           timeout=120)
    assert quiet.returncode == 0
    assert 'Updating traits' not in quiet.stderr
