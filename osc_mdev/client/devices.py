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

"""Reading mdev devices out of Placement: the requests, batched.

Combines the Placement calls of ``client.placement`` with the pure logic
of ``domain.providers``: one provider listing, then every per-device
request at once in the bounded pool.
"""

from osc_lib import exceptions

from osc_mdev.client import pool
from osc_mdev.domain import providers as domain


def _devices(candidates, details):
    devices = []
    for candidate in candidates:
        info = details.get(candidate.uuid)
        if info is None:
            continue  # deleted since it was listed
        generation, inventories = info['inventories']
        usages = info.get('usages')
        if usages is None and 'allocations' in info:
            usages = domain.usages_from_allocations(info['allocations'])
        devices.extend(domain.build_devices(
            candidate, inventories, generation, usages or {},
            info.get('traits')))
    return devices


def _not_mdev(candidate):
    return exceptions.CommandError(
        'Provider %s has no VGPU or CUSTOM_* inventory, so it is not an mdev '
        'device.' % candidate.name)


def check_hosts(providers, hosts):
    unknown = set(hosts) - domain.hosts_of(providers)
    if unknown:
        raise exceptions.CommandError(
            'No compute host named %s in Placement; hosts are named as in '
            "'openstack hypervisor list'."
            % ', '.join("'%s'" % h for h in sorted(unknown)))


def list_devices(placement, wanted, read_traits=True):
    """Every mdev device that ``wanted`` (a DeviceFilter) lets through."""
    calls = [placement.list_providers]
    if wanted.traits:
        # Placement filters by trait: only matching devices are read.
        calls.append(lambda: placement.list_providers(wanted.traits))
    if wanted.resource_class:
        calls.append(
            lambda: placement.resource_class_exists(wanted.resource_class))
    results = pool.call_all(calls, placement.max_workers)
    providers = results[0]
    if wanted.resource_class and not results[-1]:
        raise exceptions.CommandError(
            "Resource class %s does not exist in Placement; run 'openstack "
            "resource class list' to see the classes." % wanted.resource_class)
    check_hosts(providers, wanted.hosts)

    candidates = [c for c in domain.find_candidates(providers)
                  if wanted.wants_candidate(c)]
    if wanted.traits:
        matching = {p['uuid'] for p in results[1]}
        candidates = [c for c in candidates if c.uuid in matching]
    details = placement.get_provider_details(
        [c.uuid for c in candidates], traits=read_traits)
    devices = _devices(candidates, details)
    return sorted(filter(wanted.wants, devices), key=domain.sort_key)


def not_found_message(reference, providers, exc):
    for provider in providers:
        if reference in (provider['uuid'], provider['name']):
            return ('Provider %s is not an mdev device (it is not named '
                    '<host>_<libvirt device> under a compute node); see '
                    "'openstack mdev provider list'." % provider['name'])
    return str(exc)


def resolve(providers, candidates, reference):
    """The candidate ``reference`` names, or a one-line CommandError."""
    try:
        return domain.resolve_device(reference, candidates)
    except domain.DeviceLookupError as exc:
        raise exceptions.CommandError(
            not_found_message(reference, providers, exc)) from exc
    except ValueError as exc:
        raise exceptions.CommandError('%s.' % exc) from exc


def show_device(placement, reference):
    """One device with its consumers' allocations: ``(device, allocs)``."""
    providers = placement.list_providers()
    candidate = resolve(providers, domain.find_candidates(providers),
                        reference)
    details = placement.get_provider_details(
        [candidate.uuid], usages=False, allocations=True)
    if candidate.uuid not in details:
        raise exceptions.CommandError(
            'Device %s:%s was deleted while it was being read; run the '
            'command again.' % (candidate.host, candidate.device))
    devices = _devices([candidate], details)
    if not devices:
        raise _not_mdev(candidate)
    return devices[0], details[candidate.uuid]['allocations']


def select_devices(placement, references=(), hosts=(), resource_class=None,
                   all_devices=False):
    """The devices a write command acts on, each once.

    ``references`` name devices one by one (as ``provider show`` takes
    them); ``hosts`` and ``resource_class`` narrow the selection and
    ``all_devices`` takes every device, by the one rule of
    ``domain.SELECTION_RULE``: a named device outside ``hosts`` or
    ``resource_class`` and a selection that matches nothing are errors.
    Traits are not read here: writers read them with the provider
    generation.
    """
    try:
        domain.check_selectors(references, hosts, resource_class,
                               all_devices)
    except ValueError as exc:
        raise exceptions.CommandError('%s.' % exc) from exc
    providers = placement.list_providers()
    check_hosts(providers, hosts)
    candidates = domain.find_candidates(providers)
    named = {}
    for reference in references:
        candidate = resolve(providers, candidates, reference)
        check_within(reference, candidate, hosts)
        named.setdefault(candidate.uuid, (reference, candidate))
    wanted = [c for _, c in named.values()] if references else [
        c for c in candidates if not hosts or c.host in hosts]
    details = placement.get_provider_details(
        [c.uuid for c in wanted], usages=False, traits=False)
    rows = _devices(wanted, details)
    chosen = {}
    for reference, candidate in named.values():
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
            raise exceptions.CommandError(
                "No mdev device %s; run 'openstack mdev provider list' to "
                "see the devices." % (' '.join(what) or 'in the cloud'))
    return sorted(chosen.values(), key=domain.sort_key)


def check_within(reference, device, hosts=(), resource_class=None):
    why = domain.outside_selection(reference, device, hosts, resource_class)
    if why:
        raise exceptions.CommandError(
            'The selection contradicts itself: %s; drop the option or the '
            'name.' % why)
