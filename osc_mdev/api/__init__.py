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
pool that runs requests at once (``pool``). No use-case logic lives
here; it imports only the standard library, keystoneauth,
``osc_mdev.base`` (its failures are ``osc_mdev.base.errors``: a
``ServiceError`` with the service, request, status and attempts as data,
or the ``NotFound`` and ``Conflict`` of ``http``) and itself. Nothing is
kept in a module: each ``MdevClient`` has its own service clients, so
clients of two clouds in one process never mix.
"""

from collections.abc import Callable
import threading
import typing
import uuid

if typing.TYPE_CHECKING:
    from osc_mdev.api import compute as compute_api
    from osc_mdev.api import http as http_api
    from osc_mdev.api import identity as identity_api
    from osc_mdev.api import placement as placement_api

T = typing.TypeVar('T')


class MdevClient:
    """What ``client_manager.mdev`` gives the commands.

    Service clients are built on first use, so a command that needs only
    Placement never looks up another service. Both share one semaphore:
    ``max_workers`` bounds the requests in flight for the whole command.
    They also share one global request ID, so the command's requests can
    be followed through the Placement and Nova logs.
    """

    def __init__(self, instance: typing.Any, max_workers: int,
                 timeout: float | None) -> None:
        self._instance = instance
        self.max_workers = max_workers
        self.timeout = timeout
        self.request_id = 'req-%s' % uuid.uuid4()
        self._semaphore = threading.BoundedSemaphore(max_workers)
        self._placement: placement_api.PlacementClient | None = None
        self._compute: compute_api.ComputeClient | None = None
        self._identity: identity_api.IdentityClient | None = None

    def _service(self, service_type: str, label: str,
                 version: str | None = None) -> 'http_api.Service':
        from osc_mdev.api import http

        config = self._instance.get_configuration()

        def setting(name: str, cast: Callable[[typing.Any], T]) -> T | None:
            key = service_type.replace('-', '_')
            value = config.get('%s_%s' % (key, name), config.get(name))
            return cast(value) if value is not None else None

        def retries(name: str) -> int:
            value = setting(name, int)
            return http.DEFAULT_RETRIES if value is None else value

        timeout = self.timeout or setting('api_timeout', float)
        return http.Service(
            self._instance.session, service_type, label,
            semaphore=self._semaphore,
            interface=self._instance.interface,
            region_name=self._instance.region_name,
            endpoint_override=setting('endpoint_override', str),
            connect_retries=retries('connect_retries'),
            status_retries=retries('status_code_retries'),
            connect_retry_delay=setting('connect_retry_delay', float),
            status_retry_delay=setting('status_code_retry_delay', float),
            timeout=timeout or http.DEFAULT_TIMEOUT,
            global_request_id=self.request_id, version=version)

    @property
    def placement(self) -> 'placement_api.PlacementClient':
        if self._placement is None:
            from osc_mdev.api import placement
            self._placement = placement.PlacementClient(
                self._service('placement', 'Placement'),
                max_workers=self.max_workers)
        return self._placement

    @property
    def compute(self) -> 'compute_api.ComputeClient':
        if self._compute is None:
            from osc_mdev.api import compute
            self._compute = compute.ComputeClient(
                self._service('compute', 'Compute'),
                max_workers=self.max_workers)
        return self._compute

    @property
    def identity(self) -> 'identity_api.IdentityClient':
        if self._identity is None:
            from osc_mdev.api import identity
            self._identity = identity.IdentityClient(
                self._service('identity', 'Keystone', identity.VERSION),
                max_workers=self.max_workers)
        return self._identity
