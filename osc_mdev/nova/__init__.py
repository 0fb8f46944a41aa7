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

"""Nova's rules, mirrored: each module stands for the Nova (or
Placement) file of the same path, each function names the function it
mirrors, and a test runs Nova's own function on the same input.

``conf`` (nova.conf as the services read it: ``settings``, the options
Nova registers: ``options``), ``pci`` (``devspec``, ``request``,
``placement_translator`` and ``config``, the ``[pci]`` section as one
object), ``scheduler`` (``utils``: the one request builder,
``ResourceRequest``; ``request_filter``: the prefilters),
``virt/hardware`` (the extra specs a host must honour),
``compute`` (``provider_config`` and, in ``resource_tracker``, how
nova-compute merges those files into its tree; ``utils``: what a server
counts against DbQuotaDriver's quotas), ``limit`` (the unified limits:
``utils``, which limit Nova enforces, and ``placement``, what a server
counts against them and how many fit), ``migration`` (the rules
on moving a server), ``objects`` (Nova's servers, flavors and compute
nodes as the rules read them) and ``names`` (how Nova and Placement
name devices and providers). Pure: no network, no files, no sysfs;
imports only the standard library, oslo.config's parser, PyYAML,
os-traits, os-resource-classes, ``osc_mdev.base`` and itself.
"""
