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

"""Every command's columns depend on its options, never on the cloud.

The same command lines run on clouds Nova built, where their answers are
empty, zero and positive: a cloud whose only host has no GPU, then a
cloud of two GPUs fresh, with one server, and full after Nova's
NoValidHost. Each command line must give the same keys in ``-f json``
(and the same header in ``-f csv``, which shows it for an empty
listing too) in every state, and ``-f value -c COLUMN`` must work for
each of its columns in every state.
"""

import csv
import io
import json

import pytest

from tests.cloud import client
from tests.fixtures import cli

# One nvidia-12 GPU (8 vGPUs) per host: one server of FLAVOR each.
TOPOLOGY = {
    'hosts': [
        {'name': 'col1', 'gpus': 1, 'bus': '0x84',
         'enabled_mdev_types': ['nvidia-12']},
        {'name': 'col2', 'gpus': 1, 'bus': '0x85',
         'enabled_mdev_types': ['nvidia-12']},
        # A PCI-in-Placement GPU: one PF of two VFs.
        {'name': 'colpci', 'gpus': 0, 'bus': '0xc1',
         'pci': {'pfs': [{'pfs': 1, 'vfs_per_pf': 2, 'product_id': '26b9',
                          'pf_product_id': '26b8'}],
                 'device_spec': [
                     {'vendor_id': '10de', 'product_id': '26b9',
                      'resource_class': 'CUSTOM_NVIDIA_L40S_VF'}]}},
    ],
    # Limits Nova never reaches here.
    'unified_limits': {'registered': {
        'servers': 100, 'class:VGPU': 100, 'class:VCPU': 1000,
        'class:MEMORY_MB': 1000000, 'class:DISK_GB': 100000}},
}
BARE_TOPOLOGY = {'hosts': [{'name': 'bare1', 'gpus': 0}]}
FLAVOR = 'col-vgpu8'
PLAIN = 'col-plain'
NOVA_CONFS = (
    '[DEFAULT]\ndebug = False\n',
    '[devices]\nenabled_mdev_types = nvidia-12\n',
    '[devices]\nenabled_mdev_types = nvidia-12\n'
    '[mdev_nvidia-12]\ndevice_addresses = 0000:84:00.0,0000:84:00.0\n',
)

#: {case id: [(state, keys)]}, filled by the state tests in order.
SEEN: dict = {}
#: [(state, args, key)] where ``-f value -c KEY`` failed.
REFUSED: list = []


def _flavors(cloud):
    cloud.control('create_flavor', name=FLAVOR,
                  extra_specs={'resources:VGPU': '8'})
    cloud.control('create_flavor', name=PLAIN)


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('columns'),
                              topology=TOPOLOGY, keystone=True) as cloud:
        _flavors(cloud)
        yield cloud


@pytest.fixture(scope='module')
def files(tmp_path_factory):
    """The nova.conf files config check reads, one per state."""
    base = tmp_path_factory.mktemp('confs')
    paths = []
    for i, text in enumerate(NOVA_CONFS):
        path = base / ('nova-%d.conf' % i)
        path.write_text(text)
        paths.append(str(path))
    return paths


class State:
    """What the command lines of one state name: a server with devices
    (or None), a server without, a host, a device of each kind.
    """

    def __init__(self, name, tmp, gpu_server=None, plain_server=None,
                 host='col1', mdev_device=None, pci_device=None,
                 keystone=None, nova_conf=None):
        self.name = name
        self.tmp = tmp
        self.gpu_server = gpu_server
        self.plain_server = plain_server
        self.host = host
        self.mdev_device = mdev_device
        self.pci_device = pci_device
        self.keystone = keystone
        self.nova_conf = nova_conf


def _lister_cases(s):
    """``{case: [args]}``: the listings, with the arguments this state
    gives their names (none where the state has nothing to name).
    """
    cases = {
        'capacity': [['capacity', '--flavor', FLAVOR]],
        'capacity --long': [['capacity', '--flavor', FLAVOR, '--long']],
        'capacity --count': [['capacity', '--flavor', FLAVOR,
                              '--count', '2']],
        'capacity two flavors': [['capacity', '--flavor', FLAVOR,
                                  '--flavor', PLAIN]],
        'capacity --explain': [['capacity', '--flavor', FLAVOR,
                                '--explain']],
        'capacity --resource-class': [['capacity', '--resource-class',
                                       'VGPU']],
        'provider list': [['provider', 'list']],
        'provider list --long': [['provider', 'list', '--long']],
        'provider list --kind all': [['provider', 'list', '--kind',
                                      'all']],
        'allocation list': [['allocation', 'list']],
        'allocation list --long --kind all': [
            ['allocation', 'list', '--long', '--kind', 'all']],
        'allocation show': [['allocation', 'show', server]
                            for server in (s.plain_server, s.gpu_server)
                            if server],
        # --all on a cloud without devices is refused (nothing to
        # change).
        'trait set --dry-run': [['trait', 'set', '--all', '--trait',
                                 'CUSTOM_COLUMNS', '--dry-run']]
        if s.mdev_device else [],
        'trait unset --dry-run': [['trait', 'unset', '--all', '--trait',
                                   'CUSTOM_COLUMNS', '--dry-run']]
        if s.mdev_device else [],
        'trait export': [['trait', 'export', '--provider-config-dir',
                          str(s.tmp / 'exports'), '--dry-run']],
        'flavor configure --dry-run': [
            ['flavor', 'configure', PLAIN, '--resource-class', 'VGPU',
             '--mdev-type', 'nvidia-12', '--dry-run', '--no-validate']],
        'config check': [['config', 'check', s.nova_conf]],
        'config check --long': [['config', 'check', s.nova_conf,
                                 '--long']],
        'audit': [['audit']],
        'audit --long': [['audit', '--long']],
        'migration check': [['migration', 'check', s.gpu_server]]
        if s.gpu_server else [],
        'migration plan': [['migration', 'plan', '--host', s.host]],
    }
    if s.keystone:
        for case, args in (
                ('quota list', ['quota', 'list']),
                ('quota list --long', ['quota', 'list', '--long']),
                ('quota list --flavor', ['quota', 'list', '--flavor',
                                         FLAVOR])):
            cases[case] = [['--os-cloud', s.keystone, 'mdev'] + args[:]]
    return cases


def _show_cases(s):
    return {
        'provider show': [['provider', 'show', d] for d in (
            s.mdev_device, s.pci_device) if d],
        'flavor show': [['flavor', 'show', FLAVOR]],
    }


def _run(args):
    if args[0] == '--os-cloud':
        return cli.openstack(*args)
    return cli.openstack('mdev', *args)


def _ran(result, args):
    """The command ran to its answer: exit 0, or 1 for an answer that is
    no (migration, audit) with its rows shown.
    """
    assert result.rc in (0, 1) and result.stdout, (args, result.rc,
                                                   result.stderr)
    assert 'Traceback' not in result.stderr, result.stderr


def _lister_keys(args):
    result = _run(args + ['-f', 'csv'])
    _ran(result, args)
    header = next(csv.reader(io.StringIO(result.stdout)))
    result = _run(args + ['-f', 'json'])
    _ran(result, args)
    rows = json.loads(result.stdout)
    assert isinstance(rows, list), rows
    for row in rows:
        assert list(row) == header, (args, row, header)
    return tuple(header), len(rows)


def _show_keys(args):
    result = _run(args + ['-f', 'json'])
    _ran(result, args)
    return tuple(json.loads(result.stdout)), 1


def _refused_columns(args, keys):
    """The keys ``-f value -c KEY`` does not take: each for capacity,
    the last for the other commands (one run per key costs a command
    each; the keys themselves are compared in every state).
    """
    refused = []
    for key in keys if args[0] == 'capacity' else keys[-1:]:
        result = _run(args + ['-f', 'value', '-c', key])
        if result.rc not in (0, 1) or (
                'No recognized column names' in result.stderr):
            refused.append(key)
    return refused


def _metrics_families():
    result = cli.openstack('mdev', 'metrics')
    assert result.rc == 0, result.stderr
    return tuple(sorted({line.split()[2] for line in
                         result.stdout.splitlines()
                         if line.startswith('# TYPE ')}))


def record(state):
    """Run every command line of ``state``; remember its keys."""
    for cases, keys_of in ((_lister_cases(state), _lister_keys),
                           (_show_cases(state), _show_keys)):
        for case, runs in cases.items():
            for args in runs:
                keys, rows = keys_of(list(args))
                SEEN.setdefault(case, []).append(
                    (state.name, args, keys, rows))
                REFUSED.extend((state.name, args, key) for key in
                               _refused_columns(list(args), keys))
    SEEN.setdefault('metrics', []).append(
        (state.name, ['metrics'], _metrics_families(), None))


def fits():
    rows = cli.openstack('mdev', 'capacity', '--flavor', FLAVOR,
                         '-f', 'json').json()
    return sum(r['Fits'] for r in rows)


def test_1_bare_cloud(tmp_path_factory, files, monkeypatch, tmp_path):
    """No GPU at all: empty listings, capacity 0 on the one host."""
    with client.EmbeddedCloud(tmp_path_factory.mktemp('bare'),
                              topology=BARE_TOPOLOGY) as bare:
        _flavors(bare)
        monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(bare.clouds_yaml))
        monkeypatch.setenv('OS_CLOUD', bare.cloud_name)
        [plain] = bare.control('boot', flavor=PLAIN, name='col-plain-bare')
        assert plain['status'] == 'ACTIVE', plain
        assert fits() == 0
        record(State('bare', tmp_path, plain_server=plain['id'],
                     host='bare1', nova_conf=files[0]))


def test_2_fresh_cloud(cloud, files, tmp_path):
    """Two free GPUs, no server on them."""
    [plain] = cloud.control('boot', flavor=PLAIN, name='col-plain')
    assert plain['status'] == 'ACTIVE', plain
    assert fits() == 2
    record(State('fresh', tmp_path, plain_server=plain['id'],
                 mdev_device='col1:0000:84:00.0',
                 pci_device='colpci:0000:c1:00.0',
                 keystone=cloud.keystone_cloud, nova_conf=files[1]))


def test_3_one_server(cloud, files, tmp_path):
    [server] = cloud.control('boot', flavor=FLAVOR, name='col-gpu-1')
    assert server['status'] == 'ACTIVE', server
    assert fits() == 1
    record(State('one server', tmp_path, gpu_server=server['id'],
                 host=server['host'], mdev_device='col1:0000:84:00.0',
                 pci_device='colpci:0000:c1:00.0',
                 keystone=cloud.keystone_cloud, nova_conf=files[2]))


def test_4_full_after_no_valid_host(cloud, files, tmp_path):
    [second] = cloud.control('boot', flavor=FLAVOR, name='col-gpu-2')
    assert second['status'] == 'ACTIVE', second
    [refused] = cloud.control('boot', flavor=FLAVOR, name='col-gpu-3')
    assert 'No valid host' in (refused['fault'] or ''), refused
    # The count a script reads: 0 on each host, not another listing.
    result = cli.openstack('mdev', 'capacity', '--flavor', FLAVOR,
                           '-f', 'value', '-c', 'Fits')
    record(State('full', tmp_path, gpu_server=second['id'],
                 host=second['host'], mdev_device='col2:0000:85:00.0',
                 pci_device='colpci:0000:c1:00.0',
                 keystone=cloud.keystone_cloud, nova_conf=files[0]))
    assert (result.rc, result.stdout) == (0, '0\n0\n0\n'), result.stderr


#: Cases whose answers must have been empty, zero or positive somewhere,
#: so that the comparison means something: (case, states with rows).
SHAPES = {
    'capacity --resource-class': {'bare': 0},
    'provider list': {'bare': 0},
    'allocation list': {'bare': 0, 'fresh': 0},
    'allocation show': {'bare': 0},
    'migration plan': {'bare': 0, 'fresh': 0},
    'quota list': {'fresh': 0},
}


def test_5_keys_depend_on_the_options_only():
    assert SEEN, 'no state was recorded'
    differ = {}
    for case, runs in sorted(SEEN.items()):
        keys = {k for _, _, k, _ in runs}
        if len(keys) != 1:
            differ[case] = [(state, args, k) for state, args, k, _ in runs]
    # The names first, then what each state gave.
    assert sorted(differ) == [], differ
    assert not REFUSED, REFUSED
    for case, shape in SHAPES.items():
        rows = {state: n for state, _, _, n in SEEN[case]}
        for state, count in shape.items():
            assert rows[state] == count, (case, rows)
        assert max(rows.values()) > 0, (case, rows)
