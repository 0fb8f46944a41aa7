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

"""The command samples of the documentation, recorded on the demo cloud.

Every output the documentation shows is real: the tour of tools/demo.py
runs each command on the embedded demo cloud and records it as a sample,
``doc/source/samples/<name>.txt`` (the command line, then what it
printed). The pages include the files with ``literalinclude``; README.rst
copies some of them, each after a ``.. sample: <name>`` comment.

``tox -e demo`` writes the samples (``Writer``): a file is rewritten only
when the command now prints something else, and the README's copies follow
it. tests/e2e/test_doc_samples.py runs the same tour on a fresh demo cloud
and fails when a command no longer prints its sample (``Checker``).

Outputs are compared after ``normalise``: a UUID becomes the name of what
it identifies on the cloud that printed it (the resource provider, server
or flavor, or a name the tour gave it), kept for the written samples in
``names.json``; a UUID without a name becomes its rank of first
appearance; the ports and the work directory of the cloud are dropped.
Everything else (columns, widths, values, messages, order of rows) must be
the same.
"""

import difflib
import json
import pathlib
import re
import urllib.request

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLES = REPO / 'doc' / 'source' / 'samples'
README = REPO / 'README.rst'
NAMES_FILE = 'names.json'

UUID = re.compile(
    r'\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-'
    r'[0-9a-fA-F]{12}\b')
PORT = re.compile(r'\b(127\.0\.0\.1|localhost):\d+')
README_MARK = re.compile(r'^\.\. sample: ([a-z0-9-]+)\s*$')


def normalise(text, names, workdir=None):
    """``text`` with UUIDs named, ports and ``workdir`` dropped."""
    if workdir:
        text = text.replace(str(workdir).rstrip('/') + '/', '')
    text = PORT.sub(r'\1:PORT', text)
    unnamed = {}

    def name(match):
        uuid = match.group(0).lower()
        if uuid in names:
            return '<%s>' % names[uuid]
        return '<uuid-%d>' % unnamed.setdefault(uuid, len(unnamed) + 1)

    return UUID.sub(name, text)


def cloud_names(cloud):
    """``{uuid: name}`` of the providers, servers and flavors of an
    embedded cloud, read from its Placement and Nova APIs.
    """
    def get(url, version):
        request = urllib.request.Request(url, headers={
            'X-Auth-Token': 'admin', 'OpenStack-API-Version': version})
        with urllib.request.urlopen(request, timeout=30) as rsp:
            return json.loads(rsp.read())

    names = {}
    body = get(cloud.placement_url + '/resource_providers',
               'placement 1.14')
    for rp in body['resource_providers']:
        names[rp['uuid']] = 'provider %s' % rp['name']
    body = get(cloud.compute_url + '/servers/detail?all_tenants=1',
               'compute 2.1')
    for server in body['servers']:
        names[server['id']] = 'server %s' % server['name']
    body = get(cloud.compute_url + '/flavors/detail?is_public=None',
               'compute 2.1')
    for flavor in body['flavors']:
        names[flavor['id']] = 'flavor %s' % flavor['name']
    return names


def sample_text(command, stdout, stderr):
    """A sample: the command line, its output and its error output."""
    text = '$ %s\n%s%s' % (command, stdout, stderr)
    return text.rstrip('\n') + '\n'


def readme_blocks(text):
    """``[(name, first line, end line)]`` of the README's sample copies:
    the literal block after each ``.. sample: <name>`` comment, as line
    indexes of ``text.splitlines()`` (end excluded).
    """
    lines = text.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        match = README_MARK.match(line)
        if not match:
            continue
        start = i + 1
        while start < len(lines) and lines[start].strip() in ('', '::'):
            start += 1
        end = start
        while end < len(lines) and (not lines[end].strip()
                                    or lines[end].startswith('    ')):
            end += 1
        while end > start and not lines[end - 1].strip():
            end -= 1
        blocks.append((match.group(1), start, end))
    return blocks


def readme_copy(text, start, end):
    """The sample text a README block holds."""
    lines = text.splitlines()[start:end]
    return ''.join(line[4:] + '\n' for line in lines)


def as_readme_block(sample):
    return [('    ' + line).rstrip() for line in sample.splitlines()]


class Recorder:
    """Receives the samples of a tour; see Writer and Checker."""

    def __init__(self, directory=SAMPLES):
        self.directory = pathlib.Path(directory)
        path = self.directory / NAMES_FILE
        self.stored_names = (json.loads(path.read_text())
                             if path.exists() else {})
        self.recorded = {}

    def record(self, name, text, names, workdir=None):
        if name in self.recorded:
            raise ValueError('sample %s is recorded twice' % name)
        self.recorded[name] = (text, names, workdir)
        self.take(name, text, names, workdir)

    def path(self, name):
        return self.directory / ('%s.txt' % name)

    def documented(self, name):
        """The sample as the documentation has it, or None."""
        path = self.path(name)
        return path.read_text() if path.exists() else None

    def same(self, name, text, names, workdir):
        old = self.documented(name)
        return old is not None and (
            normalise(old, self.stored_names)
            == normalise(text, names, workdir))

    def unrecorded(self):
        """Sample files the tour did not record."""
        return sorted(p.stem for p in self.directory.glob('*.txt')
                      if p.stem not in self.recorded)


class Writer(Recorder):
    """Writes each sample whose output changed (``tox -e demo``)."""

    def __init__(self, directory=SAMPLES, readme=README, rewrite=False):
        super().__init__(directory)
        self.readme = pathlib.Path(readme) if readme else None
        self.rewrite = rewrite
        self.written = []

    def take(self, name, text, names, workdir):
        if not self.rewrite and self.same(name, text, names, workdir):
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        if workdir:
            text = text.replace(str(workdir).rstrip('/') + '/', '')
        self.path(name).write_text(text)
        for uuid in set(u.lower() for u in UUID.findall(text)):
            if uuid in names:
                self.stored_names[uuid] = names[uuid]
        self.written.append(name)

    def finish(self):
        """Keep names.json to the UUIDs of the samples, copy the samples
        into the README; answers the names of the files written.
        """
        if self.rewrite:
            for name in self.unrecorded():
                self.path(name).unlink()
        used = set()
        for path in self.directory.glob('*.txt'):
            used.update(u.lower() for u in UUID.findall(path.read_text()))
        names = {u: n for u, n in sorted(self.stored_names.items())
                 if u in used}
        path = self.directory / NAMES_FILE
        text = json.dumps(names, indent=1, sort_keys=True) + '\n'
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        if self.readme and self.readme.exists():
            self.update_readme()
        return list(self.written)

    def update_readme(self):
        text = self.readme.read_text()
        lines = text.splitlines()
        for name, start, end in reversed(readme_blocks(text)):
            sample = self.documented(name)
            if sample is not None:
                lines[start:end] = as_readme_block(sample)
        new = '\n'.join(lines) + '\n'
        if new != text:
            self.readme.write_text(new)
            self.written.append(self.readme.name)


class Checker(Recorder):
    """Compares each sample with the documented one (the e2e test)."""

    def __init__(self, directory=SAMPLES):
        super().__init__(directory)
        self.mismatches = {}

    def take(self, name, text, names, workdir):
        if self.same(name, text, names, workdir):
            return
        old = self.documented(name)
        if old is None:
            self.mismatches[name] = 'no file %s: run tox -e demo' % (
                self.path(name).name)
            return
        diff = difflib.unified_diff(
            normalise(old, self.stored_names).splitlines(),
            normalise(text, names, workdir).splitlines(),
            'documented', 'printed now', lineterm='')
        self.mismatches[name] = '\n'.join(diff)

    def report(self):
        """One text with every mismatch, or '' when there is none."""
        parts = ['%s:\n%s' % (name, diff)
                 for name, diff in sorted(self.mismatches.items())]
        stale = self.unrecorded()
        if stale:
            parts.append('sample files no command of the tour prints: %s'
                         % ', '.join(stale))
        return '\n\n'.join(parts)
