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

"""One word per meaning: every option name of every command has one help
text and one metavar, and the options page of the docs lists them all.
"""

import argparse
import collections
import configparser
import importlib
import pathlib
import re

from osc_lib import exceptions
import pytest

from osc_mdev.v1 import flavor

ROOT = pathlib.Path(__file__).resolve().parents[2]


def commands():
    """``{'mdev provider list': Command class}`` from setup.cfg."""
    config = configparser.ConfigParser()
    config.read(ROOT / 'setup.cfg')
    found = {}
    for line in config['options.entry_points']['openstack.mdev.v1'].split(
            '\n'):
        if not line.strip():
            continue
        name, target = (part.strip() for part in line.split('='))
        module, klass = target.split(':')
        found[name.replace('_', ' ')] = getattr(
            importlib.import_module(module), klass)
    return found


def visible_options(command_class, name):
    parser = command_class(None, None).get_parser('openstack ' + name)
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        for option in action.option_strings:
            if option.startswith('--'):
                yield option, action.help, action.metavar


def test_every_option_name_has_one_help_and_one_metavar():
    helps = collections.defaultdict(set)
    metavars = collections.defaultdict(set)
    where = collections.defaultdict(list)
    for name, klass in sorted(commands().items()):
        for option, text, metavar in visible_options(klass, name):
            helps[option].add(text)
            metavars[option].add(metavar)
            where[option].append(name)
    twice = {o: sorted(where[o]) for o in helps
             if len(helps[o]) > 1 or len(metavars[o]) > 1}
    assert twice == {}


#: The spellings renamed options had for one release, with a command
#: that took them: each is refused now.
DROPPED = [
    ('mdev audit', ['--nova-conf', 'gpu1=a.conf']),
    ('mdev capacity', ['--flavor', 'f', '--nova-conf', 'a.conf']),
    ('mdev flavor configure', ['f', '--resource-class', 'VGPU', '--force']),
    ('mdev migration check', ['vm-1', '--host', 'gpu2']),
    ('mdev provider list', ['--trait', 'CUSTOM_A']),
    ('mdev capacity', ['--resource-class', 'VGPU', '--trait', 'CUSTOM_A']),
    ('mdev flavor configure', ['f', '--resource-class', 'VGPU', '--trait',
                               'CUSTOM_A']),
    ('mdev trait set', ['--trait', 'CUSTOM_A', '--all', '--export-dir', 'd']),
    ('mdev trait set', ['--from-nova-conf', 'a.conf', '--host', 'gpu1']),
    ('mdev trait unset', ['--trait', 'CUSTOM_A', '--all', '--export-dir',
                          'd']),
    ('mdev trait export', ['--output-dir', 'd']),
]


@pytest.mark.parametrize('name, args', DROPPED,
                         ids=[' '.join([n] + a) for n, a in DROPPED])
def test_dropped_spellings_are_refused(name, args):
    parser = commands()[name](None, None).get_parser('openstack ' + name)
    with pytest.raises(exceptions.CommandError,
                       match='^Unrecognized arguments: '):
        parser.parse_args(args)


def test_the_options_page_lists_every_option():
    page = (ROOT / 'doc' / 'source' / 'cli' / 'options.rst').read_text()
    listed = set(re.findall(r'``(--[a-z-]+)', page))
    names = {option for name, klass in commands().items()
             for option, _, _ in visible_options(klass, name)}
    ours = {o for o in names if o not in ('--help', '--fit-width',
                                          '--print-empty', '--noindent',
                                          '--max-width', '--sort-column',
                                          '--sort-ascending',
                                          '--sort-descending',
                                          '--quote', '--prefix',
                                          '--column', '--format')}
    assert sorted(ours - listed) == []


# -- option values, parsed by argparse -------------------------------------

def parse(name, *args):
    """The Namespace of ``openstack <name> <args>``; a CommandError for
    a value the command refuses (``common.one_line_errors``).
    """
    parser = commands()[name](None, None).get_parser('openstack ' + name)
    return parser.parse_args(list(args))


@pytest.mark.parametrize('value, expected', [
    ('c1=/etc/nova.conf', ('c1', '/etc/nova.conf')),
    ('gpu.dc=a=b', ('gpu.dc', 'a=b')),
])
def test_compute_conf_is_a_host_and_a_file(value, expected):
    parsed = parse('mdev audit', '--compute-conf', value,
                   '--compute-conf', 'c2=f')
    assert parsed.compute_conf == [expected, ('c2', 'f')]


@pytest.mark.parametrize('value', ['c1', '=f', 'c1='])
def test_compute_conf_without_a_host_or_a_file_is_refused(value):
    with pytest.raises(exceptions.CommandError,
                       match="^Argument --compute-conf: takes HOST=FILE, "
                             "not '%s'; see 'openstack help mdev audit'.$"
                             % value):
        parse('mdev audit', '--compute-conf', value)


@pytest.mark.parametrize('value, expected', [
    ('gpu3=/etc/nova/provider_config', ('gpu3', '/etc/nova/provider_config')),
    ('exports/gpu3.yaml', (None, 'exports/gpu3.yaml')),
    ('gpu3.dc2.example.net=exports', ('gpu3.dc2.example.net', 'exports')),
])
def test_provider_config_is_a_path_and_maybe_a_host(value, expected):
    assert parse('mdev config check', '--provider-config',
                 value).provider_config == [expected]


@pytest.mark.parametrize('exists', [True, False])
def test_provider_config_is_told_from_its_text_alone(tmp_path, monkeypatch,
                                                     exists):
    """Whether a file named a=b.yaml exists changes nothing: a=b.yaml
    names host a, a path holding = is written with its directory.
    """
    monkeypatch.chdir(tmp_path)
    if exists:
        (tmp_path / 'a=b.yaml').write_text('')
    for command in ('mdev config check', 'mdev audit'):
        assert parse(command, '--provider-config', 'a=b.yaml',
                     '--provider-config', './a=b.yaml',
                     '--provider-config', str(tmp_path / 'a=b.yaml')
                     ).provider_config == [
            ('a', 'b.yaml'), (None, './a=b.yaml'),
            (None, str(tmp_path / 'a=b.yaml'))]


@pytest.mark.parametrize('value', ['=x', 'gpu3='])
def test_provider_config_refuses_half_a_pair(value):
    with pytest.raises(exceptions.CommandError,
                       match="takes PATH or HOST=PATH, not '%s'" % value):
        parse('mdev config check', '--provider-config', value)


@pytest.mark.parametrize('option', ['--amount', '--count'])
@pytest.mark.parametrize('value, fragment', [
    ('0', 'must be at least 1, not 0'),
    ('-2', 'must be at least 1, not -2'),
    ('two', "invalid int value: 'two'"),
])
def test_counts_are_whole_numbers_of_at_least_one(option, value, fragment):
    with pytest.raises(exceptions.CommandError,
                       match='^Argument %s: %s;' % (option, fragment)):
        parse('mdev capacity', option, value)
    assert getattr(parse('mdev capacity', option, '3'), option[2:]) == 3


@pytest.mark.parametrize('text, result', [
    ('orphaned-allocation', ('orphaned-allocation',)),
    ('lost-trait, orphaned-allocation,lost-trait',
     ('lost-trait', 'orphaned-allocation')),
    ('over-capacity', 'has no automatic fix'),
    ('nope', "'nope' is not a check"),
    (',', 'give at least one check'),
])
def test_fix_names_checks_with_a_repair(text, result):
    if isinstance(result, tuple):
        assert parse('mdev audit', '--fix', text).fix == result
    else:
        with pytest.raises(exceptions.CommandError,
                           match='^Argument --fix: .*%s' % result):
            parse('mdev audit', '--fix', text)


@pytest.mark.parametrize('values, expected', [
    (['a16'], 'a16:1'),
    (['a16:2'], 'a16:2'),
    (['a16:2,nic'], 'a16:2,nic:1'),
    (['a16:2', 'nic:3'], 'a16:2,nic:3'),
    ([' a16 : 2 '], 'a16:2'),
])
def test_pci_alias_values(values, expected):
    args = [a for v in values for a in ('--pci-alias', v)]
    parsed = parse('mdev flavor configure', 'f', *args)
    assert flavor._pci_request(parsed.pci_alias).value == expected


@pytest.mark.parametrize('values, fragment', [
    (['a16:x'], "Argument --pci-alias: 'a16:x' is not NAME or NAME:COUNT"),
    (['a16:'], 'is not NAME or NAME:COUNT'),
    (['a:b:1'], 'is not NAME or NAME:COUNT'),
    (['a16:0'], "Argument --pci-alias: 'a16:0' asks for no device"),
    ([':2'], 'is not NAME or NAME:COUNT'),
    (['a16', 'a16:2'], '^--pci-alias a16 is given twice'),
])
def test_pci_alias_values_refused(values, fragment):
    args = [a for v in values for a in ('--pci-alias', v)]
    with pytest.raises(exceptions.CommandError, match=fragment):
        flavor._pci_request(
            parse('mdev flavor configure', 'f', *args).pci_alias)
