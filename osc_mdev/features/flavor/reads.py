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

"""Flavors and the devices that can serve them: Nova and Placement.

The flavor (Nova) and the compute node trees (Placement, with the bulk
reads of ``features.capacity.reads``) are read at once in the bounded
pool; the flavor's request is Nova's (``nova.scheduler.utils``), judged
by the fit engine (``cloud.fit``), then written.
"""

from __future__ import annotations

from collections.abc import Iterable
import dataclasses
import typing

from keystoneauth1 import exceptions as ks_exc

from osc_mdev.api import compute as compute_client
from osc_mdev.api import pool
from osc_mdev.base import errors
from osc_mdev.base import words
from osc_mdev.cloud import fit as capacity_logic
from osc_mdev.cloud import providers
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.features.capacity import reads as capacity_reads
from osc_mdev.features.flavor import specs as spec_rules
from osc_mdev.nova import names
from osc_mdev.nova import objects as servers
from osc_mdev.nova.scheduler import request_filter
from osc_mdev.nova.scheduler import utils as rr

if typing.TYPE_CHECKING:
    from osc_mdev.api.compute import ComputeClient
    from osc_mdev.api.placement import PlacementClient
    from osc_mdev.nova.pci import config as pci_rules

#: The inputs a sentence names: the controller's nova.conf, and the
#: choice to skip the checks against the cloud.
CONTROLLER = errors.given('controller_conf')
NO_VALIDATE = errors.given('validate')


@dataclasses.dataclass
class Configured:
    """What ``configure`` planned and what became of each key."""

    flavor: servers.Flavor
    changes: list[spec_rules.SpecChange]    # sorted by key
    outcomes: dict[str, str]  # key: added/changed/removed/unchanged/
    #                           failed/not written
    error: str | None = None  # the first failed request's message

    def outcome(self, key: str) -> str:
        """What became of ``key``: added, changed, removed, unchanged,
        failed or not written.
        """
        return self.outcomes[key]

    @property
    def failed(self) -> list[str]:
        return sorted(k for k, r in self.outcomes.items() if r == 'failed')

    @property
    def not_written(self) -> list[str]:
        return sorted(k for k, r in self.outcomes.items()
                      if r == 'not written')

    @property
    def written(self) -> list[str]:
        return sorted(k for k, r in self.outcomes.items()
                      if r in ('added', 'changed', 'removed'))


@dataclasses.dataclass
class FlavorView:
    flavor: servers.Flavor
    request: rr.Request
    extra_specs: dict[str, str]      # the flavor's device keys
    #: (host, device, free) of the devices servers would use
    devices: list[tuple[str, str, int]]
    servers_that_fit: int | None
    problem: str


def _cloud_traits(trees: Iterable[capacity_logic.Host]) -> set[str]:
    return {t for h in trees for d in _mdev_devices(h) for t in d.traits
            if not trait_logic.is_owner_trait(t)}


def _mdev_devices(host: capacity_logic.Host
                  ) -> list[capacity_logic.Provider]:
    return [d for d in host.devices
            if not providers.is_pci_device(d.traits)]


def _mdev_classes(trees: Iterable[capacity_logic.Host]) -> set[str]:
    return {names.VGPU} | {rc for h in trees for d in _mdev_devices(h)
                           for rc in d.inventories}


def _trait_names(specs: Iterable[str]) -> set[str]:
    return {k.name for k in map(rr.spec_key, specs)
            if k and not k.is_resource}


class Read(typing.NamedTuple):
    """A flavor and the compute node trees it is judged on."""

    flavor: servers.Flavor
    trees: list[capacity_logic.Host]


class KnownTraits(typing.NamedTuple):
    """Of the traits a flavor and a request name: those some provider
    carries, and those Placement has.
    """

    carried: set[str]
    known: set[str]


class Written(typing.NamedTuple):
    """What ``_write`` did: the keys it attempted, the first error
    (None: none) and, after an error, the extra specs read back (None:
    not read).
    """

    attempted: set[str]
    error: str | None
    now: dict[str, str] | None


def _read(compute: ComputeClient, placement: PlacementClient,
          reference: str, requests: Iterable[rr.Request | None] = ()
          ) -> Read:
    """The flavor and the compute node trees its request (its own extra
    specs: the controller's PCI aliases are not read here) and
    ``requests`` are judged on (``features.capacity.reads``: a few bulk
    reads whatever the number of devices).
    """
    first = capacity_reads.read_flavor(placement, compute, reference)
    assert first.flavor is not None     # a flavor was asked for
    asked = [rr.request_for(first.flavor)] + [r for r in requests if r]
    trees = capacity_reads.read_hosts(placement, asked, first.listing,
                                      first.services, early=first.early)
    return Read(first.flavor, trees)


def configure(compute: ComputeClient, placement: PlacementClient,
              reference: str, request: rr.Request | None,
              validate: bool = True, dry_run: bool = False,
              isolate_others: bool = False,
              pci: spec_rules.PciRequest | None = None,
              pci_config: pci_rules.PciConfig | None = None) -> Configured:
    """Check the device request against the cloud and write it onto the
    flavor.

    ``request``: the mdev request (a ``nova.scheduler.utils.Request`` of
    ``bare_request``) or None; ``pci``: the PCI request
    (spec_rules.PciRequest) or None; at least one is given, and the keys of
    an earlier request of the other kind are removed unless both are
    given. ``pci_config``: the controller's ``[pci]`` (its aliases, and
    whether the scheduler asks Placement for them); None: not known,
    alias names are not checked.

    The earlier mdev request is replaced wherever the flavor writes it
    (unnumbered, numbered or named group). The flavor's extra specs that
    result are checked as a whole before anything is written: no key
    Nova's API refuses, and (``validate``) the request Nova builds from
    them (``nova.scheduler.utils.request_for``) can be served by
    some host, judged by the capacity engine; stale mdev keys go
    (``spec_rules.stale_keys``). Writes: one request sets every new key
    (Nova saves them together), then each removed key is deleted; after
    a failure the extra specs are read back, so each key's result says
    what the flavor really holds.
    """
    flavor, trees = _read(compute, placement, reference, [request])
    current = dict(flavor.extra_specs)
    carried, known = _known_traits(placement, request, current, validate)
    to_set, to_delete, changes = _plan_request(
        current, request, trees, carried, known, isolate_others)
    pci_set, pci_delete, pci_changes = spec_rules.plan_pci(current, pci)
    after = spec_rules.resulting(current, {**to_set, **pci_set},
                                 to_delete + pci_delete)
    _check_result(flavor, after, request, trees, carried, known, validate)
    if pci is not None:
        note = check_pci(placement, pci, pci_config,
                         after.get(spec_rules.GROUP_POLICY), validate)
        pci_changes = [dataclasses.replace(c, note=note)
                       for c in pci_changes]
    to_set.update(pci_set)
    to_delete = to_delete + pci_delete
    changes = sorted(changes + pci_changes, key=lambda c: c.key)
    if dry_run:
        return Configured(flavor, changes,
                          {c.key: c.action for c in changes})
    written = _write(compute, flavor.id, to_set, to_delete)
    return Configured(flavor, changes, {
        c.key: spec_rules.write_result(c, c.key in written.attempted,
                                       written.error is not None, written.now)
        for c in changes}, written.error)


def _known_traits(placement: PlacementClient, request: rr.Request | None,
                  current: dict[str, str], validate: bool
                  ) -> KnownTraits:
    """The traits some provider carries and those Placement has, among
    those the flavor and ``request`` name; with ``validate``, the
    request's classes and traits must exist in Placement
    (``errors.NotFound`` otherwise).
    """
    traits = sorted({t for g in request.groups
                     for t in g.required | g.forbidden}) if request else []
    classes = request.mdev_classes() if request else []
    named = _trait_names(current) | set(traits)
    calls: list[typing.Callable[[], typing.Any]] = [
        lambda: placement.traits_among(named, associated=True),
        lambda: placement.traits_among(named),
        lambda: all(placement.map(placement.resource_class_exists,
                                  classes))]
    carried, known, rc_exists = pool.call_all(calls, placement.max_workers)
    if validate and request:
        if not rc_exists:
            raise errors.NotFound(
                "Resource class %s does not exist in Placement; check "
                "[mdev_<type>] mdev_class in nova.conf, or see 'openstack "
                "resource class list'." % ', '.join(classes),
                kind='resource class', name=', '.join(classes),
                parameter='resource_class')
        missing = [t for t in traits if t not in known]
        if missing:
            raise errors.NotFound(
                "Trait %s does not exist in Placement; tag devices with "
                "'openstack mdev trait set' first." % ', '.join(missing),
                kind='trait', name=', '.join(missing))
    return KnownTraits(carried, known)


def _plan_request(current: dict[str, str], request: rr.Request | None,
                  trees: list[capacity_logic.Host], carried: set[str],
                  known: set[str], isolate_others: bool
                  ) -> tuple[dict[str, str], list[str], list]:
    """``(keys to set, keys to delete, [spec_rules.SpecChange])`` of the mdev
    request: the earlier one replaced wherever the flavor writes it, or
    removed when there is no new one.
    """
    mdev_classes = _mdev_classes(trees)
    device_traits = _cloud_traits(trees)
    if not request:
        to_delete, changes = spec_rules.plan_without_mdev(
            current, mdev_classes, device_traits, carried, known)
        return {}, to_delete, changes
    device_traits |= {t for g in request.groups
                      for t in g.required | g.forbidden}
    others = spec_rules.isolate_reaches_others(
        current, request, mdev_classes, device_traits, carried, known)
    if others and not isolate_others:
        raise errors.Refused(
            'Nova applies group_policy=isolate to every numbered '
            'request group of a flavor, so %s would also make %s '
            'come from a provider of its own; add %s to go on.'
            % (errors.given('spread'), ', '.join(others),
               errors.given('isolate_others')),
            parameter='isolate_others', groups=list(others))
    return spec_rules.plan(current, request, mdev_classes, device_traits,
                           carried, known)


def _check_result(flavor: servers.Flavor, after: dict[str, str],
                  request: rr.Request | None,
                  trees: list[capacity_logic.Host], carried: set[str],
                  known: set[str], validate: bool) -> None:
    """The extra specs that result, as a whole, before anything is
    written: no key Nova's API refuses and (``validate``, with an mdev
    request) some host can serve the request Nova builds from them.
    """
    refused = spec_rules.refused(after)
    if refused:
        raise errors.Refused(
            "Flavor %s: %s; correct or remove it with 'openstack flavor "
            "set' or 'openstack flavor unset --property', then run this "
            "again." % (flavor.name, refused), flavor=flavor.name,
            problem=refused)
    if validate and request:
        problem = spec_rules.can_never_serve(
            rr.request_for(dataclasses.replace(flavor, extra_specs=after)),
            trees, carried, known)
        if problem:
            raise errors.Refused(
                'No host in the cloud can serve this flavor: %s; use '
                '%s to configure it anyway.' % (problem, NO_VALIDATE),
                flavor=flavor.name, problem=problem)


def check_pci(placement: PlacementClient, pci: spec_rules.PciRequest,
              pci_config: pci_rules.PciConfig | None,
              group_policy: str | None, validate: bool = True) -> str:
    """Check a PCI request against the alias definitions and Placement.

    Raises ``errors.NotFound`` for an alias that is not defined, or
    (with ``validate``) ``errors.Refused`` for one no host can serve
    now: one allocation candidates request per alias, with the request
    groups Nova makes of it (one per device). Returns the note for the
    table: what was not checked (naming the inputs through
    ``errors.given``).
    """
    if pci_config is None:
        return ('alias names not checked: give the controller\'s nova.conf '
                'with %s' % CONTROLLER)
    aliases = pci_config.aliases
    unknown = [n for n, _ in pci.aliases if n not in aliases]
    if unknown:
        raise errors.NotFound(
            'PCI alias %s is not defined in [pci] alias of %s '
            '(defined: %s); Nova would refuse to boot servers of this '
            'flavor.' % (', '.join(unknown), CONTROLLER,
                         ', '.join(sorted(aliases)) or 'none'),
            kind='PCI alias', name=', '.join(unknown),
            parameter='controller_conf')
    if not validate:
        return 'not checked against Placement (%s)' % NO_VALIDATE
    if not pci_config.pci_in_placement:
        return ('not checked against Placement: [filter_scheduler] '
                'pci_in_placement is off in %s, so the scheduler does not '
                'ask Placement for PCI devices' % CONTROLLER)
    wanted = [(name, count, aliases[name]) for name, count in pci.aliases]
    classes = sorted({a.resource_class for _, _, a in wanted})
    rc_answers = placement.map(placement.resource_class_exists, classes)
    missing = [rc for rc, exists in zip(classes, rc_answers) if not exists]
    if missing:
        alias_name = next(n for n, _, a in wanted
                          if a.resource_class == missing[0])
        raise errors.Refused(
            'Resource class %s of PCI alias %s does not exist in Placement: '
            'no compute reports such devices ([pci] device_spec and '
            'report_in_placement); use %s to configure it anyway.'
            % (missing[0], alias_name, NO_VALIDATE),
            resource_class=missing[0], alias=alias_name)
    alias_traits = set().union(*(a.traits for _, _, a in wanted))
    unknown_traits = sorted(alias_traits - placement.traits_among(
        alias_traits, associated=True))
    if unknown_traits:
        raise errors.Refused(
            'No resource provider has trait %s, which PCI alias traits '
            'require; set it in [pci] device_spec traits on the computes, or '
            'use %s to configure it anyway.'
            % (', '.join(unknown_traits), NO_VALIDATE),
            traits=unknown_traits)
    queries = [spec_rules.pci_query(a.request_groups(count), group_policy)
               for _, count, a in wanted]
    answers = placement.map(placement.allocation_candidates, queries)
    for (name, count, alias), answer in zip(wanted, answers):
        if not answer.get('allocation_requests'):
            raise errors.Refused(
                'No host has %s%s for PCI alias %s now%s; use %s to '
                'configure it anyway.' % (
                    words.count(count, 'free %s device'
                                % alias.resource_class),
                    ' with %s' % ', '.join(sorted(alias.traits))
                    if alias.traits else '', name,
                    ' (group_policy=isolate: each from its own provider)'
                    if group_policy == 'isolate' and count > 1 else '',
                    NO_VALIDATE), alias=name, count=count)
    return ''


def _write(compute: ComputeClient, flavor_id: str, to_set: dict[str, str],
           to_delete: list[str]) -> Written:
    """The keys attempted, the first error and the extra specs read
    back after one.

    New keys first, so that a failure leaves the earlier request on the
    flavor rather than a flavor that asks for any device; removals only
    once they are set.
    """
    attempted: set[str] = set()
    failures: list[str] = []
    if to_set:
        attempted.update(to_set)
        try:
            compute.set_extra_specs(flavor_id, to_set)
        except errors.Error as exc:
            failures.append(_reason(exc, 'setting ' + ', '.join(
                sorted(to_set))))
    if not failures and to_delete:
        attempted.update(to_delete)

        # One key at a time: Nova deletes a key by saving the flavor's
        # other extra specs as it read them (Flavor.save), so concurrent
        # deletes on one flavor put back each other's keys.
        for key in to_delete:
            try:
                compute.delete_extra_spec(flavor_id, key)
            except errors.Error as exc:
                failures.append(_reason(exc, 'removing ' + key))
    if not failures:
        return Written(attempted, None, None)
    try:
        now = compute.get_extra_specs(flavor_id)
    except errors.Error:
        now = None
    return Written(attempted, failures[0], now)


def _reason(exc: Exception, doing: str) -> str:
    """What went wrong, in a few words and without a URL."""
    if isinstance(exc, compute_client.NotFound):
        return 'the flavor was deleted before %s' % doing
    cause = exc.__cause__
    data = exc.data if isinstance(exc, errors.Error) else {}
    status = data.get('status') or getattr(cause, 'status_code', None)
    if status:
        return 'Nova answered HTTP %s to %s' % (status, doing)
    if isinstance(cause, ks_exc.ConnectionError):
        return 'no answer from Nova to %s' % doing
    return '%s failed (%s)' % (doing, str(exc).rstrip('.'))


def show(compute: ComputeClient, placement: PlacementClient,
         reference: str) -> FlavorView:
    """The flavor's device request as Nova builds it, and where and how
    many servers of it fit now (the capacity engine, as ``openstack mdev
    capacity --flavor`` counts them).
    """
    flavor, trees = _read(compute, placement, reference)
    specs = dict(flavor.extra_specs)
    request = rr.request_for(flavor)
    named = _trait_names(specs)
    carried, known = pool.call_all(
        [lambda: placement.traits_among(named, associated=True),
         lambda: placement.traits_among(named)], placement.max_workers)
    mdev_classes = _mdev_classes(trees)
    managed = spec_rules.managed_keys(specs, mdev_classes,
                                      _cloud_traits(trees))
    managed |= set(spec_rules.stale_keys(specs, carried, known))
    managed |= {spec_rules.ALIAS_KEY} & set(specs)
    shown = {k: v for k, v in sorted(specs.items()) if k in managed}
    problems = [spec_rules.refused(specs)]
    if not request.describe_devices():
        return FlavorView(flavor, request, shown, [], None,
                          '; '.join(p for p in problems if p))
    problems.append(spec_rules.can_never_serve(request, trees, carried, known))
    devices, fits = [], 0
    if not problems[-1]:
        prefiltered = request_filter.process_reqspec(
            request, owner_nova=capacity_logic.owner_nova_in_effect(trees))
        by_name = {h.name: h for h in trees}
        classes = request.mdev_classes()
        for counted in capacity_logic.capacity(prefiltered, trees):
            fits += counted.fits
            host = by_name[counted.host]
            for device in host.devices:
                if device.device in counted.devices:
                    devices.append((host.name, device.device, sum(
                        device.free(rc) for rc in classes)))
    return FlavorView(flavor, request, shown, devices, fits,
                      '; '.join(p for p in problems if p))
