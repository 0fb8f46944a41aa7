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

"""The one HTTP path of osc-mdev: keystoneauth's Adapter, one error mapper.

Every Placement, Compute and Keystone request goes through
``Service.request``:

* keystoneauth's public ``Adapter`` finds the endpoint (service catalog or
  ``<service>_endpoint_override``), authenticates, sends the explicit
  microversion of each call, the command's global request ID, and logs
  with hashed tokens under ``--debug``;
* transient faults are retried by keystoneauth (``connect_retries`` for
  connection errors and timeouts, ``status_code_retries`` for HTTP 500,
  502, 503 and 504), with its exponential backoff; every request osc-mdev
  makes is idempotent (reads, generation-guarded PUTs, PUTs of a state,
  DELETEs), so a retried request never applies a change twice;
* one shared semaphore bounds the requests in flight for the whole
  command (``--os-mdev-max-workers``), however the command batches them;
* every failure becomes ``NotFound`` (404), ``Conflict`` (409), or a
  ``ServiceError`` (``osc_mdev.base.errors``): one sentence that names
  the service, the request, the answer and, for transient faults, the
  number of attempts, and the same as data (``service``, ``method``,
  ``path``, ``status``, ``attempts``).

Each ``Service`` logs through its own adapter of keystoneauth's request
logger: nothing is kept in this module, so two clouds' clients in one
process share no state.
"""

from collections.abc import Collection
from collections.abc import Mapping
import json
import logging
import threading
import typing
import urllib.parse

from keystoneauth1 import access as ks_access
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session

from osc_mdev.api import errors
from osc_mdev.base import errors as library_errors

if typing.TYPE_CHECKING:
    import requests

DEFAULT_RETRIES = 3
DEFAULT_TIMEOUT = 60.0
TRANSIENT_STATUSES = (500, 502, 503, 504)


class NotFound(library_errors.NotFound):
    """The service answered 404 for the resource asked for (data:
    ``service``, ``method``, ``path``, ``status``); the sentence is the
    service's own detail.
    """


class Conflict(library_errors.Refused):
    """The service answered 409 (in Placement: another writer changed the
    provider since it was read), or another status the request names as
    a conflict; nothing was written. The sentence is the service's own
    detail; ``code`` is its error code, ``status`` the HTTP status (both
    in ``data`` too).
    """

    def __init__(self, message: str, code: str | None = None,
                 status: int = 409, **data: typing.Any) -> None:
        super().__init__(message, code=code, status=status, **data)
        self.code = code
        self.status = status


class MicroversionUnsupported(library_errors.ServiceError):
    """The cloud's service is older than a call needs (data: also
    ``microversion`` and ``max_version``).
    """


class _RequestLog(logging.LoggerAdapter):
    """keystoneauth's request log, with its retry warnings at INFO.

    A fault that a retry cures is no error: ``-v`` shows the retries,
    ``--debug`` every request (tokens hashed by keystoneauth), and a final
    failure is the command's one-line error.
    """

    def warning(self, msg: object, *args: object,
                **kwargs: typing.Any) -> None:
        self.info(msg, *args, **kwargs)


class Service:
    """One OpenStack API (Placement, Compute or Keystone) for one command.

    :param session: the command's keystoneauth session.
    :param service_type: ``placement``, ``compute`` or ``identity``.
    :param label: how messages name the service (``Placement``).
    :param semaphore: bounds the requests in flight; shared by every
        Service of a command.
    :param connect_retries: retries after a connection error or timeout.
    :param status_retries: retries after a transient HTTP status (so one
        more attempt than retries, at most).
    :param timeout: seconds to wait for an answer before the attempt
        counts as failed.
    :param version: the major API version to discover from the catalog's
        endpoint (``'3'`` for Keystone, whose catalog may name its root);
        None to use the endpoint as it is.
    """

    def __init__(self, session: ks_session.Session, service_type: str,
                 label: str,
                 semaphore: threading.Semaphore | None = None,
                 interface: str | list[str] | None = None,
                 region_name: str | None = None,
                 endpoint_override: str | None = None,
                 connect_retries: int = DEFAULT_RETRIES,
                 status_retries: int = DEFAULT_RETRIES,
                 connect_retry_delay: float | None = None,
                 status_retry_delay: float | None = None,
                 timeout: float = DEFAULT_TIMEOUT,
                 global_request_id: str | None = None,
                 version: str | None = None) -> None:
        self.label = label
        self.service_type = service_type
        self.interface = interface
        self.region_name = region_name
        self.connect_retries = connect_retries
        self.status_retries = status_retries
        self.timeout = timeout
        self._semaphore = semaphore or threading.BoundedSemaphore(8)
        # This Service's own adapter of keystoneauth's request logger.
        self._log = _RequestLog(logging.getLogger('keystoneauth.session'),
                                {'service': service_type})
        self._adapter = ks_adapter.Adapter(
            session, service_type=service_type, interface=interface,
            region_name=region_name, endpoint_override=endpoint_override,
            connect_retries=connect_retries,
            status_code_retries=status_retries,
            retriable_status_codes=list(TRANSIENT_STATUSES),
            connect_retry_delay=connect_retry_delay,
            status_code_retry_delay=status_retry_delay,
            global_request_id=global_request_id,
            # keystoneauth logs through the Logger methods the adapter
            # has.
            client_name='osc-mdev',
            logger=typing.cast(logging.Logger, self._log), version=version)

    def access(self) -> ks_access.AccessInfo | None:
        """The access information of the command's token (its roles,
        scope and service catalog), or None when the authentication has
        none (an ``admin_token``). Authenticates first if need be.
        """
        session = self._adapter.session
        get_access = getattr(session.auth, 'get_access', None)
        if get_access is None:
            return None
        try:
            return get_access(session)
        except ks_exc.Unauthorized as exc:
            raise self._credentials_error() from exc
        except ks_exc.ConnectionError as exc:
            raise library_errors.ServiceError(
                'Cannot reach Keystone to authenticate (%s); check the '
                'auth URL and that Keystone is running.'
                % errors.connection_problem(exc),
                service='Keystone') from exc
        except ks_exc.ClientException as exc:
            raise library_errors.ServiceError(
                'Authentication failed before any request was sent: %s.'
                % errors.first_line(exc).rstrip('.'),
                service='Keystone') from exc

    def request(self, method: str, url: str, microversion: str | None,
                json_body: Mapping[str, typing.Any] | None = None,
                transient: Collection[int] = TRANSIENT_STATUSES,
                conflicts: Collection[int] = (409,)) -> typing.Any:
        """Send one request; answer its JSON body (None when empty).

        ``transient``: the HTTP statuses retried for this request;
        ``conflicts``: the statuses that raise ``Conflict``.
        """
        kwargs: dict[str, typing.Any] = {
            'microversion': microversion, 'raise_exc': False,
            'retriable_status_codes': list(transient),
            'status_code_retries': (self.status_retries if transient
                                    else 0),
            'rate_semaphore': self._semaphore,
            'timeout': self.timeout}
        if json_body is not None:
            kwargs['json'] = json_body
        try:
            response = self._adapter.request(url, method, **kwargs)
        except ks_exc.EndpointNotFound as exc:
            raise self._failed(
                'No %s endpoint found in the service catalog (%s); add one '
                'or set %s_endpoint_override in clouds.yaml.'
                % (self.label, errors.first_line(exc), self.service_type),
                method, url) from exc
        except ks_exc.ConnectionError as exc:
            attempts = self.connect_retries + 1
            raise self._failed(
                'Cannot reach the %s API (%s) for %s %s after %d attempts; '
                'check the endpoint and that the service is running.'
                % (self.label, errors.connection_problem(exc), method,
                   _path(url), attempts),
                method, url, attempts=attempts) from exc
        except ks_exc.Unauthorized as exc:
            raise self._credentials_error(method, url) from exc
        except ks_exc.ClientException as exc:
            # Authentication plugins and discovery fail with these.
            raise self._failed(
                'Request to the %s API failed before it was sent: %s.'
                % (self.label, errors.first_line(exc).rstrip('.')),
                method, url) from exc
        return self._answer(method, url, microversion, response, transient,
                            conflicts)

    # -- the error mapper -------------------------------------------------

    def _answer(self, method: str, url: str, microversion: str | None,
                response: 'requests.Response', transient: Collection[int],
                conflicts: Collection[int]) -> typing.Any:
        status = response.status_code
        if status < 400:
            if status == 204 or not response.content:
                return None
            try:
                return response.json()
            except ValueError:
                raise self._failed(
                    '%s %s at %s answered something that is not JSON; '
                    'check that the %s endpoint URL is right.'
                    % (method, _path(url), _endpoint(response), self.label),
                    method, url, status=status)
        detail, shaped = _error_detail(response)
        where = '%s %s' % (method, _path(url))
        data: dict[str, typing.Any] = dict(
            service=self.label, method=method, path=_path(url),
            status=status)
        if status == 404 and shaped:
            raise NotFound(detail, **data)
        if status in conflicts and shaped:
            raise Conflict(detail, _error_code(response), **data)
        if not shaped:
            raise library_errors.ServiceError(
                '%s answered HTTP %d with a page that is not from the %s '
                'API to %s; check the %s endpoint URL.'
                % (_endpoint(response), status, self.label, where,
                   self.label), **data)
        if status == 401:
            raise self._credentials_error(method, url)
        if status == 403:
            raise library_errors.ServiceError(
                '%s refused %s (HTTP 403: %s); these commands need an '
                'account with the admin role or a policy that allows it.'
                % (self.label, where, detail), **data)
        if status == 406:
            found = _max_version(response)
            raise MicroversionUnsupported(
                "This command needs %s API microversion %s or later; the "
                "cloud's %s supports up to %s."
                % (self.label, microversion, self.label,
                   found or 'an older version'),
                microversion=microversion, max_version=found, **data)
        if status >= 500:
            attempts = self.status_retries + 1 if status in transient else 1
            raise library_errors.ServiceError(
                '%s failed on %s with HTTP %d (%s) after %d attempt%s; try '
                'again later or check the %s service logs.'
                % (self.label, where, status, detail, attempts,
                   '' if attempts == 1 else 's', self.label),
                attempts=attempts, **data)
        raise library_errors.ServiceError(
            '%s rejected %s (HTTP %d): %s.'
            % (self.label, where, status, detail.rstrip('.')), **data)

    def _failed(self, sentence: str, method: str, url: str,
                **data: typing.Any) -> library_errors.ServiceError:
        """A ServiceError of ``method url`` to this service."""
        return library_errors.ServiceError(
            sentence, service=self.label, method=method, path=_path(url),
            **data)

    def _credentials_error(self, method: str | None = None,
                           url: str | None = None
                           ) -> library_errors.ServiceError:
        data = {} if method is None or url is None else {
            'method': method, 'path': _path(url)}
        return library_errors.ServiceError(
            '%s did not accept the credentials (HTTP 401); check the cloud '
            'configuration or token.' % self.label, service=self.label,
            status=401, **data)


def _error_detail(response: 'requests.Response') -> tuple[str, bool]:
    """``(one-line detail, whether the body is the service's own)``.

    Placement answers ``{"errors": [{"detail": ...}]}``, Nova
    ``{"itemNotFound": {"message": ...}}``; a proxy, a load balancer or a
    wrong endpoint answers HTML or other JSON.
    """
    try:
        body = json.loads(response.content)
    except ValueError:
        return 'HTTP %d' % response.status_code, False
    if isinstance(body, dict):
        errors_list = body.get('errors')
        if isinstance(errors_list, list) and errors_list and isinstance(
                errors_list[0], dict):
            first = errors_list[0]
            return _last_line(first.get('detail') or first.get('title')
                              or ''), True
        if len(body) == 1:
            (inner,) = body.values()
            if isinstance(inner, dict) and 'message' in inner:
                return _last_line(str(inner['message'])), True
    return 'HTTP %d' % response.status_code, False


def _error_code(response: 'requests.Response') -> str | None:
    try:
        return json.loads(response.content)['errors'][0].get('code')
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None


def _max_version(response: 'requests.Response') -> str | None:
    try:
        return json.loads(response.content)['errors'][0].get('max_version')
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None


def _last_line(text: object) -> str:
    """Placement's details start with a generic sentence; the last
    non-empty line says what happened.
    """
    lines = [line.strip() for line in str(text).splitlines()
             if line.strip()]
    return lines[-1] if lines else ''


def _endpoint(response: 'requests.Response') -> str:
    parts = urllib.parse.urlsplit(response.url or '')
    return '%s://%s' % (parts.scheme, parts.netloc) if parts.netloc else (
        'The endpoint')


def _path(url: str) -> str:
    return url.split('?', 1)[0]
