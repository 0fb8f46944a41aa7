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

"""Shared pytest set-up: no OS_* variables of the developer's leak in."""

import os

import pytest


@pytest.fixture(autouse=True)
def _clean_openstack_env(monkeypatch, tmp_path):
    for key in list(os.environ):
        if key.startswith('OS_'):
            monkeypatch.delenv(key)
    # An empty clouds.yaml so a developer's own clouds are never read.
    empty = tmp_path / 'no-clouds.yaml'
    empty.write_text('clouds: {}\n')
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(empty))
