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

import pytest

from osc_mdev.nova import names


@pytest.mark.parametrize('provider,root,expected', [
    ('compute1_pci_0000_84_00_0', 'compute1', 'pci_0000_84_00_0'),
    # Host names with '_' and '.': split on the root's name.
    ('compute_1.example.com_pci_0000_3b_00_0', 'compute_1.example.com',
     'pci_0000_3b_00_0'),
    ('gpu_node_2_mtty_mtty', 'gpu_node_2', 'mtty_mtty'),
    # Not <root>_<nodedev>.
    ('compute1_0000:81:00.0', 'compute1', None),        # PCI in Placement
    ('compute1:Open vSwitch agent', 'compute1', None),  # Neutron agent
    ('compute1_pci_0000_84_00_0', 'compute', None),     # other root
    ('compute1_', 'compute1', None),
    ('compute1', 'compute1', None),
])
def test_nodedev_from_provider_name(provider, root, expected):
    assert names.nodedev_from_provider_name(provider, root) == expected


@pytest.mark.parametrize('nodedev,expected', [
    ('pci_0000_84_00_0', '0000:84:00.0'),
    ('pci_0000_AF_1f_7', '0000:af:1f.7'),
    ('mtty_mtty', None),
    ('pci_0000_84_00', None),
    ('pci_0000_84_00_8', None),
])
def test_pci_address_from_nodedev(nodedev, expected):
    assert names.pci_address_from_nodedev(nodedev) == expected


@pytest.mark.parametrize('text,expected', [
    ('0000:84:00.0', '0000:84:00.0'),
    ('0000:AF:00.1', '0000:af:00.1'),
    ('84:00.0', '0000:84:00.0'),
    (' 0001:3b:1f.7 ', '0001:3b:1f.7'),
])
def test_normalize_pci_address(text, expected):
    assert names.normalize_pci_address(text) == expected


@pytest.mark.parametrize('text', [
    '0000:84:00', '0000:84:00.8', '000:84:00.0', 'zz:00.0', '', '84-00.0'])
def test_normalize_pci_address_rejects(text):
    with pytest.raises(ValueError, match='0000:84:00.0'):
        names.normalize_pci_address(text)


@pytest.mark.parametrize('name', ['VGPU', 'CUSTOM_MLX5', 'CUSTOM_NVIDIA_11'])
def test_mdev_resource_class_valid(name):
    assert names.validate_mdev_resource_class(name) == name


@pytest.mark.parametrize('name', [
    'vgpu', 'VCPU', 'PGPU', 'CUSTOM_', 'CUSTOM_mlx5', 'mlx5',
    'CUSTOM_A-B', 'CUSTOM_' + 'X' * 249])
def test_mdev_resource_class_invalid(name):
    with pytest.raises(ValueError, match='VGPU or CUSTOM_'):
        names.validate_mdev_resource_class(name)


@pytest.mark.parametrize('name', [
    'CUSTOM_NVIDIA_11', 'OWNER_NOVA', 'COMPUTE_STATUS_DISABLED'])
def test_trait_valid(name):
    assert names.validate_trait_name(name) == name


@pytest.mark.parametrize('name', [
    'custom_nvidia_11', 'CUSTOM_', 'CUSTOM_NVIDIA-11', 'bad-name', '',
    '1TRAIT', 'CUSTOMX', 'CUSTOM_' + 'A' * 249])
def test_trait_invalid(name):
    with pytest.raises(ValueError, match='trait name'):
        names.validate_trait_name(name)


def test_is_uuid():
    assert names.is_uuid('8f1c5b36-3b7a-4c1c-9a2e-6f1d7c0b7d11')
    assert not names.is_uuid('compute1')


def test_canonical_uuid():
    canonical = '8f1c5b36-3b7a-4c1c-9a2e-6f1d7c0b7d11'
    for text in (canonical, canonical.upper(), '{%s}' % canonical,
                 canonical.replace('-', '')):
        assert names.canonical_uuid(text) == canonical


@pytest.mark.parametrize('provider,root,expected', [
    ('gpu5_0000:AF:00.0', 'gpu5', '0000:af:00.0'),
    ('gpu_5.dc2_0000:25:00.4', 'gpu_5.dc2', '0000:25:00.4'),
    # Nova upper-cases the address; other names are no PCI device.
    ('gpu5_0000:af:00.0', 'gpu5', None),
    ('gpu5_pci_0000_af_00_0', 'gpu5', None),            # an mdev device
    ('gpu5_AF:00.0', 'gpu5', None),
    ('gpu5:Open vSwitch agent', 'gpu5', None),
    ('gpu5_0000:AF:00.0', 'gpu', None),
])
def test_pci_address_from_provider_name(provider, root, expected):
    assert names.pci_address_from_provider_name(provider, root) == expected


@pytest.mark.nova
def test_pci_provider_name_matches_nova():
    from nova.compute import pci_placement_translator as nova_pci

    view = nova_pci.PlacementView.__new__(nova_pci.PlacementView)
    view.root_rp_name = 'gpu_5.dc2'
    for address in ('0000:af:00.0', '0000:25:00.4', '0001:3b:1f.7'):
        name = view._get_rp_name_for_address(address)
        assert names.pci_address_from_provider_name(
            name, 'gpu_5.dc2') == address


@pytest.mark.nova
@pytest.mark.parametrize('vendor,product', [
    ('10de', '1eb8'), ('10DE', '25b6'), ('8086', '0d5c')])
def test_pci_ids_from_nova_resource_class(vendor, product):
    from nova.compute import pci_placement_translator as nova_pci

    rc = nova_pci.get_resource_class(None, vendor, product)
    assert names.pci_ids_from_resource_class(rc) == (
        vendor.lower(), product.lower())
    # A class the device spec sets tells neither.
    assert names.pci_ids_from_resource_class(
        nova_pci.get_resource_class('a16_vgpu', vendor, product)) is None
