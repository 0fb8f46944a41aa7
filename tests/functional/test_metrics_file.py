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

"""``openstack mdev metrics`` against a real Placement: the text parses
with prometheus_client's own parser, ``--output`` replaces the file in one
rename; a device or a compute node whose reads fail (a fault proxy answers
500 for them) costs its own series only, and a run that reads nothing
says so in the file. (The data against per-device reads and the request
counts are in test_bulk_reads; the flavor counts against ``capacity`` with
real Nova in tests/e2e/test_metrics.py.)
"""

import collections.abc
import errno
import os
import socket

from prometheus_client import core
from prometheus_client import parser
import pytest

from osc_mdev.local import textfile
from tests.fixtures import cli
from tests.fixtures import faults
from tests.fixtures import placement_data
from tests.fixtures.placement_data import Gpu


@pytest.fixture(scope='module')
def cloud(placement):
    gpus = [Gpu('pci_0000_84_00_0', 'VGPU', 4, ('CUSTOM_NVIDIA_35',)),
            Gpu('mtty_mtty', 'CUSTOM_MTTY', 2)]
    root = placement.add_compute_node('metrics-1.example.com', gpus)
    placement.boot_server(root, gpus[0])
    return gpus


def metrics(auth, *args):
    return cli.openstack(*auth, 'mdev', 'metrics', *args)


def families(text):
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def leftovers(directory):
    """Temporary files left in ``directory``."""
    return [p.name for p in directory.iterdir() if p.name.endswith('.tmp')]


def dead_auth():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    return cli.admin_token_args('http://127.0.0.1:%d' % port)


def test_every_family_has_help_and_type(cloud, auth):
    result = metrics(auth)
    assert result.rc == 0, result.stderr
    found = families(result.stdout)
    for name in ('openstack_mdev_device_capacity',
                 'openstack_mdev_device_used', 'openstack_mdev_device_free',
                 'openstack_mdev_host_capacity', 'openstack_mdev_host_used',
                 'openstack_mdev_host_free', 'openstack_mdev_scrape_success',
                 'openstack_mdev_scrape_duration_seconds',
                 'openstack_mdev_scrape_timestamp_seconds'):
        assert found[name].type == 'gauge', name
        assert found[name].documentation, name
        assert '# HELP %s ' % name in result.stdout
        assert '# TYPE %s gauge' % name in result.stdout
    used = {s.labels['device']: (s.labels, s.value)
            for s in found['openstack_mdev_device_used'].samples}
    assert used['0000:84:00.0'] == ({
        'host': 'metrics-1.example.com', 'device': '0000:84:00.0',
        'kind': 'mdev', 'resource_class': 'VGPU',
        'type': 'CUSTOM_NVIDIA_35'}, 1)
    # A virtual parent has no PCI address: its libvirt name.
    assert used['mtty_mtty'][0]['resource_class'] == 'CUSTOM_MTTY'
    assert [s.value for s in found['openstack_mdev_host_free'].samples
            if s.labels['resource_class'] == 'VGPU'
            and s.labels['host'] == 'metrics-1.example.com'] == [3]


def test_output_replaces_the_file_atomically(cloud, auth, tmp_path):
    target = tmp_path / 'openstack_mdev.prom'
    target.write_text('old\n')
    os.chmod(target, 0o640)
    result = metrics(auth, '--output', str(target))
    assert result.rc == 0, result.stderr
    assert result.stdout == ''
    text = target.read_text()
    assert families(text)['openstack_mdev_scrape_success'].samples[0] \
        .value == 1
    # The old file's mode is kept; no temporary file is left behind.
    assert os.stat(target).st_mode & 0o777 == 0o640
    assert leftovers(tmp_path) == []


def test_a_new_file_is_readable_by_the_collector(cloud, auth, tmp_path):
    target = tmp_path / 'new.prom'
    result = metrics(auth, '--output', str(target))
    assert result.rc == 0, result.stderr
    assert os.stat(target).st_mode & 0o044 == 0o044


def test_a_run_that_reads_nothing_replaces_the_file(tmp_path):
    target = tmp_path / 'openstack_mdev.prom'
    target.write_text('openstack_mdev_device_used{host="old"} 1\n'
                      'openstack_mdev_scrape_success 1\n')
    result = metrics(dead_auth(), '--output', str(target))
    cli.assert_one_line_error(result, 'Reading the cloud failed',
                              'openstack_mdev_scrape_success 0')
    # The old numbers are gone: Prometheus no longer reads them as now.
    found = families(target.read_text())
    assert sorted(found) == ['openstack_mdev_scrape_duration_seconds',
                             'openstack_mdev_scrape_success',
                             'openstack_mdev_scrape_timestamp_seconds']
    assert [s.value for s in found[
        'openstack_mdev_scrape_success'].samples] == [0]
    assert leftovers(tmp_path) == []


def test_failed_read_prints_scrape_success_0():
    result = metrics(dead_auth())
    assert result.rc != 0
    found = families(result.stdout)
    assert [s.value for s in found[
        'openstack_mdev_scrape_success'].samples] == [0]
    assert 'openstack_mdev_device_used' not in found
    assert 'Reading the cloud failed' in result.stderr
    assert 'Traceback' not in result.stderr


@pytest.mark.parametrize('where', ['missing', 'directory'])
def test_an_unwritable_output_is_refused_before_reading(tmp_path, where):
    target = tmp_path / 'no-such-dir' / 'x.prom' if where == 'missing' \
        else tmp_path
    # A dead Placement: the refusal comes before any read.
    result = metrics(dead_auth(), '--output', str(target))
    cli.assert_one_line_error(result, 'Cannot write %s' % target)


def test_failed_write_keeps_the_old_file(cloud, auth, tmp_path,
                                         monkeypatch):
    target = tmp_path / 'openstack_mdev.prom'
    target.write_text('old\n')

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(textfile.os, 'fsync', full)
    result = metrics(auth, '--output', str(target))
    cli.assert_one_line_error(result, 'Writing %s failed' % target,
                              'No space left on device',
                              'left as it was')
    assert target.read_text() == 'old\n'
    assert leftovers(tmp_path) == []


# -- devices and compute nodes whose reads fail ----------------------------

@pytest.fixture(scope='module')
def full_node(placement, cloud):
    """A compute node with nothing free (VCPU, memory, disk and its two
    GPUs): no allocation candidate reaches its tree, so its devices are
    read one by one. Returns ``(root uuid, gpus)``.
    """
    host = 'metrics-full.example.com'
    root = placement.create_provider(host)
    placement.set_inventory(root, {'VCPU': {'total': 2},
                                   'MEMORY_MB': {'total': 2048},
                                   'DISK_GB': {'total': 20}})
    placement.set_traits(root, placement_data.ROOT_TRAITS)
    gpus = []
    for nodedev in ('pci_0000_a1_00_0', 'pci_0000_a2_00_0'):
        gpu = Gpu(nodedev, 'VGPU', 1, ('CUSTOM_NVIDIA_35',))
        gpu.name = '%s_%s' % (host, nodedev)
        gpu.uuid = placement.create_provider(gpu.name, parent=root)
        placement.set_inventory(gpu.uuid, {'VGPU': {'total': 1,
                                                    'max_unit': 1}})
        placement.set_traits(gpu.uuid, ['OWNER_NOVA', *gpu.traits])
        gpus.append(gpu)
    placement.boot_server(root, gpus[0])
    placement.allocate('6c1b0a4e-3f5d-4f0e-9d7a-2b8c1e4f6a01',
                       {gpus[1].uuid: {'VGPU': 1}})
    return root, gpus


def fail_paths_with(*uuids: str) -> collections.abc.Callable:
    """A proxy rule: 500 for every request whose path names one of
    ``uuids`` (a device's reads, a tree's ``in_tree=`` reads).
    """
    return lambda req: faults.status(500) if any(
        u in req.path for u in uuids) else None


def by_device(family: core.Metric) -> dict:
    return {(s.labels['host'], s.labels['device']): s.value
            for s in family.samples}


def test_a_device_whose_reads_fail_costs_its_own_series_only(
        cloud, full_node, faulty, proxy, tmp_path):
    _, (broken, fine) = full_node
    proxy.reset(fail_paths_with(broken.uuid))
    target = tmp_path / 'openstack_mdev.prom'
    target.write_text('old\n')
    result = metrics(faulty, '--output', str(target))

    assert proxy.actions(), 'no read of the device met the fault'
    assert result.rc == 1, result.stderr
    assert 'Traceback' not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2, result.stderr
    assert 'metrics-full.example.com:0000:a1:00.0' in lines[0]
    found = families(target.read_text())
    host = 'metrics-full.example.com'
    assert by_device(found['openstack_mdev_device_up']) == {
        ('metrics-1.example.com', '0000:84:00.0'): 1,
        ('metrics-1.example.com', 'mtty_mtty'): 1,
        (host, '0000:a1:00.0'): 0, (host, '0000:a2:00.0'): 1}
    assert by_device(found['openstack_mdev_device_used']) == {
        ('metrics-1.example.com', '0000:84:00.0'): 1,
        ('metrics-1.example.com', 'mtty_mtty'): 0,
        (host, '0000:a2:00.0'): 1}
    # A node's sums would be short of the device not read: left out.
    assert {s.labels['host'] for s in found[
        'openstack_mdev_host_used'].samples} == {'metrics-1.example.com'}
    assert [s.value for s in found[
        'openstack_mdev_scrape_success'].samples] == [0]
    assert leftovers(tmp_path) == []


def test_a_node_whose_reads_fail_costs_its_own_devices_only(
        cloud, full_node, faulty, proxy):
    root, gpus = full_node
    proxy.reset(fail_paths_with(root, *(g.uuid for g in gpus)))
    result = metrics(faulty)

    assert proxy.actions(), 'no read of the node met the fault'
    assert result.rc == 1, result.stderr
    found = families(result.stdout)
    host = 'metrics-full.example.com'
    up = by_device(found['openstack_mdev_device_up'])
    assert {k: v for k, v in up.items() if k[0] == host} == {
        (host, '0000:a1:00.0'): 0, (host, '0000:a2:00.0'): 0}
    assert by_device(found['openstack_mdev_device_free']) == {
        ('metrics-1.example.com', '0000:84:00.0'): 3,
        ('metrics-1.example.com', 'mtty_mtty'): 2}
    # One warning per device (the node's own read costs no series).
    assert len([line for line in result.stderr.splitlines()
                if host in line]) == 2
