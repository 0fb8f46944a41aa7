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

"""The files ``config generate`` writes, read back by Nova's own code.

Tests marked ``nova`` load the written files with Nova's option
definitions (nova.conf's ``pci``, ``scheduler`` and ``devices`` modules,
``register_dynamic_opts``) and hand them to nova 34: ``[pci]
device_spec`` to ``nova.pci.whitelist.Whitelist`` and the devices of the
host (as libvirt reports them) to ``nova.pci.placement_translator``'s
PlacementView; the aliases to ``nova.pci.request.get_alias_from_config``
and on to the request groups the scheduler asks Placement for; the mdev
options to the libvirt driver's ``_get_supported_vgpu_types`` and
``_get_vgpu_type_per_pgpu``. Each must read what the plan says.
"""

import json
import pathlib

import pytest

from osc_mdev.features.config.generate import files as generated
from osc_mdev.features.config.generate import plan as configgenerate
from osc_mdev.features.config.generate import run as config_generate
from osc_mdev.local import sysfs as local_sysfs
from tests.fixtures import nova_driver
from tests.fixtures import sysfs

L4_A = sysfs.VgpuGpu('0000:25:00.0', numvfs=4, totalvfs=4)
L4_B = sysfs.VgpuGpu('0000:26:00.0', numvfs=4, totalvfs=4, header=True,
                     product_id='27b9')
CHOICES = ('0000:25:00.0=L4-8Q:3', '0000:26:00.0=NVIDIA L4-4Q')
MDEV_DEVICES = [('0000:84:00.0', {'nvidia-35': 4, 'nvidia-36': 2}, None),
                ('0000:85:00.0', {'nvidia-35': 4}, None),
                ('0000:86:00.0', {'nvidia-35': 4}, None)]
MDEV_CHOICES = ('0000:84:00.0=nvidia-36', '0000:85:00.0=nvidia-35')


def choices(*values: str) -> list[configgenerate.Choice]:
    return [configgenerate.parse_choice(v) for v in values]


@pytest.fixture
def nova_conf():
    import nova.conf
    from nova.pci import request

    conf = nova.conf.CONF
    yield conf
    conf.reset()
    for name, group in (('report_in_placement', 'pci'), ('alias', 'pci'),
                        ('device_spec', 'pci'),
                        ('pci_in_placement', 'filter_scheduler')):
        conf.clear_override(name, group)
    request.get_alias_from_config.cache_clear()


@pytest.fixture
def vf_host(tmp_path: pathlib.Path) -> tuple[str, pathlib.Path]:
    """A host with two L4 GPUs, and the files generated for it."""
    root = sysfs.build(tmp_path / 'sys', vgpu_gpus=[L4_A, L4_B])
    out = tmp_path / 'out'
    done = config_generate.generate(root, choices(*CHOICES), str(out))
    assert [w.result for w in done] == ['created'] * 4
    return root, out


def _nova_options(paths: list[pathlib.Path]):
    """The files as nova-compute (or nova-api) reads them."""
    return nova_driver.nova_config([str(p) for p in paths],
                                   modules=('pci', 'scheduler', 'devices'))


def _nova_devices(root: str):
    from nova import objects

    objects.register_all()
    return [objects.PciDevice(
        address=d.address, vendor_id=d.vendor_id, product_id=d.product_id,
        dev_type=d.dev_type, parent_addr=d.parent_addr, status='available',
        instance_uuid=None, extra_info={})
        for d in local_sysfs.read_host(root).pci_devices()]


@pytest.mark.nova
def test_nova_reads_one_device_spec_per_vf(vf_host, nova_conf) -> None:
    from nova.compute import pci_placement_translator as translator
    from nova.pci import whitelist

    root, out = vf_host
    conf = _nova_options([out / generated.COMPUTE_CONF])
    assert conf.pci.report_in_placement is True
    nova_conf.set_override('report_in_placement', True, 'pci')
    specs = whitelist.Whitelist(conf.pci.device_spec)
    matched = {}
    for dev in _nova_devices(root):
        spec = specs.get_devspec(dev)
        if spec is not None:
            tags = spec.get_tags()
            matched[dev.address] = (translator.get_resource_class(
                tags['resource_class'], spec.vendor_id, spec.product_id),
                tags['managed'])
    wanted = {vf: ('CUSTOM_NVIDIA_L4_8Q', 'false') for vf in L4_A.vfs[:3]}
    wanted.update({vf: ('CUSTOM_NVIDIA_L4_4Q', 'false') for vf in L4_B.vfs})
    # Neither PF nor the VF left out matches a spec.
    assert matched == wanted


@pytest.mark.nova
def test_nova_makes_one_provider_per_gpu_with_one_class(vf_host,
                                                        nova_conf) -> None:
    from nova.compute import pci_placement_translator as translator
    from nova.pci import whitelist

    root, out = vf_host
    conf = _nova_options([out / generated.COMPUTE_CONF])
    nova_conf.set_override('report_in_placement', True, 'pci')
    specs = whitelist.Whitelist(conf.pci.device_spec)
    view = translator.PlacementView('gpu5', [])
    for dev in _nova_devices(root):
        spec = specs.get_devspec(dev)
        if spec is not None:
            view.process_dev(dev, spec)
    assert {name: (rp.resource_class, sorted(d.address for d in rp.devs))
            for name, rp in view.rps.items() if rp.devs} == {
        'gpu5_0000:25:00.0': ('CUSTOM_NVIDIA_L4_8Q', L4_A.vfs[:3]),
        'gpu5_0000:26:00.0': ('CUSTOM_NVIDIA_L4_4Q', L4_B.vfs)}


@pytest.mark.nova
def test_nova_reads_the_aliases_and_asks_placement_for_the_class(
        vf_host, nova_conf) -> None:
    from nova import context
    from nova import objects
    from nova.pci import request

    objects.register_all()
    _, out = vf_host
    conf = _nova_options([out / generated.CONTROLLER_CONF])
    assert conf.filter_scheduler.pci_in_placement is True
    nova_conf.set_override('alias', conf.pci.alias, 'pci')
    nova_conf.set_override('pci_in_placement', True, 'filter_scheduler')
    request.get_alias_from_config.cache_clear()
    assert request.get_alias_from_config() == {
        name: ('legacy', [{'dev_type': 'type-VF', 'resource_class': rc}])
        for name, rc in (('nvidia-l4-4q', 'CUSTOM_NVIDIA_L4_4Q'),
                         ('nvidia-l4-8q', 'CUSTOM_NVIDIA_L4_8Q'))}
    spec = objects.RequestSpec(
        context.get_admin_context(),
        pci_requests=objects.InstancePCIRequests(
            requests=request._translate_alias_to_requests('nvidia-l4-8q:2')),
        requested_resources=None)
    spec.generate_request_groups_from_pci_requests()
    assert [g.resources for g in spec.requested_resources] == [
        {'CUSTOM_NVIDIA_L4_8Q': 1}, {'CUSTOM_NVIDIA_L4_8Q': 1}]
    # Without pci_in_placement an alias needs vendor_id and product_id:
    # the controller's file turns it on.
    nova_conf.set_override('pci_in_placement', False, 'filter_scheduler')
    request.get_alias_from_config.cache_clear()
    with pytest.raises(Exception) as refused:
        request.get_alias_from_config()
    assert type(refused.value).__name__ == 'PciInvalidAlias'


@pytest.mark.nova
def test_device_specs_add_to_those_of_the_other_files(vf_host,
                                                      nova_conf) -> None:
    from nova.pci import whitelist

    _, out = vf_host
    nova_file = out.parent / 'nova.conf'
    nova_file.write_text('[pci]\ndevice_spec = {"vendor_id": "8086", '
                         '"product_id": "1572", "physical_network": '
                         '"physnet1"}\n')
    conf = _nova_options([nova_file, out / generated.COMPUTE_CONF])
    nova_conf.set_override('report_in_placement', True, 'pci')
    specs = whitelist.Whitelist(conf.pci.device_spec).specs
    assert [s.vendor_id for s in specs] == ['8086'] + ['10de'] * 7


@pytest.fixture
def mdev_host(tmp_path: pathlib.Path) -> tuple[str, pathlib.Path]:
    root = sysfs.build(tmp_path / 'sys', devices=MDEV_DEVICES,
                       virtual=[('mtty/mtty', {'mtty-1': 2})])
    out = tmp_path / 'out'
    done = config_generate.generate(
        root, choices(*MDEV_CHOICES, 'mtty_mtty=1'), str(out))
    assert [w.file.name for w in done] == [generated.COMPUTE_CONF]
    return root, out


@pytest.mark.nova
def test_nova_gives_each_mdev_gpu_its_type_and_no_default(
        mdev_host, monkeypatch) -> None:
    root, out = mdev_host
    devices = ['pci_0000_84_00_0', 'pci_0000_85_00_0', 'pci_0000_86_00_0',
               'mtty_mtty']
    supported, per_device = nova_driver.run_driver(
        monkeypatch, [str(out / generated.COMPUTE_CONF)], root, devices)
    assert supported == ['nvidia-36', 'nvidia-35', 'mtty-1']
    # 0000:86:00.0, which no choice named, takes no type.
    assert per_device == {
        'pci_0000_84_00_0': ('nvidia-36', 'VGPU'),
        'pci_0000_85_00_0': ('nvidia-35', 'VGPU'),
        'pci_0000_86_00_0': (None, 'VGPU'),
        'mtty_mtty': ('mtty-1', 'VGPU')}


@pytest.mark.nova
def test_nova_reads_the_mdev_groups(mdev_host) -> None:
    _, out = mdev_host
    values = nova_driver.nova_values([str(out / generated.COMPUTE_CONF)])
    assert values['devices']['enabled_mdev_types'] == [
        'nvidia-36', 'nvidia-35', 'mtty-1']
    assert values['mdev_nvidia-36']['device_addresses'] == ['0000:84:00.0']
    assert values['mdev_nvidia-35']['device_addresses'] == ['0000:85:00.0']
    assert values['mdev_mtty-1']['device_addresses'] == ['mtty_mtty']


def test_the_device_specs_are_json_nova_can_read(vf_host) -> None:
    _, out = vf_host
    lines = [line for line in (out / generated.COMPUTE_CONF).read_text()
             .splitlines() if line.startswith('device_spec = ')]
    assert json.loads(lines[0][len('device_spec = '):]) == {
        'address': '0000:25:00.4', 'vendor_id': '10de',
        'product_id': '27b8', 'resource_class': 'CUSTOM_NVIDIA_L4_8Q',
        'managed': 'no'}
    assert len(lines) == 7
    # The class is os-resource-classes' name of the type.
    [gpu, _] = configgenerate.plan(
        local_sysfs.read_host(vf_host[0]),
        [configgenerate.parse_choice(c) for c in CHOICES]).vf_gpus
    assert gpu.resource_class == 'CUSTOM_NVIDIA_L4_8Q'
