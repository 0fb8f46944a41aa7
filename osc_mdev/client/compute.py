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

Requests go through the SDK's compute proxy (keystoneauth adapter with the
cloud's endpoint, overrides and auth) and the SDK's error mapping; this
module turns the errors into one-line CommandErrors.
"""

import re
import threading
import urllib.parse

from keystoneauth1 import exceptions as ks_exc
from openstack import exceptions as sdk_exc
from osc_lib import exceptions as osc_exc

from osc_mdev.client import errors
from osc_mdev.client import pool

SERVER = '2.1'        # OS-EXT-SRV-ATTR:host for admins; uuid filter
FLAVOR = '2.61'       # flavors carry their extra_specs
EXTRA_SPECS = '2.1'

# Servers per page of GET /servers/detail (Nova's default max_limit).
PAGE_SIZE = 1000


class NotFound(Exception):
    """The Compute API answered 404."""


class ComputeClient:
    """Compute requests used by the mdev commands."""

    def __init__(self, proxy_factory, max_workers=pool.DEFAULT_MAX_WORKERS):
        # The SDK discovers the endpoint's versions when the proxy is
        # built, so it is built on first use, inside the error handling.
        self._proxy_factory = proxy_factory
        self._proxy = None
        self._lock = threading.Lock()
        self.max_workers = max_workers

    def _get_proxy(self):
        with self._lock:
            if self._proxy is None:
                self._proxy = self._proxy_factory()
            return self._proxy

    def _request(self, method, url, version, **kwargs):
        try:
            response = self._get_proxy().request(
                url, method, microversion=version, **kwargs)
            sdk_exc.raise_from_response(response)
        except sdk_exc.NotFoundException as exc:
            raise NotFound(str(exc)) from exc
        except sdk_exc.ForbiddenException as exc:
            raise osc_exc.CommandError(
                'The Compute API refused %s %s (HTTP 403); these commands '
                'need an account with the admin role.'
                % (method, _path(url))) from exc
        except sdk_exc.HttpException as exc:
            raise osc_exc.CommandError(
                'The Compute API rejected %s %s: %s'
                % (method, _path(url), errors.first_line(exc))) from exc
        except ks_exc.EndpointNotFound as exc:
            raise osc_exc.CommandError(
                'No Compute endpoint found (%s); add one to the service '
                'catalog or set compute_endpoint_override.' % exc) from exc
        except (ks_exc.ConnectionError, ks_exc.DiscoveryFailure) as exc:
            raise osc_exc.CommandError(
                'Cannot reach the Compute API (%s); check the endpoint and '
                'that the service is running.'
                % errors.connection_problem(exc)) from exc
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def map(self, func, items):
        return pool.bounded_map(func, items, self.max_workers)

    # -- servers ----------------------------------------------------------

    def get_server(self, server_id):
        """The server, or None when Nova does not know the ID."""
        try:
            return self._request('GET', '/servers/%s' % server_id,
                                 SERVER)['server']
        except NotFound:
            return None

    def servers_named(self, name):
        """Servers of every project whose name is exactly ``name``."""
        query = urllib.parse.urlencode(
            {'name': '^%s$' % re.escape(name), 'all_tenants': 'True'})
        servers = self._request('GET', '/servers/detail?%s' % query,
                                SERVER)['servers']
        return [s for s in servers if s['name'] == name]

    def servers_on_host(self, host):
        """Every server Nova has on ``host``, all projects, all pages."""
        servers, marker = [], None
        while True:
            params = [('all_tenants', 'True'), ('host', host),
                      ('limit', str(PAGE_SIZE))]
            if marker:
                params.append(('marker', marker))
            page = self._request(
                'GET', '/servers/detail?%s' % urllib.parse.urlencode(params),
                SERVER)['servers']
            servers.extend(page)
            if len(page) < PAGE_SIZE:
                return servers
            marker = page[-1]['id']

    def servers_by_id(self, server_ids, hosts=()):
        """``{id: server}`` for the IDs Nova knows, in few requests.

        Nova's server list filters on one ``uuid`` at a time, so servers
        are listed per host (``hosts``: where Placement has their
        allocations), one request per host and page, all at once; only
        IDs not found there (a server Nova has elsewhere, or none) are
        looked up one by one.
        """
        wanted = set(server_ids)
        found = {}
        for servers in self.map(self.servers_on_host, sorted(set(hosts))):
            for server in servers:
                if server['id'] in wanted:
                    found[server['id']] = server
        rest = sorted(wanted - set(found))
        for server_id, server in zip(rest, self.map(self.get_server, rest)):
            if server is not None:
                found[server_id] = server
        return found

    # -- flavors ----------------------------------------------------------

    def get_flavor(self, flavor_id):
        try:
            return self._request('GET', '/flavors/%s' % urllib.parse.quote(
                flavor_id, safe=''), FLAVOR)['flavor']
        except NotFound:
            return None

    def flavors_named(self, name):
        query = urllib.parse.urlencode({'is_public': 'None'})
        flavors = self._request('GET', '/flavors/detail?%s' % query,
                                FLAVOR)['flavors']
        return [f for f in flavors if f['name'] == name]

    def set_extra_specs(self, flavor_id, specs):
        return self._request(
            'POST', '/flavors/%s/os-extra_specs' % flavor_id, EXTRA_SPECS,
            json={'extra_specs': specs})['extra_specs']

    def delete_extra_spec(self, flavor_id, key):
        try:
            self._request('DELETE', '/flavors/%s/os-extra_specs/%s' % (
                flavor_id, urllib.parse.quote(key, safe='')), EXTRA_SPECS)
        except NotFound:
            pass  # already gone: the goal is reached


def _path(url):
    return url.split('?', 1)[0]
