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

"""Provider config files: osc-mdev's reading of them against Nova's own.

Each file below is judged by ``osc_mdev.nova.compute.provider_config`` and, in
the tests marked ``nova``, by Nova's ``get_provider_configs`` on the same
bytes: Nova refuses a file exactly when osc-mdev finds an error that
stops nova-compute, and keeps the same providers and traits otherwise.
The merge rules are run through ``ResourceTracker._merge_provider_configs``
on a real ``ProviderTree``.
"""

import functools
import types

import pytest

from osc_mdev.features.trait import export_files as write
from osc_mdev.nova.compute import provider_config as pc
from osc_mdev.nova.compute import resource_tracker as merge

HEAD = "meta:\n  schema_version: '1.0'\n"

# (id, text, a fragment of osc-mdev's finding or None for a good file)
FILES = [
    ('good-name', HEAD + 'providers:\n- identification: {name: n1_pci_0000_'
     '84_00_0}\n  traits: {additional: [CUSTOM_NVIDIA_35, CUSTOM_A]}\n',
     None),
    ('good-uuid', HEAD + "providers:\n- identification: {uuid: "
     "'6a8f7a4e-1c1a-4c63-9a53-4d2d3b2c9d10'}\n  traits: {additional: "
     "[CUSTOM_A]}\n", None),
    ('good-compute-node', HEAD + "providers:\n- identification: {uuid: "
     "'$COMPUTE_NODE'}\n  traits: {additional: [CUSTOM_A]}\n", None),
    ('good-no-providers', HEAD, None),
    ('good-empty-list', HEAD + 'providers: []\n', None),
    ('good-inventory', HEAD + 'providers:\n- identification: {name: x}\n'
     '  inventories:\n    additional:\n    - CUSTOM_R: {total: 4, reserved: '
     '0, min_unit: 1, max_unit: 4, step_size: 1, allocation_ratio: 1.5}\n',
     None),
    ('good-float-total', HEAD + 'providers:\n- identification: {name: x}\n'
     '  inventories: {additional: [{CUSTOM_R: {total: 2.0}}]}\n', None),
    ('good-extra-keys', HEAD + 'providers:\n- identification: {name: x}\n'
     '  traits: {additional: [CUSTOM_A], removed: [CUSTOM_B]}\n'
     '  note: kept\nowner: ops\n', None),
    ('good-repeated-trait', HEAD + 'providers:\n- identification: {name: '
     'x}\n  traits: {additional: [CUSTOM_A, CUSTOM_A]}\n', None),
    ('good-ignored-twice', HEAD + 'providers:\n- identification: {name: x}\n'
     '  traits: {additional: [CUSTOM_A]}\n- identification: {name: x}\n',
     'has no additional traits or inventories'),
    ('good-minor-version', "meta: {schema_version: '1.7'}\n",
     'may ignore fields'),
    ('good-unquoted-custom', HEAD + 'providers:\n- identification: {name: '
     'x}\n  traits: {additional: [CUSTOM_]}\n', 'Placement refuses'),
    ('good-empty-inventory-item', HEAD + 'providers:\n- identification: '
     "{name: x}\n  traits: {additional: [CUSTOM_A]}\n  inventories: "
     "{additional: ['']}\n", None),
    ('bad-version-inner-space', "meta: {schema_version: '1. 0'}\n",
     'not written as'),
    ('bad-version-letters', "meta: {schema_version: '1.0a'}\n",
     'No schema version'),
    ('bad-tab', HEAD + 'providers:\n\t- x\n', 'Not YAML'),
    ('bad-number-trait', HEAD + 'providers:\n- identification: {name: x}\n'
     '  traits: {additional: [42]}\n', 'not a trait name'),
    ('bad-null-name', HEAD + 'providers:\n- identification: {name: null}\n'
     '  traits: {additional: [CUSTOM_A]}\n', '1 to 200'),
    ('bad-not-yaml', HEAD + 'providers: [\n', 'Not YAML'),
    ('bad-two-documents', HEAD + '---\n' + HEAD, 'Not YAML'),
    ('bad-empty', '', 'No schema version'),
    ('bad-list', '- a\n', 'No schema version'),
    ('bad-no-meta', 'providers: []\n', 'No schema version'),
    ('bad-version-number', 'meta: {schema_version: 1.0}\n',
     'No schema version'),
    ('bad-version-text', "meta: {schema_version: 'one'}\n",
     'No schema version'),
    ('bad-version-three-parts', "meta: {schema_version: '1.0.1'}\n",
     'No schema version'),
    ('bad-major', "meta: {schema_version: '2.0'}\n", 'major version 1'),
    ('bad-version-pattern', "meta: {schema_version: '1.00'}\n",
     'not written as'),
    ('bad-version-space', "meta: {schema_version: ' 1.0'}\n",
     'not written as'),
    ('bad-source-file', HEAD + '__source_file: x.yaml\n', '__source_file'),
    ('bad-providers-mapping', HEAD + 'providers: {name: x}\n',
     'must be a list'),
    ('bad-providers-null', HEAD + 'providers:\n', 'must be a list'),
    ('bad-provider-text', HEAD + 'providers: [x]\n', 'must be a mapping'),
    ('bad-no-identification', HEAD + 'providers:\n- traits: {additional: '
     '[CUSTOM_A]}\n', 'no identification'),
    ('bad-name-and-uuid', HEAD + "providers:\n- identification: {name: x, "
     "uuid: '$COMPUTE_NODE'}\n  traits: {additional: [CUSTOM_A]}\n",
     'exactly one of name and uuid'),
    ('bad-empty-identification', HEAD + 'providers:\n- identification: {}\n'
     '  traits: {additional: [CUSTOM_A]}\n', 'exactly one of name'),
    ('bad-other-identification', HEAD + 'providers:\n- identification: '
     '{address: "0000:84:00.0"}\n  traits: {additional: [CUSTOM_A]}\n',
     'knows name and uuid only'),
    ('bad-empty-name', HEAD + "providers:\n- identification: {name: ''}\n"
     "  traits: {additional: [CUSTOM_A]}\n", '1 to 200'),
    ('bad-long-name', HEAD + 'providers:\n- identification: {name: %s}\n'
     '  traits: {additional: [CUSTOM_A]}\n' % ('n' * 201), '1 to 200'),
    ('bad-number-name', HEAD + 'providers:\n- identification: {name: 42}\n'
     '  traits: {additional: [CUSTOM_A]}\n', '1 to 200'),
    ('bad-uuid', HEAD + 'providers:\n- identification: {uuid: compute1}\n'
     '  traits: {additional: [CUSTOM_A]}\n', 'neither a UUID'),
    ('bad-compute-node-name', HEAD + "providers:\n- identification: {uuid: "
     "'$COMPUTE'}\n  traits: {additional: [CUSTOM_A]}\n", 'neither a UUID'),
    ('bad-lower-case-trait', HEAD + 'providers:\n- identification: {name: '
     'x}\n  traits: {additional: [custom_a]}\n', 'not a trait name'),
    ('bad-dash-trait', HEAD + 'providers:\n- identification: {name: x}\n'
     '  traits: {additional: [CUSTOM_NVIDIA-35]}\n', 'not a trait name'),
    ('bad-standard-trait', HEAD + 'providers:\n- identification: {name: x}\n'
     '  traits: {additional: [HW_GPU_API_VULKAN]}\n', 'Only custom traits'),
    ('bad-owner-trait', HEAD + 'providers:\n- identification: {name: x}\n'
     '  traits: {additional: [CUSTOM_A, OWNER_NOVA]}\n',
     'Only custom traits'),
    ('bad-traits-list', HEAD + 'providers:\n- identification: {name: x}\n'
     '  traits: [CUSTOM_A]\n', 'traits must be a mapping'),
    ('bad-traits-text', HEAD + 'providers:\n- identification: {name: x}\n'
     '  traits: {additional: CUSTOM_A}\n', 'must be a list of traits'),
    ('bad-traits-null', HEAD + 'providers:\n- identification: {name: x}\n'
     '  traits:\n', 'traits must be a mapping'),
    ('bad-standard-class', HEAD + 'providers:\n- identification: {name: x}\n'
     '  inventories: {additional: [{VGPU: {total: 1}}]}\n',
     'custom resource classes'),
    ('bad-no-total', HEAD + 'providers:\n- identification: {name: x}\n'
     '  inventories: {additional: [{CUSTOM_R: {reserved: 1}}]}\n',
     'needs a total'),
    ('bad-bool-total', HEAD + 'providers:\n- identification: {name: x}\n'
     '  inventories: {additional: [{CUSTOM_R: {total: true}}]}\n',
     'total must be an integer'),
    ('bad-inventory-field', HEAD + 'providers:\n- identification: {name: x}\n'
     '  inventories: {additional: [{CUSTOM_R: {total: 1, used: 0}}]}\n',
     'no field used'),
    ('bad-ratio-text', HEAD + 'providers:\n- identification: {name: x}\n'
     '  inventories: {additional: [{CUSTOM_R: {total: 1, allocation_ratio: '
     'high}}]}\n', 'must be a number'),
    ('bad-inventory-text', HEAD + 'providers:\n- identification: {name: x}\n'
     '  inventories: {additional: [CUSTOM_R]}\n', 'not a mapping'),
    ('bad-twice', HEAD + 'providers:\n- identification: {name: x}\n'
     '  traits: {additional: [CUSTOM_A]}\n- identification: {name: x}\n'
     '  traits: {additional: [CUSTOM_B]}\n', 'defined twice'),
    ('bad-compute-node-twice', HEAD + "providers:\n- identification: "
     "{uuid: '$COMPUTE_NODE'}\n  traits: {additional: [CUSTOM_A]}\n"
     "- identification: {uuid: '$COMPUTE_NODE'}\n  traits: {additional: "
     "[CUSTOM_B]}\n", 'defined twice'),
]


def ours(text, name='a.yaml'):
    config = pc.parse(text, name)
    return config, pc.check_files([config])


def nova_reads(directory):
    """Nova's verdict on a directory: ``{uuid_or_name: traits}`` or the
    exception it raises.
    """
    from nova.compute import provider_config

    try:
        configs = provider_config.get_provider_configs(str(directory))
    except Exception as exc:  # Nova refuses (or fails on) the files
        return exc
    return {key: list(value.get('traits', {}).get('additional', []))
            for key, value in configs.items()}


def kept(configs):
    return {e.value: list(e.traits) for c in configs for e in c.entries
            if e.kept and not c.refused}


@pytest.mark.parametrize('name, text, fragment', FILES,
                         ids=[f[0] for f in FILES])
def test_each_file_gets_its_row(name, text, fragment):
    config, found = ours(text)
    if fragment is None:
        assert found == []
    else:
        assert [f for f in found if fragment in f.message], found
    assert bool(pc.refused_by_nova(found)) == name.startswith('bad-')
    for finding in found:
        assert finding.where.startswith('a.yaml')


@pytest.mark.nova
@pytest.mark.parametrize('name, text, fragment', FILES,
                         ids=[f[0] for f in FILES])
def test_nova_refuses_what_osc_mdev_refuses(tmp_path, name, text,
                                            fragment):
    directory = tmp_path / 'provider_config'
    directory.mkdir()
    (directory / 'a.yaml').write_text(text)
    verdict = nova_reads(directory)
    config, found = ours(text)
    assert isinstance(verdict, Exception) == bool(pc.refused_by_nova(found))
    if not isinstance(verdict, Exception):
        assert verdict == kept([config])


@pytest.mark.nova
def test_a_provider_in_two_files(tmp_path):
    one = HEAD + ('providers:\n- identification: {name: x}\n'
                  '  traits: {additional: [CUSTOM_A]}\n')
    two = HEAD + ('providers:\n- identification: {name: y}\n'
                  '  traits: {additional: [CUSTOM_B]}\n'
                  '- identification: {name: x}\n'
                  '  traits: {additional: [CUSTOM_C]}\n')
    directory = tmp_path / 'provider_config'
    directory.mkdir()
    (directory / 'a.yaml').write_text(one)
    (directory / 'b.yaml').write_text(two)
    assert 'multiple definitions' in str(nova_reads(directory))
    configs = [pc.parse(one, 'a.yaml'), pc.parse(two, 'b.yaml')]
    found = pc.check_files(configs)
    assert [(f.severity, f.where) for f in found] == [('error', 'b.yaml:6')]
    assert 'a.yaml:4' in found[0].message
    # A file on its own is fine.
    (directory / 'a.yaml').unlink()
    assert nova_reads(directory) == {'y': ['CUSTOM_B'], 'x': ['CUSTOM_C']}
    assert pc.check_files(configs[1:]) == []


@pytest.mark.nova
def test_rendered_files_are_read_by_nova_as_written(tmp_path):
    providers = {
        'gpu3.dc2.example.net_pci_0000_84_00_0': ['CUSTOM_NVIDIA_35'],
        'gpu3.dc2.example.net_pci_0000_85_00_0': ['CUSTOM_NVIDIA_36',
                                                  'CUSTOM_RACK_7'],
        'gpu3.dc2.example.net_mtty_mtty': ['CUSTOM_MTTY_1'],
        'gpu3.dc2.example.net_pci_0000_86_00_0': [],
        # YAML would read these as other types unless quoted.
        'true': ['CUSTOM_A'], '0123': ['CUSTOM_B'], 'null': ['CUSTOM_C'],
    }
    text = write.render('gpu3.dc2.example.net', providers)
    directory = tmp_path / 'provider_config'
    directory.mkdir()
    (directory / write.file_name('gpu3.dc2.example.net')).write_text(text)
    assert nova_reads(directory) == {n: t for n, t in providers.items() if t}
    assert pc.parse(text, 'x.yaml').findings == []


@pytest.mark.parametrize('host', [
    'gpu3\nproviders: []', 'gpu3\r\nmeta: {schema_version: "1.0"}',
    'gpu3\x1b[2J'])
def test_a_host_name_with_a_line_break_is_written_nowhere(host):
    """The host's name is in the file's first comment: a line break in it
    would make the rest of the name YAML that nova-compute reads.
    """
    with pytest.raises(ValueError, match='control character'):
        write.file_name(host)
    with pytest.raises(ValueError, match='control character'):
        write.render(host, {host + '_pci_0000_84_00_0': ['CUSTOM_A']})


def test_render_refuses_what_nova_would():
    with pytest.raises(ValueError, match='refused by nova-compute'):
        write.render('h', {'h_pci_0000_84_00_0': ['HW_GPU_API_VULKAN']})
    with pytest.raises(ValueError, match='refused'):
        write.render('h', {'x' * 201: ['CUSTOM_A']})


@pytest.mark.parametrize('traits, only, prefix, kept_traits', [
    (('OWNER_NOVA', 'CUSTOM_NVIDIA_35', 'CUSTOM_RACK_1', 'HW_GPU_X'), False,
     'CUSTOM_', ['CUSTOM_NVIDIA_35', 'CUSTOM_RACK_1']),
    (('OWNER_NOVA', 'CUSTOM_NVIDIA_35', 'CUSTOM_RACK_1'), True, 'CUSTOM_',
     ['CUSTOM_NVIDIA_35']),
    (('CUSTOM_VGPU_NVIDIA_35', 'CUSTOM_NVIDIA_36', 'CUSTOM_MLX5_CORE'), True,
     'CUSTOM_VGPU_', ['CUSTOM_VGPU_NVIDIA_35']),
    (('CUSTOM_MLX5_CORE', 'CUSTOM_MTTY_1', 'CUSTOM_I915_GVTG_V5_4',
      'CUSTOM_GPU'), True, 'CUSTOM_',
     ['CUSTOM_I915_GVTG_V5_4', 'CUSTOM_MLX5_CORE', 'CUSTOM_MTTY_1']),
])
def test_exported_traits(traits, only, prefix, kept_traits):
    assert write.exported_traits(traits, only, prefix) == kept_traits


@pytest.mark.parametrize('host', ['', 'a/b', '.hidden', 'x\0y'])
def test_file_name_refuses_what_cannot_be_a_file(host):
    with pytest.raises(ValueError):
        write.file_name(host)


def test_files_nova_does_not_read():
    found = pc.ignored_file_findings([
        'd/gpu1.yml', 'd/.gpu2.yaml', 'd/README', 'd/GPU3.YAML'])
    assert [f.where for f in found] == ['d/gpu1.yml', 'd/.gpu2.yaml',
                                        'd/GPU3.YAML']


# -- The merge, against ResourceTracker._merge_provider_configs --------------

ROOT = '0d1f6e4e-92c5-4b38-8d2b-0d6a2c1f3a01'
GPU = '5c2b9f0e-7c55-4e3e-9a3a-2a5f1d0b7c02'
PCI = '8e4c6a1d-3b2f-4f6e-8d9c-7a1b2c3d4e03'
NODE = 'gpu3.dc2.example.net'
TREE = [
    merge.TreeProvider(ROOT, NODE, 'root', ('COMPUTE_NODE', 'OWNER_NOVA')),
    merge.TreeProvider(GPU, NODE + '_pci_0000_84_00_0', 'mdev',
                       ('CUSTOM_NVIDIA_35', 'OWNER_NOVA')),
    merge.TreeProvider(PCI, NODE + '_0000:81:00.0', 'pci',
                       ('COMPUTE_MANAGED_PCI_DEVICE', 'CUSTOM_GPU_L40S',
                        'OWNER_NOVA')),
]


def nova_merge(text, tree=TREE):
    """Nova's merge of one file into a ProviderTree like ``tree``:
    ``({provider name: traits after}, ValueError or None, warnings)``.
    """
    import logging
    import os
    import tempfile

    from nova.compute import provider_config
    from nova.compute import provider_tree
    from nova.compute import resource_tracker

    with tempfile.TemporaryDirectory() as directory:
        with open(os.path.join(directory, 'a.yaml'), 'w') as handle:
            handle.write(text)
        configs = provider_config.get_provider_configs(directory)
    ptree = provider_tree.ProviderTree()
    for p in tree:
        if p.kind == 'root':
            ptree.new_root(p.name, p.uuid)
        else:
            ptree.new_child(p.name, ROOT, uuid=p.uuid)
        ptree.update_traits(p.name, p.traits)
    tracker = types.SimpleNamespace(absent_providers=set())
    tracker._get_providers_to_update = functools.partial(
        resource_tracker.ResourceTracker._get_providers_to_update, tracker)
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger('nova.compute.resource_tracker')
    logger.addHandler(handler)
    try:
        resource_tracker.ResourceTracker._merge_provider_configs(
            tracker, configs, ptree)
        failure = None
    except ValueError as exc:
        failure = exc
    finally:
        logger.removeHandler(handler)
    after = {p.name: sorted(ptree.data(p.uuid).traits) for p in tree}
    return after, failure, [r.getMessage() for r in records
                            if r.levelname == 'WARNING']


def merge_ours(text, tree=TREE):
    config = pc.parse(text, 'a.yaml')
    assert not config.refused
    return merge.merge_findings(config.entries, tree, NODE)


@pytest.mark.nova
def test_merge_adds_traits_a_device_already_carries():
    """The traits a device carries now are what trait export writes; Nova's
    check of traits 'owned by the virt driver' leaves the provider's own
    custom traits out, so they never trip it.
    """
    text = HEAD + ('providers:\n- identification: {name: %s_pci_0000_84_00_'
                   '0}\n  traits: {additional: [CUSTOM_NVIDIA_35, '
                   'CUSTOM_RACK_7]}\n' % NODE)
    after, failure, warnings = nova_merge(text)
    assert failure is None and warnings == []
    assert after[NODE + '_pci_0000_84_00_0'] == [
        'CUSTOM_NVIDIA_35', 'CUSTOM_RACK_7', 'OWNER_NOVA']
    assert merge_ours(text) == []


@pytest.mark.nova
def test_merge_ignores_providers_the_node_lacks():
    text = HEAD + ('providers:\n- identification: {name: %s_pci_0000_99_00_'
                   '0}\n  traits: {additional: [CUSTOM_A]}\n'
                   '- identification: {name: other_pci_0000_84_00_0}\n'
                   '  traits: {additional: [CUSTOM_A]}\n' % NODE)
    after, failure, warnings = nova_merge(text)
    assert failure is None
    assert len(warnings) == 2 and all('will be ignored' in w
                                      for w in warnings)
    assert after == {p.name: sorted(p.traits) for p in TREE}
    found = merge_ours(text)
    assert [(f.severity, f.where) for f in found] == [
        ('warning', 'a.yaml:4'), ('warning', 'a.yaml:6')]
    assert 'another compute node' not in found[0].message
    assert 'another compute node' in found[1].message


def test_another_hosts_file_is_one_finding():
    text = HEAD + ('providers:\n- identification: {name: other_pci_0000_84_'
                   '00_0}\n  traits: {additional: [CUSTOM_A]}\n'
                   '- identification: {name: other_pci_0000_85_00_0}\n'
                   '  traits: {additional: [CUSTOM_A]}\n')
    found = merge_ours(text)
    assert [(f.severity, f.where) for f in found] == [('warning', 'a.yaml')]
    assert 'None of the 2 providers' in found[0].message


@pytest.mark.nova
def test_merge_fails_on_one_provider_named_twice():
    text = HEAD + ("providers:\n- identification: {name: %s_pci_0000_84_00_"
                   "0}\n  traits: {additional: [CUSTOM_A]}\n"
                   "- identification: {uuid: '%s'}\n"
                   "  traits: {additional: [CUSTOM_B]}\n" % (NODE, GPU))
    _, failure, _ = nova_merge(text)
    assert 'same provider is specified using both name' in str(failure)
    found = merge_ours(text)
    assert [(f.severity, f.where) for f in found] == [('error', 'a.yaml:6')]


@pytest.mark.nova
def test_merge_of_compute_node_reaches_the_root_only():
    text = HEAD + ("providers:\n- identification: {uuid: '$COMPUTE_NODE'}\n"
                   "  traits: {additional: [CUSTOM_RACK_7]}\n")
    after, failure, _ = nova_merge(text)
    assert failure is None
    assert after[NODE] == ['COMPUTE_NODE', 'CUSTOM_RACK_7', 'OWNER_NOVA']
    assert after[NODE + '_pci_0000_84_00_0'] == [
        'CUSTOM_NVIDIA_35', 'OWNER_NOVA']
    config = pc.parse(text, 'a.yaml')
    reached, absent = merge.merge_targets(config.entries, TREE)
    assert [p.uuid for _, p in reached] == [ROOT] and absent == []


@pytest.mark.nova
def test_compute_node_as_a_name_is_the_compute_node_too(tmp_path):
    """Nova keys entries by value (``uuid_or_name``): ``name:
    $COMPUTE_NODE`` reaches the roots as ``uuid: $COMPUTE_NODE`` does, and
    the two are one provider defined twice.
    """
    text = HEAD + ("providers:\n- identification: {name: '$COMPUTE_NODE'}\n"
                   "  traits: {additional: [CUSTOM_RACK_7]}\n")
    after, failure, _ = nova_merge(text)
    assert failure is None and 'CUSTOM_RACK_7' in after[NODE]
    config = pc.parse(text, 'a.yaml')
    reached, _ = merge.merge_targets(config.entries, TREE)
    assert [p.uuid for _, p in reached] == [ROOT]
    both = text + ("- identification: {uuid: '$COMPUTE_NODE'}\n"
                   "  traits: {additional: [CUSTOM_RACK_8]}\n")
    _, found = ours(both)
    assert [f.where for f in pc.refused_by_nova(found)] == ['a.yaml:6']
    directory = tmp_path / 'provider_config'
    directory.mkdir()
    (directory / 'a.yaml').write_text(both)
    assert 'multiple definitions' in str(nova_reads(directory))


@pytest.mark.nova
def test_merge_adds_file_traits_to_a_pci_device_over_its_device_spec():
    """Nova's PCI placement translator sets a PCI device's traits from
    [pci] device_spec, then the merge adds the file's: a file would keep a
    trait device_spec no longer gives. osc-mdev warns.
    """
    text = HEAD + ('providers:\n- identification: {name: "%s_0000:81:00.0"}'
                   '\n  traits: {additional: [CUSTOM_POOL_A]}\n' % NODE)
    after, failure, _ = nova_merge(text)
    assert failure is None
    assert 'CUSTOM_POOL_A' in after[NODE + '_0000:81:00.0']
    found = merge_ours(text)
    assert [(f.severity, 'device_spec' in f.message) for f in found] == [
        ('warning', True)]


def test_devices_whose_traits_no_file_keeps():
    text = HEAD + ('providers:\n- identification: {name: %s_pci_0000_84_00_'
                   '0}\n  traits: {additional: [CUSTOM_RACK_7]}\n' % NODE)
    config = pc.parse(text, 'a.yaml')
    found = merge.uncovered_findings(config.entries, TREE, NODE)
    assert len(found) == 1 and 'CUSTOM_NVIDIA_35' in found[0].message
    # The PCI device's traits come from its device spec: not reported.
    assert 'CUSTOM_GPU_L40S' not in found[0].message
    assert merge.uncovered_findings([], TREE[:1], NODE) == []
    # Named twice (Nova fails on it, merge_findings says so): the traits
    # of both entries count.
    both = HEAD + ("providers:\n- identification: {name: %s_pci_0000_84_00_"
                   "0}\n  traits: {additional: [CUSTOM_NVIDIA_35]}\n"
                   "- identification: {uuid: '%s'}\n"
                   "  traits: {additional: [CUSTOM_B]}\n" % (NODE, GPU))
    config = pc.parse(both, 'a.yaml')
    assert merge.uncovered_findings(config.entries, TREE, NODE) == []


def test_what_nova_refuses_is_data_not_words():
    # Worded like a refusal, but no rule of Nova's found it.
    worded = pc.Finding(pc.ERROR, 'a.yaml:1',
                        'nova-compute refuses to start with this file.')
    assert pc.refused_by_nova([worded]) == []
    config = pc.parse(HEAD + 'providers: none\n', 'a.yaml')
    assert config.findings and config.refused
    assert pc.refused_by_nova(config.findings) == config.findings
