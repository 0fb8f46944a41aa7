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

"""``config check --sysfs --host``: the vGPUs of a host tree (laid out as
the kernel lays it out) against what Placement holds in use there.
"""

import pathlib
import uuid

import pytest

from osc_mdev.domain import configcheck
from osc_mdev.domain import configcheck_usage
from osc_mdev.domain import findings
from osc_mdev.domain import host_gpus
from osc_mdev.local import sysfs as local_sysfs
from tests.fixtures import sysfs

NODE = 'gpu1.example.net'


def placed(address: str, used: int, servers: tuple[str, ...] = (),
           rc: str = 'VGPU') -> configcheck.PlacementDevice:
    nodedev = 'pci_' + address.replace(':', '_').replace('.', '_')
    return configcheck.PlacementDevice(nodedev, address, rc, 4, (),
                                       servers, used)


def host(tmp_path: pathlib.Path, mdevs: dict[str, int]) -> host_gpus.Host:
    """GPUs 0000:84:00.0 and 0000:85:00.0 with ``mdevs`` per address."""
    return local_sysfs.read_host(sysfs.build(
        tmp_path / 'sys', devices=[
            ('0000:84:00.0', {'nvidia-35': 4}, None),
            ('0000:85:00.0', {'nvidia-35': 4}, None)],
        mdevs=[(str(uuid.uuid4()), address, 'nvidia-35')
               for address, count in mdevs.items() for _ in range(count)]))


@pytest.mark.parametrize('mdevs,device,message', [
    ({'0000:84:00.0': 1}, placed('0000:84:00.0', 2, ('a', 'b')),
     'GPU 0000:84:00.0 has 1 mdev but Placement holds 2 VGPU there, for '
     'servers a and b: 1 of their 2 mdevs is gone'),
    ({}, placed('0000:84:00.0', 1, ('vm-1 (a)',), 'CUSTOM_NV35'),
     'GPU 0000:84:00.0 has 0 mdevs but Placement holds 1 CUSTOM_NV35 '
     'there, for server vm-1 (a): its mdev is gone'),
    ({'0000:84:00.0': 1}, placed('0000:84:00.0', 3, ('a',)),
     'for server a: 2 of its 3 mdevs are gone'),
    ({'0000:84:00.0': 1}, placed('0000:84:00.0', 3, ('a', 'b', 'c')),
     'for servers a, b and c: 2 of their 3 mdevs are gone'),
    ({}, placed('0000:86:00.0', 1, ('a',)),
     'GPU 0000:86:00.0 has 0 mdevs (it is not an mdev parent on this '
     'host: is its driver loaded?) but Placement holds 1 VGPU there'),
])
def test_lost_mdevs(tmp_path: pathlib.Path, mdevs: dict[str, int],
                    device: configcheck.PlacementDevice,
                    message: str) -> None:
    [finding] = configcheck_usage.mdev_usage_findings(
        host(tmp_path, mdevs), NODE, [device])
    assert finding.severity == findings.WARNING
    assert finding.where == 'Placement, host %s' % NODE
    assert message in finding.message, finding.message
    assert finding.message.endswith(
        "create it again with the UUID of the server's libvirt domain (its "
        "<hostdev type='mdev'>).")
    assert (finding.host, finding.device, finding.resource_class) == (
        NODE, device.address, device.resource_class)


def test_spare_mdevs_are_a_note(tmp_path: pathlib.Path) -> None:
    [finding] = configcheck_usage.mdev_usage_findings(
        host(tmp_path, {'0000:84:00.0': 3, '0000:85:00.0': 1}), NODE,
        [placed('0000:84:00.0', 1, ('a',)), placed('0000:85:00.0', 1)])
    assert finding.severity == findings.INFO
    assert finding.message == (
        'GPU 0000:84:00.0 has 3 mdevs and Placement holds 1 VGPU there: '
        'Nova gives the 2 no server uses to the next servers.')


def test_matching_counts_are_quiet(tmp_path: pathlib.Path) -> None:
    assert configcheck_usage.mdev_usage_findings(
        host(tmp_path, {'0000:84:00.0': 2}), NODE,
        [placed('0000:84:00.0', 2, ('a', 'b')),
         placed('0000:85:00.0', 0)]) == []
