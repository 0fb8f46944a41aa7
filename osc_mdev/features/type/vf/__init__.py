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


"""``type change`` of a GPU whose vGPUs are SR-IOV VFs typed through
sysfs, offered through PCI in Placement: the pure logic (``change``:
the VFs to reset, ``config generate``'s lines for the new type, the
nova.conf read back with Nova's rules) and the steps and checks
(``run``).
"""
