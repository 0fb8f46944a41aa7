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

"""osc-mdev's Python library (osc_mdev.library) against a real Placement
and the Nova stand-in: the example of the library's page runs as it is
shown, and what the library answers is what the commands show.
"""

import pathlib
import subprocess
import sys

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from openstack.config import cloud_region
import pytest

from osc_mdev.base import errors
from osc_mdev import library
from tests.fixtures import cli
from tests.fixtures import nova_standin
from tests.fixtures.placement_data import Gpu
from tests.fixtures import sysfs

EXAMPLE = (pathlib.Path(__file__).resolve().parents[2] / 'doc' / 'source'
           / 'reference' / 'examples' / 'gpu_report.py')
FLAVOR = nova_standin.flavor('vgpu', 2, 2048,
                             extra_specs={'resources:VGPU': '1'})
NOVA_CONF = """[DEFAULT]
host = lib1

[devices]
enabled_mdev_types = nvidia-35, nvidia-36

[mdev_nvidia-35]
device_addresses = 0000:84:00.0
"""


@pytest.fixture(scope='module')
def nova():
    standin = nova_standin.NovaStandin(flavors=[FLAVOR])
    yield standin
    standin.stop()


@pytest.fixture(scope='module')
def hosts(placement):
    found = {}
    for host, sizes in (('lib1', (4, 2)), ('lib2', (8,))):
        gpus = [Gpu('pci_0000_%02x_00_0' % (0x84 + i), 'VGPU', size)
                for i, size in enumerate(sizes)]
        root = placement.add_compute_node(host, gpus)
        found[host] = (root, gpus)
    root, gpus = found['lib1']
    placement.boot_server(root, gpus[0])
    return found


@pytest.fixture
def cloud(placement_url, nova, hosts, tmp_path, monkeypatch):
    path = tmp_path / 'clouds.yaml'
    path.write_text(nova_standin.clouds_yaml(placement_url, nova.url,
                                             'libcloud'))
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(path))
    return ['--os-cloud', 'libcloud']


@pytest.fixture
def node(tmp_path):
    root = sysfs.build(tmp_path / 'sys', devices=[
        ('0000:84:00.0', {'nvidia-35': 4}, None)])
    conf = tmp_path / 'nova.conf'
    conf.write_text(NOVA_CONF)
    return str(conf), root


def test_the_example_of_the_docs_runs(cloud, node):
    conf, root = node
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), 'libcloud', 'vgpu', conf, root],
        capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1), result.stderr
    lines = result.stdout.splitlines()

    listed = cli.openstack(*cloud, 'mdev', 'provider', 'list', '-f',
                           'json').json()
    assert [line for line in lines if line.startswith('gpu ')] == [
        'gpu %(Host)s %(Device)s %(Resource Class)s used %(Used)d of '
        '%(Capacity)d' % row for row in listed]
    assert len(listed) == 3

    counted = cli.openstack(*cloud, 'mdev', 'capacity', '--flavor', 'vgpu',
                            '-f', 'json').json()
    assert [line for line in lines if line.startswith('fits ')] == [
        'fits %(Host)s %(Fits)d' % row for row in counted]
    assert 'total %d' % sum(r['Fits'] for r in counted) in lines
    assert 'total 13' in lines      # 3 + 2 on lib1, 8 on lib2

    checked = cli.openstack('mdev', 'config', 'check', conf, '--sysfs', root,
                            '-f', 'json').json()
    messages = {r['Message'] for r in checked if r.get('Message')}
    shown = [line.split(' ', 2)[2] for line in lines
             if line.startswith('finding ')]
    assert shown and set(shown) <= messages
    assert result.returncode == (1 if any(
        line.startswith('finding error ') for line in lines) else 0)


def test_a_keystoneauth_session_alone(placement_url, hosts):
    # No clouds.yaml: the session's auth plugin gives the endpoint.
    session = ks_session.Session(auth=token_endpoint.Token(
        placement_url, 'admin'))
    found = library.gpus(session, hosts=['lib2'])
    assert [(d.host, d.device, d.capacity, d.used) for d in found] == [
        ('lib2', '0000:84:00.0', 8, 0)]
    assert found[0].uuid == hosts['lib2'][1][0].uuid
    mdev = library.client(session, max_workers=2, timeout=5)
    assert [d.uuid for d in library.gpus(mdev)] == [
        d.uuid for d in library.gpus(session)]


def test_a_cloud_regions_settings_per_service(placement_url, hosts):
    # The session's endpoint is dead: only the CloudRegion's
    # placement_endpoint_override reaches Placement.
    session = ks_session.Session(auth=token_endpoint.Token(
        'http://127.0.0.1:9/dead', 'admin'))
    region = cloud_region.from_session(
        session, placement_endpoint_override=placement_url,
        placement_connect_retries=0)
    found = library.gpus(library.client(session, region), hosts=['lib2'])
    assert [d.uuid for d in found] == [hosts['lib2'][1][0].uuid]
    with pytest.raises(errors.ServiceError) as caught:
        library.gpus(session)
    assert 'Cannot reach the Placement API' in str(caught.value)


def test_a_host_needs_a_cloud(node):
    conf, root = node
    with pytest.raises(errors.Invalid) as caught:
        library.host_findings([conf], host='lib1')
    assert caught.value.data == {'parameter': 'cloud'}
    assert str(caught.value) == (
        'A host is checked against Placement: give cloud too.')
