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

"""Every Keystone (identity v3) call osc-mdev makes: unified limits and
projects.

Requests go through ``api.http.Service`` (keystoneauth's Adapter, the
shared retry policy and error mapper), on the v3 endpoint keystoneauth
discovers from the catalog. Keystone has no microversions. What the
token says (roles, scope, catalog) comes from the session's
authentication: no request of its own.
"""

from collections.abc import Mapping
import dataclasses
import urllib.parse

from osc_mdev.api import pool
from osc_mdev.base import errors

VERSION = '3'


@dataclasses.dataclass(frozen=True)
class Token:
    """What Keystone's policy sees of the command's token."""

    roles: frozenset[str]
    system_scoped: bool
    project_id: str | None
    project_name: str | None = None


@dataclasses.dataclass(frozen=True)
class ServiceRef:
    """A service as limits name it: its ID and its endpoint's region."""

    service_id: str
    region_id: str | None


class IdentityClient(pool.ServiceClient):
    """Keystone requests used by the quota commands."""

    def token(self) -> Token | None:
        """The roles and scope of the command's token; None when the
        authentication has no token of Keystone's (an admin token).
        """
        access = self._http.access()
        if access is None:
            return None
        return Token(roles=frozenset(access.role_names or ()),
                     system_scoped=bool(access.system_scoped),
                     project_id=access.project_id,
                     project_name=access.project_name)

    def catalog_service(self, service_type: str) -> ServiceRef | None:
        """The service of ``service_type`` in the token's catalog, for the
        interface and region the command uses (the first endpoint, as
        keystoneauth picks it); None when the catalog has none.
        """
        access = self._http.access()
        if access is None or not access.has_service_catalog():
            return None
        found = access.service_catalog.get_endpoint_data_list(
            service_type=service_type,
            interface=self._http.interface or 'public',
            region_name=self._http.region_name)
        if not found or not found[0].service_id:
            return None
        return ServiceRef(found[0].service_id, found[0].region_name)

    def services(self, service_type: str) -> list[ServiceRef]:
        """``GET /services?type=``: the services of that type, each in
        the region the command uses (None: any).
        """
        return [ServiceRef(s['id'], self._http.region_name)
                for s in self._list('/services', 'services',
                                    {'type': service_type})]

    def registered_limits(self, service: ServiceRef) -> list[dict]:
        """Every registered limit (default) of ``service``, of every
        region (each with its ``region_id``), in one request.
        """
        return self._list('/registered_limits', 'registered_limits',
                          {'service_id': service.service_id})

    def limits(self, service: ServiceRef) -> list[dict]:
        """The project and domain limits of ``service``, of every region,
        in one request: every project's to a token with the admin or
        service role or a system scope, its own project's to any other
        (Keystone's policy, without an error).
        """
        return self._list('/limits', 'limits',
                          {'service_id': service.service_id})

    def projects(self) -> list[dict]:
        """Every project (``id``, ``name``, ``domain_id``), one request."""
        return self._list('/projects', 'projects', {})

    def _list(self, path: str, key: str,
              query: Mapping[str, str]) -> list[dict]:
        url = path + ('?' + urllib.parse.urlencode(query) if query else '')
        body = self._request('GET', url, None)
        if body.get('truncated'):
            raise errors.ServiceError(
                'Keystone answered only the first %d %s of GET %s (its '
                'list_limit option); raise the limit so that every one is '
                'listed.' % (len(body[key]), key.replace('_', ' '), path),
                service='Keystone', method='GET', path=path,
                listed=len(body[key]))
        return body[key]
