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

"""``config check`` on ``[libvirt] live_migration_permit_post_copy``: a
node with VFIO devices (mdevs, PCI devices given to guests) whose driver
asks for post-copy, which QEMU refuses with them. Whether the driver
asks is Nova's own rule (``nova.migration.post_copy_enabled``, checked
against Nova's driver in test_migration).
"""

import pathlib

import pytest

from osc_mdev.features.config.check import reads as config
from osc_mdev.features.config.check import report as configreport
from tests.fixtures import nova_driver

MDEV = ('[devices]\nenabled_mdev_types = nvidia-35\n'
        '[libvirt]\nlive_migration_downtime = 500000\n'
        'live_migration_downtime_steps = 3\n'
        'live_migration_downtime_delay = 3\n')
ON = 'live_migration_permit_post_copy = True\n'
SPEC = '[pci]\ndevice_spec = {"address": "0000:41:00.4"%s}\n'
POST_COPY = '[libvirt]\nlive_migration_permit_post_copy = %s\n'


def post_copy(tmp_path: pathlib.Path, texts: list[str]) -> list:
    paths = nova_driver.write_files(tmp_path, texts)
    checked = config.check(paths)
    return [f for f in checked.findings
            if 'live_migration_permit_post_copy' in f.where]


@pytest.mark.parametrize('texts, severity', [
    ([MDEV + ON], 'error'),
    ([MDEV, POST_COPY % 'yes'], 'error'),
    ([SPEC % ', "live_migratable": "yes"', POST_COPY % 'True'], 'error'),
    ([SPEC % '', POST_COPY % 'True'], 'warning'),
    ([SPEC % ', "live_migratable": "false"', POST_COPY % 'on'], 'warning'),
    # Neutron's SR-IOV ports: Nova detaches them before the migration.
    ([SPEC % ', "physical_network": "physnet1"', POST_COPY % 'True'], None),
    ([MDEV + ON, POST_COPY % 'False'], None),
    ([MDEV], None),
    (['[DEFAULT]\ndebug = true\n' + POST_COPY % 'True'], None),
])
def test_post_copy_with_vfio_devices(tmp_path: pathlib.Path,
                                     texts: list[str],
                                     severity: str | None) -> None:
    found = post_copy(tmp_path, texts)
    assert [f.severity for f in found] == ([severity] if severity else [])
    if found:
        assert 'QEMU refuses' in found[0].message
        assert found[0].message.endswith(
            "set it to False (Nova's vGPU guide).")


def test_post_copy_error_is_no_start_failure(tmp_path: pathlib.Path) -> None:
    paths = nova_driver.write_files(tmp_path, [MDEV + ON])
    checked = config.check(paths)
    assert configreport.failure(checked.findings) == (
        '1 error(s): nova-compute will start, but live migrations of '
        'servers with VFIO devices fail.')
    _, _, verdict = configreport.result(checked.files, checked.findings,
                                        checked.scope)
    assert verdict.endswith('1 error: nova-compute will start, but live '
                            'migrations of servers with VFIO devices fail.')


def test_post_copy_error_names_the_devices(tmp_path: pathlib.Path) -> None:
    [found] = post_copy(tmp_path, [
        MDEV + ON + SPEC % ', "live_migratable": "true"'])
    assert found.message.startswith(
        'live_migration_permit_post_copy = True with mdev types nvidia-35 '
        'and live-migratable PCI devices (address 0000:41:00.4 *:*): '
        'every live migration of their servers away from this node fails')
    assert found.where.endswith(':7')
