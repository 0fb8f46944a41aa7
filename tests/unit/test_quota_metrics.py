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

"""The quota metrics, read back with prometheus_client's own parser, and
the shipped quota dashboard, which must query only what is emitted.
"""

import json
import pathlib
import re

from prometheus_client import parser

from osc_mdev.features.metrics import families as metrics
from osc_mdev.features.quota import limits as quota
from osc_mdev.features.quota import metrics as quota_metrics
from osc_mdev.nova.limit import utils as mdev_limit
from tests.fixtures import grafana

ROOT = pathlib.Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / 'doc' / 'source' / 'admin' / 'grafana-mdev-quota.json'

ROWS = [
    quota.QuotaRow('p1', 'class:VGPU', 3, mdev_limit.Effective(
        4, mdev_limit.PROJECT_LIMIT)),
    quota.QuotaRow('p2', 'class:CUSTOM_MLX5', 2, mdev_limit.Effective(
        -1, mdev_limit.NO_LIMIT, mdev_limit.REQUIRE)),
    quota.QuotaRow('p1', 'class:CUSTOM_MLX5', 0, mdev_limit.Effective(
        0, mdev_limit.NO_LIMIT, mdev_limit.REQUIRE, listed=True)),
]


def parsed(text: str) -> dict:
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def test_used_and_limit_per_project_and_class() -> None:
    text = metrics.render(quota_metrics.families(ROWS, {'p1': 'ml "team"'}))
    found = parsed(text)
    assert sorted(found) == sorted(quota_metrics.FAMILIES)
    for name, (help_text, _) in quota_metrics.FAMILIES.items():
        assert found[name].type == 'gauge'
        assert found[name].documentation == help_text
    values = {name: {(s.labels['project'], s.labels['project_name'],
                      s.labels['resource_class']): s.value
                     for s in found[name].samples} for name in found}
    assert values == {
        'openstack_mdev_project_used': {
            ('p1', 'ml "team"', 'CUSTOM_MLX5'): 0,
            ('p1', 'ml "team"', 'VGPU'): 3, ('p2', '', 'CUSTOM_MLX5'): 2},
        'openstack_mdev_project_limit': {
            ('p1', 'ml "team"', 'CUSTOM_MLX5'): 0,
            ('p1', 'ml "team"', 'VGPU'): 4, ('p2', '', 'CUSTOM_MLX5'): -1}}


def test_no_family_of_the_device_metrics_is_named_again() -> None:
    assert not set(quota_metrics.FAMILIES) & set(metrics.FAMILIES)


def test_the_dashboard_queries_only_emitted_metrics_and_labels() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = list(grafana.queries(dashboard))
    assert queries
    used = set()
    for query in queries:
        names = set(re.findall(r'\b(openstack_mdev_[a-z_]+)\b', query))
        assert names and names <= set(quota_metrics.FAMILIES), query
        used |= names
        groups = re.findall(r'\b(?:by|on) \(([^)]*)\)', query) + re.findall(
            r'[{,]\s*([a-z_]+)\s*=~?"', query) + re.findall(
            r'label_values\([a-z_]+, ([a-z_]+)\)', query)
        for group in groups:
            for label in group.split(','):
                assert label.strip() in quota_metrics.LABELS, (label, query)
    assert used == set(quota_metrics.FAMILIES)
    assert 'Quota pressure' in {p['title'] for p in dashboard['panels']}
