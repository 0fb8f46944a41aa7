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

"""One package per command group, each built on the cores (``cloud``,
``nova``, ``host``) and the I/O layers (``api``, ``local``):
``allocation`` (servers and their devices), ``trait``, ``flavor``,
``config`` (``check`` and ``generate``), ``capacity``, ``audit``,
``metrics``, ``migration``, ``quota`` and ``type``. ``provider`` list
and show need no feature of their own: they are the cloud's reads
(``osc_mdev.cloud.reads``).
In each, the pure judgement and the reads that feed it live in modules
named for their job; ``nova_conf`` reads the nova.conf files a command
is given. Nothing here parses the command line or formats output.
"""
