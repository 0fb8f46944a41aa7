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

"""Domain: pure logic and data classes, split by concept.

Nova's rules, mirrored one function each (naming the Nova function), in
a module per Nova file where they span several: ``pci_devspec``,
``pci_request`` and ``pci_placement_translator``, held together by
``pci``'s PciConfig; ``provider_config`` (read as nova-compute reads
the files) and ``provider_config_merge`` (merged into its provider
tree), beside ``provider_config_write`` (the files we write);
``resource_request``, the one request builder (nova/scheduler/utils.py),
with ``hardware`` (the extra specs nova/virt/hardware.py reads) and
``request_filter`` (the scheduler's prefilters). Then a compute node's
devices as its sysfs shows them (``host_gpus``), Placement's provider
and request models, capacity arithmetic and its
explainer, and the findings of ``config check`` (``configcheck``,
``configcheck_pci``, rendered by ``configreport``) and ``audit``: one
model of a finding and its severities, ``findings``. What ``config
generate`` makes of a host: the plan (``configgenerate``) and the texts
of its files (``configgenerate_files``). No network, no
files, no sysfs: everything is handed in as data. Imports only the
standard library, oslo.config's parser, PyYAML (to parse and render
texts), os-traits, os-resource-classes and itself.
"""
