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

"""Which trees the allocation candidate summaries reach, and which anchor
to ask next.

``GET /allocation_candidates?resources=<class>:1`` (an *anchor*)
summarizes every provider of each tree where one provider has one unit
of ``<class>`` free: capacity, used and traits (microversion 1.29 and
later). Placement has no request that reaches a tree with nothing free:
every request needs one group with resources, each amount at least 1,
and only trees that can give it are summarized (a resourceless group
adds no tree). So a tree is reached by the anchor of any class it has a
unit of free, and a tree where nothing at all is free by none.

The anchors, one step after another while a wanted tree is missing:

1. ``MEMORY_MB``, which every compute node reports (dedicated-CPU
   nodes too) and which stays free on nodes whose VCPUs are all taken;
2. ``DISK_GB``, free on most nodes whose memory is full;
3. ``VCPU`` and ``PCPU``;
4. the classes of the devices themselves (``VGPU``, ``CUSTOM_*``, PCI
   classes), most frequent first, at most ``DEVICE_ANCHORS``.

A step asks only classes seen in the answers so far (on compute nodes
for steps 2 and 3, on devices of the kinds the missing trees hold for
step 4), so nothing is guessed; while no compute node has been reached,
steps 2 and 3 ask every class they name.

``[placement] max_allocation_candidates`` cuts an answer short and drops
whole trees without saying so; ``cut_anchors`` tells such an answer by
a tree it lacks that another answer shows with a unit of its class free.
"""

import collections
from collections.abc import Collection, Iterable, Mapping

from osc_mdev.cloud import providers

# Placement's raw ``provider_summaries``: ``{provider uuid: {'resources':
# {class: {'capacity': n, 'used': n}}, 'traits': [...],
# 'root_provider_uuid': uuid, ...}}``.
Summaries = dict[str, dict]

FIRST = 'MEMORY_MB'
NODE_STEPS = (('DISK_GB',), ('VCPU', 'PCPU'))
# At most this many device classes are asked about: trees still missing
# then are read on their own.
DEVICE_ANCHORS = 2


def root_of(uuid: str, summary: Mapping) -> str:
    """The root UUID of a summarized provider."""
    return summary.get('root_provider_uuid') or uuid


def reached(summaries: Mapping[str, Mapping]) -> set[str]:
    """The root UUIDs of the trees ``summaries`` describe."""
    return {root_of(u, s) for u, s in summaries.items()}


def _classes(summary: Mapping) -> dict[str, dict[str, int]]:
    return summary.get('resources') or {}


def has_free(summary: Mapping, resource_class: str) -> bool:
    """Whether the summarized provider has one unit of the class free."""
    res = _classes(summary).get(resource_class)
    return res is not None and res['capacity'] - res['used'] >= 1


def next_anchors(asked: Collection[str], summaries: Mapping[str, Mapping],
                 candidates: Iterable[providers.Candidate],
                 missing: Collection[str]) -> list[str]:
    """The classes to anchor on next for the trees ``missing`` (root
    UUIDs), given the classes ``asked`` and the ``summaries`` read so
    far; ``candidates`` are the devices of the listing. Empty when no
    anchor is left to try.
    """
    on_nodes = [s for u, s in summaries.items() if root_of(u, s) == u]
    node_classes = {rc for s in on_nodes for rc in _classes(s)}
    for step in NODE_STEPS:
        found = [rc for rc in step if rc not in asked
                 and (not on_nodes or rc in node_classes)]
        if found:
            return found
    candidates = list(candidates)
    kinds = {c.kind for c in candidates if c.root_uuid in missing}
    seen: collections.Counter[str] = collections.Counter()
    for c in candidates:
        summary = summaries.get(c.uuid)
        if summary is not None and c.kind in kinds:
            seen.update(providers.device_classes(
                c, _classes(summary), summary.get('traits')))
    node_anchors = {FIRST} | {rc for step in NODE_STEPS for rc in step}
    budget = DEVICE_ANCHORS - len(set(asked) - node_anchors)
    ranked = sorted((rc for rc in seen if rc not in asked),
                    key=lambda rc: (-seen[rc], rc))
    return ranked[:max(budget, 0)]


def cut_anchors(answers: Mapping[str, Mapping[str, Mapping]],
                summaries: Mapping[str, Mapping]) -> list[str]:
    """The classes whose whole-cloud answer (``answers``: class ->
    its summaries) was cut short: it lacks a tree that ``summaries``
    (all answers merged) shows with a unit of the class free. Widest
    answer first.
    """
    trees = collections.defaultdict(list)
    for uuid, summary in summaries.items():
        trees[root_of(uuid, summary)].append(summary)
    cut = []
    for rc, answer in answers.items():
        got = reached(answer)
        if any(root not in got and any(has_free(s, rc) for s in tree)
               for root, tree in trees.items()):
            cut.append(rc)
    return sorted(cut, key=lambda rc: (-len(reached(answers[rc])), rc))
