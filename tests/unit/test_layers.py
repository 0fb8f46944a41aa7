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

"""The layers of osc_mdev import only what their docstrings allow, the
pure modules touch no file, socket or process, nothing below the
commands knows the command line (cliff, osc-lib, option names), names
send the reader to the right module, and no function holds two jobs.

Each module is parsed with ``ast``; every ``import`` and ``from ...
import`` counts, those inside functions included.
"""

import ast
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / 'osc_mdev'

# Which osc_mdev packages each layer may import (besides itself): the
# commands, then the features, then the cores, then the I/O layers.
ALLOWED = {
    'base': {'base'},
    'nova': {'base', 'nova'},
    'host': {'base', 'nova', 'host'},
    'local': {'base', 'nova', 'host', 'local'},
    'api': {'api', 'base'},
    'cloud': {'api', 'base', 'cloud', 'nova'},
    'features': {'api', 'base', 'cloud', 'features', 'host', 'local',
                 'nova'},
    'v1': {'api', 'base', 'cloud', 'features', 'host', 'nova', 'v1',
           # OSC's entry point, for the client it builds.
           'plugin'},
}
# The layers that read nothing: every module of them is pure.
PURE_LAYERS = ('base', 'nova', 'host')
# In the cloud and the features, the modules that read or write (through
# ``api`` or ``local``); every other module there is pure.
READERS = ('reads', 'lookup', 'run', 'writes', 'provider_files',
           'nova_conf')
# What reaches files, sockets or processes: never in a pure module.
NOT_IN_DOMAIN = ('os', 'glob', 'pathlib', 'shutil', 'socket', 'subprocess',
                 'urllib', 'requests', 'keystoneauth1', 'io', 'tempfile',
                 'http', 'importlib', 'builtins')
# Pure parts of the modules above.
PURE = ('urllib.parse',)
# An option named in text.
OPTION = re.compile(r'(?<![\w-])--[a-z][a-z-]*')
# A command line a message suggests: ``openstack`` and what follows, up to
# a quote, a bracket (but for a ``%(name)s`` placeholder) or a semicolon;
# or one of another tool a generated script runs (``mdevctl``).
COMMAND_LINE = re.compile(r'openstack (?:%\(\w+\)s|[^\'"();])*'
                          r'|mdevctl [^;&\n]*')
# One option of a command line being built: ``'--trait %s'``.
COMMAND_PART = re.compile(r'--[a-z][a-z-]* %s')


def _resolve(module, node):
    """The absolute name ``from ... import`` at ``node`` names."""
    if not node.level:
        return node.module or ''
    package = module.split('.')[:-node.level]
    return '.'.join(package + ([node.module] if node.module else []))


def imports(path, package=PACKAGE):
    """Every module name the file at ``path`` (in ``package``) imports, at
    any depth (``from a import b`` gives ``a.b``).
    """
    module = '.'.join(
        path.relative_to(package.parent).with_suffix('').parts)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, node)
            for alias in node.names:
                yield '%s.%s' % (base, alias.name) if base else alias.name


def opens(path):
    """The lines of ``path`` that call ``open`` (or ``builtins.open``,
    ``io.open``, ``os.open``...).
    """
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == 'open' or \
                isinstance(func, ast.Attribute) and func.attr == 'open':
            yield node.lineno


def named_options(path):
    """``(line, option)`` of each command-line option a string literal of
    ``path`` names, other than in a command line it suggests (the
    operator's next command) or builds. Docstrings are not messages and
    are left out.
    """
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)):
            doc = node.body[0] if node.body else None
            if isinstance(doc, ast.Expr) and isinstance(doc.value,
                                                        ast.Constant):
                docstrings.add(id(doc.value))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(
                node.value, str) or id(node) in docstrings:
            continue
        if COMMAND_PART.fullmatch(node.value):
            continue
        for option in OPTION.findall(COMMAND_LINE.sub('', node.value)):
            yield node.lineno, option


def modules(layer):
    return sorted((PACKAGE / layer).rglob('*.py'))


def pure_modules():
    """The modules that touch no file, socket or process: every module of
    the pure layers, and those of the cloud and the features that are
    not readers.
    """
    found = [path for layer in PURE_LAYERS for path in modules(layer)]
    for layer in ('cloud', 'features'):
        found += [path for path in modules(layer)
                  if path.stem not in READERS]
    return found


def banned(name):
    if any(name == pure or name.startswith(pure + '.') for pure in PURE):
        return False
    return any(name == top or name.startswith(top + '.')
               for top in NOT_IN_DOMAIN)


@pytest.mark.parametrize('layer', sorted(ALLOWED))
def test_layer_imports_only_what_it_may(layer):
    assert modules(layer)
    wrong = []
    for path in modules(layer):
        for name in imports(path):
            parts = name.split('.')
            if parts[0] == 'osc_mdev' and len(parts) > 1 and \
                    parts[1] not in ALLOWED[layer]:
                wrong.append('%s imports %s' % (path.name, name))
            if path.stem not in READERS and layer in ('cloud', 'features') \
                    and parts[:2] in (['osc_mdev', 'api'],
                                      ['osc_mdev', 'local']):
                wrong.append('%s reads, it is not one of %s' % (
                    path, ', '.join(READERS)))
    assert wrong == []


def test_pure_modules_import_nothing_that_touches_files():
    wrong = ['%s imports %s' % (path.name, name)
             for path in pure_modules() for name in imports(path)
             if banned(name)]
    assert wrong == []


def test_pure_modules_open_no_file():
    wrong = ['%s:%d calls open()' % (path.name, line)
             for path in pure_modules() for line in opens(path)]
    assert wrong == []


def test_pure_modules_name_no_option():
    """The pure modules raise errors with data and word their messages
    without the commands' options: the command layer words them with the
    names of the options (v1/errors.py).
    """
    wrong = ['%s:%d names %s' % (path.name, line, option)
             for path in pure_modules()
             for line, option in named_options(path)]
    assert wrong == []


@pytest.mark.parametrize('source, found', [
    ("raise ValueError('--fix needs a check')\n", [(1, '--fix')]),
    ("x = ('give the file with '\n     '--compute-conf HOST=FILE')\n",
     [(1, '--compute-conf')]),
    ("x = 'see: openstack mdev audit --fix lost-trait --host %s'\n", []),
    ("x = 'openstack server migrate --host %(host)s --wait (%s)'\n", []),
    ("x = \"run 'openstack mdev trait set --trait T D' (or --all)\"\n",
     [(1, '--all')]),
    ("x = '--trait %s'\ny = '--trait'\n", [(2, '--trait')]),
    ('def f():\n    """Parses --fix."""\n    return "a --b"\n',
     [(3, '--b')]),
    ("x = 'in_tree--x, 2--3, ---'\n", []),
])
def test_named_options_are_seen(tmp_path, source, found):
    path = tmp_path / 'example.py'
    path.write_text(source)
    assert list(named_options(path)) == found


@pytest.mark.parametrize('source, found', [
    ('import os\n', ['os']),
    ('import os.path as p\n', ['os.path']),
    ('from os import path\n', ['os.path']),
    ('def f():\n    import glob\n', ['glob']),
    ('class A:\n    def f(self):\n        from pathlib import Path\n',
     ['pathlib.Path']),
    ('import urllib.request\n', ['urllib.request']),
    ('from urllib import request\n', ['urllib.request']),
    ('from keystoneauth1 import session\n', ['keystoneauth1.session']),
    ('import subprocess, socket\n', ['subprocess', 'socket']),
    ('import urllib.parse\nimport re\nfrom osc_mdev.nova import names\n',
     []),
])
def test_banned_imports_are_seen(tmp_path, source, found):
    path = tmp_path / 'osc_mdev' / 'nova' / 'example.py'
    path.parent.mkdir(parents=True)
    path.write_text(source)
    assert [n for n in imports(path, tmp_path / 'osc_mdev')
            if banned(n)] == found


@pytest.mark.parametrize('source, layer, found', [
    ('from osc_mdev.api import http\n', 'nova', ['osc_mdev.api.http']),
    ('from osc_mdev import local\n', 'nova', ['osc_mdev.local']),
    ('from .. import features\n', 'cloud', ['osc_mdev.features']),
    ('from . import names\n', 'nova', []),
    ('from osc_mdev.nova.conf import settings\n', 'local', []),
])
def test_other_layers_are_seen(tmp_path, source, layer, found):
    path = tmp_path / 'osc_mdev' / layer / 'example.py'
    path.parent.mkdir(parents=True)
    path.write_text(source)
    assert [n for n in imports(path, tmp_path / 'osc_mdev')
            if n.split('.')[0] == 'osc_mdev'
            and n.split('.')[1] not in ALLOWED[layer]] == found


@pytest.mark.parametrize('source, lines', [
    ('def f(p):\n    with open(p) as f:\n        return f.read()\n', [2]),
    ('import io\nio.open("x")\n', [2]),
    ('x = "open(" \n', []),
])
def test_open_calls_are_seen(tmp_path, source, lines):
    path = tmp_path / 'example.py'
    path.write_text(source)
    assert list(opens(path)) == lines


def test_every_package_says_what_lives_there():
    for init in sorted(PACKAGE.rglob('*/__init__.py')) + [
            PACKAGE / '__init__.py']:
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc.split()) > 8, init


# -- a library under the command line ---------------------------------------

# What only the command line may import.
COMMAND_LINE_LIBRARIES = ('cliff', 'osc_lib', 'openstackclient')
# Options of Nova's services (oslo.config's), which a message may name.
NOVA_SERVICE_OPTIONS = ('--config-dir', '--config-file')


def below_the_commands():
    """Every module of osc_mdev but the commands (``v1``) and the
    plugin's entry point, which osc's shell loads.
    """
    return sorted(path for path in PACKAGE.rglob('*.py')
                  if path.relative_to(PACKAGE).parts[0] != 'v1'
                  and path.name != 'plugin.py')


def test_nothing_below_the_commands_imports_the_command_line():
    wrong = ['%s imports %s' % (path.relative_to(PACKAGE), name)
             for path in below_the_commands() for name in imports(path)
             if name.split('.')[0] in COMMAND_LINE_LIBRARIES]
    assert wrong == []


def test_nothing_below_the_commands_names_an_option():
    """Below ``v1`` a sentence names the caller's inputs by parameter
    (``errors.given``); ``v1/errors.py`` words them as options.
    """
    wrong = ['%s:%d names %s' % (path.relative_to(PACKAGE), line, option)
             for path in below_the_commands()
             for line, option in named_options(path)
             if option not in NOVA_SERVICE_OPTIONS]
    assert wrong == []


def _aliases(path):
    """``(alias, module)`` of each ``from osc_mdev... import module as
    alias`` of ``path``.
    """
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split('.')[0] == 'osc_mdev':
            for alias in node.names:
                if alias.asname:
                    yield alias.asname, '%s.%s' % (node.module, alias.name)


def test_no_import_alias_takes_another_modules_name():
    """``from osc_mdev.x import a as b`` where ``b`` is the name of
    another module or package of osc_mdev misleads the reader; the name
    of the imported module's own package is no other
    (``from osc_mdev.features.capacity import reads as capacity``).
    """
    names = {path.stem for path in PACKAGE.rglob('*.py')} | {
        path.name for path in PACKAGE.rglob('*') if path.is_dir()}
    wrong = ['%s: %s as %s' % (path.relative_to(PACKAGE), module, alias)
             for path in sorted(PACKAGE.rglob('*.py'))
             for alias, module in _aliases(path)
             if alias in names and alias not in module.split('.')]
    assert wrong == []


def test_no_two_modules_differ_by_an_underscore():
    """``novaconf`` beside ``nova_conf`` sends the reader to the wrong
    file.
    """
    seen = {}
    for path in sorted(PACKAGE.rglob('*.py')):
        seen.setdefault(path.stem.replace('_', ''), set()).add(path.stem)
    assert [sorted(stems) for stems in seen.values() if len(stems) > 1] == []


# A function longer than this holds two jobs.
LONGEST_FUNCTION = 80


def test_no_function_holds_two_jobs():
    wrong = []
    for path in sorted(PACKAGE.rglob('*.py')):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > LONGEST_FUNCTION:
                    wrong.append('%s: %s has %d lines' % (
                        path.relative_to(PACKAGE), node.name, length))
    assert wrong == []
