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

"""Transient and lasting faults between the CLI and a real Placement.

A real TCP proxy (tests.fixtures.faults) sits between the ``openstack``
command and a real Placement and, per request, answers 500/503, drops the
connection before or after forwarding, delays past the timeout, or answers
a load balancer's HTML page. Each test checks what Placement holds
afterwards, read directly (not through the proxy or osc-mdev).
"""

import collections
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.fixtures import cli
from tests.fixtures import faults
from tests.fixtures.placement_data import Gpu

TRAITS_PUT = '/traits'


@pytest.fixture
def cloud(faulty):
    """The CLI's arguments for Placement behind the fault proxy."""
    return faulty


@pytest.fixture
def host(placement, request):
    name = 'fault-%s' % request.node.name[-40:].replace('_', '-')
    gpus = [Gpu('pci_0000_%02x_00_0' % (0x60 + i), 'VGPU', 4)
            for i in range(6)]
    placement.add_compute_node(name, gpus)
    return name, gpus


def mdev(cloud, *args):
    return cli.openstack(*cloud, 'mdev', *args)


def state(placement, gpus):
    """(generation, traits) of each device, read from Placement itself."""
    return [(placement.generation(g.uuid),
             frozenset(placement.get_traits(g.uuid))) for g in gpus]


def test_reads_survive_transient_faults(placement, cloud, proxy, host):
    name, gpus = host
    # --long: one inventories read per device besides the bulk reads,
    # enough requests to meet every kind of fault.
    clean = mdev(cloud, 'provider', 'list', '--host', name, '--long',
                 '-f', 'json')
    assert clean.rc == 0, clean.stderr
    kinds = [faults.status(503), faults.status(500), faults.DROP_BEFORE,
             faults.DROP_AFTER, faults.HTML_PAGE]

    def every_other(req):
        # Odd requests meet a fault; the retry (the next request) passes.
        return kinds[req.n // 2 % len(kinds)] if req.n % 2 else None
    proxy.reset(every_other)
    result = mdev(cloud, 'provider', 'list', '--host', name, '--long',
                  '-f', 'json')
    assert result.rc == 0, result.stderr
    assert result.json() == clean.json()
    assert result.stderr == ''
    assert {repr(a) for _, a in proxy.actions()} == {
        repr(k) for k in kinds}, proxy.log


def test_lasting_503_is_one_line_naming_request_and_attempts(
        cloud, proxy, host):
    proxy.reset(lambda req: faults.status(503))
    result = mdev(cloud, 'provider', 'list')
    line = cli.assert_one_line_error(
        result, 'Placement failed on GET /resource_providers with HTTP 503',
        'after 4 attempts')
    assert 'Traceback' not in line
    # Each request the command sent was tried 4 times, then given up.
    attempts = collections.Counter(req.path.split('?')[0]
                                   for req, _ in proxy.log)
    assert set(attempts.values()) == {4}, attempts


def test_load_balancer_html_page_is_one_line(cloud, proxy, host):
    html = faults.status(404, b'<html><body>Not here</body></html>',
                         'text/html')
    proxy.reset(lambda req: html)
    result = mdev(cloud, 'provider', 'list')
    cli.assert_one_line_error(
        result, 'answered HTTP 404 with a page that is not from the '
        'Placement API', 'check the Placement endpoint URL')


def test_a_200_that_is_not_json_is_one_line(cloud, proxy, host):
    page = faults.status(200, b'<html>portal login</html>', 'text/html')
    proxy.reset(lambda req: page)
    result = mdev(cloud, 'provider', 'list')
    cli.assert_one_line_error(result, 'answered something that is not JSON')


def test_answer_slower_than_the_timeout_is_retried(
        placement, cloud, proxy, host):
    name, gpus = host
    proxy.reset(faults.nth('GET', '/resource_providers', {1},
                           faults.delay(3)))
    result = mdev(cloud, '--os-mdev-timeout', '1', 'provider', 'list',
                  '--host', name, '-f', 'json')
    assert result.rc == 0, result.stderr
    assert len(result.json()) == len(gpus)
    assert proxy.actions(faults.Delay)


def test_timeouts_that_last_are_one_line(cloud, proxy, host):
    proxy.reset(lambda req: faults.delay(2))
    result = mdev(cloud, '--os-mdev-timeout', '0.5', 'provider', 'list')
    cli.assert_one_line_error(result, 'Cannot reach the Placement API',
                              'timed out', 'after 4 attempts')


def test_lost_trait_writes_are_verified_not_repeated(
        placement, cloud, proxy, host):
    """Placement applies every second trait PUT but its answer is lost:
    the command re-reads, reports each device as changed, and no device
    is written twice.
    """
    name, gpus = host
    before = state(placement, gpus)
    proxy.reset(faults.nth('PUT', '/resource_providers/', {1, 3, 5},
                           faults.DROP_AFTER))
    result = mdev(cloud, 'trait', 'set', '--trait', 'CUSTOM_LOST_ANSWER',
                  '--host', name, '-f', 'json')
    assert result.rc == 0, result.stderr
    assert {r['Result'] for r in result.json()} == {
        'added CUSTOM_LOST_ANSWER'}
    after = state(placement, gpus)
    for (gen0, traits0), (gen1, traits1) in zip(before, after):
        assert traits1 == traits0 | {'CUSTOM_LOST_ANSWER'}
        # One trait write per device: a lost answer was not applied twice.
        assert gen1 == gen0 + 1
    assert len(proxy.actions(faults.DROP_AFTER)) == 3


def test_lasting_fault_mid_run_reports_each_device_and_converges(
        placement, cloud, proxy, host):
    name, gpus = host
    before = state(placement, gpus)
    victim = gpus[2].uuid

    def break_one(req):
        if req.method == 'PUT' and victim in req.path:
            return faults.status(502)
        return None
    proxy.reset(break_one)
    result = mdev(cloud, 'trait', 'set', '--trait', 'CUSTOM_HALF_DONE',
                  '--host', name, '-f', 'json')
    assert result.rc == 1
    rows = json.loads(result.stdout)
    by_device = {r['Device']: r['Result'] for r in rows}
    assert by_device.pop('0000:62:00.0').startswith('failed: ')
    assert set(by_device.values()) == {'added CUSTOM_HALF_DONE'}
    assert result.stderr.strip().splitlines()[-1] == (
        '1 of the devices could not be changed; see the Result column.')
    assert 'Traceback' not in result.stderr
    after = state(placement, gpus)
    # Every device fully changed or untouched.
    for gpu, (gen0, traits0), (gen1, traits1) in zip(gpus, before, after):
        if gpu.uuid == victim:
            assert (gen1, traits1) == (gen0, traits0)
        else:
            assert traits1 == traits0 | {'CUSTOM_HALF_DONE'}
    # Run again without the fault: it converges.
    proxy.reset()
    again = mdev(cloud, 'trait', 'set', '--trait', 'CUSTOM_HALF_DONE',
                 '--host', name, '-f', 'json')
    assert again.rc == 0, again.stderr
    assert {r['Device']: r['Result'] for r in again.json()} == {
        '0000:%02x:00.0' % (0x60 + i): (
            'added CUSTOM_HALF_DONE' if i == 2 else 'unchanged')
        for i in range(6)}
    assert all('CUSTOM_HALF_DONE' in t for _, t in state(placement, gpus))


@pytest.mark.parametrize('detail', [
    'Another thread concurrently updated the resource provider data. '
    'Please retry your update',
    'Injected fault 500.'])
def test_concurrent_update_500_is_a_conflict_and_reread(
        placement, cloud, proxy, host, detail):
    """Placement's 500 on a trait PUT when another writer moved the
    provider on wrote nothing: whatever its words, the device is re-read
    and written again, keeping the other writer's trait.
    """
    name, gpus = host
    body = json.dumps({'errors': [{
        'status': 500, 'title': 'Internal Server Error', 'detail': detail,
        'code': 'placement.undefined_code'}]}).encode()
    raced = faults.nth('PUT', '/resource_providers/', {1, 2},
                       faults.status(500, body))

    def race(req):
        answer = raced(req)
        if answer is not None:
            # The other writer that won the race.
            uuid = req.path.split('/')[2]
            placement.set_traits(uuid, sorted(
                set(placement.get_traits(uuid)) | {'CUSTOM_OTHER_WRITER'}))
        return answer
    proxy.reset(race)
    result = mdev(cloud, 'trait', 'set', '--trait', 'CUSTOM_AFTER_RACE',
                  '--host', name, '-f', 'json')
    assert result.rc == 0, result.stderr
    assert all(r['Result'].startswith('added CUSTOM_AFTER_RACE')
               for r in result.json())
    traits = [t for _, t in state(placement, gpus)]
    assert all('CUSTOM_AFTER_RACE' in t for t in traits)
    assert sum('CUSTOM_OTHER_WRITER' in t for t in traits) == 2


def test_a_500_that_moved_nothing_fails_that_device_only(
        placement, cloud, proxy, host):
    """A 500 on a trait PUT with the provider's generation where it was
    is Placement's failure, not a race: that device fails, untouched,
    and a run without the fault converges.
    """
    name, gpus = host
    before = state(placement, gpus)
    proxy.reset(faults.nth('PUT', '/resource_providers/', {1},
                           faults.status(500)))
    result = mdev(cloud, 'trait', 'set', '--trait', 'CUSTOM_AFTER_500',
                  '--host', name, '-f', 'json')
    assert result.rc == 1
    assert 'Traceback' not in result.stderr
    rows = json.loads(result.stdout)
    failed = [r['Result'] for r in rows if r['Result'].startswith('failed')]
    assert len(failed) == 1 and 'HTTP 500' in failed[0], rows
    after = state(placement, gpus)
    assert sum(t1 == t0 and g1 == g0 for (g0, t0), (g1, t1)
               in zip(before, after)) == 1
    proxy.reset()
    again = mdev(cloud, 'trait', 'set', '--trait', 'CUSTOM_AFTER_500',
                 '--host', name, '-f', 'json')
    assert again.rc == 0, again.stderr
    assert all('CUSTOM_AFTER_500' in t for _, t in state(placement, gpus))


def _ctrl_c_as_from_a_terminal():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_mid_run_leaves_each_device_done_or_untouched(
        placement, cloud, proxy, host, tmp_path):
    name, gpus = host
    before = state(placement, gpus)
    slow = faults.delay(2.0)   # a window wide enough on a busy machine
    proxy.reset(lambda req: slow if req.method == 'PUT' and (
        '/resource_providers/' in req.path) else None)
    proc = subprocess.Popen(
        [sys.executable, '-m', 'openstackclient.shell', *cloud,
         '--os-mdev-max-workers', '2', 'mdev', 'trait', 'set', '--trait',
         'CUSTOM_INTERRUPTED', '--host', name, '-f', 'json'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ),
        # As from a terminal, even where the tests run in the background
        # (a shell starts those with Ctrl-C ignored).
        preexec_fn=_ctrl_c_as_from_a_terminal)
    deadline = time.monotonic() + 60
    while len(proxy.actions(faults.Delay)) < 2:
        assert time.monotonic() < deadline, proxy.log
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert 'Traceback' not in stderr
    assert 'Interrupted: ' in stderr and 'Run the command again' in stderr
    rows = {r['Device']: r['Result'] for r in json.loads(stdout)}
    after = state(placement, gpus)
    done = 0
    for i, ((gen0, traits0), (gen1, traits1)) in enumerate(
            zip(before, after)):
        result = rows['0000:%02x:00.0' % (0x60 + i)]
        if 'CUSTOM_INTERRUPTED' in traits1:
            assert result == 'added CUSTOM_INTERRUPTED'
            assert (gen1, traits1) == (gen0 + 1, traits0 | {
                'CUSTOM_INTERRUPTED'})
            done += 1
        else:
            assert result == 'not changed: interrupted'
            assert (gen1, traits1) == (gen0, traits0)
    assert 0 < done < len(gpus)
    # Running it again finishes the job.
    proxy.reset()
    again = mdev(cloud, 'trait', 'set', '--trait', 'CUSTOM_INTERRUPTED',
                 '--host', name, '-f', 'json')
    assert again.rc == 0, again.stderr
    assert all('CUSTOM_INTERRUPTED' in t for _, t in state(placement, gpus))


def test_read_failing_on_some_devices_prints_no_partial_table(
        placement, cloud, proxy, host):
    name, gpus = host
    victim = gpus[4].uuid
    # The long table's Total comes from one inventories read per device
    # (the bulk summaries carry no inventory fields).
    proxy.reset(lambda req: faults.status(503) if (
        victim in req.path and req.path.endswith('/inventories')) else None)
    result = mdev(cloud, 'provider', 'list', '--host', name, '--long')
    cli.assert_one_line_error(
        result, 'Placement failed on GET /resource_providers/%s/inventories'
        % victim, 'HTTP 503', 'after 4 attempts')


@pytest.mark.parametrize('workers', [1, 3])
def test_max_workers_bounds_requests_in_flight(placement, cloud, proxy,
                                               host, workers):
    """Counted at the proxy: a bulk write never has more requests in
    flight than --os-mdev-max-workers, over every step of the command.
    """
    name, gpus = host
    proxy.reset(lambda req: faults.delay(0.15))
    result = mdev(cloud, '--os-mdev-max-workers', str(workers), 'trait',
                  'set', '--trait', 'CUSTOM_BOUNDED_%d' % workers, '--host',
                  name, '-f', 'json')
    assert result.rc == 0, result.stderr
    assert len(result.json()) == len(gpus)
    assert proxy.peak == workers, proxy.peak


def test_capacity_of_a_bare_request_reads_in_one_round(cloud, proxy, host):
    """The listing, the allocation candidates and the ``?resources=``
    listing of a bare request do not wait for one another: each is sent
    before any is answered (every answer is held back 0.5 s).
    """
    name, _ = host
    arrived = []

    def slow(req):
        arrived.append((time.monotonic(), req.path))
        return faults.delay(0.5)

    proxy.reset(slow)
    result = mdev(cloud, 'capacity', '--resource-class', 'VGPU', '--host',
                  name, '-f', 'json')
    assert result.rc == 0, result.stderr
    assert [r['Fits'] for r in result.json()] == [24]
    paths = sorted(p.split('?')[0] for _, p in arrived)
    assert paths == ['/allocation_candidates', '/resource_providers',
                     '/resource_providers'], arrived
    first = min(t for t, _ in arrived)
    assert all(t - first < 0.4 for t, _ in arrived), arrived
