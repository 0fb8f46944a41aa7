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

"""What the capacity command reads: Placement's trees, Nova's flavor and
compute services, and (for ``--count``) Placement's allocation candidates.

How few requests it takes, whatever the number of GPUs and whatever is
allocated:

1. At once: the provider listing (``GET /resource_providers``: the
   trees), for a flavor the flavor and the nova-compute services, and
   the first anchor, ``GET /allocation_candidates?resources=MEMORY_MB:1``,
   whose provider summaries give capacity, used and traits of every
   provider of every tree with free memory (microversion 1.29 and later
   list every provider of a candidate's tree).
2. One ``GET /resource_providers?resources=<class>:<amount>`` per
   distinct amount the request asks of a provider, which says which
   providers can take that amount in one allocation now (room,
   ``min_unit``, ``max_unit``, ``step_size``), the unit rules the
   summaries do not carry. A bare request's are known from the start:
   they are asked in the first round; a flavor's after its extra specs.
3. Only while a tree is missing from the answers (no free memory, or an
   answer cut short by ``[placement] max_allocation_candidates``): the
   further anchors of ``provider.cover_trees`` (``DISK_GB``, ``VCPU``
   and ``PCPU``, the devices' classes), a few requests whatever the
   number of trees.
4. Only for what is still not covered (a node where nothing at all is
   free, a provider created in between): inventories, usages and traits
   per provider, all at once in the pool.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import functools
import logging
import typing

from osc_lib import exceptions

from osc_mdev.api import pool
from osc_mdev.domain import capacity as domain
from osc_mdev.domain import explanation
from osc_mdev.domain import multicreate
from osc_mdev.domain import providers
from osc_mdev.domain import request_filter
from osc_mdev.domain import resource_request as rr
from osc_mdev.domain import servers
from osc_mdev.domain import words
from osc_mdev.usecases import naming
from osc_mdev.usecases import nova_payloads
from osc_mdev.usecases import provider as device_reads

if typing.TYPE_CHECKING:
    from osc_mdev.api.compute import ComputeClient
    from osc_mdev.api.placement import PlacementClient
    from osc_mdev.domain import pci as pci_rules

LOG = logging.getLogger(__name__)

ANCHOR = ('anchor',)


def _disabled(services: Iterable[Mapping[str, typing.Any]],
              root_names: Iterable[str]) -> set[str]:
    """Root names whose nova-compute service is disabled.

    A service is known by its service host, a node by its hypervisor
    hostname (the root provider's name): a root matches a service whose
    host is its name or the first label of its name (``gpu3`` for
    ``gpu3.dc2.example.net``).
    """
    off = {s['host'] for s in services if s.get('status') == 'disabled'}
    return {name for name in root_names
            if name in off or name.split('.', 1)[0] in off}


def read_flavor(placement: PlacementClient, compute: ComputeClient | None,
                flavor: str | None, hosts: Iterable[str] = (),
                request: rr.Request | None = None) -> tuple:
    """``(flavor, listing, services, early)``, read at once: the flavor
    a ``servers.Flavor``, None without ``flavor``.

    With them, in the same round, the requests of ``read_hosts`` that do
    not depend on the flavor: the allocation candidates every count
    starts from and, for a bare ``request`` (no flavor), its
    ``?resources=`` listings. ``early`` holds those answers for
    ``read_hosts``.
    """
    calls: list[Callable[[], typing.Any]] = [
        placement.list_providers, device_reads.anchor_call(placement)]
    keys: list[tuple[object, ...]] = [ANCHOR]
    if request is not None:
        for amount in _amounts([request]):
            calls.append(functools.partial(placement.providers_with_room,
                                           amount))
            keys.append(_room_key(amount))
    if flavor is not None:
        if compute is None:
            raise ValueError('a flavor is read from Nova')
        calls.append(compute.compute_services)
        calls.append(functools.partial(naming.find_flavor, compute, flavor))
    results = pool.call_all(calls, placement.max_workers)
    device_reads.check_hosts(results[0], hosts)
    early = dict(zip(keys, results[1:]))
    if flavor is None:
        return None, results[0], [], early
    return (nova_payloads.flavor(results[-1]), results[0], results[-2],
            early)


def read_hosts(placement: PlacementClient,
               request: rr.Request | list[rr.Request], listing: list[dict],
               services: Iterable[dict] = (), hosts: Iterable[str] = (),
               need_roots: bool = True, early: dict | None = None
               ) -> list[domain.Host]:
    """The compute node trees ``request`` is counted on.

    ``request`` may be a list of requests: the trees then serve each of
    them (the amounts Placement is asked about are those of all).
    ``early``: answers ``read_flavor`` already read, not asked again.

    Nova is asked only about a flavor (``services``): a bare request is
    Placement's question only, though Nova's own COMPUTE_STATUS_DISABLED
    trait on the root still counts. ``hosts`` limits the trees (root
    provider names); without ``need_roots`` only trees with devices are
    kept. Devices are mdev devices and PCI-in-Placement devices (named
    ``<root>_<ADDRESS>``, kept when they carry Nova's
    COMPUTE_MANAGED_PCI_DEVICE trait), counted alike.
    """
    candidates = providers.find_candidates(listing, providers.KINDS)
    roots = {p['uuid']: p for p in listing
             if (p.get('root_provider_uuid') or p['uuid']) == p['uuid']}
    with_devices = {c.root_uuid for c in candidates}
    wanted_roots = [uuid for uuid, p in roots.items()
                    if (not hosts or p['name'] in hosts)
                    and (need_roots or uuid in with_devices)]
    wanted = set(wanted_roots)
    children = [c for c in candidates if c.root_uuid in wanted]

    amounts = _amounts(request if isinstance(request, (list, tuple))
                       else [request])
    answers = dict(early or {})
    calls: dict[tuple, Callable[[], typing.Any]] = {}
    if ANCHOR not in answers:
        calls[ANCHOR] = device_reads.anchor_call(placement)
    for amount in amounts:
        if _room_key(amount) not in answers:
            calls[_room_key(amount)] = functools.partial(
                placement.providers_with_room, amount)
    answers.update(zip(calls, pool.call_all(list(calls.values()),
                                            placement.max_workers)))
    # The trees the first answer left out: further anchors.
    summaries = device_reads.cover_trees(
        placement, {None: answers[ANCHOR]},
        {uuid: roots[uuid]['name'] for uuid in wanted_roots},
        candidates) or {}
    can_take = [{p['uuid'] for p in answers[_room_key(a)]} for a in amounts]

    uncovered = [u for u in wanted_roots if u not in summaries] + [
        c.uuid for c in children if c.uuid not in summaries]
    details = placement.get_provider_details(uncovered) if uncovered \
        else {}

    def provider(uuid: str, name: str,
                 device: str = '') -> domain.Provider | None:
        if uuid in details:
            return _from_details(uuid, name, details[uuid], device)
        if uuid in summaries:
            return _from_summary(uuid, name, summaries[uuid], device,
                                 amounts, can_take)
        return None  # deleted since it was listed

    disabled = _disabled(services, [roots[u]['name'] for u in wanted_roots])
    return _trees(provider, children, [(u, roots[u]['name'])
                                       for u in wanted_roots],
                  disabled, need_roots)


def _trees(provider: typing.Callable[..., domain.Provider | None],
           children: list[providers.Candidate],
           roots: list[tuple[str, str]], disabled: set[str],
           need_roots: bool) -> list[domain.Host]:
    """The compute node trees of ``roots`` (``[(uuid, name)]``) with
    the ``children`` that are devices, by name; ``provider(uuid, name,
    device)`` is the provider as read (None when it is gone).
    """
    by_root: dict[str, list[domain.Provider]] = {}
    for candidate in children:
        found = provider(candidate.uuid, candidate.name, candidate.device)
        if found is not None and candidate.kind == providers.PCI and (
                not providers.is_pci_device(found.traits)):
            found = None
        if found is not None:
            by_root.setdefault(candidate.root_uuid, []).append(found)
    result = []
    for uuid, name in roots:
        root = provider(uuid, name)
        devices = by_root.get(uuid, ())
        if root is None or (not devices and not need_roots):
            continue
        if not root.inventories and not devices:
            continue  # not a compute node (a sharing provider, say)
        result.append(domain.Host(
            root.name, root, tuple(sorted(devices, key=lambda p: p.device)),
            disabled=root.name in disabled))
    return sorted(result, key=lambda h: h.name)


def _room_key(amount: Mapping[str, int]) -> tuple[object, ...]:
    return ('room',) + tuple(sorted(amount.items()))


def _amounts(requests: Iterable[rr.Request]) -> list[dict[str, int]]:
    """The distinct ``{class: amount}`` one provider may be asked for:
    each numbered group whole, each class of the unnumbered group.
    """
    found: list[dict[str, int]] = []
    for group in (g for r in requests for g in r.groups):
        parts = [dict(group.resources)] if group.numbered else [
            {rc: n} for rc, n in group.resources]
        for part in parts:
            if part not in found:
                found.append(part)
    return found


def _from_details(uuid: str, name: str, info: Mapping[str, typing.Any],
                  device: str) -> domain.Provider:
    _, inventories = info['inventories']
    return domain.Provider(
        uuid=uuid, name=name,
        inventories={rc: domain.Inventory.from_api(inv)
                     for rc, inv in inventories.items()},
        usages=dict(info.get('usages') or {}),
        traits=frozenset(info.get('traits') or ()),
        device=device)


def _from_summary(uuid: str, name: str, summary: Mapping[str, typing.Any],
                  device: str, amounts: Sequence[Mapping[str, int]],
                  can_take: Sequence[Collection[str]]) -> domain.Provider:
    """A provider from its allocation candidate summary.

    Summaries carry capacity ((total - reserved) x ratio) and used, not
    the units: an amount the provider has room for but that Placement's
    ``?resources=`` listing leaves out is one its units do not allow.
    """
    resources = summary.get('resources') or {}
    refused: dict[str, set[int]] = {}
    for wanted, listed in zip(amounts, can_take):
        if uuid in listed:
            continue
        if all(rc in resources and resources[rc]['capacity'] -
               resources[rc]['used'] >= n for rc, n in wanted.items()):
            for rc, n in wanted.items():
                refused.setdefault(rc, set()).add(n)
    return domain.Provider(
        uuid=uuid, name=name,
        inventories={rc: domain.Inventory(
            total=info['capacity'], max_unit=info['capacity'],
            refused=frozenset(refused.get(rc, ())))
            for rc, info in resources.items()},
        usages={rc: info['used'] for rc, info in resources.items()},
        traits=frozenset(summary.get('traits') or ()),
        device=device)


def candidates_by_root(placement: PlacementClient, request: rr.Request
                       ) -> tuple[dict[str, list[dict[str, typing.Any]]],
                                  dict[str, typing.Any]]:
    """``({root uuid: [allocation requests]}, provider_summaries)``.

    One ``GET /allocation_candidates`` for ``request``, limited to
    Nova's default ``max_placement_results`` as the scheduler asks it;
    each tree's allocation requests in Placement's order: the first is
    the one the scheduler claims (see domain.multicreate.multi_create).
    """
    answer = placement.allocation_candidates(rr.to_querystring(request))
    summaries = answer.get('provider_summaries') or {}
    by_root: dict[str, list[dict[str, typing.Any]]] = {}
    for areq in answer.get('allocation_requests') or []:
        for uuid in areq['allocations']:
            root = (summaries.get(uuid) or {}).get(
                'root_provider_uuid') or uuid
            by_root.setdefault(root, []).append(areq['allocations'])
            break
    return by_root, summaries


def check_flavor_request(request: rr.Request) -> None:
    try:
        rr.check_request(request)
    except rr.RequestError as exc:
        raise exceptions.CommandError(words.sentence(str(exc))) from exc


@dataclasses.dataclass
class OneRequest:
    """What one ``server create --min N --max N`` would place."""

    placed: int             # at least
    per_host: dict[str, int]    # servers one request takes per host
    verdict: str


@dataclasses.dataclass
class Counted:
    """The servers of a request that fit, per host, and why not."""

    request: rr.Request     # prefilters added
    per_host: list[domain.HostCapacity]     # by host
    steps: list[explanation.Step] | None = None  # when explained
    fix: str | None = None      # the explainer's smallest change
    one_request: OneRequest | None = None

    @property
    def total(self) -> int:
        return sum(h.fits for h in self.per_host)


def request_of(flavor: servers.Flavor,
               pci_config: pci_rules.PciConfig | None = None,
               booted_from_volume: bool = False) -> rr.Request:
    """The request Nova builds for a server of ``flavor``
    (``resource_request.request_for``), for a count: its PCI alias
    devices need ``pci_config``, the PciConfig of the controller's
    nova.conf. CommandError when they cannot be known or Nova refuses
    them; a warning when Nova asks Placement nothing for them
    (``pci_in_placement`` off).
    """
    name = flavor.name or flavor.id
    alias = flavor.extra_specs.get(rr.PCI_ALIAS_KEY)
    if alias is not None and pci_config is None:
        raise exceptions.CommandError(
            'Flavor %s asks for PCI devices (%s=%s), whose aliases '
            'are defined in the controller\'s [pci] alias: pass its '
            'nova.conf with --controller-conf <file>.' % (
                name, rr.PCI_ALIAS_KEY, alias))
    try:
        request = rr.request_for(flavor, pci_config, booted_from_volume)
    except rr.RequestError as exc:
        raise exceptions.CommandError('Flavor %s: %s.' % (
            name, exc)) from exc
    if request.pci_requests and not any(g.is_pci for g in request.groups):
        LOG.warning(
            'Warning: [filter_scheduler] pci_in_placement is off in '
            '--controller-conf: Nova asks Placement nothing for the '
            'PCI alias of flavor %s (its PCI filter picks the '
            'devices), so they are not counted.', name)
    return request


def count(placement: PlacementClient, compute: ComputeClient | None,
          flavor: str | None = None, request: rr.Request | None = None,
          hosts: Iterable[str] = (),
          pci_config: pci_rules.PciConfig | None = None,
          explain: bool = False, count: int | None = None) -> Counted:
    """How many more servers of ``flavor`` (a name or ID) or of the bare
    ``request`` fit on the compute nodes (``hosts``: only these), with
    Nova's prefilters; the explainer's steps with ``explain``; with
    ``count``, whether one multi-create of that many servers is placed.
    """
    found, listing, services, early = read_flavor(
        placement, compute, flavor, hosts, request)
    bare = request is not None
    if request is None:
        request = request_of(found, pci_config)
        check_flavor_request(request)
    trees = read_hosts(placement, request, listing, services, hosts,
                       need_roots=not bare, early=early)
    request = request_filter.process_reqspec(
        request, owner_nova=domain.owner_nova_in_effect(trees))
    counted = Counted(request, domain.capacity(request, trees))
    if explain:
        counted.steps, counted.fix = explanation.explain(request, trees)
        return counted
    if count is not None:
        first, summaries = candidates_by_root(placement, request)
        by_root = {h.root.uuid: h.name for h in trees}
        first = {by_root[k]: v for k, v in first.items() if k in by_root}
        if multicreate.candidate_order_is_fixed(request):
            placed, one = multicreate.multi_create(
                count, {h: v[0] for h, v in first.items()}, summaries)
            most = placed
        else:
            placed, most, one = multicreate.multi_create_bounds(
                count, first, summaries)
        counted.one_request = OneRequest(
            placed, one, multicreate.multi_create_verdict(
                count, placed, one, counted.per_host, most))
    return counted
