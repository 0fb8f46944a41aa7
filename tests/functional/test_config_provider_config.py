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

"""``openstack mdev config check --provider-config`` with the real CLI and
a real Placement: the files ``trait export`` writes pass, hand-made bad
ones each get their row, and with ``--host`` the files are compared with
the node's providers.
"""

import pathlib
import uuid

import pytest

from tests.fixtures import cli
from tests.fixtures.placement_data import Gpu

HEAD = "meta:\n  schema_version: '1.0'\n"


def provider_file(path, *entries):
    """Write a provider config file of ``(identification, traits)``
    entries (identification as YAML text) at ``path``.
    """
    path.write_text(HEAD + 'providers:\n' + ''.join(
        '- identification: {%s}\n  traits: {additional: [%s]}\n'
        % (ident, ', '.join(traits)) for ident, traits in entries))
    return path


def check(auth, *args):
    return cli.openstack(*auth, 'mdev', 'config', 'check', *args)


def findings(result):
    import json
    assert 'Traceback' not in result.stderr, result.stderr
    # The rows but for the effective rows and the last, result row.
    return [(f['Severity'], f['Where'], f['Message'])
            for f in json.loads(result.stdout)
            if f['Severity'] not in ('effective', 'result')]


@pytest.fixture
def node(placement):
    name = 'pc-%s.dc1.example.net' % uuid.uuid4().hex[:8]
    gpus = [Gpu('pci_0000_84_00_0', 'VGPU', 4, ('CUSTOM_NVIDIA_35',)),
            Gpu('pci_0000_85_00_0', 'VGPU', 4, ('CUSTOM_NVIDIA_36',)),
            Gpu('pci_0000_86_00_0', 'VGPU', 4)]
    root = placement.add_compute_node(name, gpus)
    pci = placement.add_pci_device(root, name, '0000:c1:00.0',
                                   'CUSTOM_PCI_10DE_26B9', total=2,
                                   traits=('CUSTOM_GPU_L40S',))
    return name, root, gpus, pci


@pytest.fixture
def exported(tmp_path, auth, node):
    name = node[0]
    out = tmp_path / 'exports'
    result = cli.openstack(*auth, 'mdev', 'trait', 'export', '--host', name,
                           '--provider-config-dir', str(out))
    assert result.rc == 0, result.stderr
    return out


def test_the_exported_file_passes(auth, node, exported):
    name = node[0]
    # On the compute node, without credentials...
    alone = cli.openstack('mdev', 'config', 'check', '--provider-config',
                          str(exported), '-f', 'json')
    assert alone.rc == 0, alone.stderr
    assert findings(alone) == []
    # ...and against Placement.
    for args in (('--provider-config', str(exported), '--host', name),
                 ('--provider-config', '%s=%s' % (name, exported),
                  '--host', name)):
        result = check(auth, *args, '-f', 'json')
        assert result.rc == 0, result.stderr
        assert findings(result) == []
    # Credentials at hand do not make a host named in the value read the
    # cloud: only --host does.
    cli.assert_one_line_error(
        check(auth, '--provider-config', '%s=%s' % (name, exported)),
        'give --host %s too' % name)


BAD = {
    'version.yaml': "meta: {schema_version: 1.0}\n",
    'major.yaml': "meta: {schema_version: '2.0'}\n",
    'broken.yaml': HEAD + 'providers: [\n',
    'standard.yaml': HEAD + 'providers:\n- identification: {name: a}\n'
    '  traits: {additional: [HW_GPU_API_VULKAN]}\n',
    'both.yaml': HEAD + "providers:\n- identification: {name: b, uuid: "
    "'$COMPUTE_NODE'}\n  traits: {additional: [CUSTOM_B]}\n",
    'lower.yaml': HEAD + 'providers:\n- identification: {name: c}\n'
    '  traits: {additional: [custom_c]}\n',
    'uuid.yaml': HEAD + 'providers:\n- identification: {uuid: gpu-1}\n'
    '  traits: {additional: [CUSTOM_D]}\n',
    'twice.yaml': HEAD + 'providers:\n- identification: {name: e}\n'
    '  traits: {additional: [CUSTOM_E]}\n',
    'twice2.yaml': HEAD + 'providers:\n- identification: {name: e}\n'
    '  traits: {additional: [CUSTOM_F]}\n',
}


def test_hand_made_bad_files_each_get_their_row(tmp_path):
    directory = tmp_path / 'provider_config'
    directory.mkdir()
    for name, text in BAD.items():
        (directory / name).write_text(text)
    (directory / 'skipped.yml').write_text(HEAD)
    result = cli.openstack('mdev', 'config', 'check', '--provider-config',
                           str(directory), '-f', 'json')
    assert result.rc == 1
    assert 'error(s)' in result.stderr
    rows = findings(result)
    for name in BAD:
        if name == 'twice.yaml':
            continue  # the first definition is fine; the second is not
        mine = [r for r in rows if r[1].startswith(str(directory / name))]
        assert [r[0] for r in mine] == ['error'], (name, rows)
    twice = [r for r in rows if r[1].startswith(str(directory /
                                                    'twice2.yaml'))]
    assert 'defined twice' in twice[0][2]
    assert str(directory / 'twice.yaml:4') in twice[0][2]
    assert [(r[0], r[1]) for r in rows if 'skipped' in r[1]] == [
        ('warning', str(directory / 'skipped.yml'))]


def test_against_the_node(tmp_path, placement, auth, node):
    name, root, gpus, pci = node
    path = provider_file(
        tmp_path / 'gpu.yaml',
        # The first GPU: kept by name.
        ('name: %s_pci_0000_84_00_0' % name, ['CUSTOM_NVIDIA_35']),
        # A device the node does not have.
        ('name: %s_pci_0000_99_00_0' % name, ['CUSTOM_NVIDIA_35']),
        # A provider of another node.
        ('name: other-node_pci_0000_84_00_0', ['CUSTOM_NVIDIA_35']),
        # The first GPU again, by UUID.
        ("uuid: '%s'" % gpus[0].uuid, ['CUSTOM_RACK_1']),
        # The PCI device.
        ("name: '%s_0000:C1:00.0'" % name, ['CUSTOM_POOL_A']))
    result = check(auth, '--provider-config', str(path), '--host', name,
                   '-f', 'json')
    assert result.rc == 1, result.stderr
    rows = findings(result)
    assert [(s, w) for s, w, _ in rows] == [
        ('error', '%s:10' % path),
        ('warning', '%s:6' % path),
        ('warning', '%s:8' % path),
        ('warning', '%s:12' % path),
        ('warning', 'Placement, host %s' % name)]
    assert 'also identified at %s:4' % path in rows[0][2]
    assert 'has no provider %s_pci_0000_99_00_0' % name in rows[1][2]
    assert 'another compute node' in rows[2][2]
    assert 'device_spec' in rows[3][2]
    # The second GPU's type trait is in no file; the bare GPU has none.
    assert ('%s_pci_0000_85_00_0 carries CUSTOM_NVIDIA_36' % name
            in rows[4][2])


def test_with_a_nova_conf(tmp_path: pathlib.Path, auth: tuple, node: tuple,
                          exported: object) -> None:
    name = node[0]
    conf = tmp_path / 'nova.conf'
    conf.write_text('[devices]\nenabled_mdev_types = nvidia-35\n'
                    '[libvirt]\nlive_migration_downtime = 500000\n'
                    'live_migration_downtime_steps = 3\n'
                    'live_migration_downtime_delay = 3\n')
    result = check(auth, str(conf), '--provider-config', str(exported),
                   '-f', 'json')
    assert result.rc == 0, result.stderr
    rows = findings(result)
    assert rows and all('nova.conf' in w for _, w, _ in rows)
    assert name


@pytest.mark.parametrize('args, fragments', [
    ((), ('The following arguments are required: <file> (nova.conf '
          'files) or --provider-config',)),
    (('--provider-config', 'a=x', '--provider-config', 'b=y'),
     ('for one compute node, not a, b',)),
    (('--provider-config', 'a=x', '--host', 'b'),
     ('for one compute node, not a, b',)),
    # Naming the node in the value does not read the cloud: only --host
    # does, and it is asked for.
    (('--provider-config', 'a=x'),
     ('--provider-config gives the files of compute node a; to compare '
      'them with its providers in Placement (which needs cloud '
      'credentials) give --host a too, or give the path alone',)),
    (('--provider-config', '/no/such/dir'), ('/no/such/dir does not exist',)),
    (('--provider-config', '=x'), ('takes PATH or HOST=PATH',)),
])
def test_bad_input_is_one_line(args, fragments):
    cli.assert_one_line_error(
        cli.openstack('mdev', 'config', 'check', *args), *fragments)


@pytest.fixture
def no_nova(placement_url, tmp_path, monkeypatch):
    cli.use_cloud_without_nova(placement_url, tmp_path, monkeypatch)


def test_audit_compares_the_devices_with_their_file(no_nova, tmp_path,
                                                    placement, node):
    name, _, gpus, _ = node
    path = provider_file(
        tmp_path / 'gpu.yaml', ('name: %s_pci_0000_84_00_0' % name,
                                ['CUSTOM_NVIDIA_35', 'CUSTOM_RACK_7']))
    result = cli.openstack('mdev', 'audit', '--host', name,
                           '--provider-config', '%s=%s' % (name, path),
                           '-f', 'json')
    rows = [(r['Severity'], r['Device'], r['Message']) for r in
            findings_of(result) if r['Check'] == 'provider-config']
    assert [r[:2] for r in rows] == [('warning', '0000:84:00.0'),
                                     ('warning', '0000:85:00.0')]
    assert 'lacks CUSTOM_RACK_7' in rows[0][2]
    assert 'carries CUSTOM_NVIDIA_36' in rows[1][2]


def findings_of(result):
    import json
    assert 'Traceback' not in result.stderr, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize('value, extra, fragments', [
    ('{path}', (), ('takes HOST=PATH here',)),
    ('{name}={bad}', (), ('nova-compute refuses to start',
                          'config check --provider-config')),
    ('no-such-node={path}', (), ("No compute host named 'no-such-node'",)),
    ('{name}={path}', ('--host', '{other}'), ('which --host leaves out',)),
])
def test_audit_bad_provider_config_is_one_line(
        no_nova, tmp_path, placement, node, value, extra, fragments):
    name = node[0]
    other = 'pc-other-%s' % uuid.uuid4().hex[:8]
    placement.add_compute_node(other, [])
    good = tmp_path / 'good.yaml'
    good.write_text(HEAD)
    bad = tmp_path / 'bad.yaml'
    bad.write_text("meta: {schema_version: '2.0'}\n")
    fill = {'path': good, 'bad': bad, 'name': name, 'other': other}
    result = cli.openstack('mdev', 'audit', '--provider-config',
                           value.format(**fill),
                           *(a.format(**fill) for a in extra))
    cli.assert_one_line_error(result, *fragments)
