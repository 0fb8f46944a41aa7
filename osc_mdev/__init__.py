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

* ``v1``: the commands. Arguments in, one use-case call, rows out.
* ``usecases``: one module per command group; reads through ``api`` (and
  files through ``local``), hands the data to ``domain``.
* ``api``: HTTP to Placement and Nova (keystoneauth's Adapter).
* ``local``: nova.conf files and sysfs trees on the machine.
* ``domain``: pure logic and data classes: Nova's and Placement's rules.

``plugin`` is OpenStackClient's entry point.
"""
