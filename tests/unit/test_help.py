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

"""Help that helps: each command says what it answers in a few lines and
ends with examples; each option says what it is in a sentence or two. The
details live in the documentation (doc/source/cli).
"""

import re

import pytest

from tests.unit import test_options

COMMANDS = sorted(test_options.commands().items())
CLIFF = ('--help', '--fit-width', '--print-empty', '--noindent',
         '--max-width', '--sort-column', '--sort-ascending',
         '--sort-descending', '--quote', '--prefix', '--column', '--format')


def help_text(name, klass):
    parser = klass(None, None).get_parser('openstack ' + name)
    return parser, parser.format_help()


@pytest.mark.parametrize('name, klass', COMMANDS)
def test_description_says_what_it_answers_in_a_few_lines(name, klass):
    description = klass(None, None).get_description()
    summary, _, body = description.partition('\n')
    assert len(summary) <= 79
    assert len(body.strip().splitlines()) <= 8, name


@pytest.mark.parametrize('name, klass', COMMANDS)
def test_help_ends_with_examples_of_the_command(name, klass):
    parser, text = help_text(name, klass)
    examples = text[text.index('\nExamples:\n'):]
    commands = re.findall(r'^    (openstack [^\n]*)', examples, re.M)
    assert 2 <= len(commands) <= 3, (name, commands)
    for command in commands:
        assert command.startswith('openstack ' + name), command
    assert '::' not in text


@pytest.mark.parametrize('name, klass', COMMANDS)
def test_each_option_help_is_a_sentence_or_two(name, klass):
    parser, _ = help_text(name, klass)
    for action in parser._actions:
        if not action.help or set(action.option_strings) & set(CLIFF):
            continue
        sentences = re.findall(r'[.?!](?:\s|$)', action.help)
        assert len(sentences) <= 2, (name, action.option_strings)
        assert len(action.help) <= 200, (name, action.option_strings)
