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

"""The [pci] rules of ``nova.pci``, each cross-checked with nova 34's code.

Tests marked ``nova`` hand the same names, device specs, aliases and
devices to Nova's own functions (pci_placement_translator, devspec,
whitelist, request, request_spec) and compare the answers.
"""

import json

import pytest

from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.pci import devspec as pci_devspec
from osc_mdev.nova.pci import placement_translator as translator
from osc_mdev.nova.pci import request as pci_request

NAMES = ['CUSTOM_A16_16A', 'a16-16a', 'PGPU', 'pgpu', 'VGPU', 'my gpu',
         'CUSTOM_x', '-', 'x' * 300]
TRAIT_STRINGS = ['', 'blue', 'blue, big', 'HW_GPU_API_VULKAN,my-awesome-gpu',
                 'hw_gpu_api_vulkan', 'a,,b', 'CUSTOM_OK,COMPUTE_STATUS_'
                 'DISABLED']

SPECS = {
    'vf with class and traits': {
        'vendor_id': '10de', 'product_id': '25b6', 'address': '0000:25:00.4',
        'resource_class': 'a16-16a', 'traits': 'blue,big', 'managed': 'no'},
    'glob address': {'address': '*:25:*.*', 'vendor_id': '10DE'},
    'partial glob': {'address': ':25:00.'},
    'regex address': {'address': {'bus': '25', 'function': '[4-7]'}},
    'bad regex': {'address': {'bus': '('}},
    'vendor not hex': {'vendor_id': '10dx'},
    'product too big': {'product_id': '1ffff'},
    'function too big': {'address': '0000:25:00.8'},
    'slot too big': {'address': '0000:25:20.0'},
    'too many fields': {'address': '0:0000:25:00.0'},
    'devname and address': {'devname': 'eth0', 'address': '0000:25:00.0'},
    'managed not boolean': {'address': '0000:25:00.4', 'managed': 'maybe'},
    'live_migratable yes': {'address': '0000:25:00.4',
                            'live_migratable': 'yes'},
    'one_time_use': {'address': '0000:25:00.0', 'one_time_use': 'true'},
    'function blank': {'address': '0000:25:00. '},
    'function empty': {'address': '0000:25:00.'},
    'slot blank': {'address': '0000:25: .4'},
}
TEXTS = {
    'not json': '{"vendor_id": "10de",}',
    'a string': '"10de"',
    'list with a number': '[{"vendor_id": "10de"}, 3]',
    'list of two': '[{"vendor_id": "10de"}, {"vendor_id": "8086"}]',
}


@pytest.fixture
def nova_conf():
    import nova.conf
    from nova.pci import request

    conf = nova.conf.CONF
    yield conf
    conf.reset()
    conf.clear_override('report_in_placement', 'pci')
    conf.clear_override('alias', 'pci')
    conf.clear_override('pci_in_placement', 'filter_scheduler')
    request.get_alias_from_config.cache_clear()


@pytest.mark.nova
@pytest.mark.parametrize('name', NAMES)
def test_resource_class_agrees_with_nova(name):
    from nova.compute import pci_placement_translator as nova

    assert translator.normalize_resource_class(name) == \
        nova._normalize_resource_class(name)
    assert translator.pci_resource_class(name, '10de', '25b6') == \
        nova.get_resource_class(name, '10de', '25b6')
    assert translator.pci_resource_class(None, '10de', '25b6') == \
        nova.get_resource_class(None, '10de', '25b6') == \
        'CUSTOM_PCI_10DE_25B6'


@pytest.mark.nova
@pytest.mark.parametrize('text', TRAIT_STRINGS)
def test_traits_agree_with_nova(text):
    from nova.compute import pci_placement_translator as nova

    assert translator.pci_traits(text) == nova.get_traits(text)
    assert sorted(translator.normalize_traits(text.split(','))) == \
        sorted(nova._normalize_traits(text.split(',')))
    for live in ({}, {'live_migratable': 'yes'}, {'live_migratable': 'no'}):
        tags = dict(live, traits=text)
        assert translator.device_traits(tags) == nova._get_traits_for_dev(tags)


def test_normalisation_surprises():
    # A space after the comma is part of the name; a lower-case standard
    # trait is not standard any more; an empty name is "CUSTOM_".
    assert translator.pci_traits('blue, big') == {'CUSTOM_BLUE', 'CUSTOM__BIG'}
    assert translator.pci_traits('hw_gpu_api_vulkan') == {
        'CUSTOM_HW_GPU_API_VULKAN'}
    assert translator.pci_traits('a,,b') == {'CUSTOM_A', 'CUSTOM_', 'CUSTOM_B'}
    assert translator.placement_name_problem('CUSTOM_', 'trait')
    assert translator.placement_name_problem('CUSTOM_' + 'X' * 250, 'trait')
    assert translator.placement_name_problem('CUSTOM__BIG', 'trait') is None


def _nova_whitelist(text, report_in_placement, conf):
    from nova.pci import whitelist

    conf.set_override('report_in_placement', report_in_placement, 'pci')
    try:
        return whitelist.Whitelist([text])
    except Exception as exc:     # what nova-compute stops with
        return exc


@pytest.mark.nova
@pytest.mark.parametrize('report', [False, True])
@pytest.mark.parametrize('name', sorted(SPECS) + sorted(TEXTS))
def test_device_specs_agree_with_nova(name, report, nova_conf):
    text = TEXTS.get(name) or json.dumps(SPECS[name])
    nova = _nova_whitelist(text, report, nova_conf)
    try:
        ours = pci_devspec.device_spec_entries(text, 'here', report)
    except novaconf.NovaConfError as exc:
        assert isinstance(nova, Exception), (name, exc)
        return
    assert not isinstance(nova, Exception), (name, nova)
    assert len(ours) == len(nova.specs)
    for mine, theirs in zip(ours, nova.specs):
        assert (mine.vendor_id, mine.product_id) == (
            theirs.vendor_id, theirs.product_id)
        assert mine.tags == theirs.get_tags()


DEVICES = [
    # (address, vendor, product, type, parent)
    ('0000:25:00.0', '10de', '2236', 'type-PF', None),
    ('0000:25:00.4', '10de', '25b6', 'type-VF', '0000:25:00.0'),
    ('0000:25:00.5', '10de', '25b6', 'type-VF', '0000:25:00.0'),
    ('0000:41:00.0', '10de', '2236', 'type-PCI', None),
]
VIEWS = {
    'vfs one class': [
        {'address': '0000:25:00.4', 'resource_class': 'A16'},
        {'address': '0000:25:00.5', 'resource_class': 'A16'}],
    'vfs mixed classes': [
        {'address': '0000:25:00.4', 'resource_class': 'A16'},
        {'address': '0000:25:00.5', 'resource_class': 'A16_2'}],
    'vfs mixed traits': [
        {'address': '0000:25:00.4', 'traits': 'blue'},
        {'address': '0000:25:00.5'}],
    'pf and its vfs': [
        {'address': '0000:25:00.0'}, {'address': '0000:25:00.4'}],
    'vf one_time_use': [
        {'address': '0000:25:00.4', 'one_time_use': 'true'}],
    'vf one_time_use false': [
        {'address': '0000:25:00.4', 'one_time_use': 'false'}],
    'pf one_time_use': [
        {'address': '0000:25:00.0', 'one_time_use': 'true'}],
    'pci one_time_use yes': [
        {'address': '0000:41:00.0', 'one_time_use': 'yes',
         'traits': 'blue'}],
    'pci one_time_use false': [
        {'address': '0000:41:00.0', 'one_time_use': 'false'}],
    'whole gpus by ids': [{'vendor_id': '10de', 'product_id': '2236'}],
    'first spec wins': [
        {'address': '0000:25:00.4', 'traits': 'blue'},
        {'vendor_id': '10de', 'traits': 'blue'}],
    'physical_network left out': [
        {'address': '0000:25:00.4', 'physical_network': 'net1'},
        {'address': '0000:25:00.5', 'resource_class': 'X'}],
}


PFS = {d[0] for d in DEVICES if d[3] == 'type-PF'}


@pytest.fixture
def nova_pfs(monkeypatch):
    """Nova's sysfs test of a physical function
    (``nova.pci.utils.is_physical_function``) answers from DEVICES.
    """
    from nova.pci import utils

    monkeypatch.setattr(utils, 'is_physical_function', lambda *fields: (
        '%s:%s:%s.%s' % fields) in PFS)


def _nova_view(specs, conf):
    from nova.compute import pci_placement_translator as translator
    from nova import objects
    from nova.pci import whitelist

    objects.register_all()
    conf.set_override('report_in_placement', True, 'pci')
    wl = whitelist.Whitelist([json.dumps(specs)])
    view = translator.PlacementView('node1', [])
    try:
        for address, vendor, product, dev_type, parent in DEVICES:
            dev = objects.PciDevice(
                address=address, vendor_id=vendor, product_id=product,
                dev_type=dev_type, parent_addr=parent, status='available',
                instance_uuid=None, extra_info={})
            spec = wl.get_devspec(dev)
            if spec is not None:
                view.process_dev(dev, spec)
    except Exception as exc:
        return exc
    return {name: (rp.resource_class, rp.traits,
                   sorted(d.address for d in rp.devs))
            for name, rp in view.rps.items() if rp.devs}


@pytest.mark.nova
@pytest.mark.parametrize('name', sorted(VIEWS))
def test_providers_agree_with_nova(name, nova_conf, nova_pfs):
    nova = _nova_view(VIEWS[name], nova_conf)
    specs = pci_devspec.device_spec_entries(json.dumps(VIEWS[name]), 'here',
                                            True)
    devices = [pci_devspec.PciDevice(*d) for d in DEVICES]
    providers, problems = translator.pci_providers('node1', devices, specs,
                                                   PFS)
    if isinstance(nova, Exception):
        assert problems, name
        assert problems[0][0] == type(nova).__name__
        return
    assert problems == []
    assert {n: (p.resource_class, p.traits,
                sorted(d.address for d in p.devices))
            for n, p in providers.items() if p.devices} == nova


MATCHING = {
    'pf address': {'address': '0000:25:00.0'},
    'pf address, vf ids': {'address': '0000:25:00.0', 'product_id': '25b6'},
    'vf address': {'address': '0000:25:00.4'},
    'pf address fields': {'address': {
        'domain': '0000', 'bus': '25', 'slot': '00', 'function': '0'}},
    'pf address patterns': {'address': {'bus': '25', 'function': '0'}},
    'pf address fields, vf ids': {'product_id': '25b6', 'address': {
        'domain': '0000', 'bus': '25', 'slot': '00', 'function': '0'}},
    'pci address fields': {'address': {
        'domain': '0000', 'bus': '41', 'slot': '00', 'function': '0'}},
    'pf address fields in upper case': {'address': {
        'domain': '0000', 'bus': '2A', 'slot': '00', 'function': '0'}},
    'short pf address fields': {'address': {
        'domain': '0', 'bus': '25', 'slot': '0', 'function': '0'}},
    'glob': {'address': '*:25:00.*'},
}


@pytest.mark.nova
@pytest.mark.parametrize('name', sorted(MATCHING))
def test_devices_a_spec_matches_agree_with_nova(name, nova_conf, nova_pfs):
    from nova import objects
    from nova.pci import whitelist

    objects.register_all()
    text = json.dumps(MATCHING[name])
    [nova] = whitelist.Whitelist([text]).specs
    [ours] = pci_devspec.device_spec_entries(text)
    for address, vendor, product, dev_type, parent in DEVICES:
        device = objects.PciDevice(
            address=address, vendor_id=vendor, product_id=product,
            dev_type=dev_type, parent_addr=parent)
        assert pci_devspec.spec_matches(
            ours, pci_devspec.PciDevice(address, vendor, product, dev_type,
                                        parent), PFS) == \
            nova.match_pci_obj(device), address


def test_provider_names_follow_nova():
    specs = pci_devspec.device_spec_entries(json.dumps(VIEWS['vfs one class']))
    devices = [pci_devspec.PciDevice(*d) for d in DEVICES]
    providers, _ = translator.pci_providers('gpu1.example.net', devices, specs)
    assert list(providers) == ['gpu1.example.net_0000:25:00.0']
    assert providers['gpu1.example.net_0000:25:00.0'].resource_class == \
        'CUSTOM_A16'


ALIASES = {
    'ids': ['{"name": "a10", "vendor_id": "10de", "product_id": "2236"}'],
    'class only': ['{"name": "a16", "resource_class": "a16-16a", '
                   '"device_type": "type-VF", "traits": "blue,big"}'],
    'not json': ['{"name": "a16",}'],
    'unknown key': ['{"name": "a16", "resource-class": "X", '
                    '"vendor_id": "10de", "product_id": "2236"}'],
    'vendor pattern': ['{"name": "a", "vendor_id": "10d", '
                       '"product_id": "2236"}'],
    'device type': ['{"name": "a", "vendor_id": "10de", '
                    '"product_id": "2236", "device_type": "VF"}'],
    'numa policy': ['{"name": "a", "vendor_id": "10de", '
                    '"product_id": "2236", "numa_policy": "strict"}'],
    'no name': ['{"vendor_id": "10de", "product_id": "2236"}'],
    'two specs same type': [
        '{"name": "a", "vendor_id": "10de", "product_id": "2236", '
        '"device_type": "type-PCI"}',
        '{"name": "a", "vendor_id": "10de", "product_id": "2237", '
        '"device_type": "type-PCI"}'],
    'two specs no type': [
        '{"name": "a", "vendor_id": "10de", "product_id": "2236"}',
        '{"name": "a", "vendor_id": "10de", "product_id": "2237"}'],
    'two specs numa mismatch': [
        '{"name": "a", "vendor_id": "10de", "product_id": "2236", '
        '"device_type": "type-PCI", "numa_policy": "required"}',
        '{"name": "a", "vendor_id": "10de", "product_id": "2237", '
        '"device_type": "type-PCI"}'],
    'live_migratable not boolean': [
        '{"name": "a", "vendor_id": "10de", "product_id": "2236", '
        '"live_migratable": "sure"}'],
}


def _nova_aliases(texts, in_placement, conf):
    from nova.pci import request

    conf.set_override('alias', texts, 'pci')
    conf.set_override('pci_in_placement', in_placement, 'filter_scheduler')
    request.get_alias_from_config.cache_clear()
    try:
        return request.get_alias_from_config()
    except Exception as exc:
        return exc


@pytest.mark.nova
@pytest.mark.parametrize('in_placement', [False, True])
@pytest.mark.parametrize('name', sorted(ALIASES))
def test_aliases_agree_with_nova(name, in_placement, nova_conf):
    texts = ALIASES[name]
    nova = _nova_aliases(texts, in_placement, nova_conf)
    try:
        ours = pci_request.pci_aliases([(t, 'here') for t in texts],
                                       in_placement)
    except novaconf.NovaConfError as exc:
        assert isinstance(nova, Exception), (name, exc)
        assert type(nova).__name__ == 'PciInvalidAlias'
        return
    assert not isinstance(nova, Exception), (name, nova)
    assert {n: (a.numa_policy, list(a.specs)) for n, a in ours.items()} == \
        {n: (policy, specs) for n, (policy, specs) in nova.items()}


@pytest.mark.nova
@pytest.mark.parametrize('name,count', [('ids', 1), ('ids', 2),
                                        ('class only', 3)])
def test_request_groups_agree_with_nova(name, count, nova_conf):
    from nova import context
    from nova import objects
    from nova.pci import request

    objects.register_all()
    texts = ALIASES[name]
    _nova_aliases(texts, True, nova_conf)
    pci_requests = request._translate_alias_to_requests(
        '%s:%d' % (json.loads(texts[0])['name'], count))
    spec = objects.RequestSpec(
        context.get_admin_context(),
        pci_requests=objects.InstancePCIRequests(requests=pci_requests),
        requested_resources=None)
    spec.generate_request_groups_from_pci_requests()
    nova = [(g.resources, g.required_traits)
            for g in spec.requested_resources]

    [alias] = pci_request.pci_aliases([(t, 'here') for t in texts],
                                      True).values()
    ours = pci_request.alias_request_groups(alias, count)
    assert [(dict(r), set(t)) for r, t in ours] == nova
    assert pci_request.alias_request_groups(alias, count, False) == []


@pytest.mark.nova
@pytest.mark.parametrize('text', [
    'a16:1', 'a16:2,nic:1', 'a16 : 2 , nic:1', 'a16', 'a16:x', 'a16:-1',
    ':1', 'a16:1,', 'a:b:1'])
def test_alias_request_syntax_agrees_with_nova(text):
    from nova.api.validation.extra_specs import pci_passthrough

    [validator] = pci_passthrough.register()
    try:
        validator.validate('pci_passthrough:alias', text)
        nova_ok = True
    except Exception:
        nova_ok = False
    try:
        ours = pci_request.parse_alias_request(text)
    except ValueError:
        assert not nova_ok, text
        return
    assert nova_ok, text
    assert ours == [(name.strip(), int(count)) for name, count in
                    [s.split(':') for s in text.split(',')]]


@pytest.mark.nova
@pytest.mark.parametrize('report', [False, True])
@pytest.mark.parametrize('traits', [
    [], [['OWNER_NOVA']], [['OWNER_NOVA'], ['COMPUTE_MANAGED_PCI_DEVICE']]])
def test_turning_tracking_off_agrees_with_nova(report, traits, nova_conf):
    import uuid

    from nova.compute import pci_placement_translator as nova
    from nova.compute import provider_tree

    tree = provider_tree.ProviderTree()
    root = str(uuid.uuid4())
    tree.new_root('node1', root)
    for number, names_ in enumerate(traits):
        child = tree.new_child('node1_%d' % number, root,
                               uuid=str(uuid.uuid4()))
        tree.update_traits(child, names_)
    try:
        nova.ensure_tracking_was_not_enabled_before(tree)
        nova_refuses = False
    except Exception:
        nova_refuses = True
    # Nova checks this only while report_in_placement is off.
    assert translator.tracking_disabled_after_enabled(report, traits) == (
        nova_refuses and not report)


DEVNAME_SPECS = {
    'devname': [{'devname': 'enp129s0f0'}],
    'devname with physical_network': [
        {'devname': 'enp129s0f0', 'physical_network': 'physnet1'}],
    'address with physical_network': [
        {'address': '0000:25:00.4', 'physical_network': 'physnet1'}],
    'empty devname': [{'devname': ''}],
    'devname after an address': [
        {'address': '0000:25:00.4'},
        {'devname': 'enp129s0f1', 'physical_network': 'physnet2',
         'vendor_id': '15b3'}],
    'addresses': [{'address': '0000:25:00.4'}, {'vendor_id': '10de'}],
}


@pytest.mark.nova
@pytest.mark.parametrize('name', sorted(DEVNAME_SPECS))
def test_devname_in_placement_agrees_with_nova(name, nova_conf):
    from nova.compute import pci_placement_translator as nova
    from nova.pci import whitelist

    nova_conf.set_override('report_in_placement', True, 'pci')
    text = json.dumps(DEVNAME_SPECS[name])
    try:
        nova.ensure_no_dev_spec_with_devname(
            whitelist.Whitelist([text]).specs)
        nova_refuses = False
    except Exception as exc:
        assert type(exc).__name__ == 'PlacementPciException'
        nova_refuses = True
    specs = pci_devspec.device_spec_entries(text, 'here', True)
    refused = translator.specs_with_devname(specs)
    assert bool(refused) == nova_refuses
    assert refused == [s for s in specs if s.devname]


# -- the controller's aliases, told apart by data ----------------------------

def test_only_an_alias_nova_refuses_stops_the_controller_file():
    from osc_mdev.base import errors

    from osc_mdev.features import nova_conf
    from osc_mdev.nova.pci import config as pci

    # A file named after aliases, whose device spec nova-compute refuses:
    # the controller's aliases are fine.
    good = ('[pci]\ndevice_spec = {not json\n'
            'alias = {"name": "a16", "vendor_id": "10de", '
            '"product_id": "25b6"}\n')
    settings = novaconf.parse_texts([('/etc/nova/pci-alias.conf', good)])
    config = nova_conf.pci_of(settings)
    assert list(config.aliases) == ['a16']
    assert config.alias_error is None
    [spec] = config.findings
    assert spec.stops_nova and 'device_spec' in spec.where
    # An alias Nova refuses: where it is written and why, as data.
    bad = '[pci]\nalias = {"name": "a16", "vendor_id": "10de"}\n'
    config = pci.pci_config(novaconf.parse_texts([('nova.conf', bad)]))
    assert config.aliases == {}
    assert config.alias_error.where == '[pci] alias, nova.conf:2'
    assert config.alias_error.stops_nova
    with pytest.raises(errors.Invalid,
                       match=r"controller_conf: \[pci\] alias, "
                             r"nova.conf:2: .*no vendor_id and product_id"):
        nova_conf.pci_of(novaconf.parse_texts([('nova.conf', bad)]))


def test_alias_errors_carry_where_and_why():
    with pytest.raises(pci_request.AliasError) as caught:
        pci_request.pci_aliases([('{"name": "x", "bogus": 1}', 'here:4')])
    assert caught.value.where == 'here:4'
    assert 'bogus' in caught.value.reason
    assert str(caught.value) == 'here:4: %s' % caught.value.reason
