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

"""API layer: every HTTP request osc-mdev sends.

One keystoneauth Adapter path (``http.Service``: microversions, retries,
the one error mapper), one module per service (``placement``,
``compute``, ``identity``) with explicit microversions, and the bounded
pool that runs requests at once (``pool``). No feature logic lives
here; it imports only the standard library, keystoneauth,
openstacksdk's configuration (``CloudRegion``, for the settings of each
service), ``osc_mdev.base`` (its failures are ``osc_mdev.base.errors``: a
``ServiceError`` with the service, request, status and attempts as data,
or the ``NotFound`` and ``Conflict`` of ``http``) and itself. Nothing is
kept in a module: each ``MdevClient`` has its own service clients, so
clients of two clouds in one process never mix.
"""

import functools
import threading
import typing
import uuid

if typing.TYPE_CHECKING:
    from keystoneauth1 import session as ks_session
    from openstack.config import cloud_region as sdk_cloud_region

    from osc_mdev.api import compute as compute_api
    from osc_mdev.api import http as http_api
    from osc_mdev.api import identity as identity_api
    from osc_mdev.api import placement as placement_api
    from osc_mdev.api import pool as pool_api

DEFAULT_MAX_WORKERS = 8

_Client = typing.TypeVar('_Client', bound='pool_api.ServiceClient')


class MdevClient:
    """The clients of one cloud: what ``client_manager.mdev`` gives the
    commands, and what a program builds from its keystoneauth session.

    :param session: an authenticated keystoneauth session.
    :param cloud_region: openstacksdk's ``CloudRegion`` of the cloud
        (``openstack.config.get_cloud_region(cloud=...)`` reads it from
        ``clouds.yaml``): its settings per service, such as
        ``placement_endpoint_override``, ``connect_retries``,
        ``status_code_retries``, ``compute_connect_retry_delay`` or
        ``api_timeout``. Without it, keystoneauth's defaults and the
        service catalog of ``session``.
    :param region_name: the region whose endpoints to use, for every
        service (else the cloud region's, per service).
    :param interface: the endpoint interface (``public``, ``internal``,
        ``admin``), for every service (else the cloud region's).
    :param max_workers: most requests in flight at once, over all
        services together.
    :param timeout: seconds to wait for each answer before the attempt
        counts as failed and is retried (else the cloud region's
        ``api_timeout``, else 60).

    Service clients are built on first use, so a program that needs only
    Placement never looks up another service. Both share one semaphore:
    ``max_workers`` bounds the requests in flight for the whole client.
    They also share one global request ID, so the client's requests can
    be followed through the Placement and Nova logs.
    """

    def __init__(self, session: 'ks_session.Session',
                 cloud_region: 'sdk_cloud_region.CloudRegion | None' = None,
                 *, region_name: str | None = None,
                 interface: str | list[str] | None = None,
                 max_workers: int = DEFAULT_MAX_WORKERS,
                 timeout: float | None = None) -> None:
        from openstack.config import cloud_region as sdk_cloud_region

        self.session = session
        self.cloud_region = cloud_region or sdk_cloud_region.from_session(
            session, region_name=region_name)
        self.region_name = region_name
        self.interface = interface
        self.max_workers = max_workers
        self.timeout = timeout
        self.request_id = 'req-%s' % uuid.uuid4()
        self._semaphore = threading.BoundedSemaphore(max_workers)

    def _seconds(self, service_type: str, name: str) -> float | None:
        """``<service>_<name>``, else ``<name>``, of the CloudRegion's
        settings as openstacksdk names them: for the settings it has no
        getter for in every release osc-mdev supports (``api_timeout``,
        which it gives to the session it builds; the retry delays, whose
        getters came later).
        """
        config = self.cloud_region.config
        value = config.get('%s_%s' % (service_type.replace('-', '_'), name),
                           config.get(name))
        return float(value) if value is not None else None

    def _service(self, service_type: str, label: str,
                 version: str | None = None) -> 'http_api.Service':
        from osc_mdev.api import http

        region = self.cloud_region

        def retries(value: int | None) -> int:
            return http.DEFAULT_RETRIES if value is None else value

        return http.Service(
            self.session, service_type, label,
            semaphore=self._semaphore,
            interface=self.interface or region.get_interface(service_type),
            region_name=(self.region_name
                         or region.get_region_name(service_type)),
            endpoint_override=region.get_endpoint(service_type),
            connect_retries=retries(region.get_connect_retries(
                service_type)),
            status_retries=retries(region.get_status_code_retries(
                service_type)),
            connect_retry_delay=self._seconds(service_type,
                                              'connect_retry_delay'),
            status_retry_delay=self._seconds(service_type,
                                             'status_code_retry_delay'),
            timeout=(self.timeout or self._seconds(service_type,
                                                   'api_timeout')
                     or http.DEFAULT_TIMEOUT),
            global_request_id=self.request_id, version=version)

    def _client(self, cls: 'type[_Client]', service_type: str, label: str,
                version: str | None = None) -> '_Client':
        return cls(self._service(service_type, label, version),
                   max_workers=self.max_workers)

    @functools.cached_property
    def placement(self) -> 'placement_api.PlacementClient':
        from osc_mdev.api import placement
        return self._client(placement.PlacementClient, 'placement',
                            'Placement')

    @functools.cached_property
    def compute(self) -> 'compute_api.ComputeClient':
        from osc_mdev.api import compute
        return self._client(compute.ComputeClient, 'compute', 'Compute')

    @functools.cached_property
    def identity(self) -> 'identity_api.IdentityClient':
        from osc_mdev.api import identity
        return self._client(identity.IdentityClient, 'identity', 'Keystone',
                            identity.VERSION)
