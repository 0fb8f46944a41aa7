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

"""The limit Nova enforces, and the servers a project's limits allow:
the rules of domain.quota, and each checked against Nova's and
oslo.limit's own code on the same inputs (tests marked ``nova``).

For every combination of a project limit, a registered limit, both
``[quota] unified_limits_resource_strategy`` values and a resource list
that lists the resource or not, the cross-check asks oslo.limit's
Enforcer (its LimitFixture stands for Keystone) whether one more unit
goes over, and ``nova.limit.utils.should_enforce`` whether Nova refuses
it; domain.quota must refuse exactly then.
"""

import itertools

import pytest

from osc_mdev.cloud import payloads as nova_payloads
from osc_mdev.features.quota import limits as quota
from osc_mdev.nova.compute import utils as mdev_compute
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova.limit import placement as mdev_placement
from osc_mdev.nova.limit import utils as mdev_limit
from osc_mdev.nova.scheduler import utils as rr


def request_of(flavor, pci_config=None, booted_from_volume=False):
    """The request of a flavor as Nova's API gives it, built as every
    command builds it.
    """
    return rr.request_for(nova_payloads.flavor(flavor), pci_config,
                          booted_from_volume)


VGPU = 'class:VGPU'
PROJECT = 'p1'

# Each value: absent (None), unlimited, zero, and a positive limit.
VALUES = (None, -1, 0, 2)
STRATEGIES = [
    mdev_limit.Strategy(mdev_limit.REQUIRE, ('servers',)),
    mdev_limit.Strategy(mdev_limit.REQUIRE, ('servers', VGPU)),
    mdev_limit.Strategy(mdev_limit.IGNORE, ()),
    mdev_limit.Strategy(mdev_limit.IGNORE, (VGPU,)),
]
CASES = [(project, registered, strategy, used)
         for project, registered in itertools.product(VALUES, VALUES)
         for strategy in STRATEGIES for used in (0, 1, 2, 3)]


def limits_of(project: int | None,
              registered: int | None) -> mdev_limit.Limits:
    return mdev_limit.Limits(
        {} if registered is None else {VGPU: registered},
        {} if project is None else {(PROJECT, VGPU): project})


def refused(project: int | None, registered: int | None,
            strategy: mdev_limit.Strategy, used: int) -> bool:
    """Whether domain.quota says one more VGPU is refused."""
    effective = mdev_limit.effective_limit(
        PROJECT, VGPU, limits_of(project, registered), strategy)
    return not effective.unlimited and used + 1 > effective.limit


@pytest.mark.parametrize('project, registered, expected, source', [
    (3, 1, 3, mdev_limit.PROJECT_LIMIT),
    (-1, 1, -1, mdev_limit.PROJECT_LIMIT),
    (None, 4, 4, mdev_limit.REGISTERED_LIMIT),
    (None, -1, -1, mdev_limit.REGISTERED_LIMIT),
    (0, 5, 0, mdev_limit.PROJECT_LIMIT),
    (None, 0, 0, mdev_limit.REGISTERED_LIMIT),
])
def test_a_found_limit_is_what_nova_enforces(project: int | None,
                                             registered: int | None,
                                             expected: int,
                                             source: str) -> None:
    effective = mdev_limit.effective_limit(
        PROJECT, VGPU, limits_of(project, registered), STRATEGIES[0])
    assert (effective.limit, effective.source, effective.strategy) == (
        expected, source, None)
    assert effective.rule == source


@pytest.mark.parametrize('strategy, limit, rule', [
    (STRATEGIES[0], -1, "no limit; require strategy does not list it "
                        "(Nova's default)"),
    (STRATEGIES[1], 0, "no limit; require strategy lists it (Nova's "
                       "default)"),
    (STRATEGIES[2], 0, "no limit; ignore strategy does not list it "
                       "(Nova's default)"),
    (STRATEGIES[3], -1, "no limit; ignore strategy lists it (Nova's "
                        "default)"),
])
def test_without_any_limit_the_strategy_decides(strategy: mdev_limit.Strategy,
                                                limit: int, rule: str) -> None:
    effective = mdev_limit.effective_limit(
        PROJECT, VGPU, limits_of(None, None), strategy)
    assert (effective.limit, effective.rule) == (limit, rule)


def test_a_project_limit_of_0_without_registered_limit_is_ignored() -> None:
    """should_enforce looks for a *registered* limit when oslo.limit
    answers 0, so under Nova's defaults a project limit of 0 alone does
    not stop the project.
    """
    effective = mdev_limit.effective_limit(
        PROJECT, VGPU, limits_of(0, None), STRATEGIES[0])
    assert effective.unlimited
    assert effective.rule == ("project limit 0, no registered limit; "
                              "require strategy does not list it (Nova's "
                              "default)")
    from_file = mdev_limit.Strategy(mdev_limit.REQUIRE, ('servers', VGPU),
                                    from_file=True)
    effective = mdev_limit.effective_limit(
        PROJECT, VGPU, limits_of(0, None), from_file)
    assert (effective.limit, effective.rule) == (
        0, 'project limit 0, no registered limit; require strategy lists it')


def test_rows_by_pressure_with_only_used_or_limited_classes() -> None:
    limits = mdev_limit.Limits({VGPU: 2},
                               {('b', VGPU): 8, ('c', 'class:X'): 1})
    usages = {'a': {'VGPU': 3}, 'b': {'VGPU': 1}, 'c': {},
              'd': {'VGPU': 1, 'MEMORY_MB': 512}}
    rows = quota.quota_rows(usages, ['VGPU', 'X'], limits, STRATEGIES[0],
                            every_class=frozenset({'d'}))
    assert [(r.project_id, r.resource, r.used, r.limit, r.free)
            for r in rows] == [
        ('a', VGPU, 3, 2, -1),
        ('c', 'class:X', 0, 1, 1),
        ('d', VGPU, 1, 2, 1),
        ('b', VGPU, 1, 8, 7),
        ('d', 'class:X', 0, -1, None)]


def test_unaccounted_classes() -> None:
    assert quota.unaccounted({'VGPU': 4, 'CUSTOM_A': 2},
                             {'a': {'VGPU': 3}, 'b': {'VGPU': 1}}) == [
        'CUSTOM_A']
    assert quota.unaccounted({'VGPU': 4}, {'a': {'VGPU': 5}}) == []


def test_flavor_deltas_sum_the_groups() -> None:
    request = request_of({
        'vcpus': 2, 'ram': 1024, 'disk': 10,
        'extra_specs': {'resources1:VGPU': '1', 'resources2:VGPU': '1',
                        'group_policy': 'isolate'}})
    assert mdev_placement.flavor_deltas(request) == {
        'servers': 1, 'class:VCPU': 2, 'class:MEMORY_MB': 1024,
        'class:DISK_GB': 10, VGPU: 2}


def test_servers_allowed_names_the_binding_limit() -> None:
    effective = {
        'servers': mdev_limit.Effective(-1, mdev_limit.REGISTERED_LIMIT),
        'class:VCPU': mdev_limit.Effective(20, mdev_limit.PROJECT_LIMIT),
        VGPU: mdev_limit.Effective(5, mdev_limit.PROJECT_LIMIT)}
    deltas = {'servers': 1, 'class:VCPU': 4, VGPU: 2}
    fit = mdev_placement.servers_allowed(
        deltas, {'class:VCPU': 4, VGPU: 1}, effective)
    assert fit == mdev_placement.QuotaFit(2, VGPU, 1, 5, 2)
    fit = mdev_placement.servers_allowed(
        deltas, {'class:VCPU': 16, VGPU: 1}, effective)
    assert fit == mdev_placement.QuotaFit(1, 'class:VCPU', 16, 20, 4)
    over = mdev_placement.servers_allowed(deltas, {VGPU: 7}, effective)
    assert (over.servers, over.resource) == (0, VGPU)
    free = {k: mdev_limit.Effective(-1, mdev_limit.NO_LIMIT) for k in deltas}
    assert mdev_placement.servers_allowed(
        deltas, {}, free) == mdev_placement.QuotaFit(None)


def test_keystone_lists_every_limit_to_admins_system_and_services() -> None:
    assert quota.sees_every_limit(frozenset({'admin'}), False)
    assert quota.sees_every_limit(frozenset({'service'}), False)
    assert quota.sees_every_limit(frozenset({'reader'}), True)
    assert not quota.sees_every_limit(frozenset({'member', 'reader'}),
                                      False)


def test_strategy_from_nova_conf() -> None:
    settings = novaconf.parse_texts([('nova.conf', (
        '[quota]\ndriver = nova.quota.UnifiedLimitsDriver\n'
        'unified_limits_resource_strategy = ignore\n'
        'unified_limits_resource_list = class:VGPU, servers\n'))])
    assert mdev_limit.strategy_from(settings) == mdev_limit.Strategy(
        mdev_limit.IGNORE, (VGPU, 'servers'), mdev_limit.UNIFIED_LIMITS_DRIVER,
        from_file=True)
    defaults = mdev_limit.strategy_from(novaconf.parse_texts(
        [('nova.conf', '[DEFAULT]\nhost = api1\n')]))
    assert (defaults.strategy, defaults.resource_list, defaults.unified) == (
        mdev_limit.REQUIRE, ('servers',), False)


@pytest.mark.parametrize('text, where', [
    ('[quota]\nunified_limits_resource_strategy = prefer\n',
     '[quota] unified_limits_resource_strategy, nova.conf:2'),
    ('[quota]\nunified_limits_resource_list = servers, class:vgpu\n',
     '[quota] unified_limits_resource_list, nova.conf:2'),
])
def test_strategy_nova_refuses(text: str, where: str) -> None:
    with pytest.raises(ValueError) as raised:
        mdev_limit.strategy_from(novaconf.parse_texts([('nova.conf', text)]))
    assert str(raised.value).startswith(where)


# -- against Nova's and oslo.limit's code -----------------------------------

def _nova_conf(strategy: mdev_limit.Strategy) -> object:
    import nova.conf
    from oslo_config import fixture as config_fixture
    from oslo_limit import limit  # noqa: F401 (registers [oslo_limit])

    conf = config_fixture.Config(nova.conf.CONF)
    conf.setUp()
    # The LimitFixture answers for any endpoint.
    conf.config(group='oslo_limit', endpoint_id='nova-endpoint')
    conf.config(group='quota', driver=mdev_limit.UNIFIED_LIMITS_DRIVER,
                unified_limits_resource_strategy=strategy.strategy,
                unified_limits_resource_list=list(strategy.resource_list))
    return conf


def _nova_refuses(project: int | None, registered: int | None,
                  strategy: mdev_limit.Strategy, used: int) -> bool:
    """Whether oslo.limit finds one more VGPU over the limit and Nova's
    should_enforce enforces it.
    """
    from nova.limit import utils as limit_utils
    from oslo_limit import exception as limit_exc
    from oslo_limit import fixture as limit_fixture
    from oslo_limit import limit

    reg = {} if registered is None else {VGPU: registered}
    proj = {} if project is None else {PROJECT: {VGPU: project}}
    conf = _nova_conf(strategy)
    fixture = limit_fixture.LimitFixture(reg, proj)
    fixture.setUp()
    try:
        limit_utils.IDENTITY_CLIENT = limit_utils.IdentityClient(
            fixture.mock_conn, 'service_id', 'region_id')
        enforcer = limit.Enforcer(lambda p, names: {VGPU: used})
        try:
            enforcer.enforce(PROJECT, {VGPU: 1})
        except limit_exc.ProjectOverLimit as exc:
            return limit_utils.should_enforce(exc)
        return False
    finally:
        limit_utils.IDENTITY_CLIENT = None
        fixture.cleanUp()
        conf.cleanUp()


@pytest.mark.nova
@pytest.mark.parametrize('project, registered, strategy, used', CASES)
def test_effective_limit_is_what_nova_enforces(project: int | None,
                                               registered: int | None,
                                               strategy: mdev_limit.Strategy,
                                               used: int) -> None:
    assert refused(project, registered, strategy, used) == _nova_refuses(
        project, registered, strategy, used)


def test_the_cross_check_covers_both_outcomes_and_strategies() -> None:
    outcomes = {(s.strategy, refused(*c[:2], s, c[3]))
                for c in CASES for s in [c[2]]}
    assert outcomes == {
        (mdev_limit.REQUIRE, True), (mdev_limit.REQUIRE, False),
        (mdev_limit.IGNORE, True), (mdev_limit.IGNORE, False)}


ALLOWED_CASES = [
    # (limits {resource: (project, registered)}, used, deltas, max_count)
    ({VGPU: (3, None), 'servers': (None, -1)}, {VGPU: 1}, {VGPU: 1}, 5),
    ({VGPU: (None, 4), 'servers': (None, 10), 'class:VCPU': (None, 8)},
     {VGPU: 1, 'servers': 2, 'class:VCPU': 2}, {VGPU: 1, 'class:VCPU': 2},
     6),
    ({VGPU: (0, None), 'servers': (None, -1)}, {VGPU: 0}, {VGPU: 2}, 3),
    ({VGPU: (None, None), 'servers': (None, 20)}, {VGPU: 0}, {VGPU: 1}, 4),
    ({VGPU: (2, 8), 'servers': (None, 5)}, {VGPU: 3, 'servers': 1},
     {VGPU: 1}, 4),
]


@pytest.mark.nova
@pytest.mark.parametrize('strategy', STRATEGIES)
@pytest.mark.parametrize('limits, used, per_server, max_count',
                         ALLOWED_CASES)
def test_servers_allowed_is_what_nova_allows(strategy: mdev_limit.Strategy,
                                             limits: dict, used: dict,
                                             per_server: dict,
                                             max_count: int) -> None:
    """Nova's enforce_num_instances_and_resources, with oslo.limit's
    Enforcer on the same limits, allows exactly ``servers_allowed``
    servers of one request for ``max_count``.
    """
    from unittest import mock

    from nova import exception
    from nova.limit import placement as placement_limits
    from nova.limit import utils as limit_utils
    from oslo_limit import fixture as limit_fixture

    deltas = dict(per_server, servers=1)
    reg = {k: r for k, (_, r) in limits.items() if r is not None}
    proj = {PROJECT: {k: p for k, (p, _) in limits.items() if p is not None}}
    ours = mdev_limit.Limits(reg, {(PROJECT, k): v for k, v in proj[PROJECT]
                                   .items()})
    effective = {k: mdev_limit.effective_limit(PROJECT, k, ours, strategy)
                 for k in deltas}
    expected = mdev_placement.servers_allowed(deltas, used, effective).servers
    expected = max_count if expected is None else min(expected, max_count)

    conf = _nova_conf(strategy)
    fixture = limit_fixture.LimitFixture(reg, proj)
    fixture.setUp()
    usage = {k: used.get(k, 0) for k in deltas}
    try:
        limit_utils.IDENTITY_CLIENT = limit_utils.IdentityClient(
            fixture.mock_conn, 'service_id', 'region_id')
        with mock.patch.object(
                placement_limits, '_get_deltas',
                lambda spec, count: {k: v * count
                                     for k, v in deltas.items()}), \
                mock.patch.object(placement_limits, '_get_usage',
                                  lambda ctx, p, names: dict(usage)):
            try:
                allowed = placement_limits.enforce_num_instances_and_resources(
                    None, PROJECT, None, 1, max_count)
            except exception.TooManyInstances:
                allowed = 0
    finally:
        limit_utils.IDENTITY_CLIENT = None
        fixture.cleanUp()
        conf.cleanUp()
    assert allowed == expected


def _fit(servers: int | None, capacity: int, reason: str | None = None,
         used: int = 0) -> quota.FlavorFit:
    quota_fit = mdev_placement.QuotaFit(servers) if servers is None else \
        mdev_placement.QuotaFit(servers, VGPU, used, 4, 1)
    return quota.FlavorFit('p1', 'vgpu', quota_fit, capacity, reason)


@pytest.mark.parametrize('fit, fits, bound_by', [
    (_fit(2, 5, used=2), 2, 'quota class:VGPU: 2 of 4 used, 1 per server'),
    (_fit(0, 5, used=4), 0,
     'quota class:VGPU (403 quota exceeded): 4 of 4 used, 1 per server'),
    (_fit(3, 1), 1, 'capacity'),
    (_fit(None, 7), 7, 'capacity'),
    (_fit(2, 2, used=2), 2,
     'quota class:VGPU: 2 of 4 used, 1 per server; capacity'),
    (_fit(None, 0, 'room for 1 VGPU rules out 2 devices and 1 host, '
                   'leaving none; smallest change: free 1 VGPU on h:d'), 0,
     'capacity (NoValidHost): room for 1 VGPU rules out 2 devices and 1 '
     'host, leaving none; smallest change: free 1 VGPU on h:d'),
])
def test_what_binds_a_flavor(fit: quota.FlavorFit, fits: int,
                             bound_by: str) -> None:
    assert (fit.fits, fit.bound_by) == (fits, bound_by)


def test_capacity_reason_is_the_step_that_rules_out_the_last_host() -> None:
    from osc_mdev.cloud import explanation

    kind = explanation.Kind
    steps = [explanation.Step(kind.OFFERS, ('VGPU',), 0, 0, 2, 1),
             explanation.Step(kind.ROOM, (('VGPU', 1),), 2, 1, 0, 0),
             explanation.Step(kind.ALL_GROUPS, None, 0, 0, 0, 0)]
    assert quota.capacity_reason(steps, None) == (
        'room for 1 VGPU rules out 2 devices and 1 host, leaving none; '
        'smallest change: none found on the devices')


@pytest.mark.parametrize('specs, classes, pci, expected', [
    ({'resources:VGPU': '1'}, {'VGPU'}, False, True),
    ({'resources1:VGPU': '1', 'resources2:VGPU': '1'}, {'VGPU'}, False,
     True),
    ({'resources_GPU:CUSTOM_MLX5': '2'}, {'CUSTOM_MLX5'}, False, True),
    ({'resources:VGPU': '0'}, {'VGPU'}, False, False),
    ({'resources:VGPU': 'x'}, {'VGPU'}, False, False),
    ({'resources:VGPU': '1'}, {'CUSTOM_MLX5'}, False, False),
    ({'trait:VGPU': 'required'}, {'VGPU'}, False, False),
    ({'pci_passthrough:alias': 'l40s:1'}, {'CUSTOM_L40S'}, True, True),
    ({'pci_passthrough:alias': 'l40s:1'}, {'VGPU'}, False, False),
])
def test_a_flavor_asks_for_classes(specs: dict, classes: set[str], pci: bool,
                                   expected: bool) -> None:
    assert quota.asks_for(specs, classes, pci) is expected


def test_flavor_holders_are_the_projects_of_those_servers() -> None:
    servers = [
        {'id': 'a', 'tenant_id': 'p1',
         'flavor': {'extra_specs': {'resources:VGPU': '1'}}},
        {'id': 'b', 'tenant_id': 'p2', 'flavor': {'extra_specs': {}}},
        {'id': 'c', 'tenant_id': 'p3',
         'flavor': {'extra_specs': {'resources:CUSTOM_X': '1'}}},
        {'id': 'd', 'tenant_id': 'p4', 'flavor': {}}]
    assert quota.flavor_holders([nova_payloads.server(s) for s in servers],
                                {'VGPU', 'CUSTOM_X'}, False) == {'p1', 'p3'}


def limit(resource: str, region: str | None, project: str | None = None
          ) -> dict:
    """A limit as Keystone lists it (a registered one without project)."""
    found = {'resource_name': resource, 'region_id': region,
             'default_limit': 1, 'resource_limit': 1}
    if project is not None:
        found['project_id'] = project
    return found


def test_limits_of_another_region_are_reported_only_when_none_is_here(
        ) -> None:
    here = [limit(VGPU, 'RegionOne')]
    there = [limit(VGPU, 'RegionTwo'), limit('servers', 'RegionTwo')]
    # Another region's limits beside this one's: another Nova's.
    assert quota.outside_region(here + there, [], 'RegionOne') == []
    # None here: each other region is named.
    assert quota.outside_region(there, [limit(VGPU, 'RegionThree', 'p')],
                                'RegionOne') == [
        quota.Unread(mdev_limit.PROJECT_LIMIT, 'RegionThree', (VGPU,)),
        quota.Unread(mdev_limit.REGISTERED_LIMIT, 'RegionTwo',
                     ('class:VGPU', 'servers'))]
    # No region: always a slip, whatever this region holds.
    unread = quota.outside_region(here + [limit('servers', None)], [],
                                  'RegionOne')
    assert [u.words for u in unread] == [
        'registered limits of servers in no region']
    # An endpoint without a region reads every limit.
    assert quota.outside_region(there, [], None) == []
    assert mdev_limit.Limits.from_keystone(there, [], None).registered == {
        VGPU: 1, 'servers': 1}
    assert mdev_limit.Limits.from_keystone(here + there, [], 'RegionOne') == \
        mdev_limit.Limits({VGPU: 1}, {})


@pytest.mark.parametrize('driver', ['nova.quota.DbQuotaDriver',
                                    'nova.quota.NoopQuotaDriver'])
def test_another_driver_reads_no_limit_of_keystone(driver: str) -> None:
    strategy = mdev_limit.Strategy(mdev_limit.REQUIRE, ('servers', VGPU),
                                   driver, from_file=True)
    effective = mdev_limit.effective_limit(PROJECT, VGPU, limits_of(1, 1),
                                           strategy)
    assert effective.unlimited
    assert effective.rule == (
        'no limit; [quota] driver %s limits no resource class' % driver)


@pytest.mark.nova
def test_the_driver_option_is_novas() -> None:
    """``[quota] driver`` as nova/conf/quota.py defines it: its default
    (Nova's, not the unified limits driver) and its choices.
    """
    from nova.conf import quota as nova_quota
    from osc_mdev.nova.conf import settings as novaconf

    [nova_driver] = [o for o in nova_quota.quota_opts if o.name == 'driver']
    [ours] = [o for o in novaconf._quota_opts() if o.name == 'driver']
    assert nova_driver.default == ours.default == mdev_limit.DB_QUOTA_DRIVER
    assert sorted(c for c, _ in nova_driver.type.choices.items()) == \
        sorted(ours.type.choices)
    assert mdev_limit.UNIFIED_LIMITS_DRIVER in ours.type.choices


def test_a_tenant_sees_the_gpu_classes_it_uses_or_that_are_limited(
        ) -> None:
    limits = mdev_limit.Limits({VGPU: 2, 'servers': 10, 'class:VCPU': 20},
                               {('p', 'class:CUSTOM_A'): 1})
    usage = {'VCPU': 2, 'MEMORY_MB': 512, 'PGPU': 1, 'CUSTOM_B': 0,
             'CUSTOM_C': 3}
    assert quota.known_classes(usage, limits) == [
        'CUSTOM_A', 'CUSTOM_C', 'PGPU', 'VGPU']


def test_nova_own_quotas_count_servers_vcpus_and_memory() -> None:
    """DbQuotaDriver's deltas: ``instances``, ``cores`` (shared or
    dedicated vCPUs) and ``ram``; GPU classes count against nothing.
    """
    deltas = {'servers': 1, 'class:PCPU': 4, 'class:MEMORY_MB': 2048,
              'class:DISK_GB': 20, VGPU: 1}
    assert mdev_compute.legacy_deltas(deltas) == {
        'instances': 1, 'cores': 4, 'ram': 2048}
    effective, used = mdev_compute.legacy_limits({
        'instances': {'limit': 10, 'in_use': 2, 'reserved': 0},
        'cores': {'limit': 9, 'in_use': 4, 'reserved': 1},
        'ram': {'limit': -1, 'in_use': 4096, 'reserved': 0}})
    assert used == {'instances': 2, 'cores': 5, 'ram': 4096}
    assert effective['ram'].unlimited
    fit = mdev_placement.servers_allowed(
        mdev_compute.legacy_deltas(deltas), used, effective)
    assert (fit.servers, fit.resource) == (1, 'cores')
