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

"""Local layer: what osc-mdev reads from (and writes to) the machine it
runs on: nova.conf files (read as oslo.config reads them), sysfs trees,
nova-compute's provider config files and the files it writes.

``snapshot`` is the one reader of a compute node's raw files (sysfs,
nova.conf, libvirt domains) into a host snapshot document, standard
library only; ``node`` is a node read from such a snapshot or from the
live files. ``conf_files`` finds the files a list of paths stands for
(``--config-dir`` directories included) and reads their text;
``sysfs`` reads a compute node's sysfs (``/sys`` or a copy of it);
``provider_config`` reads
provider config files as nova-compute finds them and writes them
atomically; ``textfile`` writes a file atomically (the metrics for
node_exporter, the files of ``config generate``). What is read is
handed to the pure modules (``nova``, ``host``) as data (texts, device
records), which parse and judge it: nothing here knows Nova's rules. May
import only the standard library and ``base``, ``nova`` and ``host``.
"""
