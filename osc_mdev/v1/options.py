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

"""The options several commands share, each defined once.

An option name means one thing in every command and is described in the
same words (tests/unit/test_options.py holds every command to it). What
a command does with it is in the command's own description. Renamed
options keep their old spelling for one release as a hidden alias that
logs a deprecation warning.
"""

import argparse
from collections.abc import Sequence
import logging
import typing

from osc_mdev.domain import providers
from osc_mdev.domain import traits as trait_logic

LOG = logging.getLogger(__name__)

HOST = ("A compute node, named as in 'openstack hypervisor list' (its "
        "hypervisor hostname), not the service host; repeatable where the "
        "command takes several.")
RESOURCE_CLASS = (
    "Resource class of the devices: VGPU, an mdev type's CUSTOM_<NAME> "
    'class, or the class of PCI-in-Placement devices.')
TRAIT = ('A trait such as CUSTOM_NVIDIA_12: the one to add or remove in '
         "'trait set' and 'trait unset', one the device must have "
         'elsewhere. Repeat for several.')
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
    'for the type of each of its devices; repeat for several hosts.')
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
SYSFS = ("Root of the compute node's sysfs: /sys on the node, or a copy "
         'of it.')
OUTPUT_DIR = ('Directory to write the files in (created if missing), each '
              'replaced atomically; without it, the files are printed.')


class _Deprecated(argparse.Action):
    """An old spelling of an option: does what the new one does, and
    says so once in a warning.
    """

    def __init__(self, option_strings: Sequence[str], dest: str,
                 new: str | None = None, **kwargs: typing.Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser,
                 namespace: argparse.Namespace,
                 values: str | Sequence[typing.Any] | None,
                 option_string: str | None = None) -> None:
        LOG.warning('%s is deprecated and will be removed in the next '
                    'release; use %s.', option_string, self.new)
        if self.nargs == 0:
            setattr(namespace, self.dest, self.const)
            return
        items = list(getattr(namespace, self.dest, None) or [])
        items.append(values)
        setattr(namespace, self.dest, items)


def deprecated(parser: argparse.ArgumentParser, old: str, new: str,
               dest: str, flag: bool = False) -> None:
    """``old`` as a hidden alias of option ``new`` (stored in ``dest``).
    """
    if flag:
        parser.add_argument(old, action=_Deprecated, new=new, dest=dest,
                            nargs=0, const=True, help=argparse.SUPPRESS)
    else:
        parser.add_argument(old, action=_Deprecated, new=new, dest=dest,
                            help=argparse.SUPPRESS)


def host(parser: argparse.ArgumentParser, several: bool = True) -> None:
    if several:
        parser.add_argument('--host', metavar='<host>', action='append',
                            default=[], help=HOST)
    else:
        parser.add_argument('--host', metavar='<host>', help=HOST)


def resource_class(parser: argparse.ArgumentParser,
                   several: bool = False) -> None:
    if several:
        parser.add_argument('--resource-class', metavar='<resource-class>',
                            action='append', default=[],
                            help=RESOURCE_CLASS)
    else:
        parser.add_argument('--resource-class', metavar='<resource-class>',
                            help=RESOURCE_CLASS)


def trait(parser: argparse.ArgumentParser, required: bool = False) -> None:
    parser.add_argument('--trait', metavar='<trait>', action='append',
                        default=[], required=required, help=TRAIT)


def forbid_trait(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--forbid-trait', metavar='<trait>',
                        action='append', default=[], help=FORBID_TRAIT)


def trait_prefix(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--trait-prefix', metavar='<prefix>',
                        default=trait_logic.DEFAULT_TRAIT_PREFIX,
                        help=TRAIT_PREFIX)


def amount_and_spread(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--amount', metavar='<count>', type=int, default=1,
                        help=AMOUNT)
    parser.add_argument('--spread', action='store_true', help=SPREAD)


def dry_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--dry-run', action='store_true', help=DRY_RUN)


def long(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--long', action='store_true', help=LONG)


def controller_conf(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--controller-conf', metavar='<file>',
                        action='append', default=[], help=CONTROLLER_CONF)


def compute_conf(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--compute-conf', metavar='<host>=<file>',
                        action='append', default=[], help=COMPUTE_CONF)


def force(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--force', action='store_true', help=FORCE)


def kind(parser: argparse.ArgumentParser,
         default: str = providers.MDEV) -> None:
    parser.add_argument(
        '--kind', choices=sorted(providers.KIND_CHOICES),
        default=default, help=KIND)


def flavor(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--flavor', metavar='<flavor>', action='append',
                        default=[], help=FLAVOR)


def output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--output', metavar='<file>', help=OUTPUT)


def sysfs(parser: argparse.ArgumentParser, required: bool = False) -> None:
    parser.add_argument('--sysfs', metavar='<root>', required=required,
                        help=SYSFS)


def output_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--output-dir', metavar='<dir>', help=OUTPUT_DIR)


EXPORT_DIR = (
    "Directory of provider config files as 'trait export --output-dir' "
    'writes them (<host>.yaml): the file of each host changed is '
    'rewritten in the same run.')
PROVIDER_CONFIG = (
    "A provider config file of nova-compute, or a directory of them, as "
    'PATH or HOST=PATH (HOST as --host names it). Repeat for several.')


def export_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--export-dir', metavar='<dir>', help=EXPORT_DIR)


def provider_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--provider-config', metavar='[<host>=]<path>',
                        action='append', default=[], help=PROVIDER_CONFIG)
