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

"""``mdev migration check`` and ``plan``, every answer put to real Nova.

Servers of type nvidia-12 on ``src``, and a target of each kind:
``same`` (nvidia-12 with room), ``other`` (node ``other.dc1.example.org``,
nvidia-11 only), ``full`` (nvidia-12, filled by servers), ``old`` (QEMU
8.0.0 and libvirt 8.5.0: older than the source and than mdev live
migration needs), ``mixed`` (an nvidia-11 and an nvidia-12 GPU, both
VGPU: a flavor that does not ask for the type lets Placement pick
either) and ``lv85`` (QEMU 8.1.0 but libvirt 8.5.0: fine to the API,
refused by Nova). Every Live and Cold answer is checked by asking Nova to
make that very move: a yes must land the server's mdev, per the fake
hypervisor's own record, on a device the Devices column listed, with the
server's type; a no must end in Nova's refusal (or, for a cold migration
onto another type, which Nova accepts, in a server with another vGPU
type, as the Reason says). A whole plan is run command by command.
"""

import pathlib
import shlex

import pytest

from tests.cloud import client
from tests.e2e.helpers import mdev
from tests.e2e.helpers import mdev_json
from tests.fixtures import cli

V = {'libvirt_version': '8.6.0', 'qemu_version': '8.1.0'}
OTHER = 'other.dc1.example.org'
TOPOLOGY = {'hosts': [
    dict(V, name='src', gpus=2, bus='0x91', enabled_mdev_types=['nvidia-12']),
    dict(V, name='same', gpus=1, bus='0x92',
         enabled_mdev_types=['nvidia-12']),
    dict(V, name='other', hypervisor_hostname=OTHER, gpus=1, bus='0x93',
         enabled_mdev_types=['nvidia-11']),
    dict(V, name='full', gpus=1, bus='0x94',
         enabled_mdev_types=['nvidia-12']),
    {'name': 'old', 'gpus': 1, 'bus': '0x95',
     'enabled_mdev_types': ['nvidia-12'], 'libvirt_version': '8.5.0',
     'qemu_version': '8.0.0'},
    dict(V, name='mixed', gpus=2, bus='0x96',
         enabled_mdev_types=['nvidia-11', 'nvidia-12'],
         mdev={'nvidia-11': {'device_addresses': ['0000:96:00.0']},
               'nvidia-12': {'device_addresses': ['0000:96:01.0']}}),
    {'name': 'lv85', 'gpus': 1, 'bus': '0x97',
     'enabled_mdev_types': ['nvidia-12'], 'libvirt_version': '8.5.0',
     'qemu_version': '8.1.0'},
]}
TYPE = 'nvidia-12'
TYPE_TRAIT = 'CUSTOM_NVIDIA_12'
ANY = 'mig-any'          # resources:VGPU=1: any VGPU device
PINNED = 'mig-pinned'    # ... and trait:CUSTOM_NVIDIA_12=required


@pytest.fixture(scope='module')
def cloud(tmp_path_factory):
    with client.EmbeddedCloud(tmp_path_factory.mktemp('migration'),
                              topology=TOPOLOGY) as cloud:
        yield cloud


@pytest.fixture(scope='module')
def module_cli(cloud):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv('OS_CLIENT_CONFIG_FILE', str(cloud.clouds_yaml))
        patch.setenv('OS_CLOUD', cloud.cloud_name)
        yield


def node(cloud, host):
    return cloud.hosts[host]['hypervisor_hostname']


def service_host(cloud, node_name):
    return next(h for h, i in cloud.hosts.items()
                if i['hypervisor_hostname'] == node_name)


@pytest.fixture(scope='module')
def ready(cloud, module_cli):
    """Every GPU tagged with its type's trait (as 'mdev trait set' does),
    the two flavors, and ``full`` filled up.
    """
    for host, info in cloud.hosts.items():
        for gpu in info['gpus']:
            trait = 'CUSTOM_' + gpu['mdev_type'].upper().replace('-', '_')
            result = mdev('trait', 'set', '--trait', trait, '%s:%s' % (
                info['hypervisor_hostname'], gpu['pci_address']))
            assert result.rc == 0, result.stderr
    cloud.control('create_flavor', name=ANY,
                  extra_specs={'resources:VGPU': '1'})
    cloud.control('create_flavor', name=PINNED, extra_specs={
        'resources:VGPU': '1', 'trait:%s' % TYPE_TRAIT: 'required'})
    filled = cloud.control('boot', flavor=PINNED, host='full', count=8,
                           name='filler')
    assert [s['status'] for s in filled] == ['ACTIVE'] * 8, filled
    return cloud


def boot(cloud, flavor, host='src', name=None):
    server, = cloud.control('boot', flavor=flavor, host=host,
                            name=name or flavor)
    assert server['status'] == 'ACTIVE', server
    return server


def where(cloud, server_id):
    """(node, PCI address, type) of the server's mdev, from fake libvirt."""
    found = [(m['node'], m['pci_address'], m['mdev_type'])
             for m in cloud.control('mdev_truth') if m['server'] == server_id]
    assert len(found) == 1, found
    return found[0]


def move(cloud, server_id, host, kind):
    """Ask Nova for the move: ``(moved, answer)``."""
    if kind == 'Live':
        answer = cloud.control('live_migrate', server=server_id, host=host)
        return answer['host'] == host and \
            answer['migration_status'] == 'completed', answer
    try:
        answer = cloud.control('migrate', server=server_id, host=host)
    except client.CloudError as exc:
        return False, str(exc)
    return answer['host'] == host, answer


def back_to_src(cloud, server_id):
    moved, answer = move(cloud, server_id, 'src', 'Cold')
    assert moved, answer
    assert where(cloud, server_id)[0] == 'src'


def check_rows(*args):
    result = mdev('migration', 'check', *args, '-f', 'json')
    assert 'Traceback' not in result.stderr, result.stderr
    return result.rc, {r['Host']: r for r in cli.Result(
        0, result.stdout, '').json()}


def put_to_nova(cloud, server_id, rows, skip=()):
    """Make every move the rows answer; assert Nova agrees with each."""
    checked = []
    for host_node, row in sorted(rows.items()):
        if host_node in skip:
            continue
        host = service_host(cloud, host_node)
        for kind in ('Live', 'Cold'):
            moved, answer = move(cloud, server_id, host, kind)
            checked.append((host_node, kind, row[kind], moved))
            if row[kind] == 'yes':
                assert moved, (host_node, kind, row, answer)
                landed = where(cloud, server_id)
                assert '%s:%s' % landed[:2] in row['Devices'], (landed, row)
                assert landed[2] == TYPE
                back_to_src(cloud, server_id)
                continue
            if moved:
                # Nova accepts a cold migration onto a device of another
                # type; the answer said no because of that.
                landed = where(cloud, server_id)
                assert kind == 'Cold' and landed[2] != TYPE, (
                    host_node, row, landed)
                assert 'give the server a' in row['Reason'], row
                back_to_src(cloud, server_id)
            else:
                assert where(cloud, server_id)[0] == 'src', answer
                if kind == 'Live':
                    assert not answer['accepted'] or \
                        answer['migration_status'] in ('error', 'failed')
    return checked


def test_01_check_any_type_flavor_against_nova(cloud, ready):
    server = boot(cloud, ANY)
    assert where(cloud, server['id'])[2] == TYPE
    rc, rows = check_rows(server['id'])
    assert rc == 0
    assert set(rows) == {node(cloud, h) for h in cloud.hosts} - {'src'}
    assert (rows['same']['Live'], rows['same']['Cold']) == ('yes', 'yes')
    assert rows['same']['Devices'] == ['same:0000:92:00.0']
    other = rows[OTHER]
    assert (other['Live'], other['Cold']) == ('no', 'no')
    assert 'Source mdev types' in other['Reason']
    assert 'not supported by this compute' in other['Reason']
    assert 'give the server a CUSTOM_NVIDIA_11 vGPU' in other['Reason']
    assert (rows['full']['Live'], rows['full']['Cold']) == ('no', 'no')
    assert 'no device with room for 1 VGPU' in rows['full']['Reason']
    old = rows['old']
    assert (old['Live'], old['Cold']) == ('no', 'yes')
    assert 'requires a newer hypervisor version' in old['Reason']
    # libvirt 8.5.0 does not show in the API: the row says it leans on it.
    assert rows['lv85']['Live'] == 'yes'
    assert any('libvirt >= 8.6.0' in n for n in rows['lv85']['Not Checked'])
    checked = put_to_nova(cloud, server['id'], rows, skip={'lv85'})
    assert len(checked) == 2 * (len(rows) - 1)
    answers = {(kind, answer) for _, kind, answer, _ in checked}
    assert answers == {('Live', 'yes'), ('Live', 'no'), ('Cold', 'yes'),
                       ('Cold', 'no')}
    cloud.control('delete', server=server['id'])


def test_02_libvirt_the_api_cannot_show_is_said_and_nova_refuses(
        cloud, ready):
    server = boot(cloud, PINNED)
    rc, rows = check_rows(server['id'], '--target', 'lv85')
    assert rc == 0 and list(rows) == ['lv85']
    # The old spelling of --target is refused, naming the option.
    cli.assert_one_line_error(
        mdev('migration', 'check', server['id'], '--host', 'lv85'),
        '--host')
    assert sorted(check_rows(server['id'], '--target', 'lv85', '--target',
                             'same')[1]) == ['lv85', 'same']
    row = rows['lv85']
    assert (row['Live'], row['Cold']) == ('yes', 'yes')
    assert row['Not Checked'][0].startswith('libvirt >= 8.6.0')
    answer = cloud.control('live_migrate', server=server['id'], host='lv85')
    assert answer['host'] == 'src'
    assert any('compute service target are too old' in s
               for s in answer['skipped']), answer
    moved, answer = move(cloud, server['id'], 'lv85', 'Cold')
    assert moved, answer
    assert '%s:%s' % where(cloud, server['id'])[:2] in row['Devices']
    back_to_src(cloud, server['id'])
    cloud.control('delete', server=server['id'])


def test_03_mixed_host_another_type_first(cloud, ready):
    """With room on the nvidia-11 GPU of ``mixed`` only, a flavor that
    does not ask for the type gets it: Nova refuses the live migration
    (not fully mapped), a cold one would change the server's type.
    """
    blockers = cloud.control('boot', flavor=PINNED, host='mixed', count=8,
                             name='mixed-filler')
    assert [s['status'] for s in blockers] == ['ACTIVE'] * 8
    server = boot(cloud, ANY)
    rc, rows = check_rows(server['id'], '--target', 'mixed')
    row = rows['mixed']
    assert (row['Live'], row['Cold']) == ('no', 'no')
    assert 'not fully mapped' in row['Reason']
    assert 'mixed:0000:96:00.0 (CUSTOM_NVIDIA_11)' in row['Reason']
    assert rc == 1
    put_to_nova(cloud, server['id'], rows)
    answer = cloud.control('live_migrate', server=server['id'],
                           host='mixed')
    assert any('not fully mapped' in s for s in answer['skipped'])
    pinned = boot(cloud, PINNED)
    rc, rows = check_rows(pinned['id'], '--target', 'mixed')
    assert rc == 1
    assert 'no device with room' in rows['mixed']['Reason']
    put_to_nova(cloud, pinned['id'], rows)
    for s in blockers + [server, pinned]:
        cloud.control('delete', server=s['id'])


def test_04_disabled_and_down_services(cloud, ready):
    server = boot(cloud, PINNED)
    cloud.control('set_service', host='same', disabled=True,
                  reason='maintenance')
    try:
        rc, rows = check_rows(server['id'], '--target', 'same')
        assert rc == 1
        assert 'compute service of same is disabled (maintenance)' in (
            rows['same']['Reason'])
        put_to_nova(cloud, server['id'], rows)
    finally:
        cloud.control('set_service', host='same', disabled=False)
    cloud.control('set_service', host='same', forced_down=True)
    try:
        rc, rows = check_rows(server['id'], '--target', 'same')
        assert rc == 1
        assert 'compute service of same is down' in rows['same']['Reason']
        put_to_nova(cloud, server['id'], rows)
    finally:
        cloud.control('set_service', host='same', forced_down=False)
    rc, rows = check_rows(server['id'], '--target', 'same')
    assert rc == 0 and rows['same']['Live'] == 'yes'
    cloud.control('delete', server=server['id'])


def test_05_bad_input_is_one_line(cloud, ready):
    cli.assert_one_line_error(mdev('migration', 'check', 'no-such-server'),
                              "No server named 'no-such-server'")
    cli.assert_one_line_error(
        mdev('migration', 'check', '8d2e7a8e-52b8-4b5f-b5c7-1f0f1c1f1c1f'),
        'No server with ID 8d2e7a8e-52b8-4b5f-b5c7-1f0f1c1f1c1f')
    server = boot(cloud, PINNED)
    cli.assert_one_line_error(
        mdev('migration', 'check', server['id'], '--target', 'nowhere'),
        'nowhere')
    cli.assert_one_line_error(
        mdev('migration', 'check', server['id'], '--target', 'src'),
        'the compute node the server is on')
    cli.assert_one_line_error(mdev('migration', 'plan'), '--host')
    cli.assert_one_line_error(
        mdev('migration', 'plan', '--host', 'src', '--live', '--cold'),
        'not allowed with')
    cloud.control('delete', server=server['id'])


def run_plan_commands(rows):
    """Run each row's Command with the openstack CLI, as an operator
    would paste it.
    """
    for row in rows:
        if not row['Command']:
            continue
        for part in row['Command'].split(' && '):
            args = shlex.split(part)
            assert args[0] == 'openstack'
            result = cli.openstack(*args[1:])
            assert result.rc == 0, (part, result.stderr)


def test_06_plan_is_joint_and_runs(cloud, ready):
    # ``same`` keeps room for 2; four pinned servers and one of any type
    # leave ``src``.
    others = cloud.control('boot', flavor=PINNED, host='same', count=6,
                           name='same-filler')
    assert [s['status'] for s in others] == ['ACTIVE'] * 6
    servers = cloud.control('boot', flavor=PINNED, host='src', count=4,
                            name='drain')
    assert [s['status'] for s in servers] == ['ACTIVE'] * 4
    loose = boot(cloud, ANY, name='drain-any')

    # Live only, onto same and full: two fit, the rest cannot go.
    result = mdev('migration', 'plan', '--host', 'src', '--live',
                  '--target', 'same', '--target', 'full', '-f', 'json')
    assert result.rc == 1, result.stderr
    rows = cli.Result(0, result.stdout, '').json()
    assert len(rows) == 5
    planned = [r for r in rows if r['Target Host']]
    assert len(planned) == 2
    assert {r['Target Host'] for r in planned} == {'same'}
    stuck = [r for r in rows if not r['Target Host']]
    assert all('no device with room for 1 VGPU' in r['Reason']
               for r in stuck), stuck

    # Onto mixed too, live or cold: the server of any type is not sent
    # to mixed, where Placement may pick the nvidia-11 GPU; the others
    # are, and the overflow goes cold to old.
    rows = mdev_json('migration', 'plan', '--host', 'src', '--target',
                     'same', '--target', 'old', '--target', 'mixed')
    by_id = {r['Server']: r for r in rows}
    assert by_id[loose['id']]['Target Host'] != 'mixed'
    assert all(r['Target Host'] for r in rows), rows
    kinds = {r['Server']: (r['Target Host'], r['Kind']) for r in rows}
    assert list(kinds.values()).count(('same', 'live')) == 2
    assert all(k == 'cold' for h, k in kinds.values() if h == 'old')
    assert all(k == 'live' for h, k in kinds.values() if h != 'old')

    run_plan_commands(rows)
    for server_id, (target, kind) in kinds.items():
        landed = where(cloud, server_id)
        assert landed[0] == target and landed[2] == TYPE, (kind, landed)
    assert mdev_json('migration', 'plan', '--host', 'src') == []
    for s in others + servers + [loose]:
        cloud.control('delete', server=s['id'])


def requests_of(cloud, *args):
    """Nova's and Placement's requests for one command, counted there."""
    before = (cloud.control('compute_requests')['count'],
              cloud.control('placement_requests')['count'])
    result = mdev(*args)
    assert 'Traceback' not in result.stderr, result.stderr
    return (cloud.control('compute_requests')['requests'][before[0]:],
            cloud.control('placement_requests')['requests'][before[1]:])


def test_07_requests_do_not_grow_with_the_cloud(cloud, ready):
    servers = cloud.control('boot', flavor=PINNED, host='src', count=2,
                            name='count')
    nova, placement = requests_of(cloud, 'migration', 'check',
                                  servers[0]['id'])
    assert sorted(r.split('?')[0] for r in nova) == [
        'GET /v2.1/os-hypervisors/detail',
        'GET /v2.1/servers/%s' % servers[0]['id']]
    in_tree = [r for r in placement if 'in_tree=' in r]
    # One in_tree question per target the fit engine lets through:
    # same, old, lv85 and mixed (other has no nvidia-12 device, full is
    # full).
    assert len(in_tree) == 4, placement
    fixed = [r for r in placement if 'in_tree=' not in r]
    assert len(fixed) <= 8, fixed
    plan_nova, plan_placement = requests_of(cloud, 'migration', 'plan',
                                            '--host', 'src')

    # More servers elsewhere: not one more request.
    more = cloud.control('boot', flavor=PINNED, host='same', count=3,
                         name='elsewhere')
    again = requests_of(cloud, 'migration', 'check', servers[0]['id'])
    assert (len(again[0]), len(again[1])) == (len(nova), len(placement))
    again = requests_of(cloud, 'migration', 'plan', '--host', 'src')
    assert (len(again[0]), len(again[1])) == (len(plan_nova),
                                              len(plan_placement))
    # Nova: the node's servers and the hypervisors; Placement: fixed
    # reads, one allocation read per device of src, one in_tree question
    # per distinct request and candidate target.
    assert len(plan_nova) == 2, plan_nova
    per_device = [r for r in plan_placement if r.endswith('/allocations')]
    assert len(per_device) == 2
    assert len([r for r in plan_placement if 'in_tree=' in r]) == 4
    for s in servers + more:
        cloud.control('delete', server=s['id'])


def test_08_an_upgraded_hypervisor_takes_live_migrations(cloud, ready):
    server = boot(cloud, PINNED)
    rc, rows = check_rows(server['id'], '--target', 'old')
    assert (rows['old']['Live'], rows['old']['Cold']) == ('no', 'yes')
    upgraded = cloud.control('hypervisor_versions', host='old',
                             libvirt_version='8.6.0', qemu_version='8.1.0')
    assert upgraded['hypervisor_version'] == 8001000
    rc, rows = check_rows(server['id'], '--target', 'old')
    assert rc == 0
    assert (rows['old']['Live'], rows['old']['Cold']) == ('yes', 'yes')
    put_to_nova(cloud, server['id'], rows)
    cloud.control('delete', server=server['id'])


def test_09_the_conductor_skipping_the_version_check(
        cloud: client.EmbeddedCloud, ready: client.EmbeddedCloud,
        tmp_path: pathlib.Path) -> None:
    """nova-conductor's [workarounds] skip_hypervisor_version_check_on_lm
    lets a live migration onto an older QEMU through where Nova refuses it
    by default; given the controller's nova.conf, check and plan answer
    as Nova does either way, and what the option does not skip (the mdev
    versions of the libvirt driver) stays a no.
    """
    server = boot(cloud, PINNED)
    controller = tmp_path / 'controller.conf'
    controller.write_text('[workarounds]\n'
                          'skip_hypervisor_version_check_on_lm = True\n')
    conductor = ('--controller-conf', str(controller))
    newer = cloud.control('hypervisor_versions', host='src',
                          libvirt_version='9.0.0', qemu_version='9.0.0')
    assert newer['hypervisor_version'] == 9000000
    try:
        # Nova's default: same (QEMU 8.1.0) is older than src.
        rc, rows = check_rows(server['id'], '--target', 'same')
        assert (rows['same']['Live'], rows['same']['Cold']) == ('no', 'yes')
        assert 'requires a newer hypervisor version' in (
            rows['same']['Reason'])
        put_to_nova(cloud, server['id'], rows)
        plan = mdev('migration', 'plan', '--host', 'src', '--live',
                    '--target', 'same', '-f', 'json')
        assert plan.rc == 1
        [row] = cli.Result(0, plan.stdout, '').json()
        assert not row['Target Host'] and row['Not Checked'] == []

        cloud.control('conductor_workarounds',
                      skip_hypervisor_version_check_on_lm=True)
        # Without the controller's file the answer cannot know.
        rc, rows = check_rows(server['id'], '--target', 'same')
        assert rows['same']['Live'] == 'no'
        rc, rows = check_rows(server['id'], '--target', 'same', *conductor)
        assert rc == 0
        row = rows['same']
        assert (row['Live'], row['Cold']) == ('yes', 'yes')
        assert 'lets it through only because of [workarounds] ' \
            'skip_hypervisor_version_check_on_lm' in row['Reason']
        put_to_nova(cloud, server['id'], rows)

        # The plan says the same and carries the caveats of check.
        rows = mdev_json('migration', 'plan', '--host', 'src', '--live',
                         '--target', 'same', *conductor)
        [row] = rows
        assert (row['Target Host'], row['Kind']) == ('same', 'live')
        assert row['Not Checked'] == check_rows(
            server['id'], '--target', 'same', *conductor)[1]['same'][
                'Not Checked']
        assert row['Not Checked'][0].startswith('libvirt >= 8.6.0')
        assert 'skip_hypervisor_version_check_on_lm' in row['Reason']
        run_plan_commands(rows)
        assert where(cloud, server['id'])[0] == 'same'
        back_to_src(cloud, server['id'])

        # QEMU too old for mdevs: the libvirt driver still refuses.
        cloud.control('hypervisor_versions', host='old',
                      libvirt_version='8.5.0', qemu_version='8.0.0')
        rc, rows = check_rows(server['id'], '--target', 'old', *conductor)
        assert (rows['old']['Live'], rows['old']['Cold']) == ('no', 'yes')
        assert 'compute service target are too old' in rows['old']['Reason']
        put_to_nova(cloud, server['id'], rows)
    finally:
        cloud.control('conductor_workarounds',
                      skip_hypervisor_version_check_on_lm=False)
        cloud.control('hypervisor_versions', host='src', **V)
        cloud.control('delete', server=server['id'])


def test_10_post_copy_on_the_source_fails_the_live_migration(
        cloud: client.EmbeddedCloud, ready: client.EmbeddedCloud,
        tmp_path: pathlib.Path) -> None:
    """With ``[libvirt] live_migration_permit_post_copy`` on the source,
    Nova's libvirt driver asks for post-copy, which QEMU (modelled by the
    fake hypervisor) refuses with the server's mdev: Nova's live migration
    fails and leaves the server in ERROR on the source. Given the source's
    nova.conf, check and plan say "no" for a live move and "yes" for a
    cold one; the target's setting does not matter to this move.
    """
    server = boot(cloud, PINNED)
    on = tmp_path / 'post-copy.conf'
    on.write_text('[devices]\nenabled_mdev_types = %s\n'
                  '[libvirt]\nlive_migration_permit_post_copy = True\n'
                  % TYPE)
    try:
        assert cloud.control('post_copy', host='src', permitted=True) == {
            'host': 'src', 'post_copy': True}
        rc, rows = check_rows(server['id'], '--target', 'same',
                              '--compute-conf', 'src=%s' % on)
        assert rc == 0
        row = rows['same']
        assert (row['Live'], row['Cold']) == ('no', 'yes')
        assert row['Reason'].startswith(
            'live: [libvirt] live_migration_permit_post_copy = True on the '
            'source src: Nova asks for post-copy')
        assert 'Nova puts the server in ERROR' in row['Reason']
        answer = cloud.control('live_migrate', server=server['id'],
                               host='same')
        assert answer['accepted'], answer
        assert (answer['migration_status'], answer['status'],
                answer['host']) == ('error', 'ERROR', 'src'), answer
        assert where(cloud, server['id'])[0] == 'src'
        assert cloud.control('reset_state', server=server['id'])[
            'status'] == 'ACTIVE'
        moved, answer = move(cloud, server['id'], 'same', 'Cold')
        assert moved, answer
        assert '%s:%s' % where(cloud, server['id'])[:2] in row['Devices']
        back_to_src(cloud, server['id'])

        # Without the source's file the answer leans on it.
        rc, rows = check_rows(server['id'], '--target', 'same')
        assert rows['same']['Live'] == 'yes'
        assert '[libvirt] live_migration_permit_post_copy of src (give ' \
            'its nova.conf)' in rows['same']['Not Checked']
        # Live only, the plan finds no target for it.
        result = mdev('migration', 'plan', '--host', 'src', '--live',
                      '--target', 'same', '--compute-conf', 'src=%s' % on,
                      '-f', 'json')
        assert result.rc == 1, result.stderr
        [row] = [r for r in cli.Result(0, result.stdout, '').json()
                 if r['Server'] == server['id']]
        assert not row['Target Host']
        assert 'live_migration_permit_post_copy = True on the source src' \
            in row['Reason']

        # Post-copy on the target only: the source's setting decides.
        assert cloud.control('post_copy', host='src', permitted=False)[
            'post_copy'] is False
        assert cloud.control('post_copy', host='same', permitted=True)[
            'post_copy'] is True
        rc, rows = check_rows(server['id'], '--target', 'same',
                              '--compute-conf', 'same=%s' % on)
        row = rows['same']
        assert (row['Live'], row['Cold']) == ('yes', 'yes')
        assert 'warning: [libvirt] live_migration_permit_post_copy = True ' \
            'on same' in row['Reason']
        moved, answer = move(cloud, server['id'], 'same', 'Live')
        assert moved, answer
        back_to_src(cloud, server['id'])
    finally:
        cloud.control('post_copy', host='src', permitted=False)
        cloud.control('post_copy', host='same', permitted=False)
        cloud.control('delete', server=server['id'])
