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

"""The osc_mdev.vgpu.finding_lines filter: the check's rows as lines."""

DOCUMENTATION = r'''
---
name: finding_lines
short_description: The findings of openstack mdev config check as lines
description:
  - "The rows of C(openstack mdev config check --snapshot-dir DIR -f json)
    whose severity is one of I(severities), one line each
    (C(NODE: SEVERITY: WHERE: MESSAGE)), then one line for each node of
    I(unreachable) that no row names."
positional: severities, unreachable
options:
  _input:
    description: The check's rows.
    type: list
    elements: dict
    required: true
  severities:
    description: The severities to keep.
    type: list
    elements: str
    default: [error, warning]
  unreachable:
    description: The nodes that could not be snapshotted.
    type: list
    elements: str
    default: []
'''

RETURN = r'''
_value:
  description: One line per finding.
  type: list
  elements: str
'''


def finding_lines(rows, severities=('error', 'warning'), unreachable=()):
    lines = ['%s: %s: %s: %s' % (row.get('Node'), row.get('Severity'),
                                 row.get('Where'), row.get('Message'))
             for row in rows if row.get('Severity') in severities]
    named = {row.get('Node') for row in rows}
    lines += ['%s: error: node unreachable, no snapshot taken' % node
              for node in sorted(unreachable) if node not in named]
    return lines


class FilterModule:
    def filters(self):
        return {'finding_lines': finding_lines}
