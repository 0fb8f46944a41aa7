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

"""The files ``config generate`` writes, from a ``plan.Plan``
(``features.config.generate.plan``).

For the GPUs whose vGPUs are SR-IOV virtual functions (NVIDIA vGPU 17
and later), as Nova's PCI passthrough guide configures them: the compute
node's nova.conf (``[pci] report_in_placement`` and one ``device_spec``
per VF, with the class of its type and ``"managed": "no"``), the
controller's (``[filter_scheduler] pci_in_placement`` and a ``type-VF``
alias per class), and, since a VF loses its type at every reboot and
driver reload, a script that gives every VF its type back and the
systemd unit that runs it after NVIDIA's vGPU manager and before
nova-compute. For mdev GPUs: ``[devices] enabled_mdev_types`` and one
``[mdev_<type>] device_addresses`` per type, every type with its
addresses, so that no type is Nova's default and a device no choice
names takes none.

The texts only: writing them is ``osc_mdev.local.textfile``'s.
"""

from collections.abc import Sequence
import dataclasses
import json
import shlex

from osc_mdev.features.config.generate import plan as plans
from osc_mdev.host import gpus as host_gpus
from osc_mdev.nova.pci import devspec as pci_devspec

COMPUTE_CONF = 'nova-compute-vgpu.conf'
CONTROLLER_CONF = 'nova-controller-vgpu.conf'
UNIT = 'osc-mdev-vgpu-types.service'
SCRIPT = 'osc-mdev-vgpu-types'
#: Where the unit runs the script from.
SCRIPT_PATH = '/usr/local/sbin/' + SCRIPT
#: Where systemd reads the unit from.
UNIT_PATH = '/etc/systemd/system/' + UNIT
#: NVIDIA's vGPU manager daemons: the unit runs after them (an ordering
#: on a unit that is not installed is ignored by systemd).
NVIDIA_UNITS = ('nvidia-vgpud.service', 'nvidia-vgpu-mgr.service')
#: nova-compute's unit, as Ubuntu and Debian, and RDO, name it.
NOVA_COMPUTE_UNITS = ('nova-compute.service',
                      'openstack-nova-compute.service')
#: Seconds the script waits for the VFs of one GPU to get their
#: ``nvidia/`` files; the unit allows twice that per GPU.
WAIT_SECONDS = 60
COMMAND = "'openstack mdev config generate'"


@dataclasses.dataclass(frozen=True)
class GeneratedFile:
    """One file: its name in the directory, what it holds in words,
    its text, and whether it is to be executable.
    """

    name: str
    holds: str
    text: str
    executable: bool = False


def _choices(plan: plans.Plan) -> str:
    return ' '.join('--type %s' % shlex.quote(c) for c in plan.choices)


def header(lines: Sequence[str], plan: plans.Plan) -> str:
    """Comment lines, then the command the file came from."""
    lines = list(lines) + [
        "Written by %s from a compute node's sysfs with" % COMMAND]
    text = ''.join('# %s\n' % line if line else '#\n' for line in lines)
    return text + '#   %s\n' % _choices(plan)


def device_spec(vf: host_gpus.Device, resource_class: str) -> str:
    """One ``[pci] device_spec``: the VF by address (and its ids), its
    class, and ``"managed": "no"``: libvirt leaves the VF bound to
    NVIDIA's driver.
    """
    spec = {'address': vf.address}
    if vf.vendor_id and vf.product_id:
        spec.update(vendor_id=vf.vendor_id, product_id=vf.product_id)
    spec.update(resource_class=resource_class, managed='no')
    return json.dumps(spec)


def _pci_section(plan: plans.Plan) -> list[str]:
    lines = ['[pci]', 'report_in_placement = True']
    for gpu in plan.vf_gpus:
        lines.append('# %s: %s on %d virtual functions' % (
            gpu.pf, plans.type_words(gpu.vgpu_type), len(gpu.vfs)))
        lines += ['device_spec = %s' % device_spec(vf, gpu.resource_class)
                  for vf in gpu.vfs]
    return lines


def _mdev_sections(plan: plans.Plan) -> list[str]:
    lines = ['[devices]', 'enabled_mdev_types = %s' % ', '.join(
        t.mdev_type for t in plan.mdev_types)]
    for mdev_type in plan.mdev_types:
        lines += ['', '[mdev_%s]' % mdev_type.mdev_type,
                  'device_addresses = %s' % ', '.join(mdev_type.addresses)]
    return lines


def compute_conf(plan: plans.Plan) -> str:
    """The compute node's nova.conf fragment."""
    sections = []
    if plan.vf_gpus:
        sections.append(_pci_section(plan))
    if plan.mdev_types:
        sections.append(_mdev_sections(plan))
    top = header(["nova-compute's options for the vGPUs of this "
                  'compute node.'], plan)
    return top + '\n' + '\n\n'.join(
        '\n'.join(lines) for lines in sections) + '\n'


def alias(name: str, resource_class: str) -> str:
    """One ``[pci] alias``: the VFs of one class."""
    return json.dumps({'name': name,
                       'device_type': pci_devspec.TYPE_VF,
                       'resource_class': resource_class})


def controller_conf(plan: plans.Plan) -> str:
    """The controller's nova.conf fragment (nova-api, nova-scheduler,
    nova-conductor).
    """
    top = header(["The controller's options (nova-api, "
                  'nova-scheduler, nova-conductor) for', 'the vGPUs '
                  'of a compute node.'], plan)
    lines = ['# A flavor asks for one vGPU with pci_passthrough:alias=%s:1.'
             % next(iter(plan.aliases())), '[pci]']
    lines += ['alias = %s' % alias(name, rc)
              for name, rc in plan.aliases().items()]
    lines += ['', '[filter_scheduler]', 'pci_in_placement = True']
    return top + '\n' + '\n'.join(lines) + '\n'


def unit(plan: plans.Plan) -> str:
    """The systemd unit that runs the script at boot."""
    return header(['Gives the NVIDIA virtual functions nova-compute '
                   'offers their vGPU type', 'at boot.'], plan) + '''
[Unit]
Description=vGPU types of the NVIDIA virtual functions nova-compute offers
# The VFs get their nvidia/ files from NVIDIA's vGPU manager.
After=%(nvidia)s
# nova-compute offers every VF of its [pci] device_spec: it does not start
# before they have their types, nor when they cannot be given them.
Before=%(nova)s

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=%(script)s
TimeoutStartSec=%(timeout)d

[Install]
WantedBy=multi-user.target
RequiredBy=%(nova)s
''' % {'nvidia': ' '.join(NVIDIA_UNITS),
       'nova': ' '.join(NOVA_COMPUTE_UNITS),
       'script': SCRIPT_PATH,
       'timeout': 2 * WAIT_SECONDS * max(1, len(plan.vf_gpus))}


#: The script's functions (POSIX sh: dash, bash; coreutils' sleep).
_SETTINGS = r"""
set -u

DEVICES=/sys/bus/pci/devices
# NVIDIA's script that enables the virtual functions of a GPU.
SRIOV_MANAGE=${SRIOV_MANAGE:-/usr/lib/nvidia/sriov-manage}
# Seconds the VFs of one GPU may take to get their nvidia/ files.
WAIT=%(wait)d
total=%(total)d
failed=0
changed=0
"""

_FUNCTIONS = r"""
say() {
    printf '%s\n' "$*"
}

fail() {
    printf 'error: %s\n' "$*" >&2
    failed=$((failed + 1))
}

# read_type VF: the VF's current_vgpu_type, in $current.
read_type() {
    current=
    IFS= read -r current < "$DEVICES/$1/nvidia/current_vgpu_type" \
        || [ -n "$current" ]
    case $current in
        '' | *[!0-9]*)
            fail "$1: $DEVICES/$1/nvidia/current_vgpu_type reads" \
                "'$current', not a vGPU type number"
            return 1 ;;
    esac
}

# write_type VF NUMBER: write NUMBER to the VF's current_vgpu_type, and
# read it back.
write_type() {
    if ! printf '%s\n' "$2" > "$DEVICES/$1/nvidia/current_vgpu_type"; then
        fail "$1: writing $2 to $DEVICES/$1/nvidia/current_vgpu_type" \
            "was refused"
        return 1
    fi
    read_type "$1" || return 1
    if [ "$current" != "$2" ]; then
        fail "$1: current_vgpu_type reads $current after $2 was written"
        return 1
    fi
}

# lists_type VF NUMBER: whether the VF's creatable_vgpu_types lists
# NUMBER ("1162 : NVIDIA L4-8Q" lines, maybe under an "ID : vGPU Name"
# header).
lists_type() {
    id=
    while IFS=' 	:' read -r id rest || [ -n "$id" ]; do
        [ "$id" = "$2" ] && return 0
        id=
    done < "$DEVICES/$1/nvidia/creatable_vgpu_types"
    return 1
}

# enable_vfs PF: NVIDIA's sriov-manage enables the VFs of a GPU that has
# none (sriov_numvfs 0, as after a reboot).
enable_vfs() {
    numvfs=
    IFS= read -r numvfs < "$DEVICES/$1/sriov_numvfs" || [ -n "$numvfs" ] \
        || { fail "$1: cannot read $DEVICES/$1/sriov_numvfs"; return 1; }
    [ "$numvfs" != 0 ] && return 0
    say "$1: no virtual functions enabled; running $SRIOV_MANAGE -e $1"
    if ! "$SRIOV_MANAGE" -e "$1"; then
        fail "$1: $SRIOV_MANAGE -e $1 failed"
        return 1
    fi
}

# wait_vf VF: wait for the VF's nvidia/current_vgpu_type, WAIT seconds
# at most for all the VFs of a GPU ($waited).
wait_vf() {
    while [ ! -e "$DEVICES/$1/nvidia/current_vgpu_type" ]; do
        if [ "$waited" -ge "$WAIT" ]; then
            fail "$1: no $DEVICES/$1/nvidia/current_vgpu_type after" \
                "${WAIT}s: is the VF enabled, and NVIDIA's vGPU manager" \
                "running?"
            return 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
}

# gpu PF NUMBER NAME VF...: give each VF the vGPU type NUMBER (NAME).
gpu() {
    pf=$1 number=$2 name=$3
    shift 3
    enable_vfs "$pf" || return 0
    waited=0
    ready=
    for vf in "$@"; do
        wait_vf "$vf" && ready="$ready $vf"
    done
    # A VF of another type gives it up before any VF takes the new one:
    # the driver refuses a type the GPU has no room for.
    for vf in $ready; do
        read_type "$vf" || continue
        if [ "$current" != 0 ] && [ "$current" != "$number" ]; then
            old=$current
            write_type "$vf" 0 || continue
            say "$vf: vGPU type $old removed"
            changed=$((changed + 1))
        fi
    done
    kept=0
    for vf in $ready; do
        read_type "$vf" || continue
        if [ "$current" = "$number" ]; then
            kept=$((kept + 1))
            continue
        fi
        # A VF whose other type could not be removed is reported above.
        [ "$current" = 0 ] || continue
        if ! lists_type "$vf" "$number"; then
            fail "$vf: $name ($number) cannot be created there now:" \
                "$DEVICES/$vf/nvidia/creatable_vgpu_types does not list it"
            continue
        fi
        write_type "$vf" "$number" || continue
        say "$vf: vGPU type $number ($name) written"
        changed=$((changed + 1))
    done
    say "$pf: $kept of $# virtual functions had $name ($number) already"
}
"""

_END = r"""
if [ "$failed" -gt 0 ]; then
    say "$failed error(s): not every virtual function has its vGPU" \
        "type." >&2
    exit 1
fi
if [ "$changed" -eq 0 ]; then
    say "Nothing changed: the $total virtual functions have their vGPU" \
        "types."
else
    say "$changed change(s): the $total virtual functions have their" \
        "vGPU types."
fi
"""


#: What the script does, in its header.
_SCRIPT_SUMMARY = """
A VF loses its type at every reboot and driver reload. Run by the unit
%(unit)s before nova-compute starts, this enables
the VFs of a GPU that has none (NVIDIA's sriov-manage -e), then writes
each VF's type to /sys/bus/pci/devices/<VF>/nvidia/current_vgpu_type
where the VF does not have it (a VF of another type gives it up first).
It says what it did, and exits 1, naming the VF, when a type cannot be
read or written. Run it again at will: a VF that has its type is left
as it is.
"""


def script(plan: plans.Plan) -> str:
    """The script the unit runs: idempotent, it writes a VF's type only
    where the VF does not have it, says what it did, and exits 1 when a
    type cannot be read or written.
    """
    top = '#!/bin/sh\n' + header([
        'Gives the NVIDIA virtual functions nova-compute offers their vGPU '
        'type.'], plan)
    summary = (_SCRIPT_SUMMARY % {'unit': UNIT}).splitlines() + [''] + [
        '%s: %s on %d VFs, class %s' % (
            g.pf, plans.type_words(g.vgpu_type), len(g.vfs),
            g.resource_class) for g in plan.vf_gpus]
    calls = ['gpu %s %d %s %s' % (
        g.pf, g.vgpu_type.number, shlex.quote(g.vgpu_type.name),
        ' '.join(vf.address for vf in g.vfs)) for g in plan.vf_gpus]
    return (top + ''.join('# %s\n' % line if line else '#\n'
                          for line in summary)
            + _SETTINGS % {'wait': WAIT_SECONDS, 'total': plan.vf_count}
            + _FUNCTIONS + '\n' + '\n'.join(calls) + '\n' + _END)


def files(plan: plans.Plan) -> list[GeneratedFile]:
    """The files of the plan, with what each holds in words."""
    found = [GeneratedFile(COMPUTE_CONF, _compute_holds(plan),
                           compute_conf(plan))]
    if plan.vf_gpus:
        found += [
            GeneratedFile(
                CONTROLLER_CONF,
                "the controller's options: [filter_scheduler] "
                'pci_in_placement, [pci] alias %s'
                % ', '.join(plan.aliases()), controller_conf(plan)),
            GeneratedFile(
                UNIT, 'systemd unit: runs the script after NVIDIA\'s vGPU '
                'manager, before nova-compute', unit(plan)),
            GeneratedFile(
                SCRIPT, 'script, for %s: the vGPU types of %d VFs of %d '
                'GPUs' % (SCRIPT_PATH, plan.vf_count, len(plan.vf_gpus)),
                script(plan), executable=True)]
    return found


def installed_by_hand(file: GeneratedFile, tool: str,
                      inventory_host: str) -> GeneratedFile:
    """The unit or the script, for a deployment tool that has no place
    for it: its words say where it goes on the node.
    """
    where = {UNIT: UNIT_PATH + ', enabled', SCRIPT: SCRIPT_PATH}
    return dataclasses.replace(file, holds='not read by %s: install it on '
                               '%s as %s; %s' % (tool, inventory_host,
                                                 where[file.name], file.holds))


def _compute_holds(plan: plans.Plan) -> str:
    parts = []
    if plan.vf_gpus:
        parts.append('[pci] report_in_placement, device_spec of %d VFs '
                     '(%s)' % (plan.vf_count,
                               ', '.join(plan.resource_classes())))
    if plan.mdev_types:
        parts.append('[devices] enabled_mdev_types %s and their '
                     'device_addresses' % ', '.join(
                         t.mdev_type for t in plan.mdev_types))
    return "nova-compute's options: " + '; '.join(parts)
