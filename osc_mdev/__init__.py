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

"""osc-mdev: OpenStackClient commands for mediated devices (vGPUs).

The layers, each importing only those below it:

* ``v1``: the commands. Arguments in, one feature call, rows out.
* ``features``: one package per command group; reads through ``cloud``,
  ``api`` and ``local``, hands the data to its pure modules and the
  cores.
* ``cloud``, ``nova``, ``host``, ``base``: the cores. The cloud as read
  (its typed model, bulk reads and the fit engine); Nova's rules in
  files named as Nova's; a compute node's devices; errors, findings and
  words.
* ``api``: HTTP to Placement, Nova and Keystone (keystoneauth).
* ``local``: nova.conf files and sysfs trees on the machine.

``library`` is the Python API; ``plugin`` is OpenStackClient's entry
point.
"""
