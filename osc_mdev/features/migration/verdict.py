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

"""Whether a server can move, live and cold, to one target, and why not.

``judge`` applies Nova's rules (``nova.migration``) in the order Nova
applies them, so the first that fails is the reason Nova gives:

1. the API: the server's state (``API.live_migrate`` / ``API.resize``);
2. the conductor: the source's nova-compute is up;
3. the scheduler: the server's request in the target's tree, disabled and
   down computes excluded (Placement and the ``ComputeFilter``), with
   room on devices and root (the one fit engine, ``cloud.fit``, its
   reasons from the explainer's kinds of steps);
4. live only, the conductor: the target's hypervisor is not older
   (``_check_compatible_with_source_hypervisor``, unless its
   ``[workarounds] skip_hypervisor_version_check_on_lm``), PCI alias
   devices are live-migratable (``_check_can_migrate_pci``);
5. live only, the libvirt driver: libvirt and QEMU on both hosts can
   migrate mdevs (``_host_can_support_mdev_live_migration``), the
   server's mdev types are enabled on the target and the devices Placement
   gives there map one to one onto them
   (``check_source_migrate_data_at_dest``);
6. live only, the migration itself, for a server with VFIO devices
   (mdevs, PCI devices): the source's ``[libvirt]
   live_migration_permit_post_copy`` makes its driver ask for post-copy
   (``_parse_migration_flags``; not for a paused server), which QEMU
   refuses with VFIO devices, so the migration fails as it starts.

What Nova does not check but an operator must know is ours: a cold
migration onto a device of another type gives the server another vGPU
(Nova accepts it); a flavor that does not ask for the type lets Placement
pick a device of another type on hosts with several types; NVIDIA vGPUs
need the ``[libvirt] live_migration_downtime*`` settings of Nova's vGPU
guide. What the APIs cannot show (libvirt's own version, the kernel) is
said, never guessed. Pure logic.
"""

from __future__ import annotations

import dataclasses
import typing

from osc_mdev.cloud import explanation
from osc_mdev.cloud import fit
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.features.migration import model
from osc_mdev.nova.conf import settings as novaconf
from osc_mdev.nova import migration as rules
from osc_mdev.nova import names
from osc_mdev.nova import objects
from osc_mdev.nova.scheduler import request_filter
from osc_mdev.nova.scheduler import utils as rr
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

# The kinds of move (migration_rules).
LIVE, COLD = rules.LIVE, rules.COLD
YES, NO = 'yes', 'no'
#: The refusal of the devices' types Nova's libvirt driver gives first:
#: a type of the server not enabled on the target.
SUPPORTED = 'supported'


@dataclasses.dataclass
class Verdict:
    """Whether a server can move to one target, and why not."""

    node: str
    service_host: str | None
    live: str                    # YES / NO
    cold: str
    devices: tuple[str, ...]     # HOST:ADDR of the devices with room
    reason: str                  # the first rule that fails, or warnings
    not_checked: tuple[str, ...] = ()
    live_refusal: str | None = None
    cold_refusal: str | None = None
    # The engine's placement on the target, for the plan: {kind:
    # [(group, provider, amounts)]}.
    placement: dict[str, fit.Placement] = dataclasses.field(
        default_factory=dict)
    # What a move of each kind Nova allows leans on, for the plan: {kind:
    # (not checked, warnings)}.
    caveats: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = (
        dataclasses.field(default_factory=dict))

    @property
    def fits(self) -> bool:
        return self.live == YES or self.cold == YES


class _NotAsked:
    """What Placement's in_tree answer was when it was not asked for."""


NOT_ASKED = _NotAsked()
#: Placement's first allocation request in the target's tree: ``{provider
#: uuid: {class: amount}}``, None when it gave none, or NOT_ASKED.
First = typing.Union[dict[str, dict[str, int]], None, _NotAsked]


@dataclasses.dataclass(frozen=True)
class Refusal:
    """A rule's refusal: ``why``, and ``about`` what when a live and a
    cold refusal share a cause (their reasons are then said together).
    """

    why: str
    about: str = ''

    def __str__(self) -> str:
        return '%s: %s' % (self.about, self.why) if self.about else self.why


#: ``(LIVE, or None for both kinds of move, text)``: a note or a warning.
Said = tuple[typing.Optional[str], str]


@dataclasses.dataclass
class _Judged:
    """What the rules said so far: refusals of each kind of move, in
    Nova's order, and the notes and warnings.
    """

    live: list[Refusal] = dataclasses.field(default_factory=list)
    cold: list[Refusal] = dataclasses.field(default_factory=list)
    notes: list[Said] = dataclasses.field(default_factory=list)
    warnings: list[Said] = dataclasses.field(default_factory=list)

    def refuse(self, refusal: Refusal) -> None:
        """Refuse both kinds of move."""
        self.live.append(refusal)
        self.cold.append(refusal)


def judge(server: model.Server, source: model.Node, target: model.Node,
          first: First = NOT_ASKED, free: fit.FreeMap | None = None,
          owner_nova: bool = True, strict_types: bool = False,
          skip_version_check: bool = False) -> Verdict:
    """Whether ``server`` can move live and cold to ``target`` (Nodes).

    ``first`` is Placement's first allocation request for the server's
    request in the target's tree (``{provider uuid: {class: amount}}``),
    None when Placement gave none, NOT_ASKED when it was not asked.
    ``free`` is what is left on the target (``fit.free_map``; the
    tree as read when None). With ``strict_types`` (the plan), a target
    where the request could land on a device of another type is refused
    even when Placement's first candidate is of the right type now.
    ``skip_version_check``: the conductor's ``[workarounds]
    skip_hypervisor_version_check_on_lm``.
    """
    if server.request is None:
        problem = server.problem or 'the server\'s request is not known'
        return Verdict(target.name, target.service_host, NO, NO, (),
                       problem, live_refusal=problem, cold_refusal=problem)
    judged = _Judged()
    _api_and_source(server, source, judged)                   # 1, 2
    plain = request_filter.process_reqspec(server.request,
                                           owner_nova=owner_nova)
    refusal = _scheduler_refusal(target)                      # 3
    if refusal is None:
        assert target.tree is not None      # else refused above
        free = fit.free_map(target.tree) if free is None else free
        refusal = _placement_refusal(plain, target.tree, free, first)
    if refusal is not None:
        judged.refuse(refusal)
        return _verdict(target, judged, {}, ())
    assert free is not None
    placement, devices = _on_target(                          # 3 to 5
        server, source, target, plain, free, first, strict_types,
        skip_version_check, judged)
    return _verdict(target, judged, placement, devices)


def _api_and_source(server: model.Server, source: model.Node,
                    judged: _Judged) -> None:
    """1. The API: the server's state; 2. the conductor: the source's
    nova-compute is up.
    """
    for kind, out in ((LIVE, judged.live), (COLD, judged.cold)):
        refusal = rules.vm_state_allows(kind, server.vm_state,
                                        server.task_state)
        if refusal:
            out.append(Refusal(refusal))
    source_hyp = source.hypervisor
    if source_hyp is not None and source_hyp.state == objects.DOWN:
        judged.refuse(Refusal(
            'Compute service of %s is unavailable at this time (its '
            'nova-compute is down)' % source_hyp.service_host))


def _placement_refusal(plain: rr.Request, tree: fit.Host,
                       free: fit.FreeMap,
                       first: First) -> Refusal | None:
    """3. The scheduler asks Placement for the server's request in the
    target's tree: it must fit, and Placement must answer a candidate.
    """
    if fit.place(plain, tree, dict(free)) is None:
        return Refusal(_why_not(plain, tree, free), 'No valid host')
    if first is None:
        return Refusal('Placement returns no allocation candidate for the '
                       'server\'s request in this tree', 'No valid host')
    return None


def _on_target(server: model.Server, source: model.Node,
               target: model.Node, plain: rr.Request,
               free: fit.FreeMap, first: First, strict_types: bool,
               skip_version_check: bool, judged: _Judged
               ) -> tuple[dict[str, fit.Placement], tuple[str, ...]]:
    """The rules once the scheduler takes the target: the devices' types
    (ours and the libvirt driver's), 4. the conductor's and 5. the
    libvirt driver's, live only. Answers the placement on devices of the
    server's type and those devices.
    """
    key = next(iter(server.type_keys)) if len(server.type_keys) == 1 \
        else None
    typed_request, typed_tree = model.typed(plain, target, key)
    assert typed_tree is not None       # the target has a tree here
    typed_found = fit.place(typed_request, typed_tree, dict(free))
    placement = {} if typed_found is None else {
        COLD: typed_found, LIVE: typed_found}
    devices = _devices(typed_request, typed_tree, free, first, target, key)
    types = _Types(server, target, key, typed_found is not None)
    type_refusal = types.judge(plain, free, first, strict_types)
    judged.notes += types.notes
    judged.warnings += types.warnings
    _conductor(server, source, target, skip_version_check, judged)
    if server.mdevs:
        _libvirt(server, source, target, type_refusal, judged)
    if server.held or server.pci_aliases:
        _post_copy(server, source, target, judged)
    if type_refusal.get(COLD):
        judged.cold.append(type_refusal[COLD])
    return placement, devices


def _conductor(server: model.Server, source: model.Node,
               target: model.Node, skip_version_check: bool,
               judged: _Judged) -> None:
    """4. The conductor, live only: the hypervisors' versions and the PCI
    alias devices.
    """
    refusal, said, warned = _conductor_versions(source, target,
                                                skip_version_check)
    if refusal:
        judged.live.append(Refusal(refusal))
    judged.notes += [(LIVE, n) for n in said]
    judged.warnings += [(LIVE, w) for w in warned]
    if server.pci_aliases:
        refusal = rules.pci_request_live_migratable(server.pci_aliases)
        if refusal:
            judged.live.append(Refusal(refusal))
        else:
            judged.notes.append((LIVE, 'live_migratable devices in the '
                                 '[pci] device_spec of %s' % target.name))


def _libvirt(server: model.Server, source: model.Node, target: model.Node,
             type_refusal: dict[str, Refusal], judged: _Judged) -> None:
    """5. The libvirt driver, live only: both hosts can migrate mdevs,
    the server's types are enabled on the target and map onto the
    devices Placement gives; the downtime settings NVIDIA vGPUs need.
    """
    judged.live.extend(Refusal(r) for r in _mdev_version_refusals(
        source, target))
    judged.notes.append((LIVE, 'libvirt >= %s and Linux >= %s on both '
                         'hosts (not shown by the API)' % (
                             rules.version_text(
                                 rules.MIN_MDEV_LIVEMIG_LIBVIRT_VERSION),
                             rules.MIN_KERNEL)))
    for kind in (SUPPORTED, LIVE):
        if type_refusal.get(kind):
            judged.live.append(type_refusal[kind])
    live_warnings: list[str] = []
    judged.notes += [(LIVE, n) for n in _downtime_notes(
        server, source, target, live_warnings)]
    judged.warnings += [(LIVE, w) for w in live_warnings]


def _post_copy(server: model.Server, source: model.Node,
               target: model.Node, judged: _Judged) -> None:
    """6. The migration itself, live only, for a server with VFIO
    devices (mdevs, PCI devices): the source's driver runs it with the
    flags of its own nova.conf, and with ``[libvirt]
    live_migration_permit_post_copy`` it asks for post-copy
    (``rules.post_copy_requested``: not for a paused server), which QEMU
    refuses with VFIO devices: the migration fails. The target's setting
    is a warning: a later live migration away from it fails.
    """
    option = '[libvirt] %s' % novaconf.POST_COPY
    if source.conf is None:
        judged.notes.append((LIVE, '%s of %s (give its nova.conf)' % (
            option, source.name)))
    elif rules.post_copy_requested(source.conf.post_copy, server.vm_state):
        judged.live.append(Refusal(
            '%s = True on the source %s: Nova asks for post-copy, which '
            'QEMU refuses with VFIO devices such as the server\'s vGPU or '
            'PCI devices ("%s"), so the migration fails as it starts and '
            'Nova puts the server in ERROR (still running on the source); '
            'set it to False there (Nova\'s vGPU guide)'
            % (option, source.name, rules.QEMU_POST_COPY_REFUSAL)))
    if target.conf is not None and rules.post_copy_enabled(
            target.conf.post_copy):
        judged.warnings.append((LIVE, (
            '%s = True on %s: this move is not concerned (the source\'s '
            'setting decides), but a live migration of the server away '
            'from %s would fail (QEMU refuses post-copy with VFIO '
            'devices); set it to False there' % (
                option, target.name, target.name))))


def _verdict(target: model.Node, judged: _Judged,
             placement: dict[str, fit.Placement],
             devices: tuple[str, ...]) -> Verdict:
    """The Verdict of what the rules said: the first refusal of each
    kind of move, the notes and warnings that concern a move not refused.
    """
    live, cold = judged.live, judged.cold

    def relevant(items: list[Said]) -> list[str]:
        return list(dict.fromkeys(
            text for kind, text in items
            if (kind is None and not (live and cold))
            or (kind == LIVE and not live)))

    reason = '; '.join(r for r in [_reason(live, cold)] + [
        'warning: %s' % w for w in relevant(judged.warnings)] if r)
    allowed = [k for k, refused in ((LIVE, live), (COLD, cold))
               if not refused]
    return Verdict(
        target.name, target.service_host, NO if live else YES,
        NO if cold else YES, devices, reason,
        tuple(relevant(judged.notes)),
        str(live[0]) if live else None, str(cold[0]) if cold else None,
        {k: v for k, v in placement.items() if k in allowed},
        {k: (_of_kind(judged.notes, k), _of_kind(judged.warnings, k))
         for k in allowed})


def _of_kind(items: list[Said], kind: str) -> tuple[str, ...]:
    """The texts of ``(kind or None, text)`` items that concern a move
    of ``kind``.
    """
    return tuple(dict.fromkeys(t for k, t in items if k in (None, kind)))


def _conductor_versions(source: model.Node, target: model.Node,
                        skip_version_check: bool
                        ) -> tuple[str | None, list[str], list[str]]:
    """``compatible_with_source_hypervisor`` on what the API shows of
    both hosts: ``(refusal or None, notes, warnings)``. The versions are
    a note when the API does not show them and the conductor compares
    them; a warning when only ``skip_version_check`` lets an older
    target through.
    """
    src, dst = source.hypervisor, target.hypervisor
    if src is None or dst is None:
        return None, [], []
    if (src.version is None or dst.version is None) and (
            not skip_version_check):
        return None, ['hypervisor versions (not shown for %s)' % (
            source.name if src.version is None else target.name)], []
    versions = (' (QEMU %s here, %s on the source)' % (
        rules.version_text(dst.version), rules.version_text(src.version))
        if src.version is not None and dst.version is not None else '')
    refusal = rules.compatible_with_source_hypervisor(
        src.hypervisor_type, src.version, dst.hypervisor_type, dst.version,
        skip_version_check)
    if refusal:
        return refusal + versions, [], []
    if src.version is not None and dst.version is not None and (
            src.version > dst.version):
        return None, [], [
            'QEMU %s here is older than %s on the source: the conductor '
            'lets it through only because of [workarounds] %s' % (
                rules.version_text(dst.version),
                rules.version_text(src.version),
                novaconf.SKIP_HYPERVISOR_VERSION_CHECK)]
    return None, [], []


def _reason(live: list[Refusal], cold: list[Refusal]) -> str:
    """The first refusal of each kind of move, in one sentence: said
    once when both are the same, together when they are about the same.
    """
    if not live and not cold:
        return ''
    if live and cold and live[0] == cold[0]:
        return str(live[0])
    if live and cold and live[0].about and live[0].about == cold[0].about:
        return '%s: live: %s; cold: %s' % (live[0].about, live[0].why,
                                           cold[0].why)
    parts = []
    if live:
        parts.append('live: %s' % live[0])
    if cold:
        parts.append('cold: %s' % cold[0])
    return '; '.join(parts)


def _scheduler_refusal(target: model.Node) -> Refusal | None:
    """The scheduler's view of the target's compute service (the
    ``ComputeFilter`` and the ``compute_status_filter`` prefilter).
    """
    hyp = target.hypervisor
    if target.tree is None:
        why = 'Placement has no compute node %s' % target.name
    elif hyp is None:
        why = 'the Compute API lists no hypervisor %s' % target.name
    elif hyp.status == objects.DISABLED:
        why = 'the compute service of %s is disabled%s' % (
            hyp.service_host, ' (%s)' % hyp.disabled_reason
            if hyp.disabled_reason else '')
    elif hyp.state == objects.DOWN:
        why = 'the compute service of %s is down' % hyp.service_host
    else:
        return None
    return Refusal(why, 'No valid host')


def _why_not(request: rr.Request, tree: fit.Host,
             free: fit.FreeMap) -> str:
    """Why one server of ``request`` does not fit on ``tree`` now, by the
    kind of the explainer's step that rules the tree out
    (``explanation.explain``), with the root's numbers when the root is
    short; a kind not worded here as the explainer words it.
    """
    host = model.with_free(tree, free)
    steps, _ = explanation.explain(request, [host])
    step = next((s for s in steps if s.hosts_out), None)
    if step is None:
        return 'the request does not fit'
    kind, subject = step.kind, step.subject
    if kind is explanation.Kind.ROOT_ROOM:
        short = ['%s %d asked, %d free' % (rc, n, host.root.free(rc))
                 for rc, n in sorted(request.root_amounts().items())
                 if host.root.free(rc) < n]
        return 'root resources short: %s' % ', '.join(short)
    if kind is explanation.Kind.ROOM:
        return 'no device with room for %s' % explanation.amounts_text(
            typing.cast(explanation.Amounts, subject))
    if kind is explanation.Kind.SERVICE_ENABLED:
        return ('the root provider carries %s (Nova syncs it with the '
                'service on its next update)' % subject)
    if kind is explanation.Kind.REQUIRED_TRAIT:
        return 'no device with trait %s' % subject
    if kind is explanation.Kind.FORBIDDEN_TRAIT:
        return 'every device has trait %s' % subject
    if kind is explanation.Kind.OFFERS:
        return 'no device offers %s' % ', '.join(
            typing.cast(tuple, subject))
    return explanation.render(step)


def _devices(typed_request: rr.Request, typed_tree: fit.Host,
             free: fit.FreeMap, first: First, target: model.Node,
             key: str | None) -> tuple[str, ...]:
    """HOST:ADDR of the devices of the server's type (or of unknown type)
    with room for one of its device groups; those of Placement's first
    candidate first.
    """
    found = fit.serving_devices(typed_request, typed_tree, free)
    if key is not None:
        found = [d for d in found if d.uuid not in target.nodedevs
                 or model.mark(key) in d.traits]
    chosen = set(first) if isinstance(first, dict) else set()
    found = fit.pick_order(sorted(found, key=lambda d: d.device),
                           first=lambda d: d.uuid in chosen)
    return tuple('%s:%s' % (target.name, d.device) for d in found)


class _Types:
    """Nova's checks of the mdev types on the target, and ours.

    Nova refuses a live migration when a type of the server is not
    enabled on the target, or when the devices Placement gives there
    (its first candidate, which the scheduler claims) do not map one to
    one onto the server's types; a cold migration onto a device of
    another type is accepted and gives the server another vGPU, which
    is refused here. ``key`` is the server's one type (None when it has
    several or one is unknown); ``typed_fits``: a server fits on the
    target's devices of that type.
    """

    def __init__(self, server: model.Server, target: model.Node,
                 key: str | None, typed_fits: bool) -> None:
        self.server, self.target = server, target
        self.key, self.typed_fits = key, typed_fits
        self.source_types = server.mdev_types()
        self.notes: list[Said] = []
        self.warnings: list[Said] = []

    @property
    def wanted(self) -> str:
        return ', '.join(sorted({t.name for t in self.source_types.values()
                                 if t is not None}))

    def judge(self, plain: rr.Request, free: fit.FreeMap,
              first: First, strict: bool) -> dict[str, Refusal]:
        """``{SUPPORTED|LIVE|COLD: refusal}``; notes and warnings kept.
        With ``strict`` (the plan), a target where the request could land
        on a device of another type is refused.
        """
        refusal: dict[str, Refusal] = {}
        if not self.server.mdevs:
            return refusal
        if any(t is None for t in self.source_types.values()):
            held = [h.device for h in self.server.mdevs
                    if h.mdev_type is None]
            self.notes.append((None, 'the mdev type of %s (no type trait: '
                               'tag it with "openstack mdev trait set '
                               '--compute-conf HOST=FILE", or give the '
                               'nova.conf of its host)' % ', '.join(held)))
            return refusal
        supported = self._supported_refusal()
        if supported is not None:
            refusal[SUPPORTED] = supported
        if isinstance(first, dict):
            refusal.update(self._first_refusals(first))
        if not self.typed_fits and self.key is not None and (
                COLD not in refusal):
            refusal[COLD] = Refusal('no %s device of %s with room' % (
                self.wanted, self.target.name))
            refusal.setdefault(LIVE, refusal[COLD])
        if self.key is not None and LIVE not in refusal and (
                COLD not in refusal):
            refusal.update(self._other_types(self.key, plain, free, strict))
        return refusal

    def _keys(self) -> dict[str, str]:
        return {m: t.key for m, t in self.source_types.items()
                if t is not None}

    def _supported_refusal(self) -> Refusal | None:
        """The server's types among those the target enables
        (``unsupported_mdev_types``), when they are known.
        """
        target = self.target
        supported = _supported(target)
        if supported is None:
            unknown = sorted(d.device for d in target.tree.devices
                             if d.uuid in target.nodedevs
                             and target.types.get(d.uuid) is None
                             ) if target.tree else []
            self.notes.append((LIVE, 'the mdev types %s enables (%s: no '
                               'type trait)' % (target.name,
                                                ', '.join(unknown))))
            return None
        names_by_key = {t.key: t.name for t in supported}
        if not rules.unsupported_mdev_types(self._keys(), set(names_by_key)):
            return None
        return Refusal(
            'Source mdev types %s are not supported by this compute : %s'
            % (sorted({t.name for t in self.source_types.values()
                       if t is not None}),
               sorted(names_by_key.values())),
            'type %s not enabled on %s (%s)' % (
                self.wanted, target.name, 'its nova.conf' if target.conf
                else 'by its devices\' type traits'))

    def _first_refusals(self, first: dict[str, dict[str, int]]
                        ) -> dict[str, Refusal]:
        """The devices of Placement's first candidate, which the
        scheduler claims, mapped onto the server's mdevs
        (``target_mdevs``).
        """
        target = self.target
        dest: dict[str, str | None] = {}
        unknown = False
        for uuid, resources in sorted(first.items()):
            if uuid not in target.nodedevs:
                continue
            mdev_type = target.types.get(uuid)
            unknown = unknown or mdev_type is None
            amount = sum(n for rc, n in resources.items()
                         if names.is_mdev_resource_class(rc))
            for n in range(amount):
                dest['%s#%d' % (uuid, n)] = model.key_of(mdev_type)
        picked = _device_names(target, first)
        if unknown:
            self.notes.append((None, 'the mdev type of %s, which Placement '
                               'picks' % picked))
            return {}
        if len(rules.target_mdevs(self._keys(), dest)) == len(
                self.source_types):
            return {}
        got = ', '.join(sorted({model.type_label(target.types.get(u))
                                for u in first if u in target.nodedevs}))
        about = 'the flavor lets Placement pick %s (%s)' % (picked, got)
        return {
            LIVE: Refusal('Source mdevs are not fully mapped for this '
                          'compute%s' % ('' if self.typed_fits else
                                         ' (no %s device with room)'
                                         % self.wanted), about),
            COLD: Refusal('Nova would accept it and give the server a %s '
                          'vGPU instead of %s' % (got, self.wanted), about)}

    def _other_types(self, key: str, plain: rr.Request,
                     free: fit.FreeMap,
                     strict: bool) -> dict[str, Refusal]:
        """Devices of other types the flavor lets Placement pick: a
        refusal for the plan (``strict``), else a warning.
        """
        target = self.target
        others = model.other_type_devices(plain, target, key, free)
        if not others or target.tree is None or not fit.place(
                plain, target.tree, model.without_type(free, target, key)):
            return {}
        text = 'the flavor lets Placement pick %s (%s) too' % (
            ', '.join('%s:%s' % (target.name, d.device) for d in others),
            ', '.join(sorted({model.type_label(target.types.get(d.uuid))
                              for d in others})))
        if strict:
            refusal = Refusal(
                '%s, and the plan does not rely on the order Placement '
                'lists devices in (flavor %s does not ask for the type: '
                'resize the server to one that does)' % (
                    text, self.server.flavor_name))
            return {LIVE: refusal, COLD: refusal}
        self.warnings.append((None, (
            '%s: Placement\'s first candidate is a %s device now; if it '
            'picks another, Nova refuses a live migration and a cold one '
            'gives the server another vGPU type' % (text, self.wanted))))
        return {}


def _device_names(target: model.Node,
                  allocation: dict[str, dict[str, int]]) -> str:
    devices = {d.uuid: d.device
               for d in (target.tree.children if target.tree else ())}
    return ', '.join('%s:%s' % (target.name, devices[u])
                     for u in sorted(allocation, key=lambda u: devices.get(
                         u, '')) if u in devices)


def _supported(node: model.Node
               ) -> tuple[trait_logic.MdevType, ...] | None:
    """The target's enabled types (MdevTypes), or None when they cannot
    be known: from its nova.conf, else from its devices' type traits
    when every mdev device has one.
    """
    if node.conf is not None:
        return tuple(node.conf.supported)
    known = node.known_types()
    if any(t is None for t in known):
        return None
    return tuple({t.key: t for t in known if t is not None}.values())


def _mdev_version_refusals(source: model.Node,
                           target: model.Node) -> list[str]:
    """Both hosts able to migrate mdevs, by QEMU's version (what the API
    shows); the source first, as Nova checks.
    """
    found = []
    for role, node in (('source', source), ('target', target)):
        hyp = node.hypervisor
        if hyp is None or hyp.version is None:
            continue
        if not rules.host_can_support_mdev_live_migration(
                hyp.version, None, hyp.hypervisor_type):
            found.append('%s (%s has QEMU %s)' % (
                rules.mdev_versions_refusal(role), node.name,
                rules.version_text(hyp.version)))
    return found


def _downtime_notes(server: model.Server, source: model.Node,
                    target: model.Node, warnings: list[str]) -> list[str]:
    """The ``[libvirt] live_migration_downtime*`` settings NVIDIA vGPUs
    need, checked in the values the nova.conf of each host given makes
    nova-compute use (a warning), noted for the others.
    """
    if not any(t is not None and t.is_nvidia
               for t in server.mdev_types().values()):
        return []
    notes, off = [], []
    for node in (source, target):
        if node.conf is None:
            notes.append('[libvirt] live_migration_downtime* of %s (give '
                         'its nova.conf)' % node.name)
            continue
        problem = libvirt_driver.downtime_problem(node.conf.downtime)
        if problem:
            off.append('%s on %s' % (problem, node.name))
    if off:
        warnings.append('[libvirt] %s: %s' % ('; '.join(off),
                                              libvirt_driver.DOWNTIME_NEEDED))
    return notes
