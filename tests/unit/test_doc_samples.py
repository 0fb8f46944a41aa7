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

"""The documentation shows recorded samples only, and every command.

tests/e2e/test_doc_samples.py proves the samples are what the commands
print; these tests prove the pages and the README show those files and
nothing else, and that every command has its reference page.
"""

import configparser
import pathlib
import re

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
    assert '\n    tox\n' in readme
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
