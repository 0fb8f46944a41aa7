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

"""The embedded cloud's built-in topologies, as data: importing them
imports nothing else (``tests.cloud.server`` imports Nova's harness,
which patches the process with eventlet; a test process that only needs
the topology must not).
"""

DEMO_TOPOLOGY = {
    'hosts': [
        {'name': 'compute1',
         'gpus': 2,
         'bus': '0x81',
         'enabled_mdev_types': ['nvidia-11']},
        {'name': 'compute2',
         'gpus': 2,
         'bus': '0x84',
         'enabled_mdev_types': ['nvidia-11', 'nvidia-12'],
         'mdev': {
             'nvidia-11': {'device_addresses': ['0000:84:00.0']},
             'nvidia-12': {'device_addresses': ['0000:84:01.0']}}},
        {'name': 'gpu_node.rack3',
         'gpus': ['generic', 'generic'],
         'bus': '0x3b',
         'enabled_mdev_types': ['mlx5_core', 'nvidia-12'],
         'mdev': {
             'mlx5_core': {'device_addresses': ['0000:3b:00.0'],
                           'mdev_class': 'CUSTOM_MLX5'},
             'nvidia-12': {'device_addresses': ['0000:3b:01.0'],
                           'mdev_class': 'VGPU'}}},
        # Service host gpu4, compute node (root provider)
        # gpu4.dc2.example.net.
        {'name': 'gpu4',
         'hypervisor_hostname': 'gpu4.dc2.example.net',
         'gpus': 2,
         'bus': '0x25',
         'enabled_mdev_types': ['nvidia-11', 'nvidia-12'],
         'mdev': {
             'nvidia-11': {'device_addresses': ['0000:25:00.0']},
             'nvidia-12': {'device_addresses': ['0000:25:01.0']}}},
        # GPUs reported through PCI in Placement: SR-IOV virtual
        # functions, one provider per physical function.
        {'name': 'sriov1',
         'gpus': 0,
         'bus': '0xc1',
         'pci': {
             'pfs': [
                 {'pfs': 2, 'vfs_per_pf': 4, 'product_id': '26b9',
                  'pf_product_id': '26b8'},
                 {'pfs': 1, 'vfs_per_pf': 2, 'product_id': '2330',
                  'pf_product_id': '2331'}],
             'device_spec': [
                 {'vendor_id': '10de', 'product_id': '26b9',
                  'resource_class': 'CUSTOM_NVIDIA_L40S_VF',
                  'traits': 'CUSTOM_GPU_L40S,CUSTOM_VGPU_VF'},
                 {'vendor_id': '10de', 'product_id': '2330',
                  'traits': 'CUSTOM_GPU_H100'}]}},
    ],
    'pci_alias': [
        {'name': 'l40s-vf', 'vendor_id': '10de', 'product_id': '26b9',
         'device_type': 'type-VF',
         'resource_class': 'CUSTOM_NVIDIA_L40S_VF'},
        {'name': 'h100-vf', 'vendor_id': '10de', 'product_id': '2330',
         'device_type': 'type-VF'},
    ],
    # With a Keystone (EmbeddedCloud(keystone=True)): Nova's unified
    # limits. GPUs for every project by default (2 vGPUs), L40S VFs only
    # for projects given a limit; CUSTOM_MLX5 and the H100 VFs have no
    # limit, so under Nova's default strategy they are unlimited. The
    # harness's project (demo), where the tour's servers go, may hold 8.
    'unified_limits': {
        'registered': {'servers': 20, 'class:VGPU': 2,
                       'class:CUSTOM_NVIDIA_L40S_VF': 0},
        'projects': {
            'demo': {'class:VGPU': 16, 'class:CUSTOM_NVIDIA_L40S_VF': 4},
            'ml-team': {'class:VGPU': 4, 'class:CUSTOM_NVIDIA_L40S_VF': 2},
            'render-farm': {'class:VGPU': 1}}},
}
