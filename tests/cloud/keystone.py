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

"""The embedded cloud with a real Keystone and Nova's unified limits.

Used by tests.cloud.server in the cloud's process when it is given a
Keystone (``--keystone-url``, a tests.fixtures.keystone_server the client
started):

* Nova runs with ``[quota] driver = nova.quota.UnifiedLimitsDriver``:
  oslo.limit reads the limits of that Keystone over HTTP, as the admin
  user, for the compute service's public endpoint (``[oslo_limit]
  endpoint_id``, set once the endpoint is registered), exactly as a
  production Nova reads them, and ``nova.limit.utils`` reads its
  registered limits the same way;
* a second Placement port validates Keystone's tokens with
  keystonemiddleware (the first one keeps noauth2 and token ``admin``);
* Keystone's catalog gets the compute service (the Nova API) and that
  Placement, so a CLI logging in with a password finds them;
* the topology's ``unified_limits`` (registered limits, project limits by
  project name) are created through Keystone's API.

Only this Keystone holds limits: the CLI and Nova read the same numbers.
"""

import time

import eventlet
from keystoneauth1 import loading as ks_loading
import nova.conf
from placement import deploy as placement_deploy
import requests

from tests.fixtures import keystone_server

CONF = nova.conf.CONF
REGION = keystone_server.REGION
ADMIN = {'username': keystone_server.ADMIN_USER,
         'password': keystone_server.ADMIN_PASSWORD,
         'project_name': keystone_server.ADMIN_PROJECT,
         'user_domain_name': 'Default', 'project_domain_name': 'Default'}


def use_unified_limits(harness: object, keystone_url: str,
                       quota: dict | None = None) -> None:
    """Configure Nova's unified limits driver against ``keystone_url``;
    ``quota``: the topology's ``[quota]`` strategy and resource list
    (``{"strategy": ..., "resource_list": [...]}``), Nova's defaults
    otherwise, and ``driver`` (another driver: the same Keystone, and
    Nova's own quotas).
    """
    quota = quota or {}
    ks_loading.register_auth_conf_options(CONF, 'oslo_limit')
    CONF.register_opts(ks_loading.get_auth_plugin_conf_options('password'),
                       group='oslo_limit')
    harness.flags(group='quota', driver=quota.get(
                      'driver', 'nova.quota.UnifiedLimitsDriver'),
                  unified_limits_resource_strategy=quota.get(
                      'strategy', 'require'),
                  unified_limits_resource_list=quota.get(
                      'resource_list', ['servers']))
    harness.flags(group='oslo_limit', auth_type='password',
                  auth_url=keystone_url + '/v3', **ADMIN)


def placement_app(conf: object, keystone_url: str) -> object:
    """The harness's Placement behind keystonemiddleware: every request
    needs a token of ``keystone_url``, and Placement's policy sees its
    roles.
    """
    from keystonemiddleware.auth_token import _opts

    conf.register_opts(_opts._OPTS, group='keystone_authtoken')
    ks_loading.register_auth_conf_options(conf, 'keystone_authtoken')
    conf.register_opts(ks_loading.get_auth_plugin_conf_options('password'),
                       group='keystone_authtoken')
    for name, value in dict(ADMIN, auth_type='password',
                            auth_url=keystone_url,
                            www_authenticate_uri=keystone_url).items():
        conf.set_override(name, value, group='keystone_authtoken')
    conf.set_override('auth_strategy', 'keystone', group='api')
    try:
        return placement_deploy.deploy(conf)
    finally:
        conf.clear_override('auth_strategy', group='api')


class Keystone:
    """Keystone's v3 API as the cloud's administrator."""

    def __init__(self, url: str, timeout: float = 120) -> None:
        self.url = url + '/v3'
        deadline = time.monotonic() + timeout
        while True:
            try:
                if requests.get(self.url, timeout=5).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError('Keystone at %s does not answer' % url)
            eventlet.sleep(0.2)
        resp = requests.post(self.url + '/auth/tokens', json={'auth': {
            'identity': {'methods': ['password'], 'password': {'user': {
                'name': ADMIN['username'], 'domain': {'name': 'Default'},
                'password': ADMIN['password']}}},
            'scope': {'project': {'name': ADMIN['project_name'],
                                  'domain': {'name': 'Default'}}}}},
            timeout=30)
        resp.raise_for_status()
        self.token = resp.headers['X-Subject-Token']

    def request(self, method: str, path: str,
                json: dict | None = None) -> dict | None:
        resp = requests.request(method, self.url + path, json=json,
                                headers={'X-Auth-Token': self.token},
                                timeout=30)
        if resp.status_code >= 400:
            raise RuntimeError('Keystone: %s %s -> %s %s' % (
                method, path, resp.status_code, resp.text))
        return resp.json() if resp.content else None

    def register(self, service_type: str, name: str,
                 url: str) -> tuple[str, str]:
        """The service and its public and internal endpoints:
        ``(service ID, public endpoint ID)``.
        """
        service = self.request('POST', '/services', {'service': {
            'type': service_type, 'name': name}})['service']
        endpoints = {}
        for interface in ('public', 'internal'):
            endpoints[interface] = self.request('POST', '/endpoints', {
                'endpoint': {'service_id': service['id'],
                             'interface': interface, 'region_id': REGION,
                             'url': url}})['endpoint']['id']
        return service['id'], endpoints['public']

    def create_limits(self, service_id: str, limits: dict) -> dict[str, str]:
        """``limits``: ``{"registered": {resource: value}, "projects":
        {project name: {resource: value}}}``, in the region.
        """
        registered = [{'service_id': service_id, 'region_id': REGION,
                       'resource_name': name, 'default_limit': value}
                      for name, value in sorted(
                          limits.get('registered', {}).items())]
        if registered:
            self.request('POST', '/registered_limits',
                         {'registered_limits': registered})
        projects = {p['name']: p['id'] for p in
                    self.request('GET', '/projects')['projects']}
        per_project = [{'service_id': service_id, 'region_id': REGION,
                        'project_id': projects[project],
                        'resource_name': name, 'resource_limit': value}
                       for project, values in sorted(
                           limits.get('projects', {}).items())
                       for name, value in sorted(values.items())]
        if per_project:
            self.request('POST', '/limits', {'limits': per_project})
        return projects


def set_up(harness: object, keystone_url: str, compute_url: str,
           placement_url: str, limits: dict | None = None) -> dict:
    """Catalog entries and limits, and Nova's ``[oslo_limit]
    endpoint_id``; answers what the READY line tells: the compute
    service's ID and the projects (``{name: id}``).
    """
    keystone = Keystone(keystone_url)
    compute, endpoint = keystone.register('compute', 'nova', compute_url)
    keystone.register('placement', 'placement', placement_url)
    harness.flags(group='oslo_limit', endpoint_id=endpoint)
    projects = keystone.create_limits(compute, limits or {})
    return {'keystone_url': keystone_url, 'compute_service_id': compute,
            'projects': projects}
