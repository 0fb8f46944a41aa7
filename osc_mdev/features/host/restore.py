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

"""``host restore``: the POSIX shell script that gives a compute node its
lost mdevs back (``features.config.check.lost``).

Each lost mdev is created with its UUID on its parent GPU and type:
where the node has ``mdevctl`` (``command -v``, when the script runs),
``mdevctl start`` then ``mdevctl define --auto`` so that it comes back
at boot; else the kernel's ``mdev_supported_types/<type>/create``. An
mdev already there is left as it is; a parent that has no room left of
the type (``available_instances`` 0), or does not offer it, is refused
for that mdev, and the script exits 1 at the end. The sysfs root is
``$SYSFS`` (``/sys`` unless set). The script only holds names checked
here (UUIDs, a parent's and a type's sysfs names), quoted.
"""

from __future__ import annotations

from collections.abc import Sequence
import dataclasses
import re
import shlex

from osc_mdev.features.config.check import lost as lost_logic

SCRIPT = 'restore-mdevs.sh'
COLUMNS = ('Server', 'Mdev', 'GPU', 'Type', 'Action')

_UUID = re.compile(r'^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$')
_SYSFS_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.:-]*$')

_FUNCTION = r'''#!/bin/sh
# The mdevs compute node %(node)s lost, created again with their UUIDs
# on their parent GPUs and types, as the servers' libvirt domains and
# Placement allocations hold them. Written by 'openstack mdev host
# restore' from the node's snapshot taken %(taken)s.
# With mdevctl each is started and defined to start at boot; without it,
# created through sysfs (not kept across a reboot). An mdev already there
# is left as it is; a parent with no room left of the type is refused.
# Exit status 1 when an mdev was refused or failed.
SYSFS=${SYSFS:-/sys}
failed=0
if command -v mdevctl >/dev/null 2>&1; then
    with_mdevctl=1
else
    with_mdevctl=0
fi

refuse() {
    echo "mdev $1 (server $2): $3" >&2
    failed=1
}

restore() {
    uuid=$1 parent=$2 type=$3 server=$4
    if [ -e "$SYSFS/bus/mdev/devices/$uuid" ]; then
        echo "mdev $uuid (server $server): already there, left as it is"
        return 0
    fi
    types=$SYSFS/class/mdev_bus/$parent/mdev_supported_types/$type
    if [ ! -d "$types" ]; then
        refuse "$uuid" "$server" "not created: $parent offers no type $type"
        return 0
    fi
    available=$(cat "$types/available_instances" 2>/dev/null)
    case $available in
        ''|*[!0-9]*|0)
            refuse "$uuid" "$server" "not created: $parent has no room \
left of type $type (available_instances ${available:-unreadable})"
            return 0 ;;
    esac
    if [ "$with_mdevctl" = 1 ]; then
        if mdevctl start -u "$uuid" -p "$parent" --type "$type" &&
                mdevctl define --auto -u "$uuid"; then
            echo "mdev $uuid (server $server): created on $parent, type \
$type, with mdevctl (started, defined to start at boot)"
        else
            refuse "$uuid" "$server" "mdevctl failed on $parent, type $type"
        fi
    elif echo "$uuid" > "$types/create"; then
        echo "mdev $uuid (server $server): created on $parent, type $type, \
through sysfs"
    else
        refuse "$uuid" "$server" "writing $types/create failed"
    fi
}

'''


@dataclasses.dataclass(frozen=True)
class Step:
    """What the script does for one lost mdev: ``action`` in words,
    ``line`` its line of the script.
    """

    lost: lost_logic.LostMdev
    action: str
    line: str

    @property
    def restores(self) -> bool:
        return self.line.startswith('restore ')


def _unusable(lost: lost_logic.LostMdev) -> str | None:
    """Why the script cannot create the mdev, None when it can."""
    if lost.gpu is None:
        return 'parent GPU unknown'
    if lost.mdev_type is None:
        return 'type unknown'
    checks = ((_UUID, lost.mdev, 'mdev UUID'), (_UUID, lost.server,
                                                'server UUID'),
              (_SYSFS_NAME, lost.gpu, 'GPU name'),
              (_SYSFS_NAME, lost.mdev_type, 'type name'))
    for pattern, value, what in checks:
        if not pattern.match(value):
            return 'the %s %r is not one sysfs can have' % (what, value)
    return None


def step(lost: lost_logic.LostMdev) -> Step:
    """The script's step for ``lost``."""
    why = _unusable(lost)
    if why is not None:
        message = 'mdev %s (server %s): not restored: %s' % (
            lost.mdev, lost.server, why)
        return Step(lost, 'not restored: %s' % why,
                    'echo %s >&2; failed=1' % shlex.quote(message))
    assert lost.gpu is not None and lost.mdev_type is not None
    return Step(lost, 'create', 'restore %s' % ' '.join(
        shlex.quote(v) for v in (lost.mdev.lower(), lost.gpu,
                                 lost.mdev_type, lost.server)))


def script(node: str, taken: str | None,
           steps: Sequence[Step]) -> str:
    """The restore script of compute node ``node``."""
    head = _FUNCTION % {'node': re.sub(r'[^\x21-\x7e]', '_', node),
                        'taken': re.sub(r'[^\x20-\x7e]', '_', taken or
                                        'at an unknown time')}
    body = ''.join('%s\n' % s.line for s in steps)
    return '%s%s\nexit $failed\n' % (head, body)


def rows(steps: Sequence[Step]) -> list[tuple[str, str, str, str, str]]:
    """One row per lost mdev: Server, Mdev, GPU, Type, Action."""
    return [('%s (%s)' % (s.lost.server_name, s.lost.server)
             if s.lost.server_name else s.lost.server, s.lost.mdev,
             s.lost.gpu or '', s.lost.mdev_type or '', s.action)
            for s in steps]
