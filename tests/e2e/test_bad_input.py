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

"""Bad input to every command, against a cloud real Nova built.

Each case must exit non-zero with one line on stderr that says what was
wrong, print no traceback and nothing on stdout, and leave Placement and
Nova exactly as they were: every provider's generation and allocations,
the traits and resource classes, and every flavor's extra specs are read
directly from the services before and after.
"""

import uuid

import pytest
import requests
import yaml

from tests.cloud import client
from tests.fixtures import cli
from tests.fixtures import faults

LONG = 'CUSTOM_' + 'A' * 249          # 256 characters
HUGE_BYTES = 11 * 1024 * 1024


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('cloud')) as cloud:
        flavor = cloud.control('create_flavor', name='bad-vgpu',
                               extra_specs={'resources:VGPU': '1'})
        for _ in range(2):
            [server] = cloud.control('boot', flavor=flavor['id'],
                                     name='bad-twin')
            assert server['status'] == 'ACTIVE', server
        yield cloud


@pytest.fixture(scope='module')
def files(tmp_path_factory):
    """nova.conf files nova-compute could not use."""
    base = tmp_path_factory.mktemp('novaconf')
    made = {
        'empty': '',
        'binary': b'\x00\x01\x02\xff\xfe' * 100,
        'latin1': '[devices]\nenabled_mdev_types = nvidia-11 \xe9\n'.encode(
            'latin-1'),
        'short-address': '[devices]\nenabled_mdev_types = nvidia-11\n'
                         '[mdev_nvidia-11]\ndevice_addresses = 81:00.0\n',
        'duplicate': '[devices]\nenabled_mdev_types = nvidia-11, '
                     'nvidia-12\n[mdev_nvidia-11]\ndevice_addresses = '
                     '0000:81:00.0\n[mdev_nvidia-12]\ndevice_addresses = '
                     '0000:81:00.0\n',
        'bad-class': '[devices]\nenabled_mdev_types = nvidia-11\n'
                     '[mdev_nvidia-11]\nmdev_class = mlx5\n',
        'no-types': '[DEFAULT]\ndebug = True\n',
        'not-ini': 'this is not an ini file\n[[[\n',
    }
    paths = {}
    for name, content in made.items():
        path = base / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        paths[name] = str(path)
    huge = base / 'huge'
    with open(huge, 'w') as out:
        out.write('[devices]\nenabled_mdev_types = nvidia-11\n')
        out.write('# padding\n' * (HUGE_BYTES // 10))
    paths['huge'] = str(huge)
    paths['directory'] = str(base)
    (base / 'emptydir').mkdir()
    paths['emptydir'] = str(base / 'emptydir')
    paths['missing'] = str(base / 'no-such-file')
    return paths


def _get(url, version_header, version):
    rsp = requests.get(url, timeout=30, headers={
        'X-Auth-Token': 'admin', version_header: version})
    rsp.raise_for_status()
    return rsp.json()


def snapshot(cloud):
    """Everything a command could have changed, read from the services."""
    def placement(path):
        return _get(cloud.placement_url + path, 'OpenStack-API-Version',
                    'placement 1.39')
    providers = placement('/resource_providers')['resource_providers']
    flavors = _get(cloud.compute_url + '/flavors/detail?is_public=None',
                   'OpenStack-API-Version', 'compute 2.61')['flavors']
    return {
        'generations': {p['uuid']: p['generation'] for p in providers},
        'allocations': {p['uuid']: placement(
            '/resource_providers/%s/allocations' % p['uuid'])['allocations']
            for p in providers},
        'traits': sorted(placement('/traits')['traits']),
        'classes': sorted(c['name'] for c in placement(
            '/resource_classes')['resource_classes']),
        'extra_specs': {f['id']: f.get('extra_specs') for f in flavors},
    }


UNKNOWN_UUID = str(uuid.UUID(int=7))

CASES = [
    # -- provider list ---------------------------------------------------
    (['provider', 'list', '--require-trait', 'nvidia-35'],
     'not a valid trait name'),
    (['provider', 'list', '--require-trait', ''], 'not a valid trait name'),
    (['provider', 'list', '--require-trait', LONG], 'not a valid'),
    (['provider', 'list', '--require-trait', 'CUSTOM_\u00dcBER'],
     'not a valid'),
    (['provider', 'list', '--require-trait', 'NOT_A_KNOWN_STANDARD_TRAIT'],
     'NOT_A_KNOWN_STANDARD_TRAIT'),
    (['provider', 'list', '--resource-class', 'vgpu'],
     'not an mdev resource class'),
    (['provider', 'list', '--resource-class', 'PGPU'],
     'not an mdev resource class'),
    (['provider', 'list', '--resource-class', ''],
     'not an mdev resource class'),
    (['provider', 'list', '--resource-class', LONG],
     'not an mdev resource class'),
    (['provider', 'list', '--resource-class', 'CUSTOM_NOT_THERE'],
     'Resource class CUSTOM_NOT_THERE does not exist in Placement'),
    (['provider', 'list', '--host', 'no-such-host'],
     "No compute host named 'no-such-host'"),
    (['provider', 'list', '--host', ''], "No compute host named ''"),
    (['provider', 'list', '--free', '--full'],
     'Argument --full: not allowed with argument --free'),
    (['provider', 'list', '--bogus'], 'Unrecognized arguments: --bogus'),
    (['provider', 'list', '-c', 'No Such Column'], 'No Such Column'),
    (['provider', 'list', '-f', 'xml'], "invalid choice: 'xml'"),
    # -- provider show ---------------------------------------------------
    (['provider', 'show'], "The following arguments are required: "
     "<device>; see 'openstack help mdev provider show'."),
    (['provider', 'show', 'nohost:0000:84:00.0'], 'no host named nohost'),
    (['provider', 'show', 'compute1:0000:99:00.0'],
     'host compute1 has no mdev device 0000:99:00.0'),
    (['provider', 'show', '0000:84:00'], 'is not a PCI address'),
    (['provider', 'show', 'compute1:0000:8g:00.0'], 'is not a PCI address'),
    (['provider', 'show', 'compute1:pci_0000_zz_00_0'],
     'is not a libvirt PCI device name'),
    (['provider', 'show', 'no-such-device'], "No mdev device matches"),
    (['provider', 'show', UNKNOWN_UUID], 'No mdev device matches'),
    (['provider', 'show', ''], 'No mdev device matches'),
    (['provider', 'show', 'compute1'], 'Provider compute1 is not an mdev'),
    (['provider', 'show', 'compute1:'], 'is not a PCI address'),
    # -- trait set / unset -----------------------------------------------
    (['trait', 'set', '--trait', 'custom_lower', '--all'],
     'not a valid trait name'),
    (['trait', 'set', '--trait', '', '--all'], 'not a valid trait name'),
    (['trait', 'set', '--trait', LONG, '--all'], 'not a valid'),
    (['trait', 'set', '--trait', 'CUSTOM_\u00c9T\u00c9', '--all'],
     'not a valid'),
    (['trait', 'set', '--trait', 'NOT_A_STANDARD_TRAIT', '--all'],
     'neither a standard trait nor known to Placement'),
    (['trait', 'set', '--all'], 'Give at least one --trait'),
    (['trait', 'set', '--trait', 'CUSTOM_OK'], 'Name the devices to change'),
    (['trait', 'set', '--trait', 'CUSTOM_OK', '--host', 'nohost'],
     "No compute host named 'nohost'"),
    (['trait', 'set', '--trait', 'CUSTOM_OK', '--resource-class',
      'CUSTOM_NONE_HERE'], 'No mdev device with resource class'),
    (['trait', 'set', '--trait', 'CUSTOM_OK', '--resource-class', 'PGPU'],
     'not an mdev resource class'),
    (['trait', 'set', '--trait', 'CUSTOM_OK', 'nohost:0000:84:00.0'],
     'no host named nohost'),
    (['trait', 'set', '--trait', 'CUSTOM_OK', 'compute1:0000:81:00'],
     'is not a PCI address'),
    (['trait', 'set', '--trait', 'CUSTOM_OK', 'compute1:0000:99:00.0'],
     'host compute1 has no mdev device'),
    (['trait', 'set', '--trait', 'CUSTOM_OK', '--force', '--all'],
     '--force only has a meaning with --replace'),
    (['trait', 'set', '--trait', 'CUSTOM_OK', '--all', '--host',
      'compute1'], '--all selects every device and cannot be combined'),
    (['trait', 'set', '--trait', 'CUSTOM_OK', '--all', '--resource-class',
      'VGPU'], 'cannot be combined with --resource-class'),
    (['trait', 'set', '--trait', 'CUSTOM_OK', 'compute1:0000:81:00.0',
      '--host', 'compute2'], 'is on host compute1, not on compute2'),
    (['trait', 'set', '--trait', 'CUSTOM_OK', 'gpu_node.rack3:0000:3b:00.0',
      '--resource-class', 'VGPU'], 'has resource class CUSTOM_MLX5'),
    (['trait', 'set', '--compute-conf', 'compute1={missing}'],
     'no-such-file'),
    (['trait', 'set', '--compute-conf', 'compute1={empty}'], 'empty'),
    (['trait', 'set', '--compute-conf', 'compute1={binary}'], 'binary'),
    (['trait', 'set', '--compute-conf', 'compute1={latin1}'], 'latin1'),
    (['trait', 'set', '--compute-conf', 'compute1={directory}'],
     'novaconf'),
    (['trait', 'set', '--compute-conf', 'compute1={huge}'], 'huge'),
    (['trait', 'set', '--compute-conf', 'compute1={short-address}'],
     '81:00.0'),
    (['trait', 'set', '--compute-conf', 'compute1={duplicate}'],
     '0000:81:00.0'),
    (['trait', 'set', '--compute-conf', 'compute1={bad-class}'], 'mlx5'),
    (['trait', 'set', '--compute-conf', 'compute1={no-types}'],
     'gives no mdev type to any device of host compute1'),
    (['trait', 'set', '--compute-conf', 'compute1={not-ini}'], 'not-ini'),
    (['trait', 'set', '--compute-conf', 'compute1'], 'takes HOST=FILE'),
    (['trait', 'set', '--compute-conf', 'compute1={no-types}',
      '--compute-conf', 'compute1={no-types}'], 'names host compute1 twice'),
    (['trait', 'set', '--compute-conf', 'compute1={no-types}', '--host',
      'compute2'], 'on host compute2, which no --compute-conf describes'),
    (['trait', 'set', '--compute-conf', 'compute1={duplicate}',
      '--trait-prefix', 'VGPU_'], 'not a valid trait prefix'),
    (['trait', 'unset', '--trait', 'OWNER_NOVA', '--all'],
     'OWNER_NOVA marks the devices as owned by a service'),
    (['trait', 'unset', '--all'], 'The following arguments are required'),
    (['trait', 'unset', '--trait', 'lower_case', '--all'],
     'not a valid trait name'),
    (['trait', 'unset', '--trait', 'CUSTOM_X', '--all', 'compute1:x'],
     'cannot be combined with device names'),
    # -- config check ----------------------------------------------------
    (['config', 'check'], 'The following arguments are required'),
    (['config', 'check', '{missing}'], 'no-such-file'),
    (['config', 'check', '{empty}'], 'empty'),
    (['config', 'check', '{binary}'], 'binary'),
    (['config', 'check', '{latin1}'], 'latin1'),
    (['config', 'check', '{huge}'], 'huge'),
    (['config', 'check', '{emptydir}'], 'emptydir'),
    (['config', 'check', '{duplicate}', '--sysfs', '{missing}'],
     'is not a directory'),
    (['config', 'check', '{no-types}', '--trait-prefix', 'custom_'],
     'not a valid trait prefix'),
    (['config', 'check', '{no-types}', '--host', 'nohost'], 'nohost'),
    (['config', 'check', '{no-types}', '--bogus'], 'Unrecognized arguments'),
    # -- capacity ----------------------------------------------------------
    (['capacity', '--flavor', 'no-such-flavor'], 'no-such-flavor'),
    (['capacity', '--resource-class', 'vgpu'], 'not an mdev resource class'),
    (['capacity', '--resource-class', 'VGPU', '--amount', '0'], '0'),
    (['capacity', '--resource-class', 'VGPU', '--amount', 'x'],
     "invalid int value: 'x'"),
    (['capacity', '--resource-class', 'VGPU', '--count', '0'], '0'),
    (['capacity', '--resource-class', 'VGPU', '--host', 'nohost'],
     'nohost'),
    (['capacity', '--resource-class', 'VGPU', '--require-trait', 'lower'],
     'not a valid trait name'),
    (['capacity', '--flavor', 'bad-vgpu', '--resource-class', 'VGPU'],
     '--flavor'),
    # -- audit -------------------------------------------------------------
    (['audit', '--fix', 'no-such-check'], 'no-such-check'),
    (['audit', '--compute-conf', 'compute1'], 'HOST=FILE'),
    (['audit', '--compute-conf', 'compute1={missing}'], 'no-such-file'),
    (['audit', '--compute-conf', 'compute1={short-address}'], '81:00.0'),
    (['audit', '--host', 'nohost'], 'nohost'),
    (['audit', '--dry-run'], '--fix'),
    # -- allocation show / list ------------------------------------------
    (['allocation', 'show', 'no-such-server'], "No server named"),
    (['allocation', 'show', 'not-a-uuid-!!'], "No server named"),
    (['allocation', 'show', 'bad-twin'], "2 servers are named 'bad-twin'"),
    (['allocation', 'show', UNKNOWN_UUID],
     'No server with ID %s' % UNKNOWN_UUID),
    (['allocation', 'show'], 'The following arguments are required'),
    (['allocation', 'show', ''], "No server named ''"),
    (['allocation', 'list', '--host', 'nohost'],
     "No compute host named 'nohost'"),
    (['allocation', 'list', '--device', 'nohost:0000:84:00.0'],
     'no host named nohost'),
    (['allocation', 'list', '--device', 'compute1:0000:84:00'],
     'is not a PCI address'),
    (['allocation', 'list', '--resource-class', 'vgpu'],
     'not an mdev resource class'),
    (['allocation', 'list', '--device', 'compute2:0000:84:00.0', '--host',
      'compute1'], 'is on host compute2, not on compute1'),
    # -- flavor configure / show -----------------------------------------
    (['flavor', 'configure', 'no-such-flavor', '--resource-class', 'VGPU'],
     "No flavor named or with ID 'no-such-flavor'"),
    (['flavor', 'configure', 'bad-vgpu', '--resource-class', 'vgpu'],
     'not an mdev resource class'),
    (['flavor', 'configure', 'bad-vgpu', '--resource-class', 'PGPU'],
     'not an mdev resource class'),
    (['flavor', 'configure', 'bad-vgpu', '--resource-class',
      'CUSTOM_NOT_IN_PLACEMENT'], 'does not exist in Placement'),
    (['flavor', 'configure', 'bad-vgpu'],
     'Give --resource-class (mdev devices), --pci-alias (PCI devices) '
     'or both.'),
    (['flavor', 'configure', 'bad-vgpu', '--resource-class', 'VGPU',
      '--amount', '0'], '--amount: must be at least 1'),
    (['flavor', 'configure', 'bad-vgpu', '--resource-class', 'VGPU',
      '--amount', '-2'], '--amount: must be at least 1'),
    (['flavor', 'configure', 'bad-vgpu', '--resource-class', 'VGPU',
      '--amount', 'two'], "invalid int value: 'two'"),
    (['flavor', 'configure', 'bad-vgpu', '--resource-class', 'VGPU',
      '--amount', '1000'], 'the largest VGPU device holds'),
    (['flavor', 'configure', 'bad-vgpu', '--resource-class', 'VGPU',
      '--require-trait', 'lower'], 'not a valid trait name'),
    (['flavor', 'configure', 'bad-vgpu', '--resource-class', 'VGPU',
      '--require-trait', 'CUSTOM_NOBODY_HAS_IT'], 'CUSTOM_NOBODY_HAS_IT'),
    (['flavor', 'configure', 'bad-vgpu', '--resource-class', 'VGPU',
      '--require-trait', 'CUSTOM_X', '--forbid-trait', 'CUSTOM_X'],
     'cannot be both required and forbidden'),
    (['flavor', 'configure', 'bad-vgpu', '--resource-class', 'VGPU',
      '--mdev-type', 'nvidia-11', '--trait-prefix', 'CUSTOM-X'],
     'not a valid trait prefix'),
    (['flavor', 'configure', 'bad-vgpu', '--resource-class', 'VGPU',
      '--forbid-trait', 'OWNER_NOVA'], 'OWNER_NOVA'),
    (['flavor', 'configure', 'bad-vgpu', '--resource-class', 'VGPU',
      '--spread', '--amount', '5'],
     '5 different devices on one host (group_policy=isolate) rules out'),
    (['flavor', 'show', 'no-such-flavor'],
     "No flavor named or with ID 'no-such-flavor'"),
    (['flavor', 'show', ''], "No flavor named or with ID ''"),
    (['flavor', 'configure', 'bad-vgpu', '--resource-class', 'VGPU',
      '--spread', '--no-validate', '--amount', '0'],
     '--amount: must be at least 1'),
    (['flavor', 'show'], 'The following arguments are required'),
]


def _case_id(case):
    return ' '.join(a if len(a) < 30 else a[:27] + '...' for a in case[0])


@pytest.mark.parametrize('args,fragment', CASES, ids=[
    _case_id(c) for c in CASES])
def test_bad_input(cloud, files, args, fragment):
    args = [a.format(**files) for a in args]
    before = snapshot(cloud)
    result = cli.openstack('mdev', *args)
    line = cli.assert_one_line_error(result)
    assert fragment in line, line
    assert snapshot(cloud) == before


def test_the_matrix_is_large_and_distinct():
    assert len({tuple(args) for args, _ in CASES}) == len(CASES) >= 80


@pytest.fixture
def html_endpoint(cloud, tmp_path, monkeypatch):
    """A clouds.yaml whose SERVICE endpoint is a proxy answering HTML."""
    made = []

    def make(service):
        upstream = (cloud.placement_url if service == 'placement'
                    else cloud.compute_url)
        proxy = faults.FaultProxy(upstream, rule=lambda req: faults.status(
            200, b'<html><body>Sign in</body></html>', 'text/html'))
        made.append(proxy)
        config = yaml.safe_load(open(cloud.clouds_yaml))
        entry = config['clouds'][cloud.cloud_name]
        entry['%s_endpoint_override' % service] = proxy.url
        path = tmp_path / ('%s.yaml' % service)
        path.write_text(yaml.safe_dump(config))
        monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(path))
    yield make
    for proxy in made:
        proxy.stop()


@pytest.mark.parametrize('service,args', [
    ('placement', ['provider', 'list']),
    ('placement', ['allocation', 'list']),
    ('compute', ['allocation', 'show', 'bad-twin']),
    ('compute', ['flavor', 'show', 'bad-vgpu']),
])
def test_endpoint_answering_html(cloud, html_endpoint, service, args):
    before = snapshot(cloud)
    html_endpoint(service)
    result = cli.openstack('mdev', *args)
    cli.assert_one_line_error(
        result, 'answered something that is not JSON',
        'check that the %s endpoint URL is right'
        % ('Placement' if service == 'placement' else 'Compute'))
    assert snapshot(cloud) == before
