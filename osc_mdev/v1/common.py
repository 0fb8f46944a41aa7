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

"""Argument checks shared by the command modules.

Bad names are refused before any request, as one-line CommandErrors
(exit status 1).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable
import os
import typing

from osc_lib import exceptions

from osc_mdev.domain import names

if typing.TYPE_CHECKING:
    from osc_lib import shell

    from osc_mdev import api
    from osc_mdev.domain import resource_request as rr

T = typing.TypeVar('T')


def client(app: shell.OpenStackShell) -> api.MdevClient:
    """``client_manager.mdev``: the client ``plugin.make_client`` builds
    (osc-lib's ClientManager does not declare a plugin's attribute).
    """
    return app.client_manager.mdev  # type: ignore[attr-defined]


def check(func: Callable[..., T], *args: typing.Any) -> T:
    """Run a domain validator; its ValueError becomes a CommandError."""
    try:
        return func(*args)
    except ValueError as exc:
        raise exceptions.CommandError('%s.' % exc) from exc


def sysfs_root(root: str) -> str:
    """``--sysfs``: a directory, the root of a node's sysfs."""
    if not os.path.isdir(root):
        raise exceptions.CommandError(
            "--sysfs %s is not a directory; give the root of the node's "
            'sysfs, /sys on the compute node.' % root)
    return root


def resource_class(value: str | None) -> str | None:
    """A valid mdev resource class, or None when none was given."""
    if value is None:
        return None
    return check(names.validate_mdev_resource_class, value)


def trait_names(values: Iterable[str]) -> tuple[str, ...]:
    """Every trait name valid, in the order given."""
    return tuple(check(names.validate_trait_name, t) for t in values)


def one_line_errors(
        parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make ``parser`` report a bad argument as one CommandError line,
    and lay its help out as written (``Help``).

    argparse prints the usage and exits 2; osc-mdev's commands say what
    was wrong in one line, exit 1, and point to the command's help.
    """
    parser.formatter_class = _help_formatter(parser.formatter_class)
    command = parser.prog.split(' ', 1)[-1]

    def error(message: str) -> typing.NoReturn:
        raise exceptions.CommandError(
            "%s%s; see 'openstack help %s'."
            % (message[0].upper(), message[1:].rstrip('.'), command))

    parser.error = error  # type: ignore[method-assign]
    return parser


def _help_formatter(base: typing.Any) -> type[argparse.HelpFormatter]:
    """``base`` (cliff's help formatter) laying out a command's
    description and epilog as written in reStructuredText, as the
    documentation renders them: paragraphs filled one by one, indented
    lines (the examples) kept as they are, a paragraph's closing ``::``
    shown as ``:``.
    """
    import re
    import textwrap

    class Help(base):
        def _fill_text(self, text: str, width: int, indent: str) -> str:
            paragraphs = []
            for block in re.split(r'\n[ \t]*\n', text.strip('\n')):
                lines = block.strip('\n').splitlines()
                if not lines:
                    continue
                if all(line.startswith(' ') for line in lines if line):
                    paragraphs.append('\n'.join(
                        indent + line.rstrip() for line in lines))
                    continue
                block = ' '.join(line.strip() for line in lines)
                if block == '::':
                    continue
                if block.endswith('::'):
                    block = block[:-1]
                paragraphs.append(textwrap.fill(
                    block, width, initial_indent=indent,
                    subsequent_indent=indent, break_on_hyphens=False))
            return '\n\n'.join(paragraphs)

    return Help


def bare_request(parsed_args: argparse.Namespace,
                 required: Collection[str]) -> rr.Request:
    """The mdev request of --resource-class, --amount, --spread,
    ``required`` traits and --forbid-trait; a CommandError for a name,
    an amount or a pair of traits that cannot be.
    """
    from osc_mdev.domain import resource_request

    forbidden = sorted(set(trait_names(parsed_args.forbid_trait)))
    both = set(required) & set(forbidden)
    if both:
        raise exceptions.CommandError(
            'Trait %s cannot be both required and forbidden.'
            % ', '.join(sorted(both)))
    return check(resource_request.bare_request,
                 resource_class(parsed_args.resource_class),
                 parsed_args.amount, required, forbidden, parsed_args.spread)
