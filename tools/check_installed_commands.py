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

"""Check that an installed osc-mdev's commands reach ``openstack``.

Run with the Python of the environment osc-mdev was installed into (CI
installs the built wheel into a fresh virtualenv). Every command of the
``openstack.mdev.v1`` entry point group must be listed by ``openstack help
mdev``, answer ``openstack help <command>`` and appear in the bash
completion script ``openstack complete`` prints. Exit 1 with one line per
problem otherwise.
"""

import importlib.metadata
import os
import re
import subprocess
import sys


def commands():
    """``['mdev provider list', ...]`` from the installed entry points."""
    names = sorted(entry.name.replace('_', ' ') for entry in
                   importlib.metadata.entry_points(group='openstack.mdev.v1'))
    if not names:
        raise SystemExit('no openstack.mdev.v1 commands are installed')
    return names


def openstack(*args):
    script = os.path.join(os.path.dirname(sys.executable), 'openstack')
    proc = subprocess.run([script, *args], capture_output=True, text=True,
                          timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def completion_words(script, words):
    """The words bash completion offers after ``openstack <words>``."""
    variable = ''.join(['cmds'] + ['_' + word for word in words])
    match = re.search(r"^\s*%s='([^']*)'" % variable, script, re.M)
    return match.group(1).split() if match else []


def main():
    problems = []
    names = commands()
    rc, listed = openstack('help', 'mdev')
    if rc != 0:
        problems.append('openstack help mdev exited %d' % rc)
    rc, script = openstack('complete')
    if rc != 0:
        problems.append('openstack complete exited %d' % rc)
    for name in names:
        words = name.split()
        if not re.search(r'^\s*%s\s*$' % re.escape(name), listed, re.M):
            problems.append('openstack help mdev does not list %r' % name)
        rc, text = openstack('help', *words)
        if rc != 0 or 'usage: openstack %s' % name not in text:
            problems.append('openstack help %s fails (exit %d)' % (name, rc))
        for depth in range(len(words)):
            if words[depth] not in completion_words(script, words[:depth]):
                problems.append('bash completion does not offer %r after '
                                '%r' % (words[depth],
                                        ' '.join(words[:depth])))
        if '--help' not in completion_words(script, words):
            problems.append('bash completion has no options for %r' % name)
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        print('%d mdev commands: in openstack help, their own help and '
              'bash completion' % len(names))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
