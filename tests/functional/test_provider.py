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

"""``openstack mdev provider list/show`` against a real Placement."""

import socket

import pytest
import requests

from tests.fixtures import cli
from tests.fixtures.placement_data import Gpu


class Cloud:
    """Three hosts with two GPUs each, laid out the way Nova reports them,
    plus providers that must never show up as mdev devices.
    """

    def __init__(self, placement):
        self.placement = placement
        self.gpus = {}
        self.roots = {}
        layout = {
            'compute_1.example.com': [
                Gpu('pci_0000_84_00_0', 'VGPU', 4, ('CUSTOM_NVIDIA_11',)),
                Gpu('pci_0000_85_00_0', 'VGPU', 4, ('CUSTOM_NVIDIA_12',)),
            ],
            'compute2': [
                Gpu('pci_0000_84_00_0', 'VGPU', 2, ('CUSTOM_NVIDIA_11',)),
                Gpu('pci_0000_86_00_0', 'CUSTOM_MLX5', 8),
            ],
            'compute3.dc-1': [
                Gpu('pci_0000_3b_00_0', 'VGPU', 16,
                    ('CUSTOM_NVIDIA_11', 'CUSTOM_GPU_POOL_A')),
                Gpu('pci_0000_3c_00_0', 'VGPU', 16, ('CUSTOM_NVIDIA_12',)),
                Gpu('mtty_mtty', 'CUSTOM_MTTY', 3),
            ],
            # Hosts without mdev devices; 'compute_1' prefixes a GPU host.
            'compute_1': [],
            'compute4': [],
        }
        for host, gpus in layout.items():
            self.roots[host] = placement.add_compute_node(host, gpus)
            for gpu in gpus:
                self.gpus[(host, gpu.nodedev)] = gpu
        # Not mdev devices: PCI in Placement, a Neutron agent, an FPGA.
        pci = placement.create_provider(
            'compute2_0000:81:00.0', parent=self.roots['compute2'])
        placement.set_inventory(pci, {'CUSTOM_PCI_10DE_1EB8': {'total': 1}})
        agent = placement.create_provider(
            'compute2:Open vSwitch agent', parent=self.roots['compute2'])
        placement.set_inventory(
            agent, {'NET_BW_EGR_KILOBIT_PER_SEC': {'total': 10000000}})
        fpga = placement.create_provider(
            'compute3.dc-1_fpga0', parent=self.roots['compute3.dc-1'])
        placement.set_inventory(fpga, {'FPGA': {'total': 1}})
        self.not_mdev = {
            'compute2_0000:81:00.0': pci, 'compute2:Open vSwitch agent': agent,
            'compute3.dc-1_fpga0': fpga}

        # Servers: Used/Free move, one GPU is full.
        self.servers = {}
        for key, count, amount in [
                (('compute_1.example.com', 'pci_0000_84_00_0'), 1, 1),
                (('compute2', 'pci_0000_84_00_0'), 2, 1),
                (('compute2', 'pci_0000_86_00_0'), 1, 3),
                (('compute3.dc-1', 'pci_0000_3b_00_0'), 5, 1)]:
            gpu = self.gpus[key]
            self.servers[key] = [
                placement.boot_server(self.roots[key[0]], gpu, amount)
                for _ in range(count)]
        self.used = {
            key: sum(amount for _ in servers)
            for key, servers, amount in [
                (k, v, 3 if k[1] == 'pci_0000_86_00_0' else 1)
                for k, v in self.servers.items()]}

    def expected_row(self, key):
        host, nodedev = key
        gpu = self.gpus[key]
        used = self.used.get(key, 0)
        device = nodedev
        if nodedev.startswith('pci_'):
            _, dom, bus, slot, fn = nodedev.split('_')
            device = '%s:%s:%s.%s' % (dom, bus, slot, fn)
        return {
            'UUID': gpu.uuid, 'Host': host, 'Device': device,
            'Resource Class': gpu.resource_class, 'Capacity': gpu.total,
            'Used': used, 'Free': gpu.total - used,
            'Traits': sorted(('OWNER_NOVA',) + gpu.traits),
        }

    def expected(self, keys=None):
        keys = self.gpus if keys is None else keys
        return sorted((self.expected_row(k) for k in keys),
                      key=lambda r: (r['Host'], r['Device']))


@pytest.fixture(scope='module')
def cloud(placement):
    return Cloud(placement)


def mdev(auth, *args):
    return cli.openstack(*auth, 'mdev', *args)


def rows(auth, *args):
    return mdev(auth, 'provider', 'list', '-f', 'json', *args).json()


def test_list_every_column(cloud, auth):
    assert rows(auth) == cloud.expected()


def test_list_long(cloud, auth):
    listed = rows(auth, '--long')
    assert [r['UUID'] for r in listed] == [
        r['UUID'] for r in cloud.expected()]
    for row in listed:
        gpu = next(g for g in cloud.gpus.values() if g.uuid == row['UUID'])
        assert row['Name'] == gpu.name
        assert row['Reserved'] == 0
        assert row['Max Unit'] == gpu.total
        assert row['Allocation Ratio'] == 1.0
        assert row['Generation'] == cloud.placement.generation(gpu.uuid)
        assert row['Total'] == row['Capacity'] == gpu.total
        assert row['Min Unit'] == row['Step Size'] == 1
        assert list(row) == [
            'UUID', 'Name', 'Host', 'Device', 'Kind', 'Resource Class',
            'Capacity', 'Used', 'Free', 'State', 'Total', 'Reserved',
            'Allocation Ratio', 'Max Unit', 'Min Unit', 'Step Size',
            'Generation', 'Traits']
        assert row['Kind'] == 'mdev'


def test_list_table_output(cloud, auth):
    result = mdev(auth, 'provider', 'list')
    assert result.rc == 0, result.stderr
    header = result.stdout.splitlines()[1]
    for column in ('UUID', 'Host', 'Device', 'Resource Class', 'Capacity',
                   'Used', 'Free', 'Traits'):
        assert column in header
    assert 'compute_1.example.com' in result.stdout
    assert '0000:84:00.0' in result.stdout
    assert 'compute2_0000:81:00.0' not in result.stdout


def test_list_value_format_with_selected_columns(cloud, auth):
    result = mdev(auth, 'provider', 'list', '-f', 'value',
                  '-c', 'Host', '-c', 'Device', '-c', 'Free')
    assert result.rc == 0, result.stderr
    expected = ['%(Host)s %(Device)s %(Free)s' % r for r in cloud.expected()]
    assert result.stdout.splitlines() == expected


def _keys(cloud, predicate):
    return [k for k in cloud.gpus if predicate(k, cloud.expected_row(k))]


@pytest.mark.parametrize('args,predicate', [
    (['--host', 'compute2'], lambda k, r: k[0] == 'compute2'),
    (['--host', 'compute2', '--host', 'compute3.dc-1'],
     lambda k, r: k[0] in ('compute2', 'compute3.dc-1')),
    (['--host', 'compute_1.example.com'],
     lambda k, r: k[0] == 'compute_1.example.com'),
    (['--resource-class', 'VGPU'], lambda k, r: r['Resource Class'] == 'VGPU'),
    (['--resource-class', 'CUSTOM_MLX5'],
     lambda k, r: r['Resource Class'] == 'CUSTOM_MLX5'),
    (['--require-trait', 'CUSTOM_NVIDIA_11'],
     lambda k, r: 'CUSTOM_NVIDIA_11' in r['Traits']),
    (['--require-trait', 'CUSTOM_NVIDIA_11', '--require-trait',
      'CUSTOM_GPU_POOL_A'],
     lambda k, r: {'CUSTOM_NVIDIA_11', 'CUSTOM_GPU_POOL_A'} <= set(
         r['Traits'])),
    (['--require-trait', 'OWNER_NOVA'], lambda k, r: True),
    (['--free'], lambda k, r: r['Free'] > 0),
    (['--full'], lambda k, r: r['Free'] == 0),
    (['--host', 'compute2', '--free'],
     lambda k, r: k[0] == 'compute2' and r['Free'] > 0),
    (['--resource-class', 'VGPU', '--require-trait', 'CUSTOM_NVIDIA_12',
      '--free'],
     lambda k, r: r['Resource Class'] == 'VGPU' and r['Free'] > 0
     and 'CUSTOM_NVIDIA_12' in r['Traits']),
    (['--host', 'compute4'], lambda k, r: False),
])
def test_list_filters(cloud, auth, args, predicate):
    expected = cloud.expected(_keys(cloud, predicate))
    assert rows(auth, *args) == expected
    if args != ['--host', 'compute4']:
        assert expected, 'filter case selects nothing: %s' % args


def test_list_full_device_is_the_one_with_no_room(cloud, auth):
    full = rows(auth, '--full')
    assert [(r['Host'], r['Device']) for r in full] == [
        ('compute2', '0000:84:00.0')]


def test_non_mdev_children_never_listed(cloud, auth):
    uuids = {r['UUID'] for r in rows(auth)}
    assert not uuids & set(cloud.not_mdev.values())
    assert not uuids & set(cloud.roots.values())


def test_show_by_every_kind_of_name(cloud, auth):
    gpu = cloud.gpus[('compute3.dc-1', 'pci_0000_3b_00_0')]
    shown = [mdev(auth, 'provider', 'show', '-f', 'json', ref).json()
             for ref in (gpu.uuid, gpu.name, 'compute3.dc-1:0000:3b:00.0',
                         'compute3.dc-1:3B:00.0', '0000:3b:00.0')]
    assert all(s == shown[0] for s in shown)
    show = shown[0]
    expected = cloud.expected_row(('compute3.dc-1', 'pci_0000_3b_00_0'))
    for key, value in expected.items():
        assert show[key] == value
    assert show['Name'] == gpu.name
    assert show['Max Unit'] == 16
    assert show['Generation'] == cloud.placement.generation(gpu.uuid)
    servers = cloud.servers[('compute3.dc-1', 'pci_0000_3b_00_0')]
    assert show['Consumers'] == [
        {'consumer': s, 'resource_class': 'VGPU', 'amount': 1}
        for s in sorted(servers)]


def test_show_consumer_amounts_and_custom_class(cloud, auth):
    show = mdev(auth, 'provider', 'show', '-f', 'json',
                'compute2:0000:86:00.0').json()
    [server] = cloud.servers[('compute2', 'pci_0000_86_00_0')]
    assert show['Resource Class'] == 'CUSTOM_MLX5'
    assert show['Used'] == 3 and show['Free'] == 5
    assert show['Consumers'] == [
        {'consumer': server, 'resource_class': 'CUSTOM_MLX5', 'amount': 3}]


def test_show_virtual_parent_and_table(cloud, auth):
    result = mdev(auth, 'provider', 'show', 'compute3.dc-1:mtty_mtty')
    assert result.rc == 0, result.stderr
    assert 'CUSTOM_MTTY' in result.stdout
    assert '| Consumers ' in result.stdout


@pytest.mark.parametrize('args,fragments', [
    (['provider', 'show', 'compute9:0000:84:00.0'],
     ['no host named compute9 has mdev devices']),
    (['provider', 'show', 'compute2:0000:99:00.0'],
     ['host compute2 has no mdev device 0000:99:00.0']),
    (['provider', 'show', '0000:84:00.0'],
     ['matches 2 devices', 'compute2:0000:84:00.0',
      'compute_1.example.com:0000:84:00.0']),
    (['provider', 'show', 'compute2:0000:84:00'],
     ['is not a PCI address', '0000:84:00.0']),
    (['provider', 'show', 'compute2'], ['compute2 is not an mdev device']),
    (['provider', 'show', 'compute2_0000:81:00.0'],
     ['compute2_0000:81:00.0 is named like a PCI-in-Placement device',
      'COMPUTE_MANAGED_PCI_DEVICE']),
    (['provider', 'show', 'no-such-thing'], ['No mdev device matches']),
    (['provider', 'list', '--host', 'compute9'],
     ["No compute host named 'compute9'"]),
    (['provider', 'list', '--require-trait', 'custom_lower'],
     ['not a valid trait name', 'CUSTOM_']),
    (['provider', 'list', '--require-trait', 'CUSTOM_NOT_THERE'],
     ['CUSTOM_NOT_THERE']),
    (['provider', 'list', '--resource-class', 'VCPU'],
     ['not an mdev resource class', 'VGPU or CUSTOM_']),
    (['provider', 'list', '--resource-class', 'CUSTOM_NOT_THERE'],
     ['Resource class CUSTOM_NOT_THERE does not exist']),
])
def test_bad_input_one_line_exit_1(cloud, auth, args, fragments):
    cli.assert_one_line_error(mdev(auth, *args), *fragments)


def test_free_and_full_are_exclusive(cloud, auth):
    result = cli.openstack_process(*auth, 'mdev', 'provider', 'list',
                                   '--free', '--full')
    cli.assert_one_line_error(
        result, 'Argument --full: not allowed with argument --free',
        "see 'openstack help mdev provider list'")


def test_policy_refusal_is_one_line(cloud, placement_url):
    # Placement's noauth2 gives any token but 'admin' no roles.
    result = cli.openstack(*cli.admin_token_args(placement_url, 'demo'),
                           'mdev', 'provider', 'list')
    cli.assert_one_line_error(result, 'HTTP 403', 'admin role')


def test_unreachable_placement_is_one_line():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port once the socket is closed.
    result = cli.openstack(
        *cli.admin_token_args('http://127.0.0.1:%d' % port),
        'mdev', 'provider', 'list')
    cli.assert_one_line_error(result, 'Cannot reach the Placement API')


def test_os_environment_variables(cloud, placement_url, monkeypatch):
    monkeypatch.setenv('OS_AUTH_TYPE', 'admin_token')
    monkeypatch.setenv('OS_TOKEN', 'admin')
    monkeypatch.setenv('OS_ENDPOINT', placement_url)
    listed = cli.openstack('mdev', 'provider', 'list', '-f', 'json').json()
    assert listed == cloud.expected()


def test_clouds_yaml_endpoint_override(cloud, placement_url, tmp_path,
                                       monkeypatch):
    # The auth endpoint is dead: only placement_endpoint_override works.
    clouds = tmp_path / 'clouds.yaml'
    clouds.write_text(
        'clouds:\n'
        '  gpu-cloud:\n'
        '    auth_type: admin_token\n'
        '    auth: {token: admin, endpoint: "http://127.0.0.1:9/dead"}\n'
        '    placement_endpoint_override: "%s"\n' % placement_url)
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(clouds))
    listed = cli.openstack('--os-cloud', 'gpu-cloud', 'mdev', 'provider',
                           'list', '-f', 'json').json()
    assert listed == cloud.expected()


def test_max_workers_option(cloud, auth):
    assert rows(auth) == rows(['--os-mdev-max-workers', '1', *auth])
    result = cli.openstack_process('--os-mdev-max-workers', '0', *auth,
                                   'mdev', 'provider', 'list')
    assert result.rc == 2
    assert 'positive whole number' in result.stderr


def test_api_version_not_offered_is_a_warning(cloud, auth):
    # osc-mdev offers command set version 1 (API_VERSIONS, a tuple). Asked
    # for another, python-openstackclient 8.0 and later warn and go on with
    # the major version; before 8.0 the tuple made it fail (the floor in
    # setup.cfg).
    result = cli.openstack_process('--os-mdev-api-version', '1.0', *auth,
                                   'mdev', 'provider', 'list', '-f', 'json')
    assert result.rc == 0, result.stderr
    assert result.json() == cloud.expected()
    assert 'not in supported versions: 1' in result.stderr
    assert 'Traceback' not in result.stderr


def test_real_openstack_process_and_help(cloud, auth):
    listed = cli.openstack_process(*auth, 'mdev', 'provider', 'list',
                                   '-f', 'json').json()
    assert listed == cloud.expected()
    helped = cli.openstack_process('help', 'mdev', 'provider', 'list')
    assert helped.rc == 0
    for option in ('--host', '--resource-class', '--require-trait', '--free',
                   '--full', '--long'):
        assert option in helped.stdout
    top = cli.openstack_process('--help')
    assert 'mdev provider list' in top.stdout
    assert 'mdev provider show' in top.stdout


def placement_max_version(url):
    """The newest microversion the running Placement announces."""
    root = requests.get(url, timeout=30).json()
    [version] = root['versions']
    return version['max_version']


def test_too_old_placement_names_both_versions(placement_url):
    # A microversion beyond what this Placement has stands for a command
    # newer than the cloud: Placement's real 406 answer is reported, with
    # the newest version Placement's root document announces.
    from keystoneauth1 import session as ks_session
    from keystoneauth1 import token_endpoint

    from osc_mdev.api import http
    from osc_mdev.api import placement as placement_client
    from osc_mdev.base import errors

    newest = placement_max_version(placement_url)
    major, minor = newest.split('.')
    beyond = '%s.%d' % (major, int(minor) + 1)
    session = ks_session.Session(
        auth=token_endpoint.Token(placement_url, 'admin'))
    client = placement_client.PlacementClient(
        http.Service(session, 'placement', 'Placement'))
    with pytest.raises(http.MicroversionUnsupported) as err:
        client._request('GET', '/resource_providers', beyond)
    assert str(err.value) == (
        "This command needs Placement API microversion %s or later; the "
        "cloud's Placement supports up to %s." % (beyond, newest))
    assert isinstance(err.value, errors.ServiceError)
    assert err.value.data == {
        'service': 'Placement', 'method': 'GET',
        'path': '/resource_providers', 'status': 406,
        'microversion': beyond, 'max_version': newest}
