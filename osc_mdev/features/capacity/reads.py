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

How few requests it takes, whatever the number of GPUs, whatever is
allocated and whatever the flavor asks (root disk, ephemeral, swap, PCI
aliases, numbered groups); several flavors counted together
(``count_flavors``) share every read:

1. At once: the provider listing (``GET /resource_providers``: the
   trees), for a flavor the flavor and the nova-compute services, and
   the first anchor, ``GET /allocation_candidates?resources=MEMORY_MB:1``,
   whose provider summaries give capacity, used and traits of every
   provider of every tree with free memory (microversion 1.29 and later
   list every provider of a candidate's tree). A bare request's
   ``?resources=`` listings (one per amount) run in this round too.
2. Only while a tree is missing from the answers (no free memory, or an
   answer cut short by ``[placement] max_allocation_candidates``): the
   further anchors of ``cloud.reads.cover_trees`` (``DISK_GB``, ``VCPU``
   and ``PCPU``, the devices' classes), a few requests whatever the
   number of trees.
3. The unit rules (``min_unit``, ``max_unit``, ``step_size``), which the
   summaries do not carry, only where they decide a count
   (``cloud.units``): the anchors' allocation requests tell who takes
   one unit; then ``GET /resource_providers?resources=`` listings, few
   and flat: the compute node's classes together at the largest amount
   any request asks, each numbered group whole, each device class at
   its largest amount; one listing per class and amount only for
   providers these still leave in doubt.
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

from osc_mdev.api import pool
from osc_mdev.base import errors
from osc_mdev.base import words
from osc_mdev.cloud import allocation_candidates
from osc_mdev.cloud import explanation
from osc_mdev.cloud import fit as fit
from osc_mdev.cloud import lookup as naming
from osc_mdev.cloud import multicreate
from osc_mdev.cloud import payloads as nova_payloads
from osc_mdev.cloud import providers
from osc_mdev.cloud import reads as device_reads
from osc_mdev.cloud import units
from osc_mdev.nova import objects as servers
from osc_mdev.nova.scheduler import request_filter
from osc_mdev.nova.scheduler import utils as rr

if typing.TYPE_CHECKING:
    from osc_mdev.api.compute import ComputeClient
    from osc_mdev.api.placement import PlacementClient
    from osc_mdev.nova.pci import config as pci_rules

LOG = logging.getLogger(__name__)

ANCHOR = ('anchor',)
KNOWN = ('known',)
CPUS = frozenset((rr.VCPU, rr.PCPU))


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


@dataclasses.dataclass(frozen=True)
class FirstReads:
    """What ``read_flavor`` reads at once: the ``flavor`` (None without
    one), the provider ``listing`` (the trees), the nova-compute
    ``services`` (none without a flavor) and, in ``early``, the answers
    of ``read_hosts``'s requests that do not depend on the flavor, for
    ``read_hosts`` not to ask them again.
    """

    flavor: servers.Flavor | None
    listing: list[dict[str, typing.Any]]
    services: list[dict[str, typing.Any]]
    early: dict[tuple[object, ...], typing.Any]


LISTING = ('listing',)
SERVICES = ('services',)
FLAVOR = ('flavor',)


def read_flavor(placement: PlacementClient, compute: ComputeClient | None,
                flavor: str | None, hosts: Iterable[str] = (),
                request: rr.Request | None = None) -> FirstReads:
    """The FirstReads of a count, read at once: the flavor (a
    ``nova.objects.Flavor``, None without ``flavor``) and the provider
    listing, and with them, in the same round, the requests of
    ``read_hosts`` that do not depend on the flavor: the allocation
    candidates every count starts from and, for a bare ``request`` (no
    flavor), its ``?resources=`` listings.
    """
    known = units.Known()
    calls: dict[tuple[object, ...], Callable[[], typing.Any]] = {
        LISTING: placement.list_providers,
        ANCHOR: device_reads.anchor_call(placement, known=known)}
    if request is not None:
        for amount in _amounts([request]):
            calls[_room_key(amount)] = functools.partial(
                placement.providers_with_room, amount)
    if flavor is not None:
        if compute is None:
            raise ValueError('a flavor is read from Nova')
        calls[SERVICES] = compute.compute_services
        calls[FLAVOR] = functools.partial(naming.find_flavor, compute,
                                          flavor)
    early = pool.call_named(calls, placement.max_workers)
    listing = early.pop(LISTING)
    device_reads.check_hosts(listing, hosts)
    services = early.pop(SERVICES, [])
    payload = early.pop(FLAVOR, None)
    early[KNOWN] = known
    return FirstReads(
        None if payload is None else nova_payloads.flavor(payload),
        listing, services, early)


def read_hosts(placement: PlacementClient,
               request: rr.Request | list[rr.Request], listing: list[dict],
               services: Iterable[dict] = (), hosts: Iterable[str] = (),
               need_roots: bool = True, early: dict | None = None
               ) -> list[fit.Host]:
    """The compute node trees ``request`` is counted on.

    ``request`` may be a list of requests: the trees then serve each of
    them, from the same reads. ``early``: answers ``read_flavor``
    already read, not asked again.

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

    requests = list(request) if isinstance(request, (list, tuple)) \
        else [request]
    answers = dict(early or {})
    known = answers.pop(KNOWN, None) or units.Known()
    if ANCHOR not in answers:
        answers[ANCHOR] = device_reads.anchor_call(placement,
                                                   known=known)()
    # The trees the first answer left out: further anchors.
    summaries = device_reads.cover_trees(
        placement, {None: answers[ANCHOR]},
        {uuid: roots[uuid]['name'] for uuid in wanted_roots},
        candidates, known) or {}
    free = _free(summaries)
    for key, listed in answers.items():
        if key[0] == 'room':
            known.add_listing(dict(key[1:]), [p['uuid'] for p in listed],
                              free)

    uncovered = [u for u in wanted_roots if u not in summaries] + [
        c.uuid for c in children if c.uuid not in summaries]
    details = placement.get_provider_details(uncovered) if uncovered \
        else {}
    asked = _asked(requests)
    disabled = _disabled(services, [roots[u]['name'] for u in wanted_roots])

    def trees() -> list[fit.Host]:
        def provider(uuid: str, name: str,
                     device: str = '') -> fit.Provider | None:
            if uuid in details:
                return _from_details(uuid, name, details[uuid], device)
            if uuid in summaries:
                return _from_summary(uuid, name, summaries[uuid], device,
                                     asked, known)
            return None  # deleted since it was listed
        return _trees(provider, children, [(u, roots[u]['name'])
                                           for u in wanted_roots],
                      disabled, need_roots)

    return _settle(placement, requests, trees, known, set(details), free,
                   asked)


def _settle(placement: PlacementClient, requests: Sequence[rr.Request],
            trees: Callable[[], list[fit.Host]], known: units.Known,
            exact: Collection[str], free: units.Free,
            asked: Mapping[str, Collection[int]]) -> list[fit.Host]:
    """``trees()`` once ``known`` tells every unit rule that decides a
    count (``_doubts``): the listings of ``_probes`` first, then, where
    fewer providers than listings are in doubt, their own inventories.
    ``exact``: providers whose inventories were read.
    """
    first = True
    while True:
        found = trees()
        doubts = _doubts(requests, found, known, exact)
        if not doubts:
            return found
        doubted = sorted({u for u, _, _ in doubts})
        LOG.debug('The units of %d providers are not known for %s',
                  len(doubted), ', '.join(sorted(
                      {'%s:%d' % (rc, n) for _, rc, n in doubts})))
        if not first and len(doubted) <= len({i[1:] for i in doubts}):
            # Fewer providers than listings: their own inventories.
            for uuid, inventories in zip(doubted, pool.call_all(
                    [functools.partial(_inventories, placement, u)
                     for u in doubted], placement.max_workers)):
                known.add_inventories(uuid, inventories, asked)
            continue
        probes = _probes(requests, doubts, first, known)
        first = False
        LOG.debug('Asking ?resources=%s', ' and '.join(','.join(
            '%s:%d' % i for i in sorted(p.items())) for p in probes))
        for amounts, listed in zip(probes, pool.call_all(
                [functools.partial(placement.providers_with_room, p)
                 for p in probes], placement.max_workers)):
            known.add_listing(amounts, [p['uuid'] for p in listed], free)


def _inventories(placement: PlacementClient, uuid: str
                 ) -> dict[str, typing.Any] | None:
    """The provider's inventories, None when it is gone."""
    try:
        return placement.get_inventories(uuid)[1]
    except device_reads.not_found() as exc:
        LOG.debug('Provider %s is gone: %s', uuid, exc)
        return None


def _free(summaries: Mapping[str, Mapping[str, typing.Any]]
          ) -> dict[tuple[str, str], int]:
    return {(uuid, rc): info['capacity'] - info['used']
            for uuid, s in summaries.items()
            for rc, info in (s.get('resources') or {}).items()}


def _asked(requests: Iterable[rr.Request]) -> dict[str, set[int]]:
    """``{class: amounts}`` one provider may be asked for."""
    asked: dict[str, set[int]] = {}
    for group in (g for r in requests for g in r.groups):
        for rc, n in group.resources:
            asked.setdefault(rc, set()).add(n)
    return asked


Doubt = tuple[str, str, int]    # (provider uuid, class, amount)


def _doubts(requests: Iterable[rr.Request], trees: Iterable[fit.Host],
            known: units.Known, exact: Collection[str]) -> set[Doubt]:
    """The amounts whose units decide a count and no read told: of a
    provider with room for them, in a tree where a server of the request
    fits by room alone (elsewhere none fits, whatever the units).
    """
    doubts: set[Doubt] = set()
    trees = list(trees)
    for request in requests:
        pairs = {(rc, n) for g in request.groups for rc, n in g.resources}
        for host in trees:
            if fit.place(request, host) is None:
                continue
            for p in host.providers:
                if p.uuid in exact:
                    continue
                doubts.update(
                    (p.uuid, rc, n) for rc, n in pairs
                    if rc in p.inventories and p.free(rc) >= n
                    and known.takes(p.uuid, rc, n) is None)
    return doubts


def _probes(requests: Iterable[rr.Request], doubts: Collection[Doubt],
            first: bool, known: units.Known) -> list[dict[str, int]]:
    """The ``?resources=`` listings that settle ``doubts``.

    First, few and flat: a numbered group's amounts together; the
    compute node's classes of the unnumbered groups together at the
    largest amount of each (one listing for the requests of dedicated
    CPUs, one for the others) and, where a smaller amount is in doubt on
    a provider no read told takes 1, at 1 (which spans every amount up
    to the largest taken); any other class at its largest amount (and at
    1 likewise). Then, per class, one listing at the largest amount
    still in doubt, which settles it for every provider with room for
    it.
    """
    pairs = {(rc, n) for _, rc, n in doubts}
    top: dict[str, int] = {}
    for rc, n in pairs:
        top[rc] = max(top.get(rc, 0), n)
    if not first:
        return [{rc: n} for rc, n in sorted(top.items())]
    lack_one = {rc for uuid, rc, n in doubts
                if n < top[rc] and known.takes(uuid, rc, 1) is None}
    probes: list[dict[str, int]] = []
    merged: dict[frozenset[str], dict[str, int]] = {}
    single: dict[str, int] = {}
    for group in (g for r in requests for g in r.groups):
        if not any(i in pairs for i in group.resources):
            continue
        if group.numbered:
            if dict(group.resources) not in probes:
                probes.append(dict(group.resources))
            continue
        node = {rc: n for rc, n in group.resources
                if rc in rr.ROOT_CLASSES}
        if node:
            # A node of dedicated CPUs may have no VCPU: apart.
            most = merged.setdefault(frozenset(node) & CPUS, {})
            for rc, n in node.items():
                most[rc] = max(most.get(rc, 0), n)
        for rc, n in group.resources:
            if rc not in rr.ROOT_CLASSES and (rc, n) in pairs:
                single[rc] = max(single.get(rc, 0), n)
    ones = [{rc: 1 for rc in m if rc in lack_one} for m in merged.values()]
    ones += [{rc: 1} for rc in sorted(single) if rc in lack_one]
    for amounts in list(merged.values()) + [
            {rc: n} for rc, n in sorted(single.items())] + ones:
        if amounts and amounts not in probes:
            probes.append(amounts)
    return probes


def _trees(provider: typing.Callable[..., fit.Provider | None],
           children: list[providers.Candidate],
           roots: list[tuple[str, str]], disabled: set[str],
           need_roots: bool) -> list[fit.Host]:
    """The compute node trees of ``roots`` (``[(uuid, name)]``) with
    the ``children`` that are devices, by name; ``provider(uuid, name,
    device)`` is the provider as read (None when it is gone).
    """
    by_root: dict[str, list[fit.Provider]] = {}
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
        result.append(fit.Host(
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
                  device: str) -> fit.Provider:
    _, inventories = info['inventories']
    return fit.Provider(
        uuid=uuid, name=name,
        inventories={rc: fit.Inventory.from_api(inv)
                     for rc, inv in inventories.items()},
        usages=dict(info.get('usages') or {}),
        traits=frozenset(info.get('traits') or ()),
        device=device)


def _from_summary(uuid: str, name: str, summary: Mapping[str, typing.Any],
                  device: str, asked: Mapping[str, Collection[int]],
                  known: units.Known) -> fit.Provider:
    """A provider from its allocation candidate summary.

    Summaries carry capacity ((total - reserved) x ratio) and used, not
    the units: an amount ``known`` says the units refuse is refused; an
    amount no read told of is taken (it decides no count: see
    ``_doubts``).
    """
    resources = summary.get('resources') or {}
    return fit.Provider(
        uuid=uuid, name=name,
        inventories={rc: fit.Inventory(
            total=info['capacity'], max_unit=info['capacity'],
            refused=frozenset(
                n for n in asked.get(rc, ())
                if known.takes(uuid, rc, n) is False))
            for rc, info in resources.items()},
        usages={rc: info['used'] for rc, info in resources.items()},
        traits=frozenset(summary.get('traits') or ()),
        device=device)


def read_candidates(placement: PlacementClient, request: rr.Request
                    ) -> allocation_candidates.Candidates:
    """Placement's allocation candidates for ``request``.

    One ``GET /allocation_candidates`` for ``request``, limited to
    Nova's default ``max_placement_results`` as the scheduler asks it;
    ``by_root()`` gives each tree's allocation requests in Placement's
    order, of which the scheduler claims the first (see
    ``multicreate.multi_create``).
    """
    return allocation_candidates.parse(placement.allocation_candidates(
        rr.to_querystring(request)))


def check_flavor_request(request: rr.Request) -> None:
    """``errors.Invalid`` for a request Nova's scheduler refuses
    (``nova.scheduler.utils.check_request``).
    """
    try:
        rr.check_request(request)
    except rr.RequestError as exc:
        raise errors.Invalid(words.sentence(str(exc)),
                             parameter='flavor') from exc


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
    per_host: list[fit.HostCapacity]     # by host
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
    (``nova.scheduler.utils.request_for``), for a count: its PCI alias
    devices need ``pci_config``, the PciConfig of the controller's
    nova.conf. ``errors.Invalid`` when they cannot be known or Nova
    refuses them; a warning when Nova asks Placement nothing for them
    (``pci_in_placement`` off).
    """
    name = flavor.name or flavor.id
    alias = flavor.extra_specs.get(rr.PCI_ALIAS_KEY)
    if alias is not None and pci_config is None:
        raise errors.Invalid(
            'Flavor %s asks for PCI devices (%s=%s), whose aliases '
            'are defined in the controller\'s [pci] alias: pass its '
            'nova.conf with %s <file>.' % (
                name, rr.PCI_ALIAS_KEY, alias,
                errors.given('controller_conf')),
            parameter='controller_conf', flavor=name)
    try:
        request = rr.request_for(flavor, pci_config, booted_from_volume)
    except rr.RequestError as exc:
        raise errors.Invalid('Flavor %s: %s.' % (name, exc),
                             parameter='flavor', flavor=name) from exc
    if request.pci_requests and not any(g.is_pci for g in request.groups):
        LOG.warning(
            "Warning: [filter_scheduler] pci_in_placement is off in the "
            "controller's nova.conf: Nova asks Placement nothing for the "
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
    read = read_flavor(placement, compute, flavor, hosts, request)
    bare = request is not None
    if request is None:
        assert read.flavor is not None     # read: no bare request
        request = request_of(read.flavor, pci_config)
        check_flavor_request(request)
    trees = read_hosts(placement, request, read.listing, read.services,
                       hosts, need_roots=not bare, early=read.early)
    request = request_filter.process_reqspec(
        request, owner_nova=fit.owner_nova_in_effect(trees))
    counted = Counted(request, fit.capacity(request, trees))
    if explain:
        counted.steps, counted.fix = explanation.explain(request, trees)
        return counted
    if count is not None:
        answer = read_candidates(placement, request)
        by_root = {h.root.uuid: h.name for h in trees}
        first = {by_root[k]: v for k, v in answer.by_root().items()
                 if k in by_root}
        if multicreate.candidate_order_is_fixed(request):
            placed, one = multicreate.multi_create(
                count, first, answer.summaries)
            most = placed
        else:
            placed, most, one = multicreate.multi_create_bounds(
                count, first, answer.summaries)
        counted.one_request = OneRequest(
            placed, one, multicreate.multi_create_verdict(
                count, placed, one, counted.per_host, most))
    return counted


def _flavors_by_reference(compute: ComputeClient,
                          references: Sequence[str]
                          ) -> dict[str, typing.Any]:
    """``{reference: flavor payload or the error that says why there is
    none}``: one flavor read as ``capacity --flavor`` reads it; several
    from one listing of every flavor (with their extra specs), by ID
    first, then by name.
    """
    found: dict[str, typing.Any] = {}
    if len(references) == 1:
        try:
            found[references[0]] = naming.find_flavor(compute,
                                                      references[0])
        except errors.Error as exc:
            found[references[0]] = exc
        return found
    listed = compute.list_flavors()
    by_id = {f['id']: f for f in listed}
    for ref in references:
        try:
            found[ref] = by_id.get(ref) or naming.one_named(
                [f for f in listed if f['name'] == ref], ref, 'flavor',
                "No flavor named or with ID '%s'; see 'openstack flavor "
                "list --all'." % ref)
        except errors.Error as exc:
            found[ref] = exc
    return found


def count_flavors(placement: PlacementClient, compute: ComputeClient,
                  flavors: Sequence[str],
                  pci_config: pci_rules.PciConfig | None = None
                  ) -> dict[str, int | Exception]:
    """How many more servers of each flavor (a name or ID) fit, as
    ``count`` counts one, from one set of reads for all of them: the
    flavors (one listing when there are several), the services, the
    provider listing, the anchors and the unit listings. A flavor that
    cannot be counted maps to the error that says why.
    """
    known = units.Known()
    calls: dict[tuple[str], Callable[[], typing.Any]] = {
        LISTING: placement.list_providers,
        SERVICES: compute.compute_services,
        FLAVOR: functools.partial(_flavors_by_reference, compute, flavors),
        ANCHOR: device_reads.anchor_call(placement, known=known)}
    answers = pool.call_named(calls, placement.max_workers)
    result: dict[str, int | Exception] = {}
    requests: dict[str, rr.Request] = {}
    for ref, payload in answers[FLAVOR].items():
        if isinstance(payload, Exception):
            result[ref] = payload
            continue
        try:
            request = request_of(nova_payloads.flavor(payload), pci_config)
            check_flavor_request(request)
        except errors.Error as exc:
            result[ref] = exc
            continue
        requests[ref] = request
    if requests:
        trees = read_hosts(placement, list(requests.values()),
                           answers[LISTING], answers[SERVICES],
                           early={ANCHOR: answers[ANCHOR], KNOWN: known})
        owner_nova = fit.owner_nova_in_effect(trees)
        for ref, request in requests.items():
            request = request_filter.process_reqspec(
                request, owner_nova=owner_nova)
            result[ref] = sum(h.fits for h in fit.capacity(request,
                                                           trees))
    return {ref: result[ref] for ref in flavors}
