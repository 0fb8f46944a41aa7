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
