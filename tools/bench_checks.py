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

"""The "same data" checks of tools/bench.py, each against a reference
that shares no code with osc-mdev.

The references are the per-device reads (``naive_reads``: inventories,
usages and traits of every GPU, one request each, one after another, as
an operator's loop reads them), the compute nodes' own reads
(``node_reads``), and what the bench itself wrote: which GPU each server
got (``Filler.servers``), the flavors the stand-in Nova holds. Each
check answers True or False and says on stderr what differs.
"""

import collections
from concurrent import futures
import json
import pathlib
import sys
import time

import requests

PLACEMENT_VERSION = 'placement 1.14'
DEFAULT = ('Host', 'Device', 'Capacity', 'Used', 'Free', 'Traits')
LONG = DEFAULT + ('Total', 'Reserved', 'Allocation Ratio', 'Max Unit',
                  'Min Unit', 'Step Size')
ROOT_REQUIRED = ('OWNER_NOVA',)
ROOT_FORBIDDEN = ('COMPUTE_STATUS_DISABLED',)


def _say(text: str) -> None:
    print('  ' + text, file=sys.stderr, flush=True)


def _session() -> requests.Session:
    session = requests.Session()
    session.headers.update({'X-Auth-Token': 'admin',
                            'OpenStack-API-Version': PLACEMENT_VERSION})
    return session


def address(nodedev: str) -> str:
    """``pci_0000_3b_00_0`` -> ``0000:3b:00.0``."""
    domain, bus, slot, function = nodedev.split('_')[1:5]
    return '%s:%s:%s.%s' % (domain, bus, slot, function)


# -- the references -------------------------------------------------------

def naive_reads(url: str) -> tuple:
    """The per-device requests one after another in this process:
    ``({(uuid, class): row}, seconds)``.
    """
    session = _session()
    start = time.perf_counter()
    providers = session.get(url + '/resource_providers').json()[
        'resource_providers']
    by_uuid = {p['uuid']: p for p in providers}
    rows = {}
    for rp in providers:
        root = by_uuid.get(rp['root_provider_uuid'])
        if root is None or root is rp:
            continue
        nodedev = rp['name'][len(root['name']) + 1:]
        if not rp['name'].startswith(root['name'] + '_') or ':' in nodedev:
            continue
        base = url + '/resource_providers/' + rp['uuid']
        inv = session.get(base + '/inventories').json()['inventories']
        usages = session.get(base + '/usages').json()['usages']
        traits = session.get(base + '/traits').json()['traits']
        for rc, i in inv.items():
            if rc != 'VGPU' and not rc.startswith('CUSTOM_'):
                continue
            capacity = int((i['total'] - i['reserved'])
                           * i['allocation_ratio'])
            rows[(rp['uuid'], rc)] = {
                'Host': root['name'], 'Device': address(nodedev),
                'Capacity': capacity, 'Total': i['total'],
                'Reserved': i['reserved'],
                'Allocation Ratio': i['allocation_ratio'],
                'Max Unit': i['max_unit'], 'Min Unit': i['min_unit'],
                'Step Size': i['step_size'],
                'Used': usages.get(rc, 0),
                'Free': max(capacity - usages.get(rc, 0), 0),
                'Traits': sorted(traits)}
    return rows, time.perf_counter() - start


def pci_reads(url: str) -> dict:
    """The per-device reads of every PCI-in-Placement provider
    (``<host>_<PCI address>``, a ``CUSTOM_PCI_*`` class), one after
    another (not timed): ``{(uuid, class): row}``, rows as
    ``naive_reads`` gives them (Device: the address the name ends with).
    """
    session = _session()
    providers = session.get(url + '/resource_providers').json()[
        'resource_providers']
    by_uuid = {p['uuid']: p for p in providers}
    rows = {}
    for rp in providers:
        root = by_uuid.get(rp['root_provider_uuid'])
        if root is None or root is rp or ':' not in rp['name'][
                len(root['name']) + 1:]:
            continue
        base = url + '/resource_providers/' + rp['uuid']
        inv = session.get(base + '/inventories').json()['inventories']
        usages = session.get(base + '/usages').json()['usages']
        traits = session.get(base + '/traits').json()['traits']
        for rc, i in inv.items():
            if rc.startswith('CUSTOM_PCI_'):
                capacity = int((i['total'] - i['reserved'])
                               * i['allocation_ratio'])
                rows[(rp['uuid'], rc)] = {
                    'Host': root['name'],
                    'Device': rp['name'][len(root['name']) + 1:].lower(),
                    'Capacity': capacity, 'Used': usages.get(rc, 0),
                    'Free': max(capacity - usages.get(rc, 0), 0),
                    'Traits': sorted(traits)}
    return rows


def node_reads(url: str, workers: int = 8) -> dict:
    """Every compute node's own inventories, usages and traits (three
    requests per root, in a pool; not timed): ``{host: {'inventories',
    'usages', 'traits'}}``.
    """
    session = _session()
    roots = [p for p in session.get(url + '/resource_providers').json()[
        'resource_providers'] if p['root_provider_uuid'] == p['uuid']]

    def one(rp: dict) -> tuple:
        base = url + '/resource_providers/' + rp['uuid']
        return rp['name'], {
            'inventories': session.get(base + '/inventories').json()[
                'inventories'],
            'usages': session.get(base + '/usages').json()['usages'],
            'traits': session.get(base + '/traits').json()['traits']}

    with futures.ThreadPoolExecutor(workers) as pool:
        return dict(pool.map(one, roots))


def required_count(url: str, traits: list) -> int:
    """How many providers have every one of ``traits`` (one request)."""
    resp = requests.get(
        url + '/resource_providers', params={'required': ','.join(traits)},
        headers={'X-Auth-Token': 'admin',
                 'OpenStack-API-Version': 'placement 1.18'})
    return len(resp.json()['resource_providers'])


# -- reckoned from the references ------------------------------------------

def _takes(inventory: dict, used: int, amount: int) -> int:
    """Allocations of ``amount`` one inventory takes, by its unit rules."""
    if not (inventory.get('min_unit', 1) <= amount
            <= inventory.get('max_unit', amount)) \
            or amount % inventory.get('step_size', 1):
        return 0
    capacity = int((inventory['total'] - inventory.get('reserved', 0))
                   * inventory.get('allocation_ratio', 1.0))
    return max(capacity - used, 0) // amount


def flavor_fits(baseline: dict, nodes: dict, root: dict, device: dict,
                trait: str | None = None) -> dict:
    """``{host: servers}`` of a flavor asking ``root`` (``{class:
    amount}``) of the compute node and ``device`` (one class, one amount)
    of one GPU (with ``trait``), for every compute node, from the
    references alone.
    """
    [(rclass, amount)] = device.items()
    free = collections.Counter()
    for (uuid, rc), row in baseline.items():
        if rc == rclass and (trait is None or trait in row['Traits']):
            free[row['Host']] += row['Free'] // amount
    fits = {}
    for host, node in nodes.items():
        traits = set(node['traits'])
        if not set(ROOT_REQUIRED) <= traits or traits & set(ROOT_FORBIDDEN):
            fits[host] = 0
            continue
        counts = [free[host]]
        for rc, n in root.items():
            inv = node['inventories'].get(rc)
            counts.append(0 if inv is None else _takes(
                inv, node['usages'].get(rc, 0), n))
        fits[host] = min(counts)
    return fits


def _node_fits(node: dict, root: dict) -> int | None:
    """Servers asking ``root`` the node takes by itself (None when its
    traits rule it out).
    """
    traits = set(node['traits'])
    if not set(ROOT_REQUIRED) <= traits or traits & set(ROOT_FORBIDDEN):
        return None
    counts = []
    for rc, n in root.items():
        inv = node['inventories'].get(rc)
        counts.append(0 if inv is None else _takes(
            inv, node['usages'].get(rc, 0), n))
    return min(counts)


def two_device_fits(baseline: dict, nodes: dict, root: dict,
                    rclass: str) -> dict:
    """``{host: servers}`` of a flavor asking ``root`` of the node and
    one ``rclass`` of each of two different devices (``group_policy=
    isolate``), from the references alone.
    """
    free = collections.defaultdict(list)
    for (uuid, rc), row in baseline.items():
        if rc == rclass:
            free[row['Host']].append(row['Free'])
    fits = {}
    for host, node in nodes.items():
        most = _node_fits(node, root)
        servers = 0
        while most is not None and servers < most and sum(
                min(f, servers + 1) for f in free[host]) >= 2 * (
                    servers + 1):
            servers += 1
        fits[host] = servers
    return fits


def capacity_expected(baseline: dict, rclass: str, traits=()) -> dict:
    """Per host, what a bare request of one ``rclass`` mdev with
    ``traits`` required should give: ``{host: (fits, free, [HOST:ADDR
    with room])}`` over the hosts with a device of any mdev class.
    """
    hosts = {}
    for row in baseline.values():
        hosts.setdefault(row['Host'], (0, 0, []))
    for (uuid, rc), row in baseline.items():
        if rc != rclass or not set(traits) <= set(row['Traits']):
            continue
        fits, free, devices = hosts[row['Host']]
        if row['Free']:
            devices = devices + ['%s:%s' % (row['Host'], row['Device'])]
        # Amount 1: every free mdev of a matching device is one server.
        hosts[row['Host']] = (fits + row['Free'], free + row['Free'],
                              devices)
    return hosts


# -- the checks ------------------------------------------------------------

def same_rows(rows: list, baseline: dict, fields: tuple) -> bool:
    """``provider list -f json`` rows hold the devices and classes of
    ``baseline``, field by field.
    """
    ours = {(r['UUID'], r['Resource Class']): r for r in rows}
    if set(ours) != set(baseline):
        _say('rows differ: %d ours, %d expected, e.g. %s' % (
            len(ours), len(baseline),
            sorted(set(ours) ^ set(baseline))[:3]))
        return False
    wrong = [(k, f) for k in baseline for f in fields
             if ours[k][f] != baseline[k][f]]
    if wrong:
        k, f = wrong[0]
        _say('%d fields differ, e.g. %s %s: %r, expected %r' % (
            len(wrong), k, f, ours[k][f], baseline[k][f]))
    return not wrong


def _families(text: str) -> list:
    from prometheus_client import parser
    return list(parser.text_string_to_metric_families(text))


def metrics_same(text: str, baseline: dict, fits: int | None = None
                 ) -> bool:
    """``mdev metrics`` gives each device's capacity, used and free as
    the per-device reads do and says the run succeeded; with ``fits``,
    the flavor's series holds that number.
    """
    want = {(row['Host'], row['Device'], rc): (
        row['Capacity'], row['Used'], row['Free'])
        for (uuid, rc), row in baseline.items()}
    got = collections.defaultdict(dict)
    success, flavor = None, []
    for family in _families(text):
        for sample in family.samples:
            if family.name == 'openstack_mdev_scrape_success':
                success = sample.value
            if family.name == 'openstack_mdev_flavor_fits':
                flavor.append(sample.value)
            field = {'openstack_mdev_device_capacity': 0,
                     'openstack_mdev_device_used': 1,
                     'openstack_mdev_device_free': 2}.get(family.name)
            if field is not None:
                key = (sample.labels['host'], sample.labels['device'],
                       sample.labels['resource_class'])
                got[key][field] = sample.value
    got = {k: (v.get(0), v.get(1), v.get(2)) for k, v in got.items()}
    ok = success == 1 and got == want
    if not ok:
        _say('metrics differ: success %s, %d series, %d expected' % (
            success, len(got), len(want)))
    if fits is not None and flavor != [fits]:
        _say('flavor fits %s, expected %s' % (flavor, fits))
        ok = False
    return ok


def flavors_same(text: str, totals: dict) -> bool:
    """``mdev metrics --flavor ...``: each flavor's series holds the
    servers ``totals`` gives it.
    """
    got = {}
    for family in _families(text):
        if family.name == 'openstack_mdev_flavor_fits':
            got.update((s.labels['flavor'], s.value)
                       for s in family.samples)
    if got != totals:
        wrong = sorted(f for f in set(got) | set(totals)
                       if got.get(f) != totals.get(f))
        _say('flavor fits differ for %s: %s, expected %s' % (
            wrong[:3], [got.get(f) for f in wrong[:3]],
            [totals.get(f) for f in wrong[:3]]))
    return got == totals


def capacity_same(rows: list, expected: dict) -> bool:
    """``mdev capacity -f json`` rows of a bare request (one per host)
    agree with ``expected`` (capacity_expected).
    """
    ours = {r['Host']: (r['Fits'], r['Free'], sorted(r['Devices']))
            for r in rows}
    want = {h: (f, n, sorted(d)) for h, (f, n, d) in expected.items()}
    if set(ours) - set(want) or len(ours) != len(rows):
        _say('capacity lists hosts %s' % sorted(set(ours) - set(want))[:3])
        return False
    for host, value in want.items():
        if ours.get(host, (0, 0, [])) != value:
            _say('capacity differs on %s: %s, expected %s' % (
                host, ours.get(host), value))
            return False
    return True


def fits_same(rows: list, expected: dict) -> bool:
    """``mdev capacity --flavor -f json``: every compute node with the
    servers ``expected`` (flavor_fits) says, one row per node.
    """
    ours = {r['Host']: r['Fits'] for r in rows}
    if len(ours) != len(rows):
        _say('capacity --flavor lists a host twice')
        return False
    if ours != expected:
        wrong = sorted(h for h in set(ours) | set(expected)
                       if ours.get(h) != expected.get(h))
        _say('flavor fits differ on %d hosts, e.g. %s: %s, expected %s' % (
            len(wrong), wrong[0], ours.get(wrong[0]),
            expected.get(wrong[0])))
        return False
    return True


def explain_same(rows: list, baseline: dict, rclass: str, trait: str
                 ) -> bool:
    """``--explain`` counts what the per-device reads count: the devices
    and hosts left after the class, the trait and the room.
    """
    def left(keep) -> tuple:
        found = [(row['Host'], uuid) for (uuid, rc), row in baseline.items()
                 if keep(rc, row)]
        return len(found), len({h for h, _ in found})

    offers = left(lambda rc, r: rc == rclass)
    tagged = left(lambda rc, r: rc == rclass and trait in r['Traits'])
    room = left(lambda rc, r: rc == rclass and trait in r['Traits']
                and r['Free'] > 0)
    steps = {r['Constraint']: (r['Devices Left'], r['Hosts Left'])
             for r in rows}
    want = {'offers %s' % rclass: offers,
            'required trait %s' % trait: tagged,
            'room for 1 %s' % rclass: room}
    same = all(steps.get(k) == v for k, v in want.items())
    if not same:
        _say('explain differs: %s, expected %s' % (steps, want))
    return same


def audit_same(rows: list, baseline: dict) -> bool:
    """The audit finds what the per-device reads say: an over-capacity
    finding for each device used beyond its capacity (the cloud has
    some), and no orphaned or missing allocation (the stand-in Nova
    knows every consumer).
    """
    over = sorted('%s:%s' % (row['Host'], row['Device'])
                  for row in baseline.values()
                  if row['Used'] > row['Capacity'])
    found = sorted('%s:%s' % (r['Host'], r['Device']) for r in rows
                   if r['Check'] == 'over-capacity')
    wrong = [r for r in rows if r['Check'] in (
        'orphaned-allocation', 'missing-allocation', 'node-mismatch',
        'nova-unreachable')]
    if wrong or found != over:
        _say('audit found %s over capacity (expected %s), and %s' % (
            found[:3], over[:3], wrong[:3]))
    return bool(over) and found == over and not wrong


def allocations_same(rows: list, baseline: dict, servers: dict) -> bool:
    """``allocation list``: amounts per device sum to the used count of
    the per-device reads, and each server is on the GPU the fill gave
    it.
    """
    used = collections.Counter()
    for row in rows:
        used[(row['Provider UUID'], row['Resource Class'])] += row['Amount']
    want = {k: v['Used'] for k, v in baseline.items() if v['Used']}
    placed = {row['Server']: row['Provider UUID'] for row in rows}
    gpus = {s: r.gpu for s, r in servers.items() if r.gpu}
    ok = dict(used) == want and placed == gpus
    if not ok:
        _say('allocation list: %d devices used (expected %d), %d servers '
             '(expected %d)' % (len(used), len(want), len(placed),
                                len(gpus)))
    return ok


def exported_same(directory: str, baseline: dict) -> bool:
    """The provider config files hold each device's custom traits, by
    host and device, as the per-device reads found them.
    """
    import yaml

    expected = {}
    for row in baseline.values():
        custom = sorted(t for t in row['Traits'] if t.startswith('CUSTOM_'))
        if custom:
            expected[(row['Host'], row['Device'])] = custom
    found = {}
    for path in pathlib.Path(directory).glob('*.yaml'):
        host = path.name[:-len('.yaml')]
        for entry in yaml.safe_load(path.read_text())['providers']:
            name = entry['identification']['name']
            found[(host, address(name[len(host) + 1:]))] = entry[
                'traits']['additional']
    if found != expected:
        _say('export: %d devices, expected %d'
             % (len(found), len(expected)))
    return found == expected


def traits_kept(url: str, baseline: dict, fresh: str, present: bool
                ) -> bool:
    """After ``trait set --all`` (``present``) or ``trait unset --all``
    of ``fresh``: every device has it (or none has), and as many devices
    as before have each other trait, with it (or at all).
    """
    had = collections.Counter(t for v in baseline.values()
                              for t in v['Traits'])
    devices = len({uuid for uuid, _ in baseline})
    if present:
        ok = required_count(url, [fresh]) == devices and all(
            required_count(url, [trait, fresh]) == count
            for trait, count in had.items())
    else:
        ok = required_count(url, [fresh]) == 0 and all(
            required_count(url, [trait]) >= count
            for trait, count in had.items())
    if not ok:
        _say('traits after %s: %s on %d providers' % (
            'set' if present else 'unset', fresh,
            required_count(url, [fresh])))
    return ok


def json_rows(text: str) -> list:
    return json.loads(text) if text.strip() else []
