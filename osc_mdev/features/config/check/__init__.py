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

"""``config check``: a node's nova.conf files judged by Nova's rules:
``mdev`` (the ``[devices]``/``[mdev_*]`` half), ``pci`` (the ``[pci]``
half), ``vf`` (SR-IOV vGPUs), ``spelling`` (names Nova does not know),
``usage`` (the node's vGPUs against Placement), ``judge`` (one node's
files, devices and Placement view together), ``fleet`` (many nodes
against one read of Placement), ``report`` (the rows) and ``reads``
(what it reads, files, sysfs and Placement).
"""
