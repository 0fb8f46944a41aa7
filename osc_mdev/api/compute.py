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

"""Every Compute API call osc-mdev makes, each with an explicit microversion.

Requests go through ``api.http.Service`` (keystoneauth's Adapter, the
shared retry policy and error mapper).
"""

from collections import abc
from collections.abc import Mapping
import re
import typing
import urllib.parse

from osc_mdev.api import http
from osc_mdev.api import pool
from osc_mdev.base import errors

# OS-EXT-SRV-ATTR:host and :hypervisor_hostname for admins; the admin
# filters node= and all_tenants=.
SERVER = '2.1'
FLAVOR = '2.61'       # flavors carry their extra_specs
EXTRA_SPECS = '2.1'
SERVICES = '2.1'      # status of each service; host is the service host
SERVER_FLAVOR = '2.47'  # servers embed their flavor with its extra_specs
MIGRATIONS = '2.59'     # migrations carry their uuid; paging
# os-hypervisors with UUID ids, paging, service host and
# hypervisor_version (QEMU's for libvirt).
HYPERVISORS = '2.53'
QUOTA_SETS = '2.1'      # os-quota-sets/{project}/detail: in_use

HYPERVISOR_HOSTNAME = 'OS-EXT-SRV-ATTR:hypervisor_hostname'

# Items asked for per page of a listing (Nova's default [api] max_limit);
# Nova answers at most its own max_limit, which may be smaller.
PAGE_SIZE = 1000

NotFound = http.NotFound

#: A JSON object of Nova's answers.
Body = dict[str, typing.Any]

#: One page of a listing: its query in, Nova's answer out.
PageReader = abc.Callable[[list[tuple[str, str]]], dict[str, typing.Any]]


def next_marker(links: abc.Iterable[dict[str, str]]) -> str | None:
    """The marker of the ``next`` link among a Nova listing's
    ``<collection>_links``, or None on the last page.

    Nova links the next page whenever a page is full (as many items as
    the smaller of ``limit`` and its ``[api] max_limit``); its link
    carries the marker to ask for that page with. A ``next`` link
    without one cannot be followed: ServiceError, rather than a listing
    cut short.
    """
    for link in links:
        if link.get('rel') != 'next':
            continue
        query = urllib.parse.urlsplit(link.get('href', '')).query
        markers = urllib.parse.parse_qs(query).get('marker')
        if not markers:
            raise errors.ServiceError(
                'The Compute API linked a next page without a marker (%s); '
                'the listing cannot be read whole.' % link.get('href'),
                service='Compute', href=link.get('href'))
        return markers[0]
    return None


class ComputeClient(pool.ServiceClient):
    """Compute requests used by the mdev commands."""

    # -- servers ----------------------------------------------------------

    def get_server(self, server_id: str, embedded_flavor: bool = False
                   ) -> Body | None:
        """The server, or None when Nova does not know the ID; with
        ``embedded_flavor``, with its own copy of its flavor (extra specs
        included).
        """
        try:
            return self._request(
                'GET', '/servers/%s' % server_id,
                SERVER_FLAVOR if embedded_flavor else SERVER)['server']
        except NotFound:
            return None

    # -- listings ---------------------------------------------------------

    def _pages(self, key: str, params: abc.Sequence[tuple[str, str]],
               read: PageReader) -> list[dict]:
        """Every item of a Nova listing whose answer holds them under
        ``key``: one request per page (``read`` of the query: ``params``,
        ``limit`` PAGE_SIZE and the marker), following the ``next`` link
        of ``<key>_links`` while Nova gives one. Nova caps each page at
        its ``[api] max_limit``, which may be smaller than PAGE_SIZE: no
        page size is assumed.
        """
        items: list[dict] = []
        marker = None
        while True:
            query = list(params) + [('limit', str(PAGE_SIZE))]
            if marker:
                query.append(('marker', marker))
            body = read(query)
            page = body[key]
            items.extend(page)
            marker = next_marker(body.get(key + '_links', ()))
            if not page or marker is None:
                return items

    def _reader(self, path: str, version: str) -> PageReader:
        """A PageReader of ``GET path?query`` at ``version``."""
        def read(query: list[tuple[str, str]]) -> dict[str, typing.Any]:
            return self._request('GET', '%s?%s' % (
                path, urllib.parse.urlencode(query)), version)
        return read

    def _servers(self, params: abc.Sequence[tuple[str, str]],
                 version: str = SERVER) -> list[dict]:
        """Every server of ``GET /servers/detail`` with ``params``, all
        pages.

        Every Nova serves this listing, so a 404 means the endpoint in
        use is not Nova's.
        """
        try:
            return self._pages('servers', params,
                               self._reader('/servers/detail', version))
        except NotFound as exc:
            raise errors.ServiceError(
                'The Compute API answered 404 Not Found to GET '
                '/servers/detail, which every Nova serves; check the '
                'compute endpoint (service catalog or '
                'compute_endpoint_override).', **exc.data) from None

    def servers_named(self, name: str) -> list[dict]:
        """Servers of every project whose name is exactly ``name``."""
        servers = self._servers([('name', '^%s$' % re.escape(name)),
                                 ('all_tenants', 'True')])
        return [s for s in servers if s['name'] == name]

    def servers_on_node(self, node: str,
                        embedded_flavor: bool = False) -> list[dict]:
        """Every server Nova has on compute node ``node``, all projects
        (with ``embedded_flavor``, each with its own copy of its flavor).

        ``node`` is the node's hypervisor hostname (the name of its root
        resource provider), which is often not the service host. Nova's
        ``node`` filter is a regular expression (admins only; ignored for
        others), so it is anchored and escaped, and only servers whose
        ``OS-EXT-SRV-ATTR:hypervisor_hostname`` is ``node`` are kept. One
        request per page.
        """
        servers = self._servers(
            [('all_tenants', 'True'), ('node', '^%s$' % re.escape(node))],
            SERVER_FLAVOR if embedded_flavor else SERVER)
        return [s for s in servers if s.get(HYPERVISOR_HOSTNAME) == node]

    def servers_by_id(self, server_ids: abc.Iterable[str],
                      nodes: abc.Iterable[str] = (),
                      embedded_flavor: bool = False) -> dict[str, Body]:
        """``{id: server}`` for the IDs Nova knows, in few requests (with
        ``embedded_flavor``, each with its own copy of its flavor).

        Nova's server list filters on one ``uuid`` at a time, so servers
        are listed per compute node (``nodes``: the root provider names
        where Placement has their allocations), one request per node and
        page, all at once; only IDs Nova does not have on those nodes (a
        server on another node, such as one being moved, or no server at
        all) are looked up one by one.
        """
        wanted = set(server_ids)
        found: dict[str, Body] = {}
        for servers in self.map(
                lambda node: self.servers_on_node(node, embedded_flavor),
                sorted(set(nodes))):
            for server in servers:
                if server['id'] in wanted:
                    found[server['id']] = server
        rest = sorted(wanted - set(found))
        for server_id, answer in zip(rest, self.map(
                lambda s: self.get_server(s, embedded_flavor), rest)):
            if answer is not None:
                found[server_id] = answer
        return found

    # -- services ---------------------------------------------------------

    def compute_services(self) -> list[Body]:
        """Every nova-compute service: ``host``, ``status``, ``state``."""
        return self._request('GET', '/os-services?binary=nova-compute',
                             SERVICES)['services']

    def list_hypervisors(self) -> list:
        """Every compute node: ``hypervisor_hostname``, ``service``
        (``host``, ``disabled_reason``), ``status``, ``state``,
        ``hypervisor_type`` and ``hypervisor_version``; all pages.
        """
        return self._pages('hypervisors', [], self._reader(
            '/os-hypervisors/detail', HYPERVISORS))

    # -- flavors ----------------------------------------------------------

    def get_flavor(self, flavor_id: str) -> Body | None:
        try:
            return self._request('GET', '/flavors/%s' % urllib.parse.quote(
                flavor_id, safe=''), FLAVOR)['flavor']
        except NotFound:
            return None

    def flavors_named(self, name: str) -> list[dict]:
        """Every flavor, public or private, named exactly ``name``."""
        return [f for f in self.list_flavors() if f['name'] == name]

    def get_extra_specs(self, flavor_id: str) -> dict[str, str]:
        """The flavor's extra specs; raises NotFound for no flavor."""
        return self._request(
            'GET', '/flavors/%s/os-extra_specs' % flavor_id,
            EXTRA_SPECS)['extra_specs']

    def set_extra_specs(self, flavor_id: str, specs: Mapping[str, str]
                        ) -> dict[str, str]:
        """Set several keys in one request (Nova saves them together)."""
        return self._request(
            'POST', '/flavors/%s/os-extra_specs' % flavor_id, EXTRA_SPECS,
            json={'extra_specs': specs})['extra_specs']

    def delete_extra_spec(self, flavor_id: str, key: str) -> None:
        try:
            self._request('DELETE', '/flavors/%s/os-extra_specs/%s' % (
                flavor_id, urllib.parse.quote(key, safe='')), EXTRA_SPECS)
        except NotFound:
            pass  # already gone: the goal is reached

    # -- bulk listings (audit) --------------------------------------------

    def list_servers(self) -> list[dict]:
        """Every server of every project, each with its own copy of its
        flavor (``flavor.extra_specs``), node and ``tenant_id``; all
        pages.
        """
        return self._servers([('all_tenants', 'True')], SERVER_FLAVOR)

    def servers_in_use(self, project_id: str) -> int:
        """The servers Nova counts against the project's ``servers``
        limit (``instances`` in use of its quota set).
        """
        return int(self.quota_set(project_id)['instances']['in_use'])

    def quota_set(self, project_id: str) -> dict:
        """``GET /os-quota-sets/{project}/detail``: the project's quota
        set as Nova's quota driver has it, each resource's ``limit``,
        ``in_use`` and ``reserved``.
        """
        body = self._request(
            'GET', '/os-quota-sets/%s/detail' % urllib.parse.quote(
                project_id, safe=''), QUOTA_SETS)
        return body['quota_set']

    def list_migrations(self) -> list[dict]:
        """Every migration Nova lists (admin), with its ``uuid``; all
        pages.
        """
        return self._pages('migrations', [], self._reader(
            '/os-migrations', MIGRATIONS))

    def list_flavors(self) -> list[dict]:
        """Every flavor, public and private, with its extra specs; all
        pages.
        """
        return self._pages('flavors', [('is_public', 'None')],
                           self._reader('/flavors/detail', FLAVOR))
