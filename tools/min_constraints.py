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

"""Print pip constraints that pin every dependency to its declared floor.

Reads ``install_requires`` in setup.cfg and turns each ``name>=X`` into
``name==X``, so ``pip install -c <output>`` installs the lowest versions
osc-mdev claims to work with (``tox -e py3-min``). A requirement without a
``>=`` floor is an error: every dependency must state its floor.

Usage:
    python tools/min_constraints.py [setup.cfg] > constraints.txt
    python tools/min_constraints.py --pip-install PIP-ARGS...

The second form runs ``pip install -c <floors> PIP-ARGS...`` with the
setup.cfg beside this script: tox's ``install_command`` for py3-min, so
the test dependencies and the package's own dependencies are resolved
against the floors together.
"""

import configparser
import os
import re
import subprocess
import sys
import tempfile

_REQUIREMENT = re.compile(
    r'^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?P<spec>[^;#]*?)\s*'
    r'(?:;.*)?$')


def floors(setup_cfg):
    """Return [(name, floor)] for install_requires, in the file's order."""
    config = configparser.ConfigParser()
    config.read_string(setup_cfg)
    result = []
    for line in config.get('options', 'install_requires').splitlines():
        line = line.split('#', 1)[0].strip()
        if not line:
            continue
        match = _REQUIREMENT.match(line)
        if not match:
            raise ValueError('cannot read requirement %r' % line)
        found = [part.strip()[2:].strip()
                 for part in match.group('spec').split(',')
                 if part.strip().startswith('>=')]
        if len(found) != 1:
            raise ValueError('requirement %r has no single >= floor' % line)
        result.append((match.group('name'), found[0]))
    return result


def constraints(path):
    with open(path, encoding='utf-8') as handle:
        return ''.join('%s==%s\n' % pin for pin in floors(handle.read()))


def pip_install(args):
    setup_cfg = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        'setup.cfg')
    with tempfile.NamedTemporaryFile(
            'w', prefix='min-constraints-', suffix='.txt') as handle:
        handle.write(constraints(setup_cfg))
        handle.flush()
        return subprocess.call([sys.executable, '-m', 'pip', 'install',
                                '-c', handle.name] + list(args))


def main(argv):
    if len(argv) > 1 and argv[1] == '--pip-install':
        return pip_install(argv[2:])
    sys.stdout.write(constraints(argv[1] if len(argv) > 1 else 'setup.cfg'))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
