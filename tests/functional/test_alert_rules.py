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

"""The shipped alerting rules (doc/source/admin/osc-mdev-alerts.yml),
checked and unit-tested by promtool: each alert fires on the series it is
written for, after its ``for``, and on no other. The rules are evaluated
on the series of a real cloud in tests/e2e/test_prometheus.py.
"""

import pathlib
import re

import pytest
import yaml

from osc_mdev.features.metrics import families as metrics
from osc_mdev.features.quota import metrics as quota_metrics
from tests.fixtures import prometheus

ADMIN = pathlib.Path(__file__).resolve().parents[2] / 'doc' / 'source' / (
    'admin')
RULES = ADMIN / 'osc-mdev-alerts.yml'
RULES_TEST = ADMIN / 'osc-mdev-alerts-test.yml'


def alerts() -> dict:
    """``{alert name: rule}`` of the rules file."""
    groups = yaml.safe_load(RULES.read_text())['groups']
    return {rule['alert']: rule for group in groups
            for rule in group['rules']}


def test_the_rules_query_only_emitted_metrics() -> None:
    emitted = set(metrics.FAMILIES) | set(quota_metrics.FAMILIES)
    for name, rule in alerts().items():
        used = set(re.findall(r'\bopenstack_mdev_[a-z_]+\b', rule['expr']))
        assert used and used <= emitted, name


@pytest.mark.prometheus
def test_promtool_checks_the_rules() -> None:
    result = prometheus.promtool('check', 'rules', str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'SUCCESS: %d rules found' % len(alerts()) in result.stdout


@pytest.mark.prometheus
def test_promtool_unit_tests_of_the_rules_pass() -> None:
    result = prometheus.promtool('test', 'rules', RULES_TEST.name,
                                 cwd=ADMIN)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'SUCCESS' in result.stdout


@pytest.mark.prometheus
def test_every_alert_has_a_unit_test_that_fires_it() -> None:
    tests = yaml.safe_load(RULES_TEST.read_text())['tests']
    fired = {case['alertname'] for test in tests
             for case in test['alert_rule_test'] if case['exp_alerts']}
    assert fired == set(alerts())


@pytest.mark.prometheus
def test_promtool_unit_tests_fail_on_a_wrong_threshold(tmp_path) -> None:
    # The unit tests can fail: the stale alert at twice its threshold.
    (tmp_path / RULES.name).write_text(
        RULES.read_text().replace('> 300', '> 600'))
    (tmp_path / RULES_TEST.name).write_text(RULES_TEST.read_text())
    result = prometheus.promtool('test', 'rules', RULES_TEST.name,
                                 cwd=tmp_path)
    assert result.returncode != 0
    assert 'OpenstackMdevMetricsStale' in result.stdout + result.stderr
