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

"""How the Compute client reads the next page of a Nova listing
(api.compute.next_marker), against the links Nova's own code makes.

The whole listings are read from real Nova in
tests/e2e/test_nova_paging.py.
"""

import pytest

from osc_mdev.api import compute
from osc_mdev.base import errors


def _nova_links(items, limit, max_limit, id_key):
    """The ``<collection>_links`` Nova's ViewBuilder makes for a page of
    ``items`` asked with ``limit``, under ``[api] max_limit``.
    """
    import types

    from nova.api.openstack import common
    import nova.conf
    import webob

    conf = nova.conf.CONF
    conf.set_override('max_limit', max_limit, 'api')
    try:
        request = webob.Request.blank(
            '/v2.1/servers/detail?all_tenants=True&limit=%d' % limit)
        request.environ['nova.context'] = types.SimpleNamespace(
            project_id='demo')
        return common.ViewBuilder()._get_collection_links(
            request, items, 'servers', id_key)
    finally:
        conf.clear_override('max_limit', 'api')


@pytest.mark.nova
@pytest.mark.parametrize('count,limit,max_limit,expected', [
    (2, 1000, 2, 'b'),        # capped by max_limit: a full page
    (1, 1000, 2, None),       # the last page
    (3, 3, 1000, 'c'),        # as many as asked
    (2, 3, 1000, None),
    (0, 1000, 2, None),
])
def test_next_marker_reads_novas_links(count, limit, max_limit, expected):
    items = [{'id': i, 'uuid': 'u-' + i} for i in 'abc'[:count]]
    links = _nova_links(items, limit, max_limit, 'id')
    assert compute.next_marker(links) == expected
    # os-migrations pages by uuid.
    links = _nova_links(items, limit, max_limit, 'uuid')
    assert compute.next_marker(links) == (expected and 'u-' + expected)


def test_next_marker_without_a_next_link():
    assert compute.next_marker([]) is None
    assert compute.next_marker([{'rel': 'self', 'href': 'x?marker=a'}]) \
        is None


def test_next_link_without_a_marker_is_an_error():
    with pytest.raises(errors.ServiceError, match='without a marker'):
        compute.next_marker([{'rel': 'next', 'href': 'http://nova/x?y=1'}])
