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

"""The options several commands share, each defined once, and the
``type=`` functions that parse option values.

An option name means one thing in every command and is described in the
same words (tests/unit/test_options.py holds every command to it). What
a command does with it is in the command's own description.

A value that cannot be parsed is refused by argparse, before any file is
read or any request made, as one line naming the option
(``common.one_line_errors``).
"""

import argparse
from collections.abc import Callable
import os
import typing

from osc_mdev.base import words
from osc_mdev.cloud import providers
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.nova import names


HOST = ("A compute node the command looks at, named as in 'openstack "
        "hypervisor list' (its hypervisor hostname), not the service host; "
        "repeatable where the command takes several.")
TARGET = ('A compute node to migrate to, named as --host names nodes; '
          'repeat for several (default: every other node).')
RESOURCE_CLASS = (
    'Resource class of the devices: VGPU, an mdev type\'s CUSTOM_<NAME> '
    'class, or the class of PCI-in-Placement devices.')
TRAIT = ('A trait to add or remove, such as CUSTOM_NVIDIA_12. Repeat for '
         'several.')
REQUIRE_TRAIT = ('A trait the device must have, such as CUSTOM_NVIDIA_12. '
                 'Repeat for several.')
FORBID_TRAIT = 'A trait the device must not have. Repeat for several.'
TRAIT_PREFIX = ('Prefix of the traits named after mdev types (by default '
                'type nvidia-12 is trait CUSTOM_NVIDIA_12).')
AMOUNT = 'Mdevs per server (default 1).'
SPREAD = ('Take each of the --amount mdevs from a different device of the '
          'host (numbered request groups, group_policy=isolate). Several '
          'vGPUs per server need Nova 33.0.0 or later on the computes.')
DRY_RUN = 'Show what would change, and change nothing.'
LONG = 'List additional fields in output.'
CONTROLLER_CONF = (
    "The controller's nova.conf (nova-api, nova-scheduler, nova-conductor) "
    'or a directory of .conf files, for its [pci] aliases, PCI, migration '
    'and [quota] settings; repeat to read several in order.')
COMPUTE_CONF = (
    "A compute node's nova.conf as HOST=FILE (HOST as --host names it), "
    'for the type of each of its devices (and, in migration check and '
    'plan, its live-migration settings); repeat for several hosts.')
SNAPSHOT = (
    "A node's snapshot ('openstack mdev host snapshot'), read instead of "
    '--sysfs, on the controller (config check: instead of the files, '
    '--sysfs and --host, repeat for more nodes).')
FORCE = ("Also change OWNER_* traits such as Nova's OWNER_NOVA, which "
         'Nova puts back when nova-compute restarts or refreshes its '
         'provider cache.')

KIND = ('Which devices: mdev, pci (PCI-in-Placement devices: whole '
        'GPUs, and the VFs of each PF as one device) or all, with a Kind '
        'column. Default: mdev; all in metrics.')
FLAVOR = ('Flavor name or ID whose servers to count: how many more fit '
          'now. Repeat for several flavors.')
OUTPUT = ('Write to this file instead of standard output, atomically: a '
          'reader sees the old file or the new one, and a failed write '
          'leaves the old file.')
PROVIDER_CONFIG_DIR = (
    'A directory of provider config files, one <host>.yaml per compute '
    "node, as 'trait export' writes them to ship to each node.")
PROVIDER_CONFIG = (
    "A compute node's own provider config file, or the directory "
    'nova-compute reads them from, as PATH or HOST=PATH (HOST as --host '
    'names it; a path holding = as ./a=b.yaml). Repeat for several.')
SYSFS = ("Root of the compute node's sysfs: /sys on the node, or a copy "
         'of it.')
SNAPSHOT = ("A node's snapshot ('openstack mdev host snapshot'), read "
            'instead of --sysfs, on the controller (config check: instead '
            'of the files, --sysfs and --host; repeat for more nodes).')
LIBVIRT_DIR = ("The directory of the node's libvirt domain definitions "
               '(default: /etc/libvirt/qemu), whose mdevs are read.')
OUTPUT_DIR = ('Directory to write the files in (created if missing), each '
              'replaced atomically; without it, the files are printed.')


# -- parsing option values ------------------------------------------------

class HostPath(typing.NamedTuple):
    """``HOST=PATH`` as given: the compute node (None when the value
    names no node) and the file or directory.
    """

    host: str | None
    path: str


def host_file(value: str) -> HostPath:
    """``HOST=FILE`` (``--compute-conf``)."""
    host, sep, path = value.partition('=')
    if not sep or not host or not path:
        raise argparse.ArgumentTypeError("takes HOST=FILE, not '%s'"
                                         % value)
    return HostPath(host, path)


def host_path(value: str) -> HostPath:
    """``[HOST=]PATH`` (``--provider-config``), told from the text alone,
    never from what exists: ``HOST=PATH`` when the text before the first
    ``=`` holds no ``/`` (a host name never does), else a path; a path
    whose name holds ``=`` is given with its directory (``./a=b.yaml``).
    """
    host, sep, path = value.partition('=')
    if not sep or '/' in host:
        return HostPath(None, value)
    if not host or not path:
        raise argparse.ArgumentTypeError(
            "takes PATH or HOST=PATH, not '%s'" % value)
    return HostPath(host, path)


def at_least_one(value: str) -> int:
    """A whole number of at least 1 (``--amount``, ``--count``)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            'invalid int value: %r' % value) from None
    if number < 1:
        raise argparse.ArgumentTypeError(
            'must be at least 1, not %d' % number)
    return number


def printable_path(value: str) -> str:
    """A path of printable characters (``--output-dir``): a path with a
    line break or another control character is refused.
    """
    bad = words.control_character(value)
    if bad is not None:
        raise argparse.ArgumentTypeError(
            "'%s' holds the control character %s; give a path in "
            'printable characters' % (words.escaped(value),
                                      words.escaped(bad)))
    return value


def sysfs_root(value: str) -> str:
    """A directory, the root of a node's sysfs (``--sysfs``)."""
    printable_path(value)
    if not os.path.isdir(value):
        raise argparse.ArgumentTypeError(
            "%s is not a directory; give the root of the node's sysfs, "
            '/sys on the compute node' % value)
    return value


def _checked(check: Callable[[str], str], value: str) -> str:
    """``check``'s answer for ``value``; its ValueError refuses the
    value, in its own words.
    """
    try:
        return check(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def resource_class_name(value: str) -> str:
    """An mdev resource class (``--resource-class``)."""
    return _checked(names.validate_mdev_resource_class, value)


def trait_name(value: str) -> str:
    """A well-formed trait name (``--trait``, ``--require-trait``,
    ``--forbid-trait``).
    """
    return _checked(names.validate_trait_name, value)


def type_trait_prefix(value: str) -> str:
    """The prefix of the traits named after mdev types
    (``--trait-prefix``).
    """
    return _checked(trait_logic.validate_prefix, value)


# -- the shared options ---------------------------------------------------

Parser = argparse.ArgumentParser


def host(parser: Parser, several: bool = True) -> None:
    if several:
        parser.add_argument('--host', metavar='<host>', action='append',
                            default=[], help=HOST)
    else:
        parser.add_argument('--host', metavar='<host>', help=HOST)


def target(parser: Parser) -> None:
    parser.add_argument('--target', metavar='<host>', action='append',
                        default=[], help=TARGET)


def resource_class(parser: Parser, several: bool = False) -> None:
    if several:
        parser.add_argument('--resource-class', metavar='<resource-class>',
                            type=resource_class_name, action='append',
                            default=[], help=RESOURCE_CLASS)
    else:
        parser.add_argument('--resource-class', metavar='<resource-class>',
                            type=resource_class_name, help=RESOURCE_CLASS)


def trait(parser: Parser, required: bool = False) -> None:
    parser.add_argument('--trait', metavar='<trait>', type=trait_name,
                        action='append', default=[], required=required,
                        help=TRAIT)


def require_trait(parser: Parser) -> None:
    parser.add_argument('--require-trait', metavar='<trait>',
                        type=trait_name, action='append', default=[],
                        help=REQUIRE_TRAIT)


def forbid_trait(parser: Parser) -> None:
    parser.add_argument('--forbid-trait', metavar='<trait>',
                        type=trait_name, action='append', default=[],
                        help=FORBID_TRAIT)


def trait_prefix(parser: Parser) -> None:
    parser.add_argument('--trait-prefix', metavar='<prefix>',
                        type=type_trait_prefix,
                        default=trait_logic.DEFAULT_TRAIT_PREFIX,
                        help=TRAIT_PREFIX)


def amount_and_spread(parser: Parser) -> None:
    parser.add_argument('--amount', metavar='<count>', type=at_least_one,
                        default=1, help=AMOUNT)
    parser.add_argument('--spread', action='store_true', help=SPREAD)


ALL_DEVICES = (
    'Every device the command acts on: every mdev device for trait set and '
    'unset, every device waiting to be cleaned for provider release; not '
    'with names or other selectors.')


def all_devices(parser: Parser) -> None:
    parser.add_argument('--all', action='store_true', dest='all_devices',
                        help=ALL_DEVICES)


def dry_run(parser: Parser) -> None:
    parser.add_argument('--dry-run', action='store_true', help=DRY_RUN)


def long(parser: Parser) -> None:
    parser.add_argument('--long', action='store_true', help=LONG)


def controller_conf(parser: Parser) -> None:
    parser.add_argument('--controller-conf', metavar='<file>',
                        action='append', default=[], help=CONTROLLER_CONF)


def compute_conf(parser: Parser) -> None:
    parser.add_argument('--compute-conf', metavar='<host>=<file>',
                        type=host_file, action='append', default=[],
                        help=COMPUTE_CONF)


def force(parser: Parser) -> None:
    parser.add_argument('--force', action='store_true', help=FORCE)


def kind(parser: Parser, default: str = providers.MDEV) -> None:
    parser.add_argument(
        '--kind', choices=sorted(providers.KIND_CHOICES),
        default=default, help=KIND)


def flavor(parser: Parser) -> None:
    parser.add_argument('--flavor', metavar='<flavor>', action='append',
                        default=[], help=FLAVOR)


def output(parser: Parser) -> None:
    parser.add_argument('--output', metavar='<file>', help=OUTPUT)


def provider_config_dir(parser: Parser) -> None:
    parser.add_argument('--provider-config-dir', metavar='<dir>',
                        help=PROVIDER_CONFIG_DIR)


def sysfs(parser: Parser, required: bool = False) -> None:
    parser.add_argument('--sysfs', metavar='<root>', type=sysfs_root,
                        required=required, help=SYSFS)


def snapshot(parser: Parser, required: bool = False) -> None:
    parser.add_argument('--snapshot', metavar='<file>', required=required,
                        help=SNAPSHOT)


def libvirt_dir(parser: Parser) -> None:
    parser.add_argument('--libvirt-dir', metavar='<dir>',
                        type=printable_path, default='/etc/libvirt/qemu',
                        help=LIBVIRT_DIR)


NODE_NAME = ("The node's name as Nova reports it (its hypervisor "
             'hostname); default: the name libvirt gives the machine.')


def node_name(parser: Parser, **kwargs: typing.Any) -> None:
    parser.add_argument('--node-name', metavar='<name>', help=NODE_NAME,
                        **kwargs)


def output_dir(parser: Parser) -> None:
    parser.add_argument('--output-dir', metavar='<dir>', type=printable_path,
                        help=OUTPUT_DIR)


def provider_config(parser: Parser) -> None:
    parser.add_argument('--provider-config', metavar='[<host>=]<path>',
                        type=host_path, action='append', default=[],
                        help=PROVIDER_CONFIG)


# -- option groups: options that go together in every command using them ---

def nova_conf_files(parser: Parser, help_text: str) -> None:
    """The nova.conf files (or --config-dir directories) of a compute
    node, in the order nova-compute reads them.
    """
    parser.add_argument('files', metavar='<file>', nargs='*',
                        help=help_text)


def node_files(parser: Parser, help_text: str) -> None:
    """The nova.conf files of the compute node this runs on, and its
    sysfs (``/sys`` unless given).
    """
    nova_conf_files(parser, help_text)
    sysfs(parser)
    parser.set_defaults(sysfs='/sys')


def nova_confs(parser: Parser) -> None:
    """The nova.conf files of compute nodes and controller, and the type
    trait prefix that reading them needs.
    """
    compute_conf(parser)
    controller_conf(parser)
    trait_prefix(parser)


def flavors(parser: Parser) -> None:
    """Flavors, and the controller's nova.conf their PCI aliases are
    read from.
    """
    flavor(parser)
    controller_conf(parser)


def required_and_forbidden_traits(parser: Parser) -> None:
    require_trait(parser)
    forbid_trait(parser)


def long_and_kind(parser: Parser) -> None:
    long(parser)
    kind(parser)
