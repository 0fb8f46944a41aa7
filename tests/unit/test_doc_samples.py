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

r"""The documentation shows recorded samples only, and every command.

tests/e2e/test_doc_samples.py proves the samples are what the commands
print; these tests prove the pages and the README show those files and
no other output, and that every command has its reference page.

A literal block of a page that is not an included sample is one of two
kinds (doc/source/contributor/index.rst):

- commands: a ``::`` block whose every line is a command at a prompt
  (``$`` or ``#``) or continues one (after a line ending in ``\``, or
  indented under it); no line of output;
- a file: ``.. code-block:: LANG`` with a ``:caption:`` naming the file,
  LANG one of FILE_LANGUAGES; it must read as that language and hold no
  prompt and no table.
"""

import configparser
import pathlib
import re
import subprocess

import pytest
import yaml

from tests.unit import test_options
from tools import samples

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / 'doc' / 'source'
INCLUDE = re.compile(r'^\.\. literalinclude:: /samples/([a-z0-9-]+)\.txt',
                     re.M)


def pages():
    return sorted(DOC.rglob('*.rst'))


def included():
    return {name: page for page in pages()
            for name in INCLUDE.findall(page.read_text())}


def test_every_included_sample_exists():
    missing = {name: str(page.relative_to(ROOT))
               for name, page in included().items()
               if not (samples.SAMPLES / ('%s.txt' % name)).exists()}
    assert missing == {}


def test_every_sample_is_shown_somewhere():
    readme = {name for name, _, _ in
              samples.readme_blocks(samples.README.read_text())}
    shown = set(included()) | readme
    files = {p.stem for p in samples.SAMPLES.glob('*.txt')}
    assert sorted(files - shown) == []


def test_the_readme_copies_are_the_samples():
    text = samples.README.read_text()
    blocks = samples.readme_blocks(text)
    assert blocks
    for name, start, end in blocks:
        path = samples.SAMPLES / ('%s.txt' % name)
        assert path.exists(), name
        assert samples.readme_copy(text, start, end) == path.read_text(), (
            'README.rst shows another %s than %s: run tox -e demo'
            % (name, path.relative_to(ROOT)))


def test_the_readme_is_a_start_page():
    lines = samples.README.read_text().splitlines()
    assert len(lines) <= 400
    text = '\n'.join(lines).lower()
    for phrase in ('issue', 'target'):
        assert phrase not in text


def test_the_readme_test_command_is_what_ci_runs():
    readme = samples.README.read_text()
    assert '\n    $ tox\n' in readme
    ci = (ROOT / '.ci' / 'run').read_text()
    assert re.search(r'^python3 -m tox$', ci, re.M)


def test_every_command_has_a_reference_page():
    config = configparser.ConfigParser()
    config.read(ROOT / 'setup.cfg')
    commands = [line.split('=')[0].strip().replace('_', ' ')
                for line in config['options.entry_points'][
                    'openstack.mdev.v1'].splitlines() if line.strip()]
    patterns = []
    for page in (DOC / 'cli').glob('*.rst'):
        patterns += re.findall(r':command: (.+)$', page.read_text(), re.M)
    cli_index = (DOC / 'cli' / 'index.rst').read_text()
    for page in (DOC / 'cli').glob('*.rst'):
        if page.stem != 'index' and ':command:' in page.read_text():
            assert '\n   %s\n' % page.stem in cli_index, page.name
    uncovered = [c for c in commands if not any(
        re.fullmatch(p.strip().replace('*', '.*'), c) for p in patterns)]
    assert uncovered == []


def test_normalise_names_uuids_and_drops_ports_and_workdir():
    names = {'11111111-2222-3333-4444-555555555555': 'server vm-1'}
    text = ('/tmp/w/x.conf 11111111-2222-3333-4444-555555555555 '
            'AAAAAAAA-2222-3333-4444-555555555555 '
            'aaaaaaaa-2222-3333-4444-555555555555 '
            'bbbbbbbb-2222-3333-4444-555555555555 http://127.0.0.1:4711/x')
    assert samples.normalise(text, names, '/tmp/w') == (
        'x.conf <server vm-1> <uuid-1> <uuid-1> <uuid-2> '
        'http://127.0.0.1:PORT/x')


def test_normalised_samples_differ_where_the_output_does():
    names_a = {'11111111-2222-3333-4444-555555555555': 'provider a'}
    names_b = {'99999999-2222-3333-4444-555555555555': 'provider a',
               '88888888-2222-3333-4444-555555555555': 'provider b'}
    documented = '| 11111111-2222-3333-4444-555555555555 | 4 |\n'
    same = '| 99999999-2222-3333-4444-555555555555 | 4 |\n'
    other_provider = '| 88888888-2222-3333-4444-555555555555 | 4 |\n'
    other_value = '| 99999999-2222-3333-4444-555555555555 | 5 |\n'
    assert (samples.normalise(documented, names_a)
            == samples.normalise(same, names_b))
    for text in (other_provider, other_value):
        assert (samples.normalise(documented, names_a)
                != samples.normalise(text, names_b))


def test_readme_blocks_round_trip(tmp_path):
    (tmp_path / 'one.txt').write_text('$ openstack mdev x\n| a |\n\n| b |\n')
    readme = tmp_path / 'README.rst'
    readme.write_text('Title\n\n.. sample: one\n\n::\n\n    $ old\n\nAfter.\n')
    writer = samples.Writer(tmp_path, readme)
    writer.finish()
    text = readme.read_text()
    assert text == ('Title\n\n.. sample: one\n\n::\n\n'
                    '    $ openstack mdev x\n    | a |\n\n    | b |\n'
                    '\nAfter.\n')
    (name, start, end), = samples.readme_blocks(text)
    assert samples.readme_copy(text, start, end) == (
        tmp_path / 'one.txt').read_text()


# -- no output but the samples ----------------------------------------------

DIRECTIVE = re.compile(r'^(\s*)\.\. ([a-z-]+)::\s*(.*?)\s*$')
PROMPT = re.compile(r'^(\$|#)( |$)')
TABLE = re.compile(r'^(\+-|\|)')
LITERAL_DIRECTIVES = ('code-block', 'code', 'sourcecode', 'parsed-literal',
                      'literalinclude')


def _ini(text):
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read_string(text)
    assert parser.sections(), 'no [section]'


def _yaml(text):
    assert isinstance(yaml.safe_load(text), (dict, list)), (
        'not a YAML mapping or list')


def _shell(text):
    proc = subprocess.run(['bash', '-n'], input=text, text=True,
                          capture_output=True)
    assert proc.returncode == 0, proc.stderr


#: What a command of a help text's examples starts with (no prompt).
HELP_COMMAND = re.compile(r'^(openstack|scp|ssh) ')
#: The languages of file blocks, and how each is read.
FILE_LANGUAGES = {'ini': _ini, 'yaml': _yaml, 'shell': _shell,
                  'rst': None, 'text': None, 'promql': None}


def _indent(line):
    return len(line) - len(line.lstrip())


def _content(lines, start):
    """The lines of the indented block that begins at or after
    ``start`` (blank lines first skipped), its first line's index and the
    index after it.
    """
    i = start
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i == len(lines) or _indent(lines[i]) == 0:
        return [], i, i
    indent = _indent(lines[i])
    end = i
    while end < len(lines) and (not lines[end].strip()
                                or _indent(lines[end]) >= indent):
        end += 1
    while end > i and not lines[end - 1].strip():
        end -= 1
    return [line[indent:] for line in lines[i:end]], i, end


def literal_blocks(text):
    """The literal blocks of a reStructuredText text: ``(line number,
    kind, argument, options, lines)`` with kind ``::`` for a literal
    block (argument None; its first line's number) or the directive
    (``code-block``, ``literalinclude``...; the directive's line number)
    and its argument and ``:option:`` values.
    """
    lines = text.splitlines()
    found = []
    i = 0
    while i < len(lines):
        line = lines[i]
        match = DIRECTIVE.match(line)
        if match and match.group(2) in LITERAL_DIRECTIVES:
            options = {}
            j = i + 1
            while j < len(lines) and re.match(r'^\s+:[a-z-]+:', lines[j]):
                name, _, value = lines[j].strip()[1:].partition(':')
                options[name] = value.strip()
                j += 1
            body, _, end = ([], j, j) \
                if match.group(2) == 'literalinclude' else _content(lines, j)
            found.append((i + 1, match.group(2), match.group(3), options,
                          body))
            i = end
        elif (line.rstrip().endswith('::') and not match
              and not line.lstrip().startswith('.. ')):
            body, first, end = _content(lines, i + 1)
            if body:
                found.append((first + 1, '::', None, {}, body))
            i = max(end, i + 1)
        elif match:
            # Another directive: its content is reStructuredText, read on.
            i += 1
        else:
            i += 1
    return found


def output_lines(lines, prompt=PROMPT):
    """The lines of a commands block that are neither a command at a
    prompt nor the continuation of one.
    """
    out = []
    command = None
    for line in lines:
        if not line.strip():
            continue
        if prompt.match(line):
            command = line
        elif command is not None and (command.rstrip().endswith('\\')
                                      or _indent(line) > 0):
            command = line if line.rstrip().endswith('\\') else command
        else:
            out.append(line)
    return out


def block_problem(kind, argument, options, body, prompt=PROMPT):
    """Why a literal block is neither an included sample, commands only
    nor a file; None when it is one of them.
    """
    if kind == 'literalinclude':
        # A sample, or a file the guide ships beside the page (a rules
        # file operators download, a Python example a test runs), with a
        # caption naming it.
        if re.fullmatch(r'[a-z0-9-]+\.yml', argument) and options.get(
                'caption') == argument:
            return None
        if re.fullmatch(r'examples/[a-z0-9_]+\.py', argument) and \
                options.get('caption') == argument.split('/')[-1]:
            return None
        if not re.fullmatch(r'/samples/[a-z0-9-]+\.txt', argument):
            return 'includes %s, not a sample' % argument
        return None
    if kind == '::' or (kind in ('code-block', 'code', 'sourcecode')
                        and argument == 'console'):
        out = output_lines(body, prompt)
        if out:
            return ('shows output (%r...): record it as a sample, or mark '
                    'a file with code-block and :caption:' % out[0])
        return None
    if kind not in ('code-block', 'code', 'sourcecode'):
        return '%s block: use commands, a sample or a file' % kind
    if argument not in FILE_LANGUAGES:
        return 'code-block %r: a file is one of %s' % (
            argument, ', '.join(sorted(FILE_LANGUAGES)))
    if not options.get('caption'):
        return 'a file block needs a :caption: naming the file'
    text = '\n'.join(body) + '\n'
    for line in body:
        if PROMPT.match(line) or TABLE.match(line):
            return 'a file block holds %r: output or a command' % line
    try:
        if FILE_LANGUAGES[argument]:
            FILE_LANGUAGES[argument](text)
    except (AssertionError, ValueError, configparser.Error,
            yaml.YAMLError) as exc:
        return 'not %s: %s' % (argument, exc)
    return None


def _documents():
    yield samples.README, {start + 1 for _, start, _ in
                           samples.readme_blocks(samples.README.read_text())}
    for page in pages():
        if samples.SAMPLES not in page.parents:
            yield page, set()


@pytest.mark.parametrize('path, copies', list(_documents()),
                         ids=lambda x: str(x.relative_to(ROOT))
                         if isinstance(x, pathlib.Path) else '')
def test_no_output_but_the_samples(path, copies):
    problems = []
    for line, kind, argument, options, body in literal_blocks(
            path.read_text()):
        if line in copies:
            continue
        problem = block_problem(kind, argument, options, body)
        if problem:
            problems.append('%s:%d: %s' % (path.relative_to(ROOT), line,
                                           problem))
    assert problems == []


@pytest.mark.parametrize('name, klass',
                         sorted(test_options.commands().items()))
def test_help_examples_are_commands_only(name, klass):
    examples = [block for block in literal_blocks(klass._epilog)
                if block[1] == '::']
    assert examples, name
    for _, _, _, _, body in examples:
        assert output_lines(body, HELP_COMMAND) == [], name


@pytest.mark.parametrize('kind, argument, options, body', [
    ('::', None, {}, ['$ openstack mdev audit', '+----+']),
    ('::', None, {}, ['$ openstack mdev config check nova.conf -f value',
                      'Nothing is wrong.']),
    ('::', None, {}, ['$ openstack mdev audit -f yaml', '- Check: x',
                      '  Host: y']),
    ('::', None, {}, ['  Reason: typed by hand']),
    ('code-block', 'console', {}, ['$ ls /sys/class/mdev_bus', '0000:84']),
    ('code-block', 'ini', {}, ['[devices]', 'enabled_mdev_types = a']),
    ('code-block', 'ini', {'caption': 'nova.conf'},
     ['$ openstack mdev audit', '[devices]']),
    ('code-block', 'yaml', {'caption': 'out.yaml'}, ['+---+', '| a |']),
    ('code-block', 'yaml', {'caption': 'out.yaml'}, ['just a line']),
    ('code-block', 'text', {'caption': 'x'}, ['| Host | Free |']),
    ('code-block', 'ini', {'caption': 'nova.conf'}, ['no section']),
    ('code-block', 'json', {'caption': 'x.json'}, ['{}']),
    ('parsed-literal', '', {}, ['$ openstack mdev audit']),
    ('literalinclude', '../../README.rst', {}, []),
])
def test_hand_typed_output_is_refused(kind, argument, options, body):
    assert block_problem(kind, argument, options, body) is not None


@pytest.mark.parametrize('kind, argument, options, body', [
    ('::', None, {}, ['$ openstack mdev audit', '$ openstack mdev audit \\',
                      '    --host compute1']),
    ('::', None, {}, ['# for f in *.yaml; do', '      scp "$f" x:', '  done',
                      '$ { echo a', '    echo b', '  } > c']),
    ('code-block', 'ini', {'caption': 'nova.conf'},
     ['[pci]', 'alias = {"name": "a",', '    "device_type": "type-VF"}']),
    ('code-block', 'yaml', {'caption': 'rules.yml'},
     ['- alert: X', '  for: 5m']),
    ('code-block', 'shell', {'caption': 'ship.sh'},
     ['for f in *.yaml; do', '    echo "$f"', 'done']),
    ('literalinclude', '/samples/audit.txt', {}, []),
])
def test_commands_files_and_samples_are_accepted(kind, argument, options,
                                                 body):
    assert block_problem(kind, argument, options, body) is None


def test_literal_blocks_are_found_where_rst_has_them():
    text = (
        'Title\n\nRun it::\n\n    $ openstack mdev audit\n    +--+\n\n'
        'Text.\n\n#. An item::\n\n       $ a\n\n   More text.\n\n'
        '.. code-block:: ini\n   :caption: nova.conf\n\n   [devices]\n\n'
        '.. literalinclude:: /samples/audit.txt\n   :language: console\n\n'
        '.. toctree::\n\n   a\n')
    assert literal_blocks(text) == [
        (5, '::', None, {}, ['$ openstack mdev audit', '+--+']),
        (12, '::', None, {}, ['$ a']),
        (16, 'code-block', 'ini', {'caption': 'nova.conf'}, ['[devices]']),
        (21, 'literalinclude', '/samples/audit.txt',
         {'language': 'console'}, []),
    ]
