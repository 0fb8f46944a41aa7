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

"""One-time-use devices against a real Placement (PostgreSQL): their
state in ``provider list`` and ``show``, and ``provider release``.

The providers are made as nova-compute makes those of a ``[pci]
device_spec`` entry with ``"one_time_use": "true"``
(``nova.compute.pci_placement_translator``): the HW_PCI_ONE_TIME_USE
trait besides COMPUTE_MANAGED_PCI_DEVICE and OWNER_NOVA, and ``reserved``
set to ``total`` while a server holds the device, left so after it is
gone.
"""

import json

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
import pytest

from osc_mdev.api import http
from osc_mdev.api import placement as placement_client
from osc_mdev.cloud import providers
from osc_mdev.cloud import reads
from osc_mdev.features.provider import writes as release
from tests.fixtures import cli
from tests.fixtures import placement_data
from tests.fixtures.placement_data import Gpu

OTU = 'HW_PCI_ONE_TIME_USE'
H100 = 'CUSTOM_PCI_10DE_2330'
HOST = 'otu1'
OTHER = 'otu2'


class Cloud:
    """Host otu1: a device used once (waiting), one in use, one never
    used, one reserved by an operator without the trait; host otu2: one
    device used once; host mdev1: an mdev GPU.
    """

    def __init__(self, pg):
        self.pg = pg
        p = self.placement = placement_data.Placement(pg.url)
        p.require_trait(OTU)
        root = self.root = p.add_compute_node(HOST)
        self.waiting = self.used_once(root, HOST, '0000:85:00.0')
        self.in_use = self.otu(root, HOST, '0000:86:00.0')
        self.server = p.boot_server(root, self.in_use)
        self.reserve(self.in_use)          # Nova's update after the boot
        self.fresh = self.otu(root, HOST, '0000:87:00.0')
        self.held = p.add_pci_device(root, HOST, '0000:88:00.0', H100, 1)
        self.reserve(self.held)
        other = self.other_root = p.add_compute_node(OTHER)
        self.other = self.used_once(other, OTHER, '0000:85:00.0')
        p.add_compute_node('mdev1', [Gpu('pci_0000_84_00_0', 'VGPU', 4)])

    def otu(self, root, host, address):
        return self.placement.add_pci_device(root, host, address, H100, 1,
                                             (OTU,))

    def used_once(self, root, host, address):
        """A device whose server came and went: reserved, no consumer."""
        gpu = self.otu(root, host, address)
        server = self.placement.boot_server(root, gpu)
        self.reserve(gpu)
        self.placement.request('DELETE', '/allocations/%s' % server)
        return gpu

    def reserve(self, gpu, reserved=None):
        self.placement.set_inventory(gpu.uuid, {H100: {
            'total': 1, 'max_unit': 1,
            'reserved': gpu.total if reserved is None else reserved}})

    def reserved(self, gpu):
        return self.placement.request(
            'GET', '/resource_providers/%s/inventories' % gpu.uuid)[
            'inventories'][H100]['reserved']


@pytest.fixture(scope='module')
def cloud(pg_placement):
    return Cloud(pg_placement)


@pytest.fixture(scope='module')
def auth(cloud):
    return cli.admin_token_args(cloud.pg.url)


@pytest.fixture(scope='module')
def client(cloud):
    session = ks_session.Session(
        auth=token_endpoint.Token(cloud.pg.url, 'admin'))
    return placement_client.PlacementClient(http.Service(
        session, 'placement', 'Placement', endpoint_override=cloud.pg.url))


def mdev(auth, *args):
    return cli.openstack(*auth, 'mdev', *args)


def states(auth, *args):
    rows = mdev(auth, 'provider', 'list', '-f', 'json', *args).json()
    return {(r['Host'], r['Device']): r['State'] for r in rows}


def counted(cloud, func):
    before = cloud.pg.requests()
    result = func()
    return result, cloud.pg.requests() - before


def test_state_of_each_device_in_list_and_show(cloud, auth):
    expected = {
        (HOST, '0000:85:00.0'): providers.TO_CLEAN,
        (HOST, '0000:86:00.0'): providers.IN_USE,
        (HOST, '0000:87:00.0'): providers.FREE,
        (HOST, '0000:88:00.0'): providers.RESERVED,
        (OTHER, '0000:85:00.0'): providers.TO_CLEAN,
    }
    assert states(auth, '--kind', 'pci') == expected
    assert states(auth, '--kind', 'pci', '--long') == expected
    assert states(auth, '--kind', 'all')[('mdev1', '0000:84:00.0')] == (
        providers.FREE)
    for (host, device), state in expected.items():
        shown = mdev(auth, 'provider', 'show', '%s:%s' % (host, device),
                     '-f', 'json').json()
        assert shown['State'] == state
    # The default mdev view has no State column: its columns are kept.
    rows = mdev(auth, 'provider', 'list', '-f', 'json').json()
    assert 'State' not in rows[0]


def test_state_costs_one_inventory_read_per_waiting_device(cloud, auth):
    """The state needs the inventory of the devices with the trait, no
    consumer and no room only: the two waiting ones here. The other
    devices cost nothing more than the columns without State.
    """
    args = ('provider', 'list', '--kind', 'pci', '-f', 'json')
    _, without = counted(cloud, lambda: mdev(auth, *args, '-c', 'UUID',
                                             '-c', 'Traits'))
    _, with_state = counted(cloud, lambda: mdev(auth, *args))
    assert with_state - without == 2


def test_dry_run_writes_nothing(cloud, auth):
    generations = [cloud.placement.generation(g.uuid)
                   for g in (cloud.waiting, cloud.other)]
    rows = mdev(auth, 'provider', 'release', '--all', '--dry-run',
                '-f', 'json').json()
    assert [(r['Host'], r['Device'], r['State'], r['Result'])
            for r in rows] == [
        (HOST, '0000:85:00.0', providers.TO_CLEAN, release.WOULD_RELEASE),
        (OTHER, '0000:85:00.0', providers.TO_CLEAN, release.WOULD_RELEASE)]
    assert [cloud.placement.generation(g.uuid)
            for g in (cloud.waiting, cloud.other)] == generations


def test_bad_input_writes_nothing(cloud, auth):
    generations = {g.uuid: cloud.placement.generation(g.uuid)
                   for g in (cloud.waiting, cloud.held)}
    # A device that is not one-time-use, named with a waiting one.
    result = mdev(auth, 'provider', 'release', '%s:0000:85:00.0' % HOST,
                  '%s:0000:88:00.0' % HOST)
    cli.assert_one_line_error(result, '0000:88:00.0',
                              'not a one-time-use device')
    result = mdev(auth, 'provider', 'release', '%s:0000:85:00.0' % HOST,
                  '%s:0000:99:00.0' % HOST)
    cli.assert_one_line_error(result, '0000:99:00.0')
    result = mdev(auth, 'provider', 'release', '--all',
                  '%s:0000:85:00.0' % HOST)
    cli.assert_one_line_error(result, '--all')
    result = mdev(auth, 'provider', 'release')
    cli.assert_one_line_error(result, '--all')
    assert {u: cloud.placement.generation(u) for u in generations} == (
        generations)
    assert cloud.reserved(cloud.held) == 1


def test_a_device_in_use_is_never_released(cloud, auth):
    before = cloud.placement.generation(cloud.in_use.uuid)
    result = mdev(auth, 'provider', 'release', '%s:0000:86:00.0' % HOST,
                  '-f', 'json')
    assert result.rc == 1
    assert [(r['State'], r['Result']) for r in json.loads(result.stdout)
            ] == [(providers.IN_USE, 'refused: in use')]
    assert 'were not released' in result.stderr
    assert cloud.reserved(cloud.in_use) == 1
    assert cloud.placement.generation(cloud.in_use.uuid) == before


def test_a_device_in_use_with_reserved_lowered_is_never_written(
        cloud, client):
    """In use, with reserved below total (someone lowered it): never
    Nova's one-use reservation, never written.
    """
    cloud.reserve(cloud.in_use, 0)
    try:
        device, = reads.one_time_use_devices(
            client, ['%s:0000:86:00.0' % HOST])
        outcome = release.release_device(client, device)
        assert (outcome.state, outcome.failed) == (providers.IN_USE, True)
    finally:
        cloud.reserve(cloud.in_use)


def test_a_concurrent_change_is_read_again_and_decided_again(
        cloud, client):
    """Between the read and the write, another operator releases the
    device and a server takes it: the write conflicts, the device is read
    again, found in use and left alone.
    """
    device, = reads.one_time_use_devices(client, ['%s:0000:85:00.0' % HOST])
    assert device.state == providers.TO_CLEAN
    assert device.generation == device.candidate.generation
    cloud.reserve(cloud.waiting, 0)
    server = cloud.placement.boot_server(cloud.root, cloud.waiting)
    cloud.reserve(cloud.waiting)
    try:
        outcome = release.release_device(client, device)
        assert (outcome.state, outcome.result, outcome.failed) == (
            providers.IN_USE, 'refused: in use', True)
        assert cloud.reserved(cloud.waiting) == 1
    finally:
        cloud.placement.request('DELETE', '/allocations/%s' % server)


def test_a_concurrent_trait_change_is_read_again_then_released(
        cloud, client):
    """A change that leaves the device waiting (a trait written
    meanwhile) makes the first write conflict; read again, it is
    released, and the trait written stays.
    """
    device, = reads.one_time_use_devices(client, ['%s:0000:85:00.0' % OTHER])
    traits = cloud.placement.get_traits(cloud.other.uuid)
    cloud.placement.set_traits(cloud.other.uuid, traits + ['CUSTOM_CLEANED'])
    conflicts = cloud.pg.stats()['status'].get('409', 0)
    outcome = release.release_device(client, device)
    assert (outcome.state, outcome.result) == (
        providers.TO_CLEAN, release.RELEASED)
    assert cloud.reserved(cloud.other) == 0
    assert 'CUSTOM_CLEANED' in cloud.placement.get_traits(cloud.other.uuid)
    # The first write met the new generation: one conflict, then a write.
    assert cloud.pg.stats()['status'].get('409', 0) - conflicts == 1
    cloud.reserve(cloud.other)      # waiting again, for the next test


def test_release_all_releases_only_waiting_devices(cloud, auth):
    result, requests = counted(cloud, lambda: mdev(
        auth, 'provider', 'release', '--all', '-f', 'json'))
    assert result.rc == 0, result.stderr
    assert [(r['Host'], r['Device'], r['Result']) for r in result.json()] == [
        (HOST, '0000:85:00.0', release.RELEASED),
        (OTHER, '0000:85:00.0', release.RELEASED)]
    assert cloud.reserved(cloud.waiting) == 0
    assert cloud.reserved(cloud.other) == 0
    assert cloud.reserved(cloud.in_use) == 1
    assert cloud.reserved(cloud.held) == 1
    # The listing, one anchor, two inventories and two writes.
    assert requests == 6
    assert states(auth, '--kind', 'pci', '--host', HOST)[
        (HOST, '0000:85:00.0')] == providers.FREE
    # Again: nothing waits, nothing is written.
    result = mdev(auth, 'provider', 'release', '--all', '-f', 'json')
    assert (result.rc, result.json()) == (0, [])
    # Named, a free one-time-use device is left as it is, without failing.
    result = mdev(auth, 'provider', 'release', '%s:0000:85:00.0' % HOST,
                  '-f', 'json')
    assert result.rc == 0
    assert [r['Result'] for r in result.json()] == [
        'not changed: not reserved']
