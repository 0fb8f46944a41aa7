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

"""Slips in nova.conf names: each gives its warning, naming the name and
the closest valid one, and each is cross-checked with Nova: the name is
not one Nova registers for that group while the suggested one is, and
Nova's own code, run on the same files, does what the warning says.
"""

import pytest

from osc_mdev.features.config.check import mdev as configcheck
from osc_mdev.features.config.check import spelling
from osc_mdev.local import conf_files as local_novaconf
from tests.fixtures import nova_driver

write_files = nova_driver.write_files

D2 = '[devices]\nenabled_mdev_types = nvidia-35, nvidia-36\n'
DEVICES = ('pci_0000_84_00_0', 'pci_0000_85_00_0', 'pci_0000_86_00_0')


def _types(expected):
    """Nova's driver gives each device this (type, resource class)."""
    def check(conf, driver):
        assert not isinstance(driver, Exception), driver
        assert {d: driver[1][d] for d in expected} == expected
    return check


def _value(group, name, expected):
    """Nova reads this value for ``[group] name``."""
    def check(conf, driver):
        assert conf[group][name] == expected
    return check


def _not_read(name, written):
    """Nova's [DEFAULT] ``name`` is not the value written."""
    def check(conf, driver):
        assert conf[name] != written
    return check


# slip: (files, (kind, group, written, meant), where, message fragment,
#        what Nova does with the files)
SLIPS = {
    'enabled_mdev_type in the singular': (
        ['[devices]\nenabled_mdev_type = nvidia-35\n'],
        ('option', 'devices', 'enabled_mdev_type', 'enabled_mdev_types'),
        '[devices] enabled_mdev_type, ',
        'Ignored: Nova has no option enabled_mdev_type in [devices]; did '
        'you mean enabled_mdev_types?',
        _value('devices', 'enabled_mdev_types', [])),
    'a [device] section': (
        ['[device]\nenabled_mdev_types = nvidia-35\n'],
        ('group', None, 'device', 'devices'),
        '[device], ',
        'Ignored: Nova has no group [device], so nova-compute reads none of '
        'its options (enabled_mdev_types); did you mean [devices]?',
        _value('devices', 'enabled_mdev_types', [])),
    'device_address in [mdev_<type>]': (
        [D2 + '[mdev_nvidia-35]\ndevice_address = 0000:84:00.0\n'
         '[mdev_nvidia-36]\ndevice_addresses = 0000:85:00.0\n'],
        ('option', 'mdev_nvidia-35', 'device_address', 'device_addresses'),
        '[mdev_nvidia-35] device_address, ',
        'Ignored: Nova has no option device_address in [mdev_nvidia-35]; '
        'did you mean device_addresses?',
        # nvidia-35 lists no device: it is the default type of all others.
        _types({'pci_0000_84_00_0': ('nvidia-35', 'VGPU'),
                'pci_0000_86_00_0': ('nvidia-35', 'VGPU')})),
    'mdev_clas': (
        [D2 + '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'
         'mdev_clas = CUSTOM_NV35\n'],
        ('option', 'mdev_nvidia-35', 'mdev_clas', 'mdev_class'),
        '[mdev_nvidia-35] mdev_clas, ',
        'Ignored: Nova has no option mdev_clas in [mdev_nvidia-35]; did you '
        'mean mdev_class?',
        _types({'pci_0000_84_00_0': ('nvidia-35', 'VGPU')})),
    '[mdev-nvidia-36] with a dash': (
        [D2 + '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'
         '[mdev-nvidia-36]\ndevice_addresses = 0000:85:00.0\n'
         'mdev_class = CUSTOM_NV36\n'],
        ('group', None, 'mdev-nvidia-36', 'mdev_nvidia-36'),
        '[mdev-nvidia-36], ',
        'Ignored: Nova has no group [mdev-nvidia-36], so nova-compute reads '
        'none of its options (device_addresses and mdev_class); did you '
        'mean [mdev_nvidia-36]?',
        # nvidia-36 lists nothing: the default type, and VGPU.
        _types({'pci_0000_85_00_0': ('nvidia-36', 'VGPU'),
                'pci_0000_86_00_0': ('nvidia-36', 'VGPU')})),
    'old and new name in one file': (
        ['[devices]\nenabled_vgpu_types = nvidia-36\n'
         'enabled_mdev_types = nvidia-35\n'],
        ('renamed', 'devices', 'enabled_vgpu_types', 'enabled_mdev_types'),
        '[devices] enabled_vgpu_types, ',
        'Ignored: enabled_vgpu_types = nvidia-36 is the deprecated name of '
        'enabled_mdev_types, which is set too (line 3), and Nova takes that '
        'value, nvidia-35, so nova-compute does not enable nvidia-36; remove '
        'one of them.',
        _value('devices', 'enabled_mdev_types', ['nvidia-35'])),
    'old name in a later file': (
        ['[devices]\nenabled_mdev_types = nvidia-35\n',
         '[devices]\nenabled_vgpu_types = nvidia-36\n'],
        ('renamed', 'devices', 'enabled_vgpu_types', 'enabled_mdev_types'),
        '[devices] enabled_mdev_types, ',
        'Ignored: enabled_mdev_types = nvidia-35 is set again under its '
        'deprecated name enabled_vgpu_types in a later file (',
        _value('devices', 'enabled_mdev_types', ['nvidia-36'])),
    '[default] in lower case': (
        ['[default]\nhost = compute1\n'],
        ('group', None, 'default', 'DEFAULT'),
        '[default], ',
        'Ignored: Nova has no group [default], so nova-compute reads none of '
        'its options (host); did you mean [DEFAULT]?',
        _not_read('host', 'compute1')),
    'an option of [devices] in [DEFAULT]': (
        ['[DEFAULT]\nenabled_mdev_types = nvidia-35\n'],
        ('option', 'DEFAULT', 'enabled_mdev_types', None),
        '[DEFAULT] enabled_mdev_types, ',
        'Ignored: Nova has no option enabled_mdev_types in [DEFAULT]; it is '
        'an option of [devices]: move it there.',
        _value('devices', 'enabled_mdev_types', [])),
    'pci_in_placement in [pci]': (
        ['[pci]\nreport_in_placement = True\npci_in_placement = True\n'],
        ('option', 'pci', 'pci_in_placement', None),
        '[pci] pci_in_placement, ',
        'Ignored: Nova has no option pci_in_placement in [pci]; it is an '
        'option of [filter_scheduler].',
        _value('filter_scheduler', 'pci_in_placement', False)),
    'a misspelt [libvirt] option': (
        ['[libvirt]\nvirt_typ = qemu\n'],
        ('option', 'libvirt', 'virt_typ', 'virt_type'),
        '[libvirt] virt_typ, ',
        'Ignored: Nova has no option virt_typ in [libvirt]; did you mean '
        'virt_type?',
        _value('libvirt', 'virt_type', 'kvm')),      # the default
    'the type of a group misspelt': (
        [D2 + '[mdev_nvidia36]\ndevice_addresses = 0000:85:00.0\n'],
        ('group', None, 'mdev_nvidia36', 'mdev_nvidia-36'),
        '[mdev_nvidia36], ',
        'Ignored: type nvidia36 is not in [devices] enabled_mdev_types, so '
        'Nova does not read this group; did you mean [mdev_nvidia-36]?',
        _types({'pci_0000_85_00_0': ('nvidia-35', 'VGPU')})),
}


def findings(paths):
    conf = local_novaconf.parse_files(paths)
    return list(conf.findings) + configcheck.file_findings(conf)


@pytest.mark.parametrize('slip', sorted(SLIPS))
def test_each_slip_is_named_with_the_closest_valid_name(tmp_path, slip):
    texts, _, where, fragment, _ = SLIPS[slip]
    found = findings(write_files(tmp_path, texts))
    hits = [f for f in found if fragment in f.message]
    assert len(hits) == 1, found
    assert hits[0].severity == 'warning'
    assert hits[0].where.startswith(where), hits[0]
    assert not [f for f in found if f.severity == 'error']


@pytest.mark.nova
@pytest.mark.parametrize('slip', sorted(SLIPS))
def test_nova_does_not_read_the_slip(tmp_path, monkeypatch, slip):
    import nova.conf
    import nova.conf.devices

    texts, (kind, group, written, meant), _, _, nova_does = SLIPS[slip]
    paths = write_files(tmp_path, texts)
    conf = nova_driver.nova_config(paths)
    nova.conf.devices.register_dynamic_opts(conf)

    def registered(group):
        # The enabled types' groups are in conf; every static group of
        # Nova is in nova.conf.CONF (importing nova.conf registers all).
        # [DEFAULT]'s options are at the top, beside the groups' names.
        if group == 'DEFAULT':
            return set(nova.conf.CONF)
        return set(conf[group] if group in conf else nova.conf.CONF[group])

    if kind == 'group':
        # Nova has no such group, and has the meant one (a type's group
        # once the type is enabled; DEFAULT always).
        assert written.lower() not in conf
        assert written.lower() not in nova.conf.CONF
        assert meant in conf or meant in nova.conf.CONF or meant == 'DEFAULT'
    elif kind == 'option':
        assert written not in registered(group)
        if meant:
            assert meant in registered(group)
        else:
            assert spelling.owners(written), written
            for owner in spelling.owners(written):
                assert written in registered(owner)
    else:
        assert meant in registered(group)
        assert written not in registered(group)      # a deprecated name
    driver = nova_driver.run_driver(monkeypatch, paths, str(tmp_path),
                                    DEVICES)
    nova_does(conf, driver)


def test_a_clean_file_has_no_name_finding(tmp_path):
    paths = write_files(tmp_path, [
        '[DEFAULT]\nhost = compute1\ndebug = true\n'
        'transport_url = rabbit://x\n' + D2 +
        '[mdev_nvidia-35]\ndevice_addresses = 0000:84:00.0\n'
        'mdev_class = CUSTOM_NV35\nmax_instances = 4\n'
        '[vgpu_nvidia-36]\ndevice_addresses = 0000:85:00.0\n'
        '[pci]\nreport_in_placement = True\n'
        '[filter_scheduler]\npci_in_placement = True\n'
        '[libvirt]\nvirt_type = kvm\ncpu_model = host-model\n'
        '[keystone_authtoken]\nauth_url = http://x\n'
        '[oslo_messaging_rabbit]\nrabbit_ha_queues = true\n'
        '[placement]\nauth_type = password\nuser_domain_name = Default\n'])
    settings = local_novaconf.load(paths)
    assert [(f.severity, f.message) for f in spelling.findings(settings)] == [
        ('info', 'cpu_model is the deprecated name of cpu_models; Nova still '
                 'reads it.')]


@pytest.mark.parametrize('text,fragment', [
    # Another type, however alike, is not a slip of an enabled one.
    (D2 + '[mdev_nvidia-99]\ndevice_addresses = 0000:85:00.0\n',
     'enable the type or remove the group.'),
    (D2 + '[mdev-nvidia-99]\ndevice_addresses = 0000:85:00.0\n',
     'did you mean [mdev_nvidia-99] (and type nvidia-99 is not in '
     '[devices] enabled_mdev_types)?'),
    (D2 + '[vgpu_nvidia-35]\ndevice_address = 0000:85:00.0\n',
     'no option device_address in [vgpu_nvidia-35]; did you mean '
     'device_addresses?'),
    (D2 + '[devices]\ndevice_addresses = 0000:85:00.0\n',
     'no option device_addresses in [devices]; it is an option of '
     '[mdev_<type>].'),
    (D2 + '[mdev_nvidia-35]\nbogus = 1\n',
     'no option bogus in [mdev_nvidia-35]; its options are '
     'device_addresses, max_instances and mdev_class.'),
    ('[libvirt]\nnothing_like_it = 1\n',
     "no option nothing_like_it in [libvirt]; see Nova's configuration "
     "reference for [libvirt]."),
    ('[mdev]\nenabled_mdev_types = nvidia-35\n',
     'Nova has no group [mdev], so nova-compute reads none of its options '
     '(enabled_mdev_types); enabled_mdev_types is an option of [devices].'),
    ('[devices]\nenabled_mdev_types = nvidia-35\n',
     None),
])
def test_more_names(tmp_path, text, fragment):
    found = findings(write_files(tmp_path, [text]))
    names = [f.message for f in found if f.message.startswith('Ignored')]
    if fragment is None:
        assert names == []
    else:
        assert [m for m in names if fragment in m], found
