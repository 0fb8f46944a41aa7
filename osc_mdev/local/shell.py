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

"""The host's shell, asked whether it reads a script: ``sh -n``.

The scripts osc-mdev writes start with ``#!/bin/sh``; ``/bin/sh -n``
reads one (from its standard input) without running any of it.
"""

import subprocess

SHELL = '/bin/sh'


def syntax_error(text: str) -> str | None:
    """What ``/bin/sh -n`` says of a script of this text, in one line;
    None when it reads it. Raises OSError when the shell cannot be run.
    """
    try:
        proc = subprocess.run([SHELL, '-n'], input=text, text=True,
                              capture_output=True, timeout=60, check=False)
    except subprocess.TimeoutExpired as exc:
        raise TimeoutError('%s -n took more than %s seconds'
                           % (SHELL, exc.timeout)) from exc
    if proc.returncode == 0:
        return None
    return (' '.join(proc.stderr.split())
            or '%s -n exits %d' % (SHELL, proc.returncode))
