"""What the capacity command reads: Placement's trees, Nova's flavor and
compute services, and (for ``--count``) Placement's allocation candidates.

One provider listing, the flavor and the compute services at once in the
bounded pool; then inventories, usages and traits of the compute node
roots and their mdev devices, all at once in the pool.
"""

import dataclasses

from osc_lib import exceptions

from osc_mdev.client import devices as device_reads
from osc_mdev.client import flavors as flavor_reads
from osc_mdev.client import pool
from osc_mdev.domain import capacity as domain
from osc_mdev.domain import providers


@dataclasses.dataclass
class Cloud:
    hosts: list            # domain.capacity.Host, by name
    flavor: dict | None


def _disabled(services, root_names):
    """Root names whose nova-compute service is disabled.

    A service is known by its service host, a node by its hypervisor
    hostname (the root provider's name): a root matches a service whose
    host is its name or the first label of its name (``gpu3`` for
    ``gpu3.dc2.example.net``).
    """
    off = {s['host'] for s in services if s.get('status') == 'disabled'}
    return {name for name in root_names
            if name in off or name.split('.', 1)[0] in off}


def read(placement, compute, flavor=None, hosts=(), need_roots=True):
    """The cloud's compute node trees (and the flavor, if named).

    Nova is asked only about a flavor: the flavor and which nova-compute
    services are disabled (a bare request is Placement's question only;
    Nova's own COMPUTE_STATUS_DISABLED trait on the root still counts).
    ``hosts`` limits the trees read (root provider names, checked);
    without ``need_roots`` (a request that asks nothing of the root and
    no flavor) only roots with mdev devices are read.
    """
    calls = [placement.list_providers]
    if flavor is not None:
        calls.append(compute.compute_services)
        calls.append(lambda: flavor_reads.find_flavor(compute, flavor))
    results = pool.call_all(calls, placement.max_workers)
    listing = results[0]
    services, found_flavor = [], None
    if flavor is not None:
        services, found_flavor = results[1], results[2]
    device_reads.check_hosts(listing, hosts)

    candidates = providers.find_candidates(listing)
    roots = {p['uuid']: p for p in listing
             if (p.get('root_provider_uuid') or p['uuid']) == p['uuid']}
    with_devices = {c.root_uuid for c in candidates}
    wanted_roots = [uuid for uuid, p in roots.items()
                    if (not hosts or p['name'] in hosts)
                    and (need_roots or uuid in with_devices)]
    wanted = set(wanted_roots)
    children = [c for c in candidates if c.root_uuid in wanted]
    details = placement.get_provider_details(
        wanted_roots + [c.uuid for c in children])
    disabled = _disabled(services, [roots[u]['name'] for u in wanted_roots])

    by_root = {}
    for candidate in children:
        info = details.get(candidate.uuid)
        if info is None:
            continue
        by_root.setdefault(candidate.root_uuid, []).append(
            _provider(candidate.uuid, candidate.name, info,
                      candidate.device))
    result = []
    for uuid in wanted_roots:
        info = details.get(uuid)
        if info is None:
            continue
        root = _provider(uuid, roots[uuid]['name'], info)
        if not need_roots and not by_root.get(uuid):
            continue
        if not root.inventories and not by_root.get(uuid):
            continue  # not a compute node (a sharing provider, say)
        result.append(domain.Host(
            root.name, root, tuple(sorted(by_root.get(uuid, ()),
                                          key=lambda p: p.device)),
            disabled=root.name in disabled))
    return Cloud(sorted(result, key=lambda h: h.name), found_flavor)


def _provider(uuid, name, info, device=''):
    _, inventories = info['inventories']
    return domain.Provider(
        uuid=uuid, name=name,
        inventories={rc: domain.Inventory.from_api(inv)
                     for rc, inv in inventories.items()},
        usages=dict(info.get('usages') or {}),
        traits=frozenset(info.get('traits') or ()),
        device=device)


def first_candidates(placement, request):
    """``({root uuid: first allocation request}, provider_summaries)``.

    One ``GET /allocation_candidates`` for ``request``, limited to
    Nova's default ``max_placement_results`` as the scheduler asks it;
    each tree's first allocation request in Placement's order is the one
    the scheduler claims (see domain.capacity.multi_create).
    """
    answer = placement.allocation_candidates(domain.to_querystring(request))
    summaries = answer.get('provider_summaries') or {}
    first = {}
    for areq in answer.get('allocation_requests') or []:
        for uuid in areq['allocations']:
            root = (summaries.get(uuid) or {}).get(
                'root_provider_uuid') or uuid
            first.setdefault(root, areq['allocations'])
            break
    return first, summaries


def check_flavor_request(request):
    try:
        domain.check_request(request)
    except domain.RequestError as exc:
        raise exceptions.CommandError('%s.' % (str(exc)[0].upper()
                                               + str(exc)[1:])) from exc
