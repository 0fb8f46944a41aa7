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

"""Mirrors nova/limit/utils.py: which limit Nova enforces on a
project's resource under its unified limits (``should_enforce``, on the
limit oslo.limit finds), with the controller's ``[quota]`` options
(``use_unified_limits``) and Keystone's limits as oslo.limit reads them
for Nova's endpoint (``oslo_limit.limit._EnforcerUtils``).

Pure logic over Keystone's limits and the controller's ``[quota]``
options; the limits are Keystone's for Nova's service
(``class:<RESOURCE CLASS>``, ``servers``).
"""

import dataclasses
import typing

from osc_mdev.nova.conf import settings as novaconf

SERVERS = 'servers'
UNLIMITED = -1

UNIFIED_LIMITS_DRIVER = 'nova.quota.UnifiedLimitsDriver'
# Nova's default [quota] driver (nova/conf/quota.py).
DB_QUOTA_DRIVER = 'nova.quota.DbQuotaDriver'
REQUIRE = 'require'
IGNORE = 'ignore'

# Where the value oslo.limit finds comes from.
PROJECT_LIMIT = 'project limit'
REGISTERED_LIMIT = 'registered limit'
NO_LIMIT = 'no limit'
# The controller's [quota] driver is not the unified limits driver.
NOT_UNIFIED = 'not unified'


# -- the controller's [quota] options ---------------------------------------

@dataclasses.dataclass(frozen=True)
class Strategy:
    """``[quota]`` of the controller's nova.conf: what Nova does with a
    resource that has no registered limit.
    """

    strategy: str = REQUIRE
    resource_list: tuple[str, ...] = (SERVERS,)
    driver: str = UNIFIED_LIMITS_DRIVER
    from_file: bool = False     # False: Nova's defaults (no nova.conf read)

    @property
    def unified(self) -> bool:
        """Mirrors ``use_unified_limits``."""
        return self.driver == UNIFIED_LIMITS_DRIVER


def strategy_from(settings: novaconf.Settings) -> Strategy:
    """The Strategy of parsed nova.conf files (the options Nova
    registers in nova/conf/quota.py); ValueError naming the option
    oslo.config refuses (nova-api does not start with it).
    """
    values = {}
    for name in novaconf.QUOTA_OPTIONS:
        value = settings.quota[name]
        if value.error is not None:
            raise ValueError('%s: %s (nova-api refuses to start with it)'
                             % (value.where, value.error))
        values[name] = value.value
    return Strategy(values['unified_limits_resource_strategy'],
                    tuple(values['unified_limits_resource_list']),
                    values['driver'], from_file=True)


# -- Keystone's limits ------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Limits:
    """Nova's limits in Keystone: registered (default) limits by resource
    name, and project limits by (project ID, resource name).
    """

    registered: dict[str, int]
    project: dict[tuple[str, str], int]

    @classmethod
    def from_keystone(cls, registered_limits: list[dict[str, typing.Any]],
                      limits: list[dict[str, typing.Any]],
                      region: str | None = None) -> 'Limits':
        """From ``GET /v3/registered_limits`` and ``GET /v3/limits`` of
        Nova's service, as oslo.limit reads them
        (``_EnforcerUtils.get_registered_limits`` and
        ``get_project_limits``): those of ``region``
        (Nova's endpoint's) only, all of them when it is None. Domain
        limits are left out: oslo.limit's flat model reads a project's
        own limits only.
        """
        return cls(
            {r['resource_name']: int(r['default_limit'])
             for r in in_region(registered_limits, region)},
            {(lim['project_id'], lim['resource_name']):
             int(lim['resource_limit'])
             for lim in in_region(limits, region) if lim.get('project_id')})

    def projects_limiting(self, names: set[str]) -> set[str]:
        """Projects with a limit of their own on one of ``names``."""
        return {p for p, name in self.project if name in names}


def in_region(limits: list[dict[str, typing.Any]], region: str | None
              ) -> list[dict[str, typing.Any]]:
    """The limits (or registered limits) oslo.limit reads for an endpoint
    in ``region``: it asks Keystone for that region's (``region_id``
    filter, ``_EnforcerUtils._get_project_limits`` and
    ``_get_registered_limits``), or for every one when the endpoint has
    no region.
    """
    if region is None:
        return list(limits)
    return [lim for lim in limits if lim.get('region_id') == region]


@dataclasses.dataclass(frozen=True)
class Effective:
    """The limit Nova enforces on one resource of one project.

    ``limit``: -1 when unlimited. ``source``: where oslo.limit's value
    came from (PROJECT_LIMIT, REGISTERED_LIMIT, NO_LIMIT). ``strategy``:
    the ``[quota]`` strategy when it decided (a value of 0 without a
    registered limit), with ``listed`` (the resource is in
    ``unified_limits_resource_list``) and ``from_file``. ``driver``: the
    controller's ``[quota] driver`` when it is not the unified limits
    driver (source NOT_UNIFIED: Nova reads no limit of Keystone).
    """

    limit: int
    source: str
    strategy: str | None = None
    listed: bool = False
    from_file: bool = False
    driver: str | None = None

    @property
    def unlimited(self) -> bool:
        return self.limit < 0

    @property
    def rule(self) -> str:
        """Which rule decided, in words."""
        if self.driver is not None:
            return 'no limit; [quota] driver %s limits no resource class' \
                % self.driver
        if self.strategy is None:
            return self.source
        where = 'no limit' if self.source == NO_LIMIT else (
            'project limit 0, no registered limit')
        return '%s; %s strategy %s%s' % (
            where, self.strategy, 'lists it' if self.listed
            else 'does not list it',
            '' if self.from_file else " (Nova's default)")


def effective_limit(project_id: str, resource: str, limits: Limits,
                    strategy: Strategy) -> Effective:
    """The limit Nova enforces on ``resource`` (``class:VGPU``,
    ``servers``) of ``project_id``.

    Mirrors oslo.limit's ``_EnforcerUtils._get_limit`` (the project's
    limit, else the registered limit, else 0; a negative limit is
    unlimited) and ``nova.limit.utils.should_enforce``: Nova enforces a
    limit above 0, never a negative one, and a limit of 0 when the
    resource has a registered limit; otherwise (0 because nothing is
    registered, or a project limit of 0 without a registered limit) the
    ``[quota]`` strategy decides: ``require`` enforces 0 on the resources
    ``unified_limits_resource_list`` lists, ``ignore`` on those it does
    not list, and the others are unlimited. ``should_enforce`` judges the
    over-limit resources of a request together, but it enforces a
    request as soon as one of them would be enforced alone, so the rule
    holds for each resource on its own. Under another ``[quota] driver``
    (Nova's default ``DbQuotaDriver``, ``NoopQuotaDriver``) Nova reads
    none of Keystone's limits and limits no resource class.
    """
    if not strategy.unified:
        return Effective(UNLIMITED, NOT_UNIFIED, driver=strategy.driver)
    if (project_id, resource) in limits.project:
        value, source = limits.project[(project_id, resource)], PROJECT_LIMIT
    elif resource in limits.registered:
        value, source = limits.registered[resource], REGISTERED_LIMIT
    else:
        value, source = 0, NO_LIMIT
    if value < 0:
        return Effective(UNLIMITED, source)
    if value > 0 or resource in limits.registered:
        return Effective(value, source)
    listed = resource in strategy.resource_list
    enforced = listed if strategy.strategy == REQUIRE else not listed
    return Effective(0 if enforced else UNLIMITED, source,
                     strategy.strategy, listed, strategy.from_file)
