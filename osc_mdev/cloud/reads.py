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

"""Reading devices out of Placement: few requests, batched.

Devices are mdev parent devices and, when asked for (``kinds``),
PCI-in-Placement devices (see ``cloud.providers``); a cloud without
PCI devices costs the same requests either way.

How the commands ask Placement for little, whatever the cloud's fill:

* The providers in scope come from one listing (``GET
  /resource_providers``), or for named hosts and devices from the trees
  they sit in (``?name=``, ``GET /resource_providers/{uuid}``, then
  ``?in_tree=``), never from a listing of the whole cloud.
* Used, capacity, resource classes and traits of every provider of those
  trees come from the provider summaries of a few ``GET
  /allocation_candidates?resources=<class>:1`` requests, the *anchors*
  (per named host: with ``in_tree=``); each one summarizes every
  provider of every tree where one unit of its class is free. The first,
  ``MEMORY_MB:1``, runs with the listing and reaches every compute node
  with free memory, nodes without a free VCPU or with dedicated CPUs
  only included. While a tree with devices is missing, the next anchors
  follow (``cloud.reach``): ``DISK_GB``, then ``VCPU`` and ``PCPU``,
  then the devices' own classes, each step's anchors at once in the
  pool and only for classes the answers so far show. A busy cloud costs
  two to six anchors, an idle one a single anchor.
* A tree that no anchor reaches is one where nothing at all is free, or
  one that ``[placement] max_allocation_candidates`` dropped from an
  answer cut short. For the second, one ``in_tree=`` request each, with
  the class of the widest answer that was cut (then of the next, for the
  trees still missing).
* Whatever the summaries still do not cover is read per device
  (inventories, usages, traits): trees where nothing is free, providers
  created meanwhile, a Placement older than microversion 1.31. So the
  answer never depends on the summaries being complete. ``--debug``
  logs what each anchor reached and names the trees read on their own.
* A summary's capacity is (total - reserved) x allocation ratio, so the
  inventory's own fields (Total, Reserved, Allocation Ratio, Max Unit,
  Min Unit, Step Size) cost one inventories read per device, and only
  when shown.

Each step runs its independent requests in the client's bounded pool; the
steps follow one another, so ``--os-mdev-max-workers`` bounds the whole
command.
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
import types
import typing

from osc_mdev.api import pool
from osc_mdev.base import errors
from osc_mdev.cloud import providers as provider_model
from osc_mdev.cloud import reach
from osc_mdev.cloud import units
from osc_mdev.nova import names
from osc_mdev.nova.pci import placement_translator

if typing.TYPE_CHECKING:
    from osc_mdev.api.placement import PlacementClient

LOG = logging.getLogger(__name__)

#: A JSON object of Placement's answers.
Body = dict[str, typing.Any]


def _not_mdev(candidate: provider_model.Candidate) -> errors.NotFound:
    if candidate.kind == provider_model.PCI:
        return errors.NotFound(
            'Provider %s is named like a PCI-in-Placement device but lacks '
            "Nova's COMPUTE_MANAGED_PCI_DEVICE trait, so it is not one."
            % candidate.name, kind='device', name=candidate.name)
    return errors.NotFound(
        'Provider %s has no VGPU or CUSTOM_* inventory, so it is not an mdev '
        'device.' % candidate.name, kind='device', name=candidate.name)


PCI_TRAITS_REFUSAL = (
    'Device %s:%s is a PCI-in-Placement device, whose traits Nova replaces '
    "with its device spec's when nova-compute restarts or refreshes its "
    'provider cache, so set them with the traits tag of [pci] device_spec '
    'on that compute.')


def _unknown_hosts(hosts: Iterable[str], parameter: str | None = None
                   ) -> errors.NotFound:
    """``errors.NotFound`` for ``hosts``, no compute node in Placement;
    the sentence begins with the input that gave them, ``parameter``.
    """
    names = sorted(hosts)
    return errors.NotFound(
        "%sNo compute host named %s in Placement; hosts are named as in "
        "'openstack hypervisor list'."
        % ('%s: ' % errors.given(parameter) if parameter else '',
           ', '.join("'%s'" % h for h in names)),
        kind='host', name=names[0], names=names, parameter=parameter)


def check_hosts(providers: Iterable[Mapping[str, typing.Any]],
                hosts: Iterable[str], parameter: str | None = None) -> None:
    """``errors.NotFound`` for ``hosts`` (given as ``parameter``) that are
    no compute node in Placement's ``providers`` listing.
    """
    unknown = set(hosts) - provider_model.hosts_of(providers)
    if unknown:
        raise _unknown_hosts(unknown, parameter)


def _errors() -> types.ModuleType:
    # Imported on use: ``--help`` of the commands does not load the HTTP
    # client.
    from osc_mdev.api import placement as placement_client
    return placement_client


def not_found() -> type[Exception]:
    """What the client raises for a provider deleted meanwhile."""
    return _errors().NotFound


def allocations_or_empty(placement: PlacementClient
                         ) -> Callable[[str], Body]:
    """A reader of a provider's allocations by consumer (``GET
    /resource_providers/{uuid}/allocations``), for ``placement.map``;
    empty for a provider deleted since it was listed.
    """
    gone = not_found()

    def read(uuid: str) -> Body:
        try:
            return placement.get_provider_allocations(uuid)
        except gone:
            return {}  # deleted since it was listed
    return read


def anchor_call(placement: PlacementClient,
                resource_class: str = reach.FIRST,
                in_tree: str | None = None,
                known: units.Known | None = None
                ) -> Callable[[], reach.Summaries | None]:
    """A call that answers the raw ``provider_summaries`` of ``GET
    /allocation_candidates?resources=<resource_class>:1`` (with
    ``in_tree``), or None on a Placement older than microversion 1.31.
    ``known`` learns from its allocation requests who takes one unit.
    """
    placement_client = _errors()

    def call() -> reach.Summaries | None:
        try:
            body = placement.get_allocation_candidates(
                '%s:1' % resource_class, in_tree=in_tree)
        except placement_client.MicroversionUnsupported:
            return None  # an old Placement: every device is read on its own
        if known is not None:
            known.add_candidates(body)
        return body.get('provider_summaries') or {}
    return call


def _merged(answers: Mapping[tuple, reach.Summaries]) -> reach.Summaries:
    merged = {}
    for part in answers.values():
        merged.update(part)
    return merged


def _names(roots: Mapping[str, str], uuids: Iterable[str]) -> str:
    return ', '.join(sorted(roots[u] for u in uuids))


def cover_trees(placement: PlacementClient,
                first: Mapping[str | None, reach.Summaries | None],
                roots: Mapping[str, str],
                candidates: Iterable[provider_model.Candidate],
                known: units.Known | None = None
                ) -> reach.Summaries | None:
    """Raw provider summaries of the trees ``roots`` (``{root uuid:
    name}``), as far as anchors reach them.

    ``first`` holds the answers of the first anchor (``reach.FIRST``) by
    tree: ``{None: ...}`` for the whole cloud, or ``{root uuid: ...}``
    asked with ``in_tree=``; further anchors are asked the same way,
    each step at once in the pool (``provider_model.reach``). ``candidates``
    are the devices of the listing, whose classes the device anchors
    come from. None (a Placement older than 1.31) stays None. Trees no
    anchor reaches are left out, named in the debug log: their providers
    are read one by one by the caller. ``known`` learns from the
    anchors' allocation requests who takes one unit of their class.
    """
    if any(part is None for part in first.values()):
        return None
    candidates = list(candidates)
    scoped = None not in first
    answers = {(reach.FIRST, tree): part or {}
               for tree, part in first.items()}
    _log_reach(answers)
    merged = _merged(answers)
    asked = {reach.FIRST}
    while True:
        missing = set(roots) - set(merged)
        anchors = reach.next_anchors(asked, merged, candidates, missing) \
            if missing else []
        if not anchors:
            break
        asked.update(anchors)
        trees = sorted(missing) if scoped else [None]
        keys = [(rc, tree) for rc in anchors for tree in trees]
        LOG.debug('%d of %d trees are in no answer so far; anchoring on %s',
                  len(missing), len(roots), ', '.join(anchors))
        found = pool.call_all([anchor_call(placement, rc, tree, known)
                               for rc, tree in keys], placement.max_workers)
        step = {key: part or {} for key, part in zip(keys, found)}
        _log_reach(step)
        answers.update(step)
        merged.update(_merged(step))
    if not scoped:
        _fill_cut(placement, answers, merged, roots, known)
    missing = set(roots) - set(merged)
    if missing:
        LOG.debug('%d of %d trees are in no allocation candidate answer, '
                  'read provider by provider: %s',
                  len(missing), len(roots), _names(roots, missing))
    return merged


def _log_reach(answers: Mapping[tuple, reach.Summaries]) -> None:
    for (rc, tree), part in answers.items():
        LOG.debug('Allocation candidates for %s:1%s reached %d trees',
                  rc, ' in tree %s' % tree if tree else '',
                  len(reach.reached(part)))


def _fill_cut(placement: PlacementClient,
              answers: Mapping[tuple, reach.Summaries],
              merged: reach.Summaries, roots: Mapping[str, str],
              known: units.Known | None = None) -> None:
    """Ask each tree ``merged`` lacks on its own (``in_tree=``) when
    answers were cut short by ``[placement] max_allocation_candidates``:
    with the class of the widest such answer, then of the next for the
    trees still missing; adds what they answer to ``merged``.
    """
    if not set(roots) - set(merged):
        return
    cut = reach.cut_anchors(
        {rc: part for (rc, tree), part in answers.items() if tree is None},
        merged)
    for rc in cut:
        missing = sorted(set(roots) - set(merged))
        if not missing:
            return
        LOG.debug('The answer for %s:1 was cut short ([placement] '
                  'max_allocation_candidates); %d trees asked one by one: '
                  '%s', rc, len(missing), _names(roots, missing))
        for part in pool.call_all(
                [anchor_call(placement, rc, root, known)
                 for root in missing],
                placement.max_workers):
            merged.update(part or {})


def _root_of(found: Sequence[Mapping[str, typing.Any]]) -> str | None:
    """The root UUID of the first provider of a lookup, or None."""
    if not found:
        return None
    return found[0].get('root_provider_uuid') or found[0]['uuid']


def _tree_root(placement: PlacementClient, reference: str) -> str | None:
    """The root of the tree a device reference points into, or None when
    only a listing of the whole cloud can tell (a bare PCI address, an
    unknown name).
    """
    placement_client = _errors()
    ref = reference.strip()
    try:
        if names.is_uuid(ref):
            return _root_of([placement.get_provider(ref)])
        host, sep, device = ref.partition(':')
        by_host = sep and device and not names.looks_like_pci_address(ref)
        found = placement.find_providers(name=host if by_host else ref)
        if not found and by_host and '_' in host:
            # A PCI device's provider name (gpu5_0000:AF:00.0) has ':'.
            found = placement.find_providers(name=ref)
        return _root_of(found)
    except placement_client.NotFound:
        return None


def _host_root_calls(placement: PlacementClient, hosts: Iterable[str]
                     ) -> dict[tuple[str, str], Callable[[], list[Body]]]:
    """The ``?name=`` lookup of each host, under ``('host', host)``."""
    return {('host', h): functools.partial(placement.find_providers, name=h)
            for h in hosts}


def _host_roots(hosts: Iterable[str],
                answers: Mapping[typing.Any, typing.Any]) -> dict[str, str]:
    """``{host: root uuid}`` from the ``?name=`` lookups of
    ``_host_root_calls`` in ``answers``; unknown hosts raise.
    """
    roots: dict[str, str] = {}
    unknown: list[str] = []
    for host in hosts:
        found = answers['host', host]
        # Placement ignores an empty ?name=, and a lookup by name may
        # answer a child: only a root of exactly that name is the host.
        root = [p for p in found if p['name'] == host and (
            p.get('root_provider_uuid') or p['uuid']) == p['uuid']]
        if root:
            roots[host] = root[0]['uuid']
        else:
            unknown.append(host)
    if unknown:
        raise _unknown_hosts(unknown)
    return roots


def _read(placement: PlacementClient, roots: Iterable[str] | None = None,
          ordered: bool = False,
          extra: Mapping[str, Callable[[], typing.Any]] | None = None,
          summaries: bool = True) -> tuple:
    """Providers and their summaries: of the whole cloud (``roots`` None)
    or of the trees of ``roots``.

    ``ordered``: the listings (which carry each provider's generation)
    are read before the summaries (which carry its traits), as a
    generation-guarded trait write needs; otherwise the first anchor
    runs with them. ``extra`` calls run with the listings. The trees
    with devices the first answer leaves out are reached by further
    anchors (``cover_trees``). Returns ``(providers, summaries,
    {name: answer of each extra call})``; without ``summaries`` only the
    listings are read.
    """
    trees: list[str | None]
    first: dict[tuple[str, str | None], Callable[[], typing.Any]]
    if roots is None:
        trees = [None]
        first = {('listing', None): placement.list_providers}
    else:
        trees = [r for r in sorted(set(roots))]
        first = {('listing', r): functools.partial(placement.find_providers,
                                                   in_tree=r)
                 for r in trees}
    first.update({('extra', name): call
                  for name, call in (extra or {}).items()})
    anchors = {('summary', r): anchor_call(placement, in_tree=r)
               for r in trees} if summaries else {}
    if ordered:
        answers = pool.call_named(first, placement.max_workers)
        answers.update(pool.call_named(anchors, placement.max_workers))
    else:
        answers = pool.call_named({**first, **anchors},
                                  placement.max_workers)
    providers = list({p['uuid']: p for r in trees
                      for p in answers['listing', r]}.values())
    merged = None
    if anchors:
        candidates = provider_model.find_candidates(
            providers, provider_model.KINDS)
        merged = cover_trees(placement,
                             {r: answers['summary', r] for r in trees},
                             _device_roots(candidates), candidates)
    return (providers, provider_model.parse_summaries(
        {'provider_summaries': merged or {}}),
        {name: answers['extra', name] for name in (extra or {})})


def _device_roots(candidates: Iterable[provider_model.Candidate]) -> dict:
    """``{root uuid: host}`` of the trees ``candidates`` sit in."""
    return {c.root_uuid: c.host for c in candidates}


def _rows(placement: PlacementClient,
          candidates: Sequence[provider_model.Candidate],
          summaries: Mapping[str, provider_model.Summary],
          inventory: bool = True, usages: bool = True, traits: bool = True,
          state: bool = False) -> list[provider_model.Device]:
    """Device rows of ``candidates``, reading per device only what the
    summaries lack.

    ``inventory``: also the inventory fields (one read per device).
    ``state``: the inventory of the devices whose state needs it (a
    one-time-use device with no room and no consumer,
    ``provider_model.may_wait``), none on a cloud without them. For a
    device the summaries do not cover, its inventories, and with
    ``usages``/``traits`` its usages and traits, are read (a PCI device's
    traits always: they tell whether it is one). A device deleted since
    it was listed is left out.
    """
    jobs: list[tuple[str, str]] = []
    for c in candidates:
        summary = summaries.get(c.uuid)
        if summary is None:
            jobs.append((c.uuid, 'inventories'))
            if usages:
                jobs.append((c.uuid, 'usages'))
            if traits or c.kind == provider_model.PCI:
                jobs.append((c.uuid, 'traits'))
        elif (inventory or (state and provider_model.may_wait(summary))) \
                and provider_model.has_device_inventory(c, summary):
            jobs.append((c.uuid, 'inventories'))
    placement_client = _errors()
    getters = {'inventories': placement.get_inventories,
               'usages': placement.get_usages,
               'traits': placement.get_traits}

    def fetch(job: tuple[str, str]) -> typing.Any:
        uuid, part = job
        try:
            return getters[part](uuid)
        except placement_client.NotFound:
            return placement_client.NotFound

    details: dict[str, dict[str, typing.Any]] = {}
    gone: set[str] = set()
    for (uuid, part), result in zip(jobs, placement.map(fetch, jobs)):
        if result is placement_client.NotFound:
            gone.add(uuid)
        else:
            details.setdefault(uuid, {})[part] = result
    devices = []
    for c in candidates:
        if c.uuid in gone:
            continue
        info = details.get(c.uuid, {})
        summary = summaries.get(c.uuid)
        if summary is not None:
            generation, inventories = info.get('inventories', (None, None))
            devices.extend(provider_model.devices_from_summary(
                c, summary, inventories, generation))
        else:
            generation, inventories = info['inventories']
            devices.extend(provider_model.build_devices(
                c, inventories, generation, info.get('usages') or {},
                info.get('traits')))
    return devices


def rows_of(placement: PlacementClient,
            candidates: Iterable[provider_model.Candidate],
            traits: bool = True, state: bool = False) -> list:
    """Device rows of ``candidates`` (of a provider listing read before):
    the anchors for their trees (``cover_trees``), per-device reads only
    for what is still missing. No inventory fields, but with ``state``
    the inventory a device's state needs (``_rows``).
    """
    candidates = list(candidates)
    summaries = cover_trees(placement, {None: anchor_call(placement)()},
                            _device_roots(candidates), candidates)
    return _rows(placement, candidates, provider_model.parse_summaries(
        {'provider_summaries': summaries or {}}), inventory=False,
        traits=traits or state, state=state)


def list_devices(placement: PlacementClient,
                 wanted: provider_model.DeviceFilter,
                 read_traits: bool = True, read_inventory: bool = True,
                 read_state: bool = False) -> list[provider_model.Device]:
    """Every device that ``wanted`` (a DeviceFilter) lets through.

    ``read_inventory``: the rows need the inventory fields (Total,
    Reserved, Max Unit, Allocation Ratio), one request per device;
    without them the request count does not grow with the cloud.
    ``read_state``: the rows need their state (``Device.state``): the
    traits, and the inventory of the one-time-use devices with no room
    and no consumer only.
    """
    return list_devices_and_hidden(placement, wanted, read_traits,
                                   read_inventory, read_state)[0]


def list_devices_and_hidden(placement: PlacementClient,
                            wanted: provider_model.DeviceFilter,
                            read_traits: bool = True,
                            read_inventory: bool = True,
                            read_state: bool = False
                            ) -> tuple[list[provider_model.Device], int]:
    """``(devices, hidden)``: ``list_devices`` and, when no device of
    ``wanted.kinds`` passed, how many devices of another kind sit on the
    hosts asked for (from the same reads: named like them, and tagged so
    where the summaries say), which an empty list can point to.
    """
    extra: dict[str, Callable[[], typing.Any]] = {}
    if wanted.traits:
        # Placement filters by trait: only matching devices are kept.
        extra['traits'] = functools.partial(placement.list_providers,
                                            wanted.traits)
    if wanted.resource_class:
        extra['class'] = functools.partial(placement.resource_class_exists,
                                           wanted.resource_class)
    roots: list[str] | None = None
    if wanted.hosts:
        hosts = sorted(set(wanted.hosts))
        roots = list(_host_roots(hosts, pool.call_named(
            _host_root_calls(placement, hosts),
            placement.max_workers)).values())
    providers, summaries, answers = _read(placement, roots, extra=extra)
    if wanted.resource_class and not answers['class']:
        raise errors.NotFound(
            "Resource class %s does not exist in Placement; run 'openstack "
            "resource class list' to see the classes." % wanted.resource_class,
            kind='resource_class', name=wanted.resource_class)

    everything = provider_model.find_candidates(providers,
                                                provider_model.KINDS)
    candidates = [c for c in everything if wanted.wants_candidate(c)]
    if wanted.traits:
        matching = {p['uuid'] for p in answers['traits']}
        candidates = [c for c in candidates if c.uuid in matching]
    devices = _rows(placement, candidates, summaries,
                    inventory=read_inventory,
                    traits=read_traits or read_state, state=read_state)
    found = sorted(filter(wanted.wants, devices), key=provider_model.sort_key)
    hidden = 0
    if not found:
        hidden = len([
            c for c in everything
            if c.kind not in wanted.kinds
            and (not wanted.hosts or c.host in wanted.hosts)
            and (c.uuid not in summaries
                 or provider_model.has_device_inventory(
                     c, summaries[c.uuid]))])
    return found, hidden


def not_found_message(reference: str,
                      providers: Iterable[Mapping[str, typing.Any]],
                      exc: Exception) -> str:
    for provider in providers:
        if reference in (provider['uuid'], provider['name']):
            return ('Provider %s is not an mdev device (it is not named '
                    '<host>_<libvirt device> under a compute node); see '
                    "'openstack mdev provider list'." % provider['name'])
    return str(exc)


def resolve(providers: Iterable[Mapping[str, typing.Any]],
            candidates: Sequence[provider_model.Candidate],
            reference: str) -> provider_model.Candidate:
    """The candidate ``reference`` names: errors.NotFound when it names
    none or several, errors.Invalid for a malformed PCI address.
    """
    try:
        return provider_model.resolve_device(reference, candidates)
    except provider_model.DeviceLookupError as exc:
        raise errors.NotFound(not_found_message(reference, providers, exc),
                              kind='device', name=reference) from exc
    except ValueError as exc:
        raise errors.Invalid('%s.' % exc, name=reference) from exc


def _scope(placement: PlacementClient, references: Sequence[str] = (),
           hosts: Iterable[str] = (), whole: bool = False,
           ordered: bool = False, summaries: bool = True,
           kinds: Collection[str] = (provider_model.MDEV,)
           ) -> tuple[list[Body], dict[str, provider_model.Summary],
                      dict[str, provider_model.Candidate], dict[str, str]]:
    """Read what naming ``references`` and selecting ``hosts`` need.

    Returns ``(providers, summaries, {reference: candidate},
    {host: root uuid})``. References resolve among devices of ``kinds``.
    Named devices and hosts cost requests for their
    trees only; a reference only a whole listing can resolve (a bare PCI
    address, a typo) reads the whole cloud, whose listing then gives the
    error message.
    """
    hosts = sorted(set(hosts))
    calls: dict[tuple[str, str], Callable[[], typing.Any]] = {
        **_host_root_calls(placement, hosts),
        **{('reference', r): functools.partial(_tree_root, placement, r)
           for r in references}}
    answers = pool.call_named(calls, placement.max_workers)
    host_roots = _host_roots(hosts, answers)
    ref_roots = [answers['reference', r] for r in references]
    whole = whole or None in ref_roots
    while True:
        roots = None if whole else (list(host_roots.values()) + ref_roots)
        providers, summed, _ = _read(placement, roots, ordered=ordered,
                                     summaries=summaries)
        candidates = provider_model.find_candidates(providers, kinds)
        try:
            named = {ref: resolve(providers, candidates, ref)
                     for ref in references}
        except errors.Error:
            if whole:
                raise
            whole = True  # the trees did not tell: ask the whole cloud
            continue
        return providers, summed, named, host_roots


def show_device(placement: PlacementClient, reference: str
                ) -> tuple[provider_model.Device, dict[str, typing.Any]]:
    """One device (mdev or PCI) with its consumers' allocations:
    ``(device, allocs)``.
    """
    _, _, named, _ = _scope(placement, [reference], summaries=False,
                            kinds=provider_model.KINDS)
    candidate = named[reference]
    details = placement.get_provider_details(
        [candidate.uuid], usages=False, allocations=True)
    if candidate.uuid not in details:
        raise errors.NotFound(
            'Device %s:%s was deleted while it was being read; run the '
            'command again.' % (candidate.host, candidate.device),
            kind='device', name=reference)
    info = details[candidate.uuid]
    generation, inventories = info['inventories']
    devices = provider_model.build_devices(
        candidate, inventories, generation,
        provider_model.usages_from_allocations(info['allocations']),
        info.get('traits'))
    if not devices:
        raise _not_mdev(candidate)
    return devices[0], info['allocations']


def select_devices(placement: PlacementClient, references: Sequence[str] = (),
                   hosts: Sequence[str] = (),
                   resource_class: str | None = None,
                   all_devices: bool = False) -> list[provider_model.Device]:
    """The devices a write command acts on, each once.

    ``references`` name devices one by one (as ``provider show`` takes
    them); ``hosts`` and ``resource_class`` narrow the selection and
    ``all_devices`` takes every device: a named device outside ``hosts``
    or ``resource_class`` (``cloud.providers.OutsideSelection``) and a
    selection that matches nothing are errors.

    Each device comes with the generation of the provider listing and the
    traits of the summaries read after it, which a trait write can use
    without reading the device again (a device the summaries miss has
    ``traits`` None: the writer reads it).

    Only mdev devices are selected: ``hosts``, ``resource_class`` and
    ``all_devices`` leave PCI-in-Placement devices out, and naming one is
    refused (PCI_TRAITS_REFUSAL) before anything is written.
    """
    whole = bool(all_devices or (
        resource_class and not hosts and not references))
    providers, summaries, named, host_roots = _scope(
        placement, references, hosts, whole=whole, ordered=True,
        kinds=provider_model.KINDS)
    for reference, candidate in named.items():
        summary = summaries.get(candidate.uuid)
        if candidate.kind == provider_model.PCI and (
                summary is None
                or provider_model.is_pci_device(summary.traits)):
            raise errors.Refused(
                PCI_TRAITS_REFUSAL % (candidate.host, candidate.device),
                device=reference)
    for reference, candidate in named.items():
        check_within(reference, candidate, hosts)
    if references:
        wanted = {c.uuid: c for c in named.values()}
    else:
        wanted = {c.uuid: c for c in provider_model.find_candidates(providers)
                  if not hosts or c.host in hosts}
    rows = _rows(placement, list(wanted.values()), summaries,
                 inventory=False, usages=False, traits=False)
    chosen: dict[str, provider_model.Device] = {}
    for reference, candidate in named.items():
        mine = [d for d in rows if d.uuid == candidate.uuid]
        if not mine:
            raise _not_mdev(candidate)
        matching = [d for d in mine if not resource_class
                    or d.resource_class == resource_class]
        if not matching:
            check_within(reference, mine[0], (), resource_class)
        chosen.setdefault(candidate.uuid, matching[0])
    if not references:
        for device in rows:
            if not resource_class or device.resource_class == resource_class:
                chosen.setdefault(device.uuid, device)
        if not chosen:
            what = []
            if hosts:
                what.append('on host %s' % ', '.join(hosts))
            if resource_class:
                what.append('with resource class %s' % resource_class)
            raise errors.NotFound(
                "No mdev device %s; run 'openstack mdev provider list' to "
                "see the devices." % (' '.join(what) or 'in the cloud'),
                kind='device', hosts=list(hosts),
                resource_class=resource_class)
    return sorted(chosen.values(), key=provider_model.sort_key)


def check_within(reference: str,
                 device: provider_model.Candidate | provider_model.Device,
                 hosts: Collection[str] = (),
                 resource_class: str | None = None) -> None:
    """provider_model.OutsideSelection when the named device is not among those
    of ``hosts`` and ``resource_class``.
    """
    outside = provider_model.outside_selection(reference, device, hosts,
                                               resource_class)
    if outside is not None:
        raise outside


def scope_devices(placement: PlacementClient, references: Sequence[str] = (),
                  hosts: Collection[str] = (),
                  kinds: Collection[str] = (provider_model.MDEV,)
                  ) -> list[provider_model.Device]:
    """Devices of ``kinds`` of the named hosts and devices (all when
    neither), with Used from the summaries: what ``allocation list``
    narrows down. Named devices may be of any kind.
    """
    providers, summaries, named, _ = _scope(
        placement, references, hosts,
        whole=not (references or hosts), kinds=provider_model.KINDS)
    candidates = provider_model.find_candidates(providers, kinds)
    chosen = [c for c in candidates if not hosts or c.host in hosts]
    if references:
        # Named devices must match the hosts too: selectors narrow one
        # another.
        for reference, candidate in named.items():
            check_within(reference, candidate, hosts)
        chosen = list({c.uuid: c for c in named.values()}.values())
    return _rows(placement, chosen, summaries, inventory=False,
                 traits=False)


def node_devices(placement: PlacementClient, hosts: Iterable[str] = ()
                 ) -> tuple[list[provider_model.Device], list[Body]]:
    """The mdev and PCI devices (with their traits) of the compute nodes
    ``hosts``, or of every node when none: ``(devices, providers)``,
    ``providers`` being the provider listing of the trees read.

    The same reads as ``provider list``: one listing and one summaries
    request for the whole cloud (for named hosts: a name lookup, a tree
    listing and a summaries request each), and per device only what the
    summaries lack. Unknown hosts are an errors.NotFound.
    """
    roots = None
    if hosts:
        hosts = sorted(set(hosts))
        roots = list(_host_roots(hosts, pool.call_named(
            _host_root_calls(placement, hosts),
            placement.max_workers)).values())
    providers, summaries, _ = _read(placement, roots)
    candidates = provider_model.find_candidates(providers,
                                                provider_model.KINDS)
    devices = _rows(placement, candidates, summaries, inventory=False,
                    usages=False, traits=True)
    return sorted(devices, key=provider_model.sort_key), providers


def cloud_devices(placement: PlacementClient
                  ) -> tuple[list[provider_model.Device], list[Body],
                             list[tuple[provider_model.Candidate,
                                        tuple[str, ...]]]]:
    """Every mdev and PCI device of the cloud, with Used and traits:
    ``(devices, providers, bare)``, ``providers`` being the whole cloud's
    listing and ``bare`` the PCI providers Nova made that hold no
    inventory, with their traits.

    The reads of ``provider list``, whatever the number of compute
    nodes: one listing and the anchors' summaries, per device only what
    the summaries lack (a tree where nothing is free: its inventories,
    usages and traits). No inventory fields: a device's summary gives
    its capacity only, (total - reserved) x ratio; ``with_inventories``
    reads them for the devices that need them.
    """
    providers, summaries, _ = _read(placement)
    candidates = provider_model.find_candidates(providers,
                                                provider_model.KINDS)
    devices = _rows(placement, candidates, summaries, inventory=False)
    return devices, providers, _bare_pci(placement, candidates, summaries,
                                         {d.uuid for d in devices})


def _bare_pci(placement: PlacementClient,
              candidates: Iterable[provider_model.Candidate],
              summaries: Mapping[str, provider_model.Summary],
              rows: Collection[str]
              ) -> list[tuple[provider_model.Candidate, tuple[str, ...]]]:
    """The PCI candidates without device rows (``rows``: the UUIDs with
    some) that are Nova's PCI providers with no inventory, with their
    traits: from the summaries, which list a provider of a tree they
    reach even without inventory; the traits of the others are read.
    """
    empty = [c for c in candidates
             if c.kind == provider_model.PCI and c.uuid not in rows
             and not (c.uuid in summaries
                      and summaries[c.uuid].resources)]
    unread = [c.uuid for c in empty if c.uuid not in summaries]
    placement_client = _errors()

    def fetch(uuid: str) -> tuple[str, ...] | None:
        try:
            if placement.get_inventories(uuid)[1]:
                return None     # inventory added meanwhile: not bare
            return tuple(sorted(placement.get_traits(uuid)))
        except placement_client.NotFound:
            return None
    read = dict(zip(unread, placement.map(fetch, unread)))
    found = []
    for candidate in empty:
        traits = (summaries[candidate.uuid].traits
                  if candidate.uuid in summaries else read[candidate.uuid])
        if traits is not None and provider_model.is_pci_device(traits):
            found.append((candidate, traits))
    return found


def with_inventories(placement: PlacementClient,
                     devices: Sequence[provider_model.Device]
                     ) -> list[provider_model.Device]:
    """``devices`` with their inventory fields: one inventories read per
    provider, in the bounded pool. A device whose class or provider is
    gone meanwhile keeps what it had.
    """
    uuids = sorted({d.uuid for d in devices})
    placement_client = _errors()

    def fetch(uuid: str) -> tuple[int, dict[str, Body]] | None:
        try:
            return placement.get_inventories(uuid)
        except placement_client.NotFound:
            return None
    read = dict(zip(uuids, placement.map(fetch, uuids)))
    result = []
    for device in devices:
        answer = read.get(device.uuid)
        if answer is not None and device.resource_class in answer[1]:
            generation, inventories = answer
            device = dataclasses.replace(
                device, generation=generation,
                inventory=provider_model.Inventory.from_api(
                    inventories[device.resource_class]))
        result.append(device)
    return result


NOT_ONE_TIME_USE = (
    'Device %s:%s is not a one-time-use device (it lacks the %s trait Nova '
    'puts on the provider of a [pci] device_spec entry with '
    '"one_time_use": "true"), so Nova never reserves it after use.')


def one_time_use_devices(placement: PlacementClient,
                         references: Sequence[str] = (),
                         all_devices: bool = False
                         ) -> list[provider_model.Device]:
    """The one-time-use devices ``references`` name, or with
    ``all_devices`` every one waiting to be cleaned (``Device.waiting``),
    with their state.

    Read in order (``_scope``): the provider listing, whose generation
    each device keeps in ``candidate.generation``, then the summaries
    (used, traits), then the inventory of the devices that may wait: a
    device whose inventory was read at that same generation was not
    changed in between. A named device that is no one-time-use device
    (an mdev device, a provider without the trait) is refused
    (errors.Refused) before anything is written.
    """
    providers, summaries, named, _ = _scope(
        placement, references, whole=all_devices, ordered=True,
        kinds=provider_model.KINDS)
    if all_devices:
        candidates = provider_model.find_candidates(
            providers, (provider_model.PCI,))
    else:
        candidates = list({c.uuid: c for c in named.values()}.values())
    rows = _rows(placement, candidates, summaries, inventory=False,
                 state=True)
    for reference, candidate in named.items():
        mine = [d for d in rows if d.uuid == candidate.uuid]
        if candidate.kind != provider_model.PCI or not mine or not any(
                d.one_time_use for d in mine):
            raise errors.Refused(
                NOT_ONE_TIME_USE % (candidate.host, candidate.device,
                                    placement_translator.HW_PCI_ONE_TIME_USE),
                device=reference)
    if all_devices:
        rows = [d for d in rows if d.waiting]
    return sorted(rows, key=provider_model.sort_key)
