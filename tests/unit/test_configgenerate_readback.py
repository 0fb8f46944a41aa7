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

"""What ``config generate`` checks before it writes: the names it takes
from sysfs (PCI addresses by Nova's own ``parse_address``), the
nova.conf fragments read back as Nova reads them, and the script read
by the host's ``/bin/sh -n``. A file that fails a check is not written,
nor is any other.
"""

import dataclasses
import pathlib

import pytest

from osc_mdev.base import words
from osc_mdev.features.config.generate import files as generated
from osc_mdev.features.config.generate import plan as configgenerate
from osc_mdev.features.config.generate import readback
from osc_mdev.features.config.generate import run as config_generate
from osc_mdev.local import shell
from osc_mdev.local import sysfs as local_sysfs
from tests.fixtures import sysfs

L4_A = sysfs.VgpuGpu('0000:25:00.0', numvfs=4, totalvfs=4)
CHOICES = ('0000:25:00.0=L4-8Q:3', '0000:84:00.0=nvidia-35')

ADDRESSES = ['0000:25:00.5', '0000:AF:00.0', '0000:25:00;5', '0000:25:00x5',
             '25:00.5', '0000:25:00.8', '10000:e0:00.0', '0000:25:00.5 ',
             '0000:25:00.5;x', 'mtty_mtty']


@pytest.mark.nova
@pytest.mark.parametrize('address', ADDRESSES)
def test_a_pci_address_is_one_novas_parse_address_reads(address) -> None:
    from nova import exception
    from nova.pci import utils

    try:
        utils.parse_address(address)
        nova_reads = True
    except exception.PciDeviceWrongAddressFormat:
        nova_reads = False
    ours = configgenerate.is_pci_address(address)
    # Only what Nova reads, and of that only the kernel's own form: Nova
    # takes any character for the "." and either case.
    assert ours == (nova_reads and address == address.lower()
                    and address[10:11] == '.')


@pytest.fixture
def planned(tmp_path: pathlib.Path):
    root = sysfs.build(tmp_path / 'sys', devices=[
        ('0000:84:00.0', {'nvidia-35': 4}, None)], vgpu_gpus=[L4_A])
    plan = configgenerate.plan(local_sysfs.read_host(root), [
        configgenerate.parse_choice(c) for c in CHOICES])
    return root, plan, {f.name: f for f in generated.files(plan)}


def test_the_generated_fragments_read_back(planned) -> None:
    _, plan, files = planned
    readback.check(plan, list(files.values()))


@pytest.mark.parametrize('name, change, fragment', [
    (generated.COMPUTE_CONF, ('report_in_placement = True',
                              'report_in_placement = Yes please'),
     'Nova would not read nova-compute-vgpu.conf as it is written'),
    (generated.COMPUTE_CONF, ('device_addresses = 0000:84:00.0',
                              'device_addresses = 0000:84:00.0\n  x'),
     "[mdev_nvidia-35] device_addresses reads ['0000:84:00.0\\\\nx']"),
    (generated.COMPUTE_CONF, ('[devices]', '[devices\n'),
     'cannot be parsed'),
    (generated.CONTROLLER_CONF, ('pci_in_placement = True',
                                 'pci_in_placement = False'),
     '[filter_scheduler] pci_in_placement reads False, not True'),
    (generated.CONTROLLER_CONF, ('"type-VF"', '"type-XX"'),
     'nova-controller-vgpu.conf'),
])
def test_a_fragment_nova_reads_otherwise_is_refused(
        planned, name, change, fragment) -> None:
    _, plan, files = planned
    assert change[0] in files[name].text
    files[name] = dataclasses.replace(
        files[name], text=files[name].text.replace(*change, 1))
    with pytest.raises(configgenerate.GenerateError) as caught:
        readback.check(plan, list(files.values()))
    assert fragment in str(caught.value)
    assert '\n' not in str(caught.value)


def test_the_shell_reads_the_script_and_refuses_a_broken_one() -> None:
    assert shell.syntax_error('#!/bin/sh\nif true; then echo "$1"; fi\n') \
        is None
    error = shell.syntax_error('#!/bin/sh\ngpu 0000:25:00.5 "X\n')
    assert error is not None and '\n' not in error


def test_nothing_is_written_when_the_shell_refuses_the_script(
        planned, tmp_path: pathlib.Path, monkeypatch) -> None:
    root, _, _ = planned
    monkeypatch.setattr(generated, 'script',
                        lambda plan: '#!/bin/sh\ngpu "$(\n')
    out = tmp_path / 'out'
    with pytest.raises(configgenerate.GenerateError) as caught:
        config_generate.generate(root, [configgenerate.parse_choice(c)
                                        for c in CHOICES], str(out))
    assert str(caught.value).startswith(
        '/bin/sh -n refuses the script osc-mdev-vgpu-types (')
    assert not out.exists()


def test_no_shell_no_files(planned, tmp_path: pathlib.Path,
                           monkeypatch) -> None:
    root, _, _ = planned
    monkeypatch.setattr(shell, 'SHELL', str(tmp_path / 'no-sh'))
    out = tmp_path / 'out'
    with pytest.raises(configgenerate.GenerateError,
                       match='^Cannot check the script'):
        config_generate.generate(root, [configgenerate.parse_choice(c)
                                        for c in CHOICES], str(out))
    assert not out.exists()


@pytest.mark.parametrize('text, shown', [
    ('a\nb', 'a\\nb'), ('tab\there', 'tab\\there'), ('\x1b[2J', '\\x1b[2J'),
    ('back\\slash', 'back\\\\slash'), ('L4-8Q é', 'L4-8Q é'),
    ('\u2028', '\\u2028')])
def test_escaped_is_one_printable_line(text, shown) -> None:
    assert words.escaped(text) == shown
    assert (words.control_character(text) is None) == (
        text == words.escaped(text).replace('\\\\', '\\'))
