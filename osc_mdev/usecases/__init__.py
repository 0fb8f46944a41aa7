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

"""Use-case layer: one module per command group.

Each reads what its command needs through ``osc_mdev.api`` (bulk reads
first, all at once in the bounded pool), hands the data to
``osc_mdev.domain`` and writes back through ``osc_mdev.api``. Nova's
answers become domain objects in one place, ``nova_payloads``: the
domain reads a server's or a flavor's attributes, never the Compute
API's keys. Nothing here parses input or formats output: that is the
commands' (``v1``) and the domain's job. Imports ``api``, ``domain``,
``local`` and itself.
"""
