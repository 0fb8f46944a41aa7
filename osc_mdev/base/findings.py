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

"""What a check found: one model for ``config check`` and ``audit``.

A finding has a severity (one of ``SEVERITIES``), a message and what it
is about: ``where`` (the file line, option or place ``config check``
names) or, for ``audit``, the ``check`` that found it and the host,
device, server, resource class and provider it names, with the repair
``--fix`` can make. Each check fills the fields it knows; the others
stay empty.
"""

from collections.abc import Iterable
import dataclasses
import typing

#: ``config check``: nova-compute refuses to start (or, with ``fails``,
#: what it offers always fails); ``audit``: Nova,
#: Placement and the flavors disagree in a way that breaks servers.
ERROR = 'error'
#: ``config check``: Nova silently does something other than written;
#: ``audit``: something to look at before it breaks.
WARNING = 'warning'
INFO = 'info'
SEVERITIES = (ERROR, WARNING, INFO)
#: Most severe first.
SEVERITY_ORDER = {severity: n for n, severity in enumerate(SEVERITIES)}


class Repair(typing.Protocol):
    """What ``audit --fix`` can do about a finding."""

    def describe(self) -> str:
        """The repair in words."""


@dataclasses.dataclass(frozen=True)
class Finding:
    """One finding of a check."""

    severity: str
    where: str = ''
    message: str = ''
    check: str = ''
    host: str = ''
    device: str = ''
    server: str = ''
    resource_class: str = ''
    provider_uuid: str = ''
    repair: Repair | None = None
    #: Nova refuses what was checked: the service does not start with it.
    stops_nova: bool = False
    #: ``config check``: an error nova-compute starts with, but what fails
    #: then, in words (``live migrations of ... fail``).
    fails: str = ''


def by_severity(found: Iterable[Finding]) -> list[Finding]:
    """The findings, most severe first (stable within a severity)."""
    return sorted(found, key=lambda f: SEVERITY_ORDER[f.severity])
