"""The end-to-end tier needs Nova's harness in this Python.

Without it the tier is skipped with a reason, except where
OSC_MDEV_REQUIRE_CLOUD is set (tox sets it): there a missing module is an
error, so the tier can never be skipped unseen.
"""

import os

import pytest

from tests.cloud import client


def pytest_collection_modifyitems(config, items):
    missing = client.missing_modules()
    if not missing:
        return
    if os.environ.get('OSC_MDEV_REQUIRE_CLOUD'):
        raise pytest.UsageError(
            'the end-to-end tests need these modules: %s'
            % ', '.join(missing))
    skip = pytest.mark.skip(
        reason='the embedded cloud needs: %s' % ', '.join(missing))
    for item in items:
        if 'tests/e2e/' in str(item.fspath):
            item.add_marker(skip)
