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

"""Section and option names of nova.conf files, against Nova's options.

oslo.config reads only the options a service registers and silently
skips every other name: ``enabled_mdev_type`` in ``[devices]``, a
``[device]`` section or ``[mdev-nvidia-36]`` with a dash are not errors,
Nova just never sees them. The names Nova registers come from
``nova.conf.options`` (generated from Nova's own option definitions); the
``[mdev_<type>]`` groups exist for the enabled types only, as
``nova.conf.devices.register_dynamic_opts`` registers them.

A real nova.conf also holds sections of other libraries
(``[keystone_authtoken]``, ``[oslo_messaging_rabbit]``...) that Nova's
list does not cover, so a section Nova does not know is reported only
when its name is close to a group that matters here (``CHECKED_GROUPS``,
``[DEFAULT]`` and the enabled types' groups) or it holds options of those
groups. Options inside ``CHECKED_GROUPS`` and the enabled types' groups
are checked fully; in ``[DEFAULT]``, which libraries share, only options
of those groups written there by mistake are reported.
"""

from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Sequence
import difflib
import re
import typing

from osc_mdev.base import words
from osc_mdev.nova.conf import options as nova_options
from osc_mdev.nova.conf import settings as novaconf

WARNING, INFO = novaconf.WARNING, novaconf.INFO

#: Nova's groups whose option names are checked in full: the ones the
#: mdev, PCI and scheduling rules read, which no library shares.
CHECKED_GROUPS = ('devices', 'pci', 'libvirt', 'compute', 'filter_scheduler',
                  'scheduler', 'workarounds')
DEFAULT = 'DEFAULT'
#: How close a name must be (difflib's ratio) to be called a slip of
#: another: a section name, and an option name.
SECTION_CUTOFF = 0.8
OPTION_CUTOFF = 0.6
TYPE_GROUP = 'mdev_%s'
OLD_TYPE_GROUP = 'vgpu_%s'
_TYPE = '<type>'
# A type group written with another separator: [mdev-nvidia-36].
_TYPE_GROUP_SLIP_RE = re.compile(r'^(mdev|vgpu)[^a-z0-9_]+(.+)$',
                                 re.IGNORECASE)


def _old_names() -> dict[str, dict[str, tuple[str, str]]]:
    """``{group: {old name: (group, option)}}`` of every deprecated name
    oslo.config still reads an option from.
    """
    found: dict[str, dict[str, tuple[str, str]]] = {}
    for (group, name), olds in nova_options.DEPRECATED.items():
        for old_group, old_name in olds:
            found.setdefault(old_group, {})[old_name] = (group, name)
    return found


_OLD_NAMES = _old_names()


def closest(name: str, candidates: Iterable[str],
            cutoff: float = OPTION_CUTOFF) -> str | None:
    """The candidate most like ``name`` (difflib), or None."""
    found = difflib.get_close_matches(name, list(candidates), n=1,
                                      cutoff=cutoff)
    return found[0] if found else None


def same_type(written: str, enabled: Iterable[str]) -> str | None:
    """The enabled type ``written`` is a slip of (another case or other
    separators: ``nvidia36``, ``NVIDIA_36`` for ``nvidia-36``), or None.
    Types that differ otherwise (``nvidia-35``, ``nvidia-36``) are
    different types, however alike.
    """
    def bare(name: str) -> str:
        return re.sub('[^a-z0-9]', '', name.lower())
    for mdev_type in enabled:
        if bare(mdev_type) == bare(written):
            return mdev_type
    return None


def known_options(group: str) -> set[str]:
    """The option names Nova reads from a static group: its options and
    the deprecated names of options (of any group) that point there.
    """
    return set(nova_options.OPTIONS.get(group, ())) | set(
        _OLD_NAMES.get(group, {}))


def type_options() -> set[str]:
    """The options of an ``[mdev_<type>]`` group (register_dynamic_opts)."""
    return set(nova_options.DYNAMIC)


def old_type_options() -> set[str]:
    """The options Nova also reads from the old ``[vgpu_<type>]`` group."""
    return {name for olds in nova_options.DYNAMIC.values()
            for group, name in olds if group == OLD_TYPE_GROUP % _TYPE}


def owners(name: str) -> list[str]:
    """The groups that matter where Nova has an option ``name``, as
    written in messages (``[mdev_<type>]`` for the type groups).
    """
    found = [g for g in CHECKED_GROUPS if name in known_options(g)]
    if name in type_options():
        found.append(TYPE_GROUP % _TYPE)
    return found


def _type_groups(enabled: Iterable[str]
                 ) -> dict[str, tuple[str, str, bool]]:
    """``{group key: (group name, type, old)}`` of the enabled types'
    groups, new and old names.
    """
    groups: dict[str, tuple[str, str, bool]] = {}
    for mdev_type in enabled:
        for template, old in ((TYPE_GROUP, False), (OLD_TYPE_GROUP, True)):
            name = template % mdev_type
            groups.setdefault(novaconf.group_key(name),
                              (name, mdev_type, old))
    return groups


def _is_nova_group(key: str) -> bool:
    return key == DEFAULT or key in nova_options.OPTIONS


def _section_suggestion(name: str, enabled: Iterable[str]) -> str | None:
    """The group a section Nova does not know was meant to be, or None."""
    slip = _TYPE_GROUP_SLIP_RE.match(name)
    if slip:
        return TYPE_GROUP % (same_type(slip.group(2), enabled)
                             or slip.group(2))
    for prefix in (TYPE_GROUP % '', OLD_TYPE_GROUP % ''):
        if name.lower().startswith(prefix[:-1]):
            meant = same_type(name[len(prefix) - 1:], enabled)
            if meant:
                return TYPE_GROUP % meant
    candidates = {g: g for g in CHECKED_GROUPS}
    candidates[DEFAULT.lower()] = DEFAULT
    best = closest(name.lower(), candidates, SECTION_CUTOFF)
    return candidates[best] if best else None


def _options_of(settings: novaconf.Settings,
                key: str) -> list[novaconf.Occurrence]:
    return [o for o in settings.occurrences
            if novaconf.group_key(o.section) == key]


def _section_findings(settings: novaconf.Settings,
                      enabled: Sequence[str]) -> list[novaconf.Finding]:
    found = []
    seen = set()
    for name, file, line in settings.sections:
        key = novaconf.group_key(name)
        if key in seen or _is_nova_group(key) or key.startswith(
                (TYPE_GROUP % '', OLD_TYPE_GROUP % '')):
            continue
        seen.add(key)
        written = list(dict.fromkeys(o.name for o in _options_of(
            settings, key)))
        where = '[%s], %s:%d' % (name, file, line)
        ignored = ('so nova-compute reads none of its options (%s)'
                   % words.and_list(written) if written else
                   'so nova-compute reads nothing from it')
        meant = _section_suggestion(name, enabled)
        if meant is not None:
            why = ''
            slip = _TYPE_GROUP_SLIP_RE.match(name)
            if slip and not (slip.group(2) in enabled
                             or same_type(slip.group(2), enabled)):
                why = (' (and type %s is not in [devices] '
                       'enabled_mdev_types)' % slip.group(2))
            found.append(novaconf.Finding(
                WARNING, where,
                'Ignored: Nova has no group [%s], %s; did you mean '
                '[%s]%s?' % (name, ignored, meant, why)))
            continue
        misplaced = [(o, owners(o)) for o in written if owners(o)]
        if misplaced:
            found.append(novaconf.Finding(
                WARNING, where,
                'Ignored: Nova has no group [%s], %s; %s.' % (
                    name, ignored, '; '.join(
                        '%s is an option of %s' % (
                            option, words.and_list('[%s]' % g for g in groups))
                        for option, groups in misplaced))))
    return found


def _unknown_option(occurrence: novaconf.Occurrence,
                    known: Collection[str]) -> novaconf.Finding:
    """The finding of an option Nova does not read from its section."""
    section, name = occurrence.section, occurrence.name
    here = novaconf.where(section, name, occurrence)
    text = 'Ignored: Nova has no option %s in [%s]' % (name, section)
    elsewhere = [g for g in owners(name)
                 if novaconf.group_key(g) != novaconf.group_key(section)
                 and not (g == TYPE_GROUP % _TYPE and section.lower()
                          .startswith((TYPE_GROUP % '',
                                       OLD_TYPE_GROUP % '')))]
    best = closest(name, known)
    if elsewhere:
        text += '; it is an option of %s' % words.and_list(
            '[%s]' % g for g in elsewhere)
    elif best is not None:
        return novaconf.Finding(WARNING, here,
                                text + '; did you mean %s?' % best)
    elif len(known) <= 5:
        text += '; its options are %s' % words.and_list(sorted(known))
    else:
        text += "; see Nova's configuration reference for [%s]" % (
            section)
    return novaconf.Finding(WARNING, here, text + '.')


def _option_findings(settings: novaconf.Settings,
                     enabled: Sequence[str]) -> list[novaconf.Finding]:
    found = []
    types = _type_groups(enabled)
    for occ in settings.occurrences:
        key = novaconf.group_key(occ.section)
        if key in CHECKED_GROUPS:
            known = known_options(key)
        elif key in types:
            _, _, old = types[key]
            if old and occ.name in type_options():
                # Read from [mdev_<type>] only: configcheck says so.
                continue
            known = old_type_options() if old else type_options()
        elif key == DEFAULT:
            if occ.name in known_options(DEFAULT) or not owners(occ.name):
                continue
            found.append(novaconf.Finding(
                WARNING, novaconf.where(occ.section, occ.name, occ),
                'Ignored: Nova has no option %s in [DEFAULT]; it is an '
                'option of %s: move it there.' % (
                    occ.name, words.and_list(
                        '[%s]' % g for g in owners(occ.name)))))
            continue
        else:
            continue
        if occ.name not in known:
            found.append(_unknown_option(occ, known))
    return found


def _renamed_findings(settings: novaconf.Settings) -> list[novaconf.Finding]:
    """Options written under more than one of their names (a current and
    a deprecated one): oslo.config takes one value, from the newest file
    and, in one file, from the current name first; the others are
    ignored. A deprecated name Nova reads is an info, and so is one whose
    value Nova drops for the same value
    (``nova.conf.settings.same_value``): Nova reads what it would read
    from the current name alone.
    """
    found = []
    for (group, name), olds in sorted(nova_options.DEPRECATED.items()):
        if group not in CHECKED_GROUPS or \
                (group, name) in nova_options.MULTI:
            continue
        names = [(group, name)] + [(novaconf.group_key(g), n)
                                   for g, n in olds]
        written = [o for o in settings.occurrences
                   if (novaconf.group_key(o.section), o.name) in names]
        if not written:
            continue
        taken = novaconf.winner(written, names)
        assert taken is not None    # written holds one of names
        taken_pair = (novaconf.group_key(taken.section), taken.name)
        kind = nova_options.KINDS.get((group, name), 'str')
        ignored = [o for o in written
                   if (novaconf.group_key(o.section), o.name) != taken_pair]
        equal = [o for o in ignored
                 if novaconf.same_value(kind, o.value, taken.value)]
        if taken_pair != (group, name):
            found.append(_deprecated_taken(taken, taken_pair, (group, name),
                                           equal))
        for occ in ignored:
            if occ not in equal:
                found.append(_ignored_name(occ, taken, (group, name)))
            elif (novaconf.group_key(occ.section), occ.name) != \
                    (group, name):
                found.append(_equal_name(occ, taken, (group, name)))
    return found


def _deprecated_taken(taken: novaconf.Occurrence,
                      taken_pair: tuple[str, str], current: tuple[str, str],
                      equal: Sequence[novaconf.Occurrence]
                      ) -> novaconf.Finding:
    """The info of ``taken``, a deprecated name oslo.config takes the
    value from; ``equal``: the lines of the current name it drops for
    the same value.
    """
    group = current[0]
    also = ''
    if any((novaconf.group_key(o.section), o.name) == current
           for o in equal):
        same = [o for o in equal
                if (novaconf.group_key(o.section), o.name) == current]
        also = ', and takes it over the same value of %s at %s' % (
            _label(current, group), ', '.join(
                '%s:%d' % (o.file, o.line) for o in same))
    return novaconf.Finding(
        INFO, novaconf.where(taken.section, taken.name, taken),
        '%s is the deprecated name of %s; Nova still reads it%s.'
        % (_label(taken_pair, group), _label(current, group), also))


def _equal_name(occ: novaconf.Occurrence, taken: novaconf.Occurrence,
                current: tuple[str, str]) -> novaconf.Finding:
    """The info of ``occ``, a deprecated name whose value oslo.config
    drops for the same value under the current name, at ``taken``.
    """
    group = current[0]
    pair = (novaconf.group_key(occ.section), occ.name)
    return novaconf.Finding(
        INFO, novaconf.where(occ.section, occ.name, occ),
        '%s = %s is the deprecated name of %s, which is set to the same '
        'value%s: Nova reads %s either way; the deprecated line can go.'
        % (_label(pair, group), novaconf.shown(occ.value),
           _label(current, group), novaconf.taken_at(taken, occ),
           novaconf.shown(taken.value)))


def _ignored_name(occ: novaconf.Occurrence, taken: novaconf.Occurrence,
                  current: tuple[str, str]) -> novaconf.Finding:
    """The warning of ``occ``, an option's value oslo.config drops for
    the one at ``taken`` under another of its names (``current``: the
    option's current ``(group, name)``), naming both values.
    """
    group = current[0]
    pair = (novaconf.group_key(occ.section), occ.name)
    taken_pair = (novaconf.group_key(taken.section), taken.name)
    value = '%s = %s' % (_label(pair, group), novaconf.shown(occ.value))
    if pair != current:
        what = '%s is the deprecated name of %s, which is set too' % (
            value, _label(current, group))
    else:
        what = '%s is set again under its deprecated name %s' % (
            value, _label(taken_pair, group))
    dropped = ''
    if current == ('devices', 'enabled_mdev_types'):
        types = [t for t in _list(occ.value) if t not in _list(taken.value)]
        if types:
            dropped = ', so nova-compute does not enable %s' % (
                words.and_list(types))
    return novaconf.Finding(
        WARNING, novaconf.where(occ.section, occ.name, occ),
        'Ignored: %s%s, and Nova takes that value, %s%s; remove one of '
        'them.' % (what, novaconf.taken_at(taken, occ),
                   novaconf.shown(taken.value), dropped))


def _list(text: str) -> list[str]:
    """The items of a list option's text, as oslo.config's ListOpt
    splits them.
    """
    return [item.strip() for item in text.split(',') if item.strip()]


def _label(pair: tuple[str, str], group: str) -> str:
    section, name = pair
    return name if section == group else '[%s] %s' % (section, name)


def findings(settings: novaconf.Settings) -> list[novaconf.Finding]:
    """Every name of the files Nova does not read as written: sections,
    options, and options set under two of their names.
    """
    enabled = [] if settings.enabled.error else list(
        typing.cast('Iterable[str]', settings.enabled.value or ()))
    return (_section_findings(settings, enabled)
            + _option_findings(settings, enabled)
            + _renamed_findings(settings))
