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

"""The metrics text, read back with prometheus_client's own parser, and
the shipped Grafana dashboard, which must query only what is emitted.
"""

import json
import pathlib
import re

from prometheus_client import core
from prometheus_client import parser
import pytest

from osc_mdev.cloud import allocations
from osc_mdev.cloud import providers
from osc_mdev.features.metrics import families as metrics
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver
from tests.fixtures import grafana

ROOT = pathlib.Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / 'doc' / 'source' / 'admin' / 'grafana-mdev.json'


def _candidate(host: str, bus: str,
               kind: str = providers.MDEV) -> providers.Candidate:
    """``bus`` 'pci_84' is libvirt's pci_0000_84_00_0."""
    nodedev, address = bus, None
    if bus.startswith('pci_'):
        address = '0000:%s:00.0' % bus.split('_')[1]
        nodedev = 'pci_0000_%s_00_0' % bus.split('_')[1]
    elif kind == providers.PCI:
        address = nodedev.lower()
    return providers.Candidate(
        uuid='u-%s-%s' % (host, nodedev), name='%s_%s' % (host, nodedev),
        host=host, root_uuid='r-' + host, nodedev=nodedev,
        pci_address=address, generation=1, kind=kind)


def _device(host: str, bus: str, rc: str = 'VGPU', capacity: int = 4,
            used: int = 1, traits: tuple = (),
            kind: str = providers.MDEV) -> providers.Device:
    return providers.Device(
        candidate=_candidate(host, bus, kind), resource_class=rc,
        inventory=None, used=used, generation=1, traits=tuple(traits),
        summary_capacity=capacity)


DEVICES = [
    _device('gpu1.example.net', 'pci_84', used=4,
            traits=('CUSTOM_NVIDIA_35', 'OWNER_NOVA')),
    _device('gpu1.example.net', 'pci_85', used=1,
            traits=('CUSTOM_NVIDIA_35',)),
    _device('gpu1.example.net', 'mtty_mtty', rc='CUSTOM_MTTY', capacity=2,
            used=3),
    _device('gpu2', 'pci_3b', capacity=8, used=0,
            traits=('CUSTOM_NVIDIA_35', 'CUSTOM_NVIDIA_36')),
]


def reading(devices: list = DEVICES, **kwargs: object) -> metrics.Reading:
    return metrics.Reading(devices=devices, **kwargs)


def parsed(text):
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def samples(family):
    return {tuple(sorted(s.labels.items())): s.value for s in family.samples}


def by_device(family: core.Metric, label: str = 'device') -> dict:
    return {s.labels[label]: s.value for s in family.samples}


def test_every_family_is_a_gauge_with_help_and_type():
    server = allocations.ServerView('vm', 'ACTIVE', 'gpu1', 'gpu1', 'p1',
                                    'vgpu.small')
    text = metrics.render(metrics.families(reading(
        fits={'vgpu.small': 3}, unread_flavors=('gone',),
        allocations=[allocations.MdevAllocation(
            'c1', DEVICES[0].candidate, 'VGPU', 1)],
        servers={'c1': server}), duration=0.5, timestamp=1.7e9))
    found = parsed(text)
    assert sorted(found) == sorted(metrics.FAMILIES)
    for name, (help_text, _) in metrics.FAMILIES.items():
        assert found[name].type == 'gauge'
        assert found[name].documentation == help_text
        assert '# HELP %s ' % name in text
        assert '# TYPE %s gauge\n' % name in text


def test_device_values_and_labels():
    found = parsed(metrics.render(metrics.families(reading())))
    used = samples(found['openstack_mdev_device_used'])
    assert used[(('device', '0000:84:00.0'), ('host', 'gpu1.example.net'),
                 ('kind', 'mdev'), ('resource_class', 'VGPU'),
                 ('type', 'CUSTOM_NVIDIA_35'))] == 4
    # Used beyond capacity: free is 0, never negative.
    assert by_device(found['openstack_mdev_device_free']) == {
        '0000:84:00.0': 0, '0000:85:00.0': 3, 'mtty_mtty': 0,
        '0000:3b:00.0': 8}
    assert by_device(found['openstack_mdev_device_up']) == {
        '0000:84:00.0': 1, '0000:85:00.0': 1, 'mtty_mtty': 1,
        '0000:3b:00.0': 1}
    assert [s.value for s in found[
        'openstack_mdev_scrape_success'].samples] == [1]


NOVA_CONF = """[devices]
enabled_mdev_types = nvidia-35, nvidia-36

[mdev_nvidia-35]
device_addresses = 0000:84:00.0

[mdev_nvidia-36]
device_addresses = 0000:3b:00.0
"""


def _conf(text: str = NOVA_CONF) -> libvirt_driver.MdevConfig:
    return libvirt_driver.supported_vgpu_types(novaconf.parse_texts(
        [('nova.conf', text)]))


def test_type_is_nova_conf_s_where_given_else_the_trait_s_name():
    found = parsed(metrics.render(metrics.families(reading(
        confs={'gpu1.example.net': _conf()}))))
    types = {s.labels['device']: s.labels['type'] for s in found[
        'openstack_mdev_device_capacity'].samples}
    assert types == {
        # Nova's rule on the given file: listed, or the type it falls to.
        '0000:84:00.0': 'nvidia-35',
        # Listed nowhere and no default type: the trait's name.
        '0000:85:00.0': 'CUSTOM_NVIDIA_35',
        'mtty_mtty': '',
        # No file for gpu2: the traits, which contradict each other.
        '0000:3b:00.0': 'CUSTOM_NVIDIA_35,CUSTOM_NVIDIA_36'}


def test_type_of_a_device_nova_gives_the_default_type():
    conf = _conf('[devices]\nenabled_mdev_types = nvidia-36\n')
    assert metrics.type_label(DEVICES[0], conf) == 'nvidia-36'
    assert metrics.type_label(DEVICES[0]) == 'CUSTOM_NVIDIA_35'


def test_host_totals_per_resource_class():
    found = parsed(metrics.render(metrics.families(reading())))
    for family, want in (
            ('openstack_mdev_host_capacity', {
                ('gpu1.example.net', 'VGPU'): 8,
                ('gpu1.example.net', 'CUSTOM_MTTY'): 2, ('gpu2', 'VGPU'): 8}),
            ('openstack_mdev_host_used', {
                ('gpu1.example.net', 'VGPU'): 5,
                ('gpu1.example.net', 'CUSTOM_MTTY'): 3, ('gpu2', 'VGPU'): 0}),
            ('openstack_mdev_host_free', {
                ('gpu1.example.net', 'VGPU'): 3,
                ('gpu1.example.net', 'CUSTOM_MTTY'): 0,
                ('gpu2', 'VGPU'): 8})):
        assert {(dict(k)['host'], dict(k)['resource_class']): v
                for k, v in samples(found[family]).items()} == want


def test_a_device_not_read_costs_its_series_and_its_node_s_sums():
    unread = _candidate('gpu2', 'pci_3c')
    found = parsed(metrics.render(metrics.families(reading(
        unread_devices=[unread]))))
    assert by_device(found['openstack_mdev_device_up'])[
        '0000:3c:00.0'] == 0
    assert '0000:3c:00.0' not in by_device(
        found['openstack_mdev_device_used'])
    assert {s.labels['host'] for s in found[
        'openstack_mdev_host_used'].samples} == {'gpu1.example.net'}
    assert [s.value for s in found[
        'openstack_mdev_scrape_success'].samples] == [0]


def test_a_device_whose_allocations_were_not_read_keeps_its_sums():
    found = parsed(metrics.render(metrics.families(reading(
        unread_devices=[DEVICES[3].candidate], allocations=[
            allocations.MdevAllocation('c1', DEVICES[3].candidate, 'VGPU',
                                       1)]))))
    assert by_device(found['openstack_mdev_device_up'])[
        '0000:3b:00.0'] == 0
    assert by_device(found['openstack_mdev_device_used'])[
        '0000:3b:00.0'] == 0
    assert 'gpu2' in {s.labels['host'] for s in found[
        'openstack_mdev_host_used'].samples}
    assert found['openstack_mdev_allocation_used'].samples == []


def test_flavor_fits_only_when_asked():
    found = parsed(metrics.render(metrics.families(reading())))
    assert 'openstack_mdev_flavor_fits' not in found
    assert 'openstack_mdev_flavor_up' not in found
    found = parsed(metrics.render(metrics.families(reading(
        fits={'vgpu.small': 3, 'vgpu "big"': 0}))))
    assert samples(found['openstack_mdev_flavor_fits']) == {
        (('flavor', 'vgpu.small'),): 3, (('flavor', 'vgpu "big"'),): 0}
    assert set(by_device(found['openstack_mdev_flavor_up'],
                         'flavor').values()) == {1}
    # An empty family still says what it is: no flavor fits is not "no
    # data".
    found = parsed(metrics.render(metrics.families(reading(fits={}))))
    assert 'openstack_mdev_flavor_fits' in found


def test_a_flavor_not_read_is_up_0_without_fits():
    found = parsed(metrics.render(metrics.families(reading(
        fits={'vgpu.small': 3}, unread_flavors=('deleted',)))))
    assert by_device(found['openstack_mdev_flavor_fits'], 'flavor') == {
        'vgpu.small': 3}
    assert by_device(found['openstack_mdev_flavor_up'], 'flavor') == {
        'vgpu.small': 1, 'deleted': 0}
    assert [s.value for s in found[
        'openstack_mdev_scrape_success'].samples] == [0]


def test_allocations_carry_the_join_labels():
    pci = _device('gpu2', '0000:C1:00.0', rc='CUSTOM_NVIDIA_L40S_VF',
                  capacity=4, used=2, kind=providers.PCI)
    found = parsed(metrics.render(metrics.families(reading(
        devices=DEVICES + [pci], allocations=[
            allocations.MdevAllocation('c1', DEVICES[0].candidate, 'VGPU',
                                       1),
            allocations.MdevAllocation('c2', pci.candidate,
                                       'CUSTOM_NVIDIA_L40S_VF', 2),
            allocations.MdevAllocation('c3', DEVICES[2].candidate,
                                       'CUSTOM_MTTY', 1)],
        servers={'c1': allocations.ServerView(
            'vm1', 'ACTIVE', 'gpu1', 'gpu1.example.net', 'proj-a',
            'vgpu.small'), 'c3': allocations.ServerView.unknown(
                'INSTANCE')}))))
    got = {s.labels['server']: (s.labels, s.value)
           for s in found['openstack_mdev_allocation_used'].samples}
    assert got['c1'] == ({
        'host': 'gpu1.example.net', 'device': '0000:84:00.0',
        'kind': 'mdev', 'resource_class': 'VGPU',
        'type': 'CUSTOM_NVIDIA_35', 'pci_bus_id': '00000000:84:00.0',
        'server': 'c1', 'server_name': 'vm1', 'project': 'proj-a',
        'flavor': 'vgpu.small'}, 1)
    assert got['c2'][0]['pci_bus_id'] == '00000000:C1:00.0'
    assert got['c2'][1] == 2
    # A consumer Nova has no server for, on a parent without an address.
    assert got['c3'][0]['pci_bus_id'] == ''
    assert got['c3'][0]['project'] == ''
    assert got['c3'][0]['server_name'] == (
        '(orphaned: no such server in Nova)')


@pytest.mark.parametrize('address, bus_id', [
    ('0000:3b:00.0', '00000000:3B:00.0'),
    ('0000:af:01.4', '00000000:AF:01.4'),
    ('10000:01:00.0', '00010000:01:00.0'),
    (None, '')])
def test_dcgm_bus_id(address, bus_id):
    assert metrics.dcgm_bus_id(address) == bus_id


@pytest.mark.parametrize('host', [
    'gpu"1', 'back\\slash', 'new\nline', 'plain.example.net'])
def test_label_values_are_escaped(host):
    text = metrics.render(metrics.families(reading(
        devices=[_device(host, 'pci_84')])))
    found = parsed(text)
    hosts = {dict(k)['host'] for k in samples(
        found['openstack_mdev_device_used'])}
    assert hosts == {host}
    # One sample per line: nothing breaks the line structure.
    assert len([line for line in text.splitlines()
                if line.startswith('openstack_mdev_device_used{')]) == 1


def test_failed_run_says_so_and_nothing_else():
    found = parsed(metrics.render(metrics.failed(duration=1.25,
                                                 timestamp=1.7e9)))
    assert sorted(found) == ['openstack_mdev_scrape_duration_seconds',
                             'openstack_mdev_scrape_success',
                             'openstack_mdev_scrape_timestamp_seconds']
    assert [s.value for s in found[
        'openstack_mdev_scrape_success'].samples] == [0]
    assert [s.value for s in found[
        'openstack_mdev_scrape_duration_seconds'].samples] == [1.25]


def test_successful_run():
    found = parsed(metrics.render(metrics.families(reading(devices=[]),
                                                   duration=0.1)))
    assert [s.value for s in found[
        'openstack_mdev_scrape_success'].samples] == [1]
    assert 'openstack_mdev_scrape_timestamp_seconds' not in found
    assert 'openstack_mdev_allocation_used' not in found


def test_the_dashboard_queries_only_emitted_metrics_and_labels():
    dashboard = json.loads(DASHBOARD.read_text())
    queries = list(grafana.queries(dashboard))
    assert queries
    used = set()
    for query in queries:
        names = set(re.findall(r'\b(openstack_mdev_[a-z_]+)\b', query))
        assert names, query
        assert names <= set(metrics.FAMILIES), query
        used |= names
        labels = set()
        for name in names:
            labels |= set(metrics.FAMILIES[name][1])
        if 'DCGM_FI_' in query:
            # The DCGM panel's join label, from DCGM's or ours.
            labels |= {'Hostname'}
        groups = re.findall(
            r'\b(?:by|without|on|group_left|group_right) ?\(([^)]*)\)',
            query) + re.findall(r'[{,]\s*([a-z_]+)\s*=~?"', query) + (
            re.findall(r'label_values\([a-z_]+, ([a-z_]+)\)', query))
        for group in groups:
            for label in filter(None, (g.strip() for g in group.split(','))):
                assert label in labels, (label, query)
    titles = {p['title']: p for p in dashboard['panels']}
    assert {'Free GPUs by type', 'Usage per host', 'Fits per flavor',
            'Servers on the GPUs'} <= set(titles)
    assert {'openstack_mdev_device_free', 'openstack_mdev_host_used',
            'openstack_mdev_flavor_fits', 'openstack_mdev_device_up',
            'openstack_mdev_allocation_used'} <= used
    # The servers' table joins each server to the GPU it is on.
    joined = [q for q in grafana.queries(titles['Servers on the GPUs'])
              if 'openstack_mdev_device_free' in q]
    assert joined and all('openstack_mdev_allocation_used' in q
                          for q in joined)
    # The DCGM panel joins each server to its GPU's DCGM series.
    dcgm = list(grafana.queries(
        titles['GPU utilisation of the servers (DCGM)']))
    assert dcgm and all('openstack_mdev_allocation_used' in q
                        and 'on (Hostname, pci_bus_id)' in q for q in dcgm)
    # Every GPU: no panel leaves a kind out.
    assert not [q for q in queries if 'kind="' in q]
