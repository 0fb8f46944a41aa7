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

"""The errors of osc-mdev's library: what went wrong, as data.

Every error below the commands is an ``Error``: its class says what
kind of thing went wrong (a name that matches nothing, an input that
cannot be, a service that failed...), ``data`` holds what it is about
(the name, the service, the HTTP status...), and ``str()`` is one
sentence. A sentence that points at one of the caller's inputs names it
through ``given('parameter')``: a program reads the library's parameter
name there, and the command line the option that gives it (``v1``
words every error in one place, ``osc_mdev.v1.errors``). Code decides on
the class and the data, never on the sentence.
"""

from __future__ import annotations

from collections.abc import Callable
import re
import typing

# An input named in a sentence: ``given('controller_conf')``.
_GIVEN = re.compile(r'\x1f(\w+)\x1f')


def given(parameter: str) -> str:
    """The place in a sentence where the input ``parameter`` (a library
    parameter name, such as ``controller_conf``) is named: as the
    parameter for a program, as its option on the command line.
    """
    return '\x1f%s\x1f' % parameter


def inputs(sentence: str) -> list[str]:
    """The parameters ``sentence`` names through ``given``, in order."""
    return _GIVEN.findall(sentence)


def words(sentence: str, name: Callable[[str], str] = str) -> str:
    """``sentence`` with each input named by ``name(parameter)``."""
    return _GIVEN.sub(lambda match: name(match.group(1)), sentence)


class Error(Exception):
    """An error of osc-mdev's library: one sentence, and its data.

    ``sentence`` may name the caller's inputs through ``given``;
    ``data`` is what the error is about, for a program to act on.
    """

    def __init__(self, sentence: str, /, **data: typing.Any) -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.data = data

    def __str__(self) -> str:
        return words(self.sentence)

    def worded(self, name: Callable[[str], str] = str) -> str:
        """The sentence, each input named by ``name(parameter)``."""
        return words(self.sentence, name)


class NotFound(Error):
    """A name or ID that matches nothing (data: ``kind``, ``name``)."""


class Ambiguous(Error):
    """A name that matches several things (data: ``kind``, ``name``,
    ``matches``).
    """


class Invalid(Error):
    """An input that cannot be, or inputs that contradict each other,
    refused before any request or write (data: ``parameter`` and what is
    wrong with it).
    """


class Refused(Error):
    """What the cloud's state does not allow: a device in use, a type
    Nova does not offer, a write that would lose data. Nothing was
    written.
    """


class ServiceError(Error):
    """A service that failed, refused or could not be reached (data:
    ``service``, and where known ``method``, ``path``, ``status``,
    ``attempts``).
    """


class Failed(Error):
    """Some of many objects could not be done; the others were (data:
    ``failed``, the count, and what the outcome rows say).
    """
