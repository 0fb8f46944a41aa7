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
rename, and a failed run is visible and leaves the old file as it was.
(The data against per-device reads and the request counts are in
test_bulk_reads; the flavor counts against ``capacity`` with real Nova in
tests/e2e/test_metrics.py.)
"""

import errno
import os
import socket

from prometheus_client import parser
import pytest

from osc_mdev.local import textfile
from tests.fixtures import cli
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
        'kind': 'mdev', 'resource_class': 'VGPU', 'type': 'NVIDIA_35'}, 1)
    # A virtual parent has no PCI address: its libvirt name.
    assert used['mtty_mtty'][0]['resource_class'] == 'CUSTOM_MTTY'
    assert [s.value for s in found['openstack_mdev_host_free'].samples
            if s.labels['resource_class'] == 'VGPU'] == [3]


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


def test_failed_read_keeps_the_old_file(tmp_path):
    target = tmp_path / 'openstack_mdev.prom'
    target.write_text('openstack_mdev_scrape_success 1\n')
    result = metrics(dead_auth(), '--output', str(target))
    cli.assert_one_line_error(result, 'Reading the cloud failed',
                              'left as it was')
    assert target.read_text() == 'openstack_mdev_scrape_success 1\n'
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
