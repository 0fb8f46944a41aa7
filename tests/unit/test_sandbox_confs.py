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

"""The files the sandbox writes for its hosts (tools/sandbox.py), from
the demo topology's plan alone: the SR-IOV vGPU host's nova.conf and
the copy of its /sys are what the cloud runs, typed or as after a
reboot.
"""

import pathlib
import types
import typing

import pytest

from osc_mdev.features.config.check import reads as config
from osc_mdev.local import sysfs as local_sysfs
from tools import sandbox

# The cloud's plan comes from tests.cloud.server, which imports Nova.
pytestmark = pytest.mark.nova


@pytest.fixture(scope='module')
def hosts() -> dict[str, typing.Any]:
    from tests.cloud import server

    return server.plan_hosts(server.DEMO_TOPOLOGY)


def test_the_vgpu_host_tree_is_the_clouds(
        tmp_path: pathlib.Path, hosts: dict[str, typing.Any]) -> None:
    written = sandbox.write_confs(types.SimpleNamespace(hosts=hosts),
                                  tmp_path)
    assert {'nova-sriov1.conf', 'sys-sriov1'} <= set(written)
    host = local_sysfs.read_host(str(tmp_path / 'sys-sriov1'))
    vfs = sorted(d['pci_address'] for d in hosts['sriov1']['pci']['devices']
                 if d['dev_type'] == 'type-VF')
    assert sorted(vf.address for pf in host.vgpu_gpus()
                  for vf in host.vfs_of(pf)) == vfs
    checked = config.check([str(tmp_path / 'nova-sriov1.conf')],
                           str(tmp_path / 'sys-sriov1'))
    assert [f.message for f in checked.findings
            if f.severity != 'info'] == []
    assert 'all 10 offered, each with a vGPU type' in checked.scope[-1]


def test_after_a_reboot_every_offered_vf_is_named(
        tmp_path: pathlib.Path, hosts: dict[str, typing.Any]) -> None:
    info = hosts['sriov1']
    (tmp_path / 'nova.conf').write_text(sandbox.pci_nova_conf(info))
    sandbox.write_vgpu_sysfs(info, tmp_path / 'sys', typed=False)
    checked = config.check([str(tmp_path / 'nova.conf')],
                           str(tmp_path / 'sys'))
    untyped = [f.device for f in checked.findings
               if 'no vGPU type' in f.message]
    assert untyped == ['0000:c1:00.1', '0000:c1:01.1', '0000:c1:02.1']
