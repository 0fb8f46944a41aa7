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

"""Argument checks shared by the command modules, and the one place
that ends a command (``Ends``): the library's errors worded with the
options' names (``v1.errors``), and the exit status decided once its
rows are shown.

Bad names are refused before any request, as one-line CommandErrors
(exit status 1).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Sequence
import dataclasses
import logging
import typing

from osc_lib.command import command
from osc_lib import exceptions
from osc_lib import utils

LOG = logging.getLogger(__name__)

if typing.TYPE_CHECKING:
    from osc_lib import shell

    from osc_mdev import api
    from osc_mdev.nova.limit import utils as quota_rules
    from osc_mdev.nova.scheduler import utils as rr

T = typing.TypeVar('T')


def client(app: shell.OpenStackShell) -> api.MdevClient:
    """The mdev client of the command's cloud (``manager_client`` of
    the app's ClientManager).
    """
    return manager_client(app.client_manager)


def manager_client(manager: typing.Any) -> api.MdevClient:
    """``manager.mdev``: the client ``plugin.make_client`` builds for
    this ClientManager, built once and kept on the manager itself.

    OSC keeps each plugin's client on the ClientManager class, so every
    manager of a process would be given the first one's: a program that
    runs commands for two clouds would send the second's requests to
    the first. Kept on the manager, each cloud gets its own.
    """
    from osc_mdev import plugin

    mine = vars(manager).get(plugin.API_NAME)
    if mine is None:
        mine = plugin.make_client(manager)
        setattr(manager, plugin.API_NAME, mine)
    return mine


def warn_quota_driver(strategy: quota_rules.Strategy) -> None:
    """The warning for a controller whose ``[quota] driver`` is not the
    unified limits driver: Nova then uses none of Keystone's limits.
    """
    from osc_mdev.nova.limit import utils as quota_rules

    if not strategy.unified:
        LOG.warning("Warning: [quota] driver is %s in --controller-conf: "
                    "Nova uses none of Keystone's limits (only %s does), so "
                    'no GPU class has a limit.', strategy.driver,
                    quota_rules.UNIFIED_LIMITS_DRIVER)


def check(func: Callable[..., T], *args: typing.Any) -> T:
    """Run a validator of the library; its ValueError becomes a
    CommandError.
    """
    try:
        return func(*args)
    except ValueError as exc:
        raise exceptions.CommandError('%s.' % exc) from exc


def one_line_errors(
        parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make ``parser`` report a bad argument as one CommandError line,
    and lay its help out as written (``Help``); options are spelled in
    full (no abbreviations).

    argparse prints the usage and exits 2; osc-mdev's commands say what
    was wrong in one line, exit 1, and point to the command's help. An
    abbreviation would be a second spelling of an option, whose meaning
    changes when a command gains an option (``--trait`` would be
    ``--trait-prefix``): each option has its one name.
    """
    parser.formatter_class = _help_formatter(parser.formatter_class)
    parser.allow_abbrev = False
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


def properties(item: object, fields: Sequence[str],
               formatters: dict[str, typing.Any] | None = None
               ) -> tuple[typing.Any, ...]:
    """osc-lib's ``get_item_properties`` of a record: the values of its
    attributes named by ``fields`` (``Devices Left``: ``devices_left``),
    through ``formatters``.
    """
    return utils.get_item_properties(
        item, fields, formatters=formatters)  # type: ignore[arg-type]


def bare_request(parsed_args: argparse.Namespace,
                 required: Collection[str]) -> rr.Request:
    """The mdev request of --resource-class, --amount, --spread,
    ``required`` traits and --forbid-trait (names argparse checked); a
    CommandError for a request or a pair of traits that cannot be.
    """
    from osc_mdev.nova.scheduler import utils as scheduler_utils

    forbidden = sorted(set(parsed_args.forbid_trait))
    both = set(required) & set(forbidden)
    if both:
        raise exceptions.CommandError(
            'Trait %s cannot be both required and forbidden.'
            % ', '.join(sorted(both)))
    return check(scheduler_utils.bare_request, parsed_args.resource_class,
                 parsed_args.amount, required, forbidden, parsed_args.spread)


# -- how a command ends ------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a command ends once its rows are shown.

    ``failure``: what failed, one sentence: the command exits 1 with it
    as a CommandError. ``interrupted``: what was left undone, logged as
    the command exits as interrupted (Ctrl-C). Otherwise it exits with
    ``status``: 0, or 1 for an answer that is no (no node takes the
    server, an error-level finding remains).
    """

    status: int = 0
    failure: str | None = None
    interrupted: str | None = None

    def exit_status(self) -> int:
        if self.interrupted:
            LOG.warning('%s', self.interrupted)
            return INTERRUPTED
        if self.failure:
            raise exceptions.CommandError(self.failure)
        return self.status


DONE = Outcome()
#: The exit status of a command interrupted (Ctrl-C), as a shell gives it.
INTERRUPTED = 130


def unwritten(count: int) -> Outcome:
    """The end of a command that writes files, ``count`` of which could
    not be written.
    """
    if not count:
        return DONE
    return Outcome(failure=(
        '%d file(s) could not be written (the old ones are kept); see the '
        'Result column.' % count))


def verdict(yes: bool) -> Outcome:
    """Exit status 0 for an answer that is yes, 1 for no."""
    return DONE if yes else Outcome(status=1)


class Rows(list):
    """What a command lists: its rows, and the Outcome that decides its
    exit status once they are shown; for a command that prints a file
    instead of rows, the file's ``text``. ``take_action`` answers its
    columns and a Rows.
    """

    def __init__(self, rows: Iterable[typing.Any] = (),
                 outcome: Outcome = DONE, text: str | None = None) -> None:
        super().__init__(rows)
        self.outcome = outcome
        self.text = text


# What a Lister's ``take_action`` answers: its columns and its Rows.
Answer = tuple[tuple[str, ...], Rows]


class _Ending(Exception):
    """Carries a command's Outcome from its output to ``run``, which
    decides the exit status: nothing is kept on the command between
    calls.
    """

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome)
        self.outcome = outcome


class Ends:
    """The one way an osc-mdev command ends: the library's errors worded
    with the options' names (``v1.errors``), and the Outcome of its rows
    deciding the exit status once they are shown.
    """

    def run(self, parsed_args: argparse.Namespace) -> int:
        from osc_mdev.base import errors as library_errors
        from osc_mdev.v1 import errors

        try:
            status = super().run(parsed_args)  # type: ignore[misc]
        except _Ending as end:
            return end.outcome.exit_status()
        except library_errors.Error as exc:
            raise errors.command_error(exc) from exc
        return typing.cast(int, status)


class Command(Ends, command.Command):
    """An osc-mdev command that shows no rows."""


class ShowOne(Ends, command.ShowOne):
    """An osc-mdev command that shows one record."""


class Lister(Ends, command.Lister):
    """An osc-mdev command that lists rows: ``take_action`` answers its
    columns and a ``Rows``; its rows (or text) are shown, then its
    Outcome decides the exit status.
    """

    def produce_output(self, parsed_args: argparse.Namespace,
                       column_names: Sequence[str],
                       data: Iterable[typing.Any]) -> int:
        outcome = getattr(data, 'outcome', DONE)
        text = getattr(data, 'text', None)
        if text is not None:
            self.app.stdout.write(text)
            status = 0
        else:
            status = super().produce_output(parsed_args, column_names, data)
        if outcome != DONE:
            raise _Ending(outcome)
        return status
