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

"""Each project's GPU usage and limit as Prometheus metrics (``openstack
mdev metrics --quota``).

Pure: the rows of ``quota list`` (``features.quota.limits.QuotaRow``)
in, ``prometheus_client`` gauge families out, printed after the families
of ``features.metrics.families``. Every metric emitted is named in
``FAMILIES``; the quota dashboard shipped in the docs queries only
those.
"""

from collections.abc import Mapping
import typing

from osc_mdev.features.quota import limits as quota
from osc_mdev.nova.limit import placement as limit_placement

if typing.TYPE_CHECKING:
    from prometheus_client import core

PREFIX = 'openstack_mdev_'
LABELS = ('project', 'project_name', 'resource_class')

#: ``{name: (help, labels)}`` of every family, in the order printed.
FAMILIES = {
    PREFIX + 'project_used': (
        "The project's usage of the GPU class as Nova counts it for its "
        "unified limits (Placement's usages of the project).", LABELS),
    PREFIX + 'project_limit': (
        'The limit Nova enforces on the project for the GPU class; -1 '
        'when unlimited.', LABELS),
}


def families(rows: list[quota.QuotaRow], names: Mapping[str, str]
             ) -> list['core.GaugeMetricFamily']:
    """The families of ``rows`` (every project with GPU usage or a GPU
    limit of its own, per class); ``names``: project names by ID ('' for
    a project Keystone does not have).
    """
    from prometheus_client import core

    found = {name: core.GaugeMetricFamily(name, text, labels=list(labels))
             for name, (text, labels) in FAMILIES.items()}
    for row in sorted(rows, key=lambda r: (r.project_id, r.resource)):
        labels = [row.project_id, names.get(row.project_id, ''),
                  limit_placement.class_of(row.resource) or row.resource]
        found[PREFIX + 'project_used'].add_metric(labels, row.used)
        found[PREFIX + 'project_limit'].add_metric(labels, row.limit)
    return list(found.values())
