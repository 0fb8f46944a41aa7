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

"""``mdev flavor configure --pci-alias`` against real Nova and Placement.

Real Nova flavors; the PCI devices are providers made in the cloud's
real Placement as nova-compute makes them with ``[pci]
report_in_placement``: a root node with children ``<root>_<ADDRESS>``,
class ``CUSTOM_PCI_<VENDOR>_<PRODUCT>`` or the device spec's, traits
COMPUTE_MANAGED_PCI_DEVICE and OWNER_NOVA (plus the spec's).
"""

import uuid

import pytest

from tests.cloud import client
from tests.e2e.helpers import flavor_specs as specs_of
from tests.e2e.helpers import mdev
from tests.e2e.helpers import mdev_json
from tests.e2e.helpers import placement_request as placement
from tests.fixtures import cli

HOST = 'pciflavorhost'
TOPOLOGY = {'hosts': [{'name': HOST, 'gpus': 1, 'bus': '0x85',
                       'enabled_mdev_types': ['nvidia-11']}]}
PCI_NODE = 'pcinode.example.net'
A16 = 'CUSTOM_PCI_10DE_25B6'       # the VFs of 0000:25:00.0, by ids
A40 = 'CUSTOM_A40'                 # a whole GPU, class from the spec
ALIAS = 'pci_passthrough:alias'
CONTROLLER = """[pci]
alias = {"name": "a16", "vendor_id": "10de", "product_id": "25b6",
    "device_type": "type-VF"}
alias = {"name": "a40", "resource_class": "a40", "device_type": "type-PCI",
    "traits": "blue"}
alias = {"name": "a40red", "resource_class": "a40", "traits": "red"}

[filter_scheduler]
pci_in_placement = %s
"""


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('pci-flavor-cloud'),
                              topology=TOPOLOGY) as cloud:
        _pci_node(cloud)
        yield cloud


def _provider(cloud, name, parent=None):
    body = {'name': name, 'uuid': str(uuid.uuid4())}
    if parent:
        body['parent_provider_uuid'] = parent
    placement(cloud, 'POST', '/resource_providers', json=body)
    return body['uuid']


def _device(cloud, root, address, rc, total, traits):
    rp = _provider(cloud, '%s_%s' % (PCI_NODE, address.upper()), root)
    placement(cloud, 'PUT', '/resource_classes/%s' % rc)
    placement(cloud, 'PUT', '/resource_providers/%s/inventories' % rp, json={
        'resource_provider_generation': 0,
        'inventories': {rc: {'total': total, 'max_unit': total}}})
    for trait in traits:
        if trait.startswith('CUSTOM_'):
            placement(cloud, 'PUT', '/traits/%s' % trait)
    placement(cloud, 'PUT', '/resource_providers/%s/traits' % rp, json={
        'resource_provider_generation': 1,
        'traits': ['COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA'] + traits})
    return rp


def _pci_node(cloud):
    root = _provider(cloud, PCI_NODE)
    placement(cloud, 'PUT', '/resource_providers/%s/inventories' % root,
              json={'resource_provider_generation': 0, 'inventories': {
                  'VCPU': {'total': 16}, 'MEMORY_MB': {'total': 65536},
                  'DISK_GB': {'total': 500}}})
    _device(cloud, root, '0000:25:00.0', A16, 2, [])
    _device(cloud, root, '0000:41:00.0', A40, 1, ['CUSTOM_BLUE'])


@pytest.fixture
def controller(tmp_path):
    path = tmp_path / 'nova.conf'
    path.write_text(CONTROLLER % 'True')
    return str(path)


def results(rows):
    return {r['Property']: r['Result'] for r in rows}


def test_pci_alias_replaces_the_mdev_request(cloud, controller):
    flavor = cloud.control('create_flavor', name='pf-switch', extra_specs={
        'resources:VGPU': '1', 'hw:cpu_policy': 'shared'})['id']
    args = ['flavor', 'configure', flavor, '--pci-alias', 'a16:2',
            '--controller-conf', controller]
    rows = mdev_json(*args, '--dry-run')
    assert results(rows) == {ALIAS: 'would be added',
                             'resources:VGPU': 'would be removed'}
    assert specs_of(cloud, flavor) == {'resources:VGPU': '1',
                                       'hw:cpu_policy': 'shared'}
    rows = mdev_json(*args)
    assert results(rows) == {ALIAS: 'added', 'resources:VGPU': 'removed'}
    assert specs_of(cloud, flavor) == {ALIAS: 'a16:2',
                                       'hw:cpu_policy': 'shared'}
    # Again: nothing to do.
    assert results(mdev_json(*args)) == {ALIAS: 'unchanged'}
    shown = mdev_json('flavor', 'show', flavor)
    assert shown['PCI Request'] == '2 devices of PCI alias a16'
    assert shown['Request'] == 'no mdev resources'
    assert shown['Extra Specs'] == {ALIAS: 'a16:2'}


def test_pci_alias_checked_against_placement(cloud, controller):
    flavor = cloud.control('create_flavor', name='pf-check')['id']
    base = ['flavor', 'configure', flavor, '--controller-conf', controller]
    # Two VFs fit on the PF's provider; three fit nowhere.
    cli.assert_one_line_error(
        mdev(*base, '--pci-alias', 'a16:3'),
        'No host has 3 free %s devices for PCI alias a16 now' % A16,
        '--no-validate')
    # The alias' traits are normalized as Nova does: "blue" is CUSTOM_BLUE.
    rows = mdev_json(*base, '--pci-alias', 'a40')
    assert results(rows) == {ALIAS: 'added'}
    cli.assert_one_line_error(
        mdev(*base, '--pci-alias', 'a40red'),
        'No resource provider has trait CUSTOM_RED')
    cli.assert_one_line_error(
        mdev(*base, '--pci-alias', 'nope:1'),
        'PCI alias nope is not defined', 'defined: a16, a40, a40red')
    cli.assert_one_line_error(
        mdev(*base, '--pci-alias', 'a16:x'), 'is not NAME or NAME:COUNT')
    assert specs_of(cloud, flavor) == {ALIAS: 'a40:1'}
    rows = mdev_json(*base, '--pci-alias', 'a16:3', '--no-validate')
    assert results(rows) == {ALIAS: 'changed'}
    assert specs_of(cloud, flavor) == {ALIAS: 'a16:3'}


def test_pci_alias_room_follows_allocations(cloud, controller):
    flavor = cloud.control('create_flavor', name='pf-room')['id']
    [pf] = placement(cloud, 'GET', '/resource_providers?name=%s_0000:25:00.0'
                     % PCI_NODE)['resource_providers']
    consumer = str(uuid.uuid4())
    placement(cloud, 'PUT', '/allocations/%s' % consumer, json={
        'allocations': {pf['uuid']: {'resources': {A16: 1}}},
        'project_id': str(uuid.uuid4()), 'user_id': str(uuid.uuid4()),
        'consumer_generation': None, 'consumer_type': 'INSTANCE'})
    try:
        cli.assert_one_line_error(
            mdev('flavor', 'configure', flavor, '--controller-conf',
                 controller, '--pci-alias', 'a16:2'),
            'No host has 2 free %s devices' % A16)
        rows = mdev_json('flavor', 'configure', flavor, '--controller-conf',
                         controller, '--pci-alias', 'a16:1')
        assert results(rows) == {ALIAS: 'added'}
    finally:
        placement(cloud, 'DELETE', '/allocations/%s' % consumer)


def test_pci_alias_without_nova_conf_or_placement(cloud, tmp_path):
    flavor = cloud.control('create_flavor', name='pf-unchecked')['id']
    [row] = mdev_json('flavor', 'configure', flavor, '--pci-alias', 'gpu:1')
    assert row['Result'] == 'added'
    assert 'alias names not checked' in row['Note']
    path = tmp_path / 'nova.conf'
    path.write_text(CONTROLLER % 'False')
    # Without pci_in_placement Nova refuses aliases with a resource class
    # and no vendor_id and product_id: nova-api would not start.
    cli.assert_one_line_error(
        mdev('flavor', 'configure', flavor, '--pci-alias', 'a16:5',
             '--controller-conf', str(path)),
        '--controller-conf',
        'alias a40,a40red has no vendor_id and product_id')
    path.write_text(CONTROLLER.replace('"traits": "blue"}', '"traits": '
                                       '"blue", "vendor_id": "10de", '
                                       '"product_id": "2235"}').replace(
        '"traits": "red"}', '"traits": "red", "vendor_id": "10de", '
        '"product_id": "2235"}') % 'False')
    [row] = mdev_json('flavor', 'configure', flavor, '--pci-alias', 'a16:5',
                      '--controller-conf', str(path))
    assert row['Result'] == 'changed'
    assert 'pci_in_placement is off' in row['Note']
    assert specs_of(cloud, flavor) == {ALIAS: 'a16:5'}


def test_mdev_and_pci_in_one_flavor(cloud, controller):
    flavor = cloud.control('create_flavor', name='pf-mixed')['id']
    rows = mdev_json('flavor', 'configure', flavor, '--resource-class',
                     'VGPU', '--pci-alias', 'a40', '--controller-conf',
                     controller)
    assert results(rows) == {ALIAS: 'added', 'resources:VGPU': 'added'}
    assert specs_of(cloud, flavor) == {ALIAS: 'a40:1', 'resources:VGPU': '1'}
    shown = mdev_json('flavor', 'show', flavor)
    assert shown['Request'] == 'resources: 1 x VGPU'
    assert shown['PCI Request'] == '1 device of PCI alias a40'
    # The mdev request alone again: the alias key goes.
    rows = mdev_json('flavor', 'configure', flavor, '--resource-class',
                     'VGPU')
    assert results(rows) == {ALIAS: 'removed', 'resources:VGPU': 'unchanged'}
    assert specs_of(cloud, flavor) == {'resources:VGPU': '1'}


def test_pci_option_mistakes_write_nothing(cloud, controller):
    flavor = cloud.control('create_flavor', name='pf-bad')['id']
    cli.assert_one_line_error(mdev('flavor', 'configure', flavor),
                              '--resource-class', '--pci-alias')
    cli.assert_one_line_error(
        mdev('flavor', 'configure', flavor, '--pci-alias', 'a16',
             '--require-trait', 'CUSTOM_X'), '--require-trait',
        'need --resource-class')
    cli.assert_one_line_error(
        mdev('flavor', 'configure', flavor, '--resource-class', 'VGPU',
             '--controller-conf', controller),
        '--controller-conf', '--pci-alias')
    bad = controller + '.bad'
    with open(bad, 'w') as conf:
        conf.write('[pci]\nalias = {"name": "a16",}\n')
    cli.assert_one_line_error(
        mdev('flavor', 'configure', flavor, '--pci-alias', 'a16',
             '--controller-conf', bad), '--controller-conf', 'not valid JSON')
    assert specs_of(cloud, flavor) == {}
