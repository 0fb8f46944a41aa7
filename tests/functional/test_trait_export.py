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

"""``openstack mdev trait export`` and ``trait set/unset
--provider-config-dir`` against a real Placement: the files hold what
Placement has, Nova's own reader accepts them, and the requests do not
grow with the cloud.
"""

import os
import uuid

import pytest
import yaml

from tests.fixtures import cli
from tests.fixtures import placement_data
from tests.fixtures.placement_data import Gpu


def mdev(auth, *args):
    return cli.openstack(*auth, 'mdev', *args)


def requests_served(url):
    return placement_data.server_stats(url)['requests']


@pytest.fixture
def host(placement):
    """A fresh compute node: two tagged GPUs, one bare, a PCI device."""
    name = 'export-%s.dc1.example.net' % uuid.uuid4().hex[:8]
    gpus = [Gpu('pci_0000_84_00_0', 'VGPU', 4,
                ('CUSTOM_NVIDIA_35', 'CUSTOM_RACK_7')),
            Gpu('pci_0000_85_00_0', 'CUSTOM_NVIDIA_36', 2,
                ('CUSTOM_NVIDIA_36',)),
            Gpu('pci_0000_86_00_0', 'VGPU', 4)]
    root = placement.add_compute_node(name, gpus)
    pci = placement.add_pci_device(root, name, '0000:c1:00.0',
                                   'CUSTOM_PCI_10DE_26B9', total=4,
                                   traits=('CUSTOM_GPU_L40S',))
    return name, gpus, pci


def providers_of(text):
    return {p['identification']['name']: p['traits']['additional']
            for p in yaml.safe_load(text)['providers']}


def nova_reads(directory):
    from nova.compute import provider_config
    return {k: v['traits']['additional'] for k, v in
            provider_config.get_provider_configs(str(directory)).items()}


def test_export_prints_the_file_of_one_host(placement_url, auth, host):
    name, gpus, _ = host
    before = requests_served(placement_url)
    result = mdev(auth, 'trait', 'export', '--host', name)
    # name lookup, tree listing, allocation candidates summaries
    assert requests_served(placement_url) - before == 3
    assert result.rc == 0, result.stderr
    assert result.stdout.startswith('# Provider config of compute node %s'
                                    % name)
    assert yaml.safe_load(result.stdout)['meta'] == {'schema_version': '1.0'}
    # Custom traits only, by provider name; the bare GPU and the PCI
    # device are not in it.
    assert providers_of(result.stdout) == {
        gpus[0].name: ['CUSTOM_NVIDIA_35', 'CUSTOM_RACK_7'],
        gpus[1].name: ['CUSTOM_NVIDIA_36']}
    assert '1 PCI-in-Placement device(s) left out' in result.stderr
    assert '[pci] device_spec' in result.stderr


def test_type_traits_only(auth, host):
    name, gpus, _ = host
    result = mdev(auth, 'trait', 'export', '--host', name,
                  '--type-traits-only')
    assert providers_of(result.stdout) == {
        gpus[0].name: ['CUSTOM_NVIDIA_35'],
        gpus[1].name: ['CUSTOM_NVIDIA_36']}
    prefixed = mdev(auth, 'trait', 'export', '--host', name,
                    '--type-traits-only', '--trait-prefix', 'CUSTOM_VGPU_')
    assert prefixed.rc == 0 and providers_of(prefixed.stdout) == {}


@pytest.mark.nova
def test_the_files_nova_reads_are_the_traits_in_placement(
        tmp_path, placement, placement_url, auth, host):
    name, gpus, _ = host
    out = tmp_path / 'exports'
    before = requests_served(placement_url)
    result = mdev(auth, 'trait', 'export', '--provider-config-dir', str(out),
                  '-f', 'json')
    # The whole cloud: one listing, one summaries request.
    assert requests_served(placement_url) - before == 2
    assert result.rc == 0, result.stderr
    rows = {r['Host']: r for r in result.json()}
    assert rows[name] == {'Host': name, 'File': str(out / (name + '.yaml')),
                          'Devices': 2, 'Traits': 3, 'Result': 'created'}
    for row in rows.values():
        (single := tmp_path / ('one-' + row['Host'])).mkdir()
        os.link(row['File'], single / os.path.basename(row['File']))
        expected = {}
        for gpu_uuid in placement.request(
                'GET', '/resource_providers?in_tree=%s' % placement.request(
                    'GET', '/resource_providers?name=%s' % row['Host'])[
                    'resource_providers'][0]['uuid'])['resource_providers']:
            custom = sorted(t for t in placement.get_traits(gpu_uuid['uuid'])
                            if t.startswith('CUSTOM_'))
            if custom and gpu_uuid['name'].startswith(row['Host'] + '_pci_'):
                expected[gpu_uuid['name']] = custom
        assert nova_reads(single) == expected
    # Again: nothing changes, nothing is written.
    mtime = os.stat(rows[name]['File']).st_mtime_ns
    again = mdev(auth, 'trait', 'export', '--provider-config-dir', str(out),
                 '-f', 'json').json()
    assert {r['Result'] for r in again} == {'unchanged'}
    assert os.stat(rows[name]['File']).st_mtime_ns == mtime


def test_requests_do_not_grow_with_the_cloud(tmp_path, placement,
                                             placement_url, auth):
    counts = []
    for round_ in range(2):
        for _ in range(3):
            placement.add_compute_node(
                'grow-%s' % uuid.uuid4().hex[:8],
                [Gpu('pci_0000_84_00_0', 'VGPU', 4, ('CUSTOM_NVIDIA_35',)),
                 Gpu('pci_0000_85_00_0', 'VGPU', 4, ('CUSTOM_NVIDIA_36',))])
        before = requests_served(placement_url)
        result = mdev(auth, 'trait', 'export', '--provider-config-dir',
                      str(tmp_path / str(round_)), '--dry-run', '-f', 'json')
        assert result.rc == 0, result.stderr
        counts.append(requests_served(placement_url) - before)
    assert counts == [2, 2]
    assert not (tmp_path / '0').exists()


def test_a_host_whose_traits_went_gets_its_file_emptied(
        tmp_path, placement, auth, host):
    name, gpus, _ = host
    out = tmp_path / 'exports'
    assert mdev(auth, 'trait', 'export', '--provider-config-dir',
                str(out)).rc == 0
    for gpu in gpus[:2]:
        placement.set_traits(gpu.uuid, ['OWNER_NOVA'])
    rows = mdev(auth, 'trait', 'export', '--provider-config-dir', str(out),
                '-f', 'json').json()
    [mine] = [r for r in rows if r['Host'] == name]
    assert (mine['Devices'], mine['Result']) == (0, 'updated')
    assert providers_of((out / (name + '.yaml')).read_text()) == {}


def test_set_and_unset_keep_the_files_up_to_date(tmp_path, placement, auth,
                                                 host):
    name, gpus, _ = host
    out = tmp_path / 'exports'
    path = out / (name + '.yaml')
    dry = mdev(auth, 'trait', 'set', '--trait', 'CUSTOM_POOL_A',
               '--provider-config-dir', str(out), '--dry-run',
               '%s:0000:86:00.0' % name)
    assert dry.rc == 0, dry.stderr
    assert 'would be created' in dry.stderr and not out.exists()
    assert 'CUSTOM_POOL_A' not in placement.get_traits(gpus[2].uuid)

    done = mdev(auth, 'trait', 'set', '--trait', 'CUSTOM_POOL_A',
                '--provider-config-dir', str(out), '%s:0000:86:00.0' % name)
    assert done.rc == 0, done.stderr
    assert 'Provider config %s: created (3 devices' % path in done.stderr
    assert providers_of(path.read_text()) == {
        gpus[0].name: ['CUSTOM_NVIDIA_35', 'CUSTOM_RACK_7'],
        gpus[1].name: ['CUSTOM_NVIDIA_36'],
        gpus[2].name: ['CUSTOM_POOL_A']}

    dry = mdev(auth, 'trait', 'unset', '--trait', 'CUSTOM_RACK_7',
               '--provider-config-dir', str(out), '--dry-run', '--host', name)
    assert 'would be updated' in dry.stderr
    assert 'CUSTOM_RACK_7' in path.read_text()
    done = mdev(auth, 'trait', 'unset', '--trait', 'CUSTOM_RACK_7',
                '--provider-config-dir', str(out), '--host', name)
    assert done.rc == 0, done.stderr
    assert providers_of(path.read_text())[gpus[0].name] == [
        'CUSTOM_NVIDIA_35']
    # The export agrees with what the trait commands wrote.
    export = mdev(auth, 'trait', 'export', '--provider-config-dir', str(out),
                  '--host', name, '-f', 'json').json()
    assert export[0]['Result'] == 'unchanged'
    # The dropped spellings are refused, and write nothing.
    before = path.read_text()
    old = mdev(auth, 'trait', 'export', '--output-dir', str(out), '--host',
               name)
    assert old.rc == 1
    assert 'Unrecognized arguments: --output-dir' in old.stderr
    old = mdev(auth, 'trait', 'set', '--trait', 'CUSTOM_RACK_7',
               '--export-dir', str(out), '--host', name)
    assert old.rc == 1
    assert 'Unrecognized arguments: --export-dir' in old.stderr
    assert path.read_text() == before


def test_a_provider_defined_in_another_file_writes_nothing(
        tmp_path, placement, auth, host):
    name, gpus, _ = host
    out = tmp_path / 'exports'
    out.mkdir()
    (out / 'site.yaml').write_text(
        "meta: {schema_version: '1.0'}\nproviders:\n"
        "- identification: {name: %s}\n  traits: {additional: [CUSTOM_X]}\n"
        % gpus[0].name)
    before = set(placement.get_traits(gpus[2].uuid))
    for args in (('trait', 'export', '--provider-config-dir', str(out)),
                 ('trait', 'set', '--trait', 'CUSTOM_POOL_B',
                  '--provider-config-dir', str(out),
                  '%s:0000:84:00.0' % name)):
        result = mdev(auth, *args)
        cli.assert_one_line_error(result, 'site.yaml:3 already defines '
                                  'provider %s' % gpus[0].name,
                                  'refuses a provider defined twice')
    assert sorted(os.listdir(out)) == ['site.yaml']
    assert set(placement.get_traits(gpus[0].uuid)) == {
        'OWNER_NOVA', 'CUSTOM_NVIDIA_35', 'CUSTOM_RACK_7'}
    assert set(placement.get_traits(gpus[2].uuid)) == before


@pytest.mark.parametrize('args, fragments', [
    ((), ('Give --provider-config-dir', 'or one --host')),
    (('--host', 'a', '--host', 'b'), ('Give --provider-config-dir',)),
    (('--host', 'no-such-node'), ("No compute host named 'no-such-node'",)),
    (('--host', 'x', '--dry-run'),
     ('--dry-run shows what --provider-config-dir',)),
    (('--host', 'x', '--trait-prefix', 'VGPU_'),
     ("'VGPU_' is not a valid trait prefix",)),
])
def test_bad_input_is_one_line(auth, args, fragments):
    cli.assert_one_line_error(mdev(auth, 'trait', 'export', *args),
                              *fragments)


def test_an_output_dir_that_is_a_file(tmp_path, auth, host):
    blocker = tmp_path / 'file'
    blocker.write_text('x')
    cli.assert_one_line_error(
        mdev(auth, 'trait', 'export', '--provider-config-dir',
             str(blocker / 'sub')),
        'is not a directory')


def test_many_named_hosts_read_the_whole_cloud_once(tmp_path, placement,
                                                    placement_url, auth):
    names = ['many-%d-%s' % (i, uuid.uuid4().hex[:6]) for i in range(5)]
    for name in names:
        placement.add_compute_node(name, [
            Gpu('pci_0000_84_00_0', 'VGPU', 4, ('CUSTOM_NVIDIA_35',))])
    args = [a for n in names for a in ('--host', n)]
    before = requests_served(placement_url)
    rows = mdev(auth, 'trait', 'export', *args, '--provider-config-dir',
                str(tmp_path), '-f', 'json').json()
    assert requests_served(placement_url) - before == 2
    assert sorted(r['Host'] for r in rows) == sorted(names)
    # Four hosts or fewer: their trees only (three requests each).
    before = requests_served(placement_url)
    assert mdev(auth, 'trait', 'export', *args[:8], '--provider-config-dir',
                str(tmp_path)).rc == 0
    assert requests_served(placement_url) - before == 12
    bad = mdev(auth, 'trait', 'export', *args, '--host', 'no-such-node',
               '--provider-config-dir', str(tmp_path))
    cli.assert_one_line_error(bad, "No compute host named 'no-such-node'")


def test_export_dir_costs_the_reads_of_one_export(tmp_path, placement_url,
                                                  auth, host):
    counts = []
    for extra in ((), ('--provider-config-dir', str(tmp_path / 'exports'))):
        before = requests_served(placement_url)
        result = mdev(auth, 'trait', 'set', '--all', '--trait',
                      'CUSTOM_NVIDIA_35', '--dry-run', *extra)
        assert result.rc == 0, result.stderr
        counts.append(requests_served(placement_url) - before)
    # The whole cloud's hosts: one listing and one summaries request more.
    assert counts[1] - counts[0] == 2
