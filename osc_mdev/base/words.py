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

"""How the messages of the commands count and list things in English,
and show a value read from outside in one line."""

from collections.abc import Iterable


def count(number: int, word: str) -> str:
    """``'1 device'``, ``'3 devices'``."""
    return '%d %s%s' % (number, word, '' if number == 1 else 's')


def and_list(items: Iterable[str]) -> str:
    """``'a'``, ``'a and b'``, ``'a, b and c'``."""
    items = list(items)
    if len(items) < 2:
        return ''.join(items)
    return '%s and %s' % (', '.join(items[:-1]), items[-1])


def first_few(items: Iterable[str], limit: int = 4) -> str:
    """``'a, b, c, d and 2 more'``: at most ``limit`` of the items."""
    shown = list(items)
    text = ', '.join(shown[:limit])
    return text + (' and %d more' % (len(shown) - limit)
                   if len(shown) > limit else '')


def sentence(text: str) -> str:
    """``'Text.'`` of ``'text'``: its first letter capital, one full stop
    at the end.
    """
    return text[:1].upper() + text[1:] + '.'


def escaped(text: str) -> str:
    """``text`` in one line of printable characters: control
    characters, backslashes and other characters that do not print as
    themselves written as Python escapes (``\\n``, ``\\x1b``).
    """
    return ''.join(c if c == ' ' or (c.isprintable() and c != '\\')
                   else c.encode('unicode_escape').decode('ascii')
                   for c in text)


def control_character(text: str) -> str | None:
    """The first character of ``text`` that is neither printable nor a
    space (a line break, a tab, an escape...), None when there is none.
    """
    return next((c for c in text if c != ' ' and not c.isprintable()),
                None)
