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

"""``config generate``: ``plan`` (what a host and its chosen types make),
``files`` (their texts), ``readback`` (the fragments read back by
Nova's rules before any write), ``formats`` (the layouts: ``files``,
``kolla`` for kolla-ansible, ``openstack_ansible``) and ``run``
(reading sysfs, writing the files).
"""
