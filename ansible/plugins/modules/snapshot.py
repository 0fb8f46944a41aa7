#!/usr/bin/python
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

"""The osc_mdev.vgpu.snapshot module: a GPU node's host snapshot."""

DOCUMENTATION = r'''
---
module: snapshot
short_description: Take a GPU compute node's host snapshot
description:
  - Reads what C(openstack mdev config check --sysfs) reads on a compute
    node (the GPUs' and VFs' sysfs entries, the mdevs, the nova.conf files
    as read, the libvirt domains, the node's names as Nova reports them)
    and returns it raw, as the document C(openstack mdev host snapshot)
    writes, for C(openstack mdev config check --snapshot-dir) on the
    controller.
  - Runs with the node's own Python and its standard library only;
    osc-mdev need not be installed on the node. Reads only; an unreadable
    path is listed in the document's C(unreadable), never an error.
version_added: 1.0.0
author:
  - osc-mdev developers
options:
  sysfs:
    description: The root of the node's sysfs.
    type: path
    default: /sys
  nova_conf_files:
    description:
      - The nova.conf files nova-compute reads, in its order.
    type: list
    elements: path
    default: [/etc/nova/nova.conf]
  libvirt_dir:
    description: Where libvirt keeps the domains' XML.
    type: path
    default: /etc/libvirt/qemu
  node_name:
    description:
      - The node's name as Nova reports it (its hypervisor hostname), when
        it is not the one the node's own hostname gives.
    type: str
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
'''

EXAMPLES = r'''
- name: Take the node's snapshot
  osc_mdev.vgpu.snapshot:
    nova_conf_files:
      - /etc/nova/nova.conf
      - /etc/nova/nova.conf.d/vgpu.conf
  register: taken

- name: Keep it on the controller
  ansible.builtin.copy:
    content: "{{ taken.snapshot | to_json }}"
    dest: "/srv/snapshots/{{ inventory_hostname }}.json"
  delegate_to: localhost
'''

RETURN = r'''
snapshot:
  description:
    - The host snapshot document (C(format) osc-mdev-host-snapshot, its
      C(version), C(taken), C(node), C(sysfs), C(nova_conf), C(libvirt),
      C(unreadable)), as C(openstack mdev host snapshot) writes it.
  returned: always
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.osc_mdev.vgpu.plugins.module_utils import (  # noqa
    snapshot as host_snapshot)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs=dict(type='path', default='/sys'),
            nova_conf_files=dict(type='list', elements='path',
                                 default=['/etc/nova/nova.conf']),
            libvirt_dir=dict(type='path', default='/etc/libvirt/qemu'),
            node_name=dict(type='str'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    document = host_snapshot.take(
        sysfs_root=params['sysfs'],
        nova_conf=tuple(params['nova_conf_files']),
        libvirt_dir=params['libvirt_dir'],
        node_name=params['node_name'] or None)
    module.exit_json(changed=False, snapshot=document)


if __name__ == '__main__':
    main()
