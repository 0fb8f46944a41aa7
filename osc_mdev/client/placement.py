"""Every Placement call osc-mdev makes, each with an explicit microversion.

Requests go through osc-placement's ``SessionClient`` (keystoneauth
session, per-request microversion, Placement's 4xx answers as osc-lib
exceptions). This module turns what is left (unreachable service, policy
refusals, a Placement too old for a call) into one-line CommandErrors.
"""

import json
import random
import time
import urllib.parse

from keystoneauth1 import exceptions as ks_exc
from osc_lib import exceptions as osc_exc
from osc_placement import http as placement_http

from osc_mdev.client import errors
from osc_mdev.client import pool

# Microversions, named by what needs them.
PROVIDER_TREE = '1.14'       # parent/root provider UUIDs in listings
REQUIRED_TRAITS = '1.18'     # GET /resource_providers?required=
TRAITS = '1.6'
RESOURCE_CLASS = '1.2'
INVENTORIES = '1.0'
USAGES = '1.0'
PROVIDER_ALLOCATIONS = '1.0'
CONSUMER_ALLOCATIONS = '1.0'
CONSUMER_TYPES = '1.38'     # consumer_type in GET /allocations/{consumer}
PROVIDER = '1.14'           # GET /resource_providers/{uuid} with root UUID
# Provider summaries of every provider in each candidate's tree, with
# traits, parents and roots (1.29), and in_tree= (1.31).
ALLOCATION_CANDIDATES = '1.31'

UPDATE_ATTEMPTS = 10
UPDATE_BACKOFF = 0.05   # seconds before the second attempt; doubles


class NotFound(Exception):
    """Placement answered 404 for a resource that is expected to exist."""


class MicroversionUnsupported(osc_exc.CommandError):
    """The cloud's Placement is older than a call needs."""


class GenerationConflict(Exception):
    """Placement answered 409: another writer changed the provider."""


class PlacementClient:
    """Placement requests used by the mdev commands."""

    def __init__(self, session, region_name=None, interface=None,
                 endpoint_override=None,
                 max_workers=pool.DEFAULT_MAX_WORKERS):
        ks_filter = {'service_type': 'placement',
                     'region_name': region_name,
                     'interface': interface}
        # An explicit microversion on every call: no negotiation round trip.
        self._http = placement_http.SessionClient(
            session, ks_filter, api_version='1.0')
        self._endpoint_override = endpoint_override
        self.max_workers = max_workers

    # -- plumbing ---------------------------------------------------------

    def _request(self, method, url, version, **kwargs):
        if self._endpoint_override:
            kwargs.setdefault('endpoint_override', self._endpoint_override)
        try:
            response = self._http.request(method, url, version=version,
                                          **kwargs)
        except osc_exc.NotFound as exc:
            raise NotFound(str(exc.message)) from exc
        except osc_exc.Conflict as exc:
            raise GenerationConflict(str(exc.message)) from exc
        except (osc_exc.Unauthorized, ks_exc.Unauthorized) as exc:
            raise osc_exc.CommandError(
                'Placement did not accept the credentials (HTTP 401: %s); '
                'check the cloud configuration or token.'
                % _message(exc)) from exc
        except osc_exc.Forbidden as exc:
            raise osc_exc.CommandError(
                'Placement refused %s %s (HTTP 403: %s); these commands need '
                'an account with the admin role or a policy that allows it.'
                % (method, _path(url), _message(exc))) from exc
        except osc_exc.ClientException as exc:
            raise osc_exc.CommandError(
                'Placement rejected %s %s: %s' % (method, _path(url),
                                                  _message(exc))) from exc
        except osc_exc.CommandError as exc:
            # osc-placement maps 4xx codes with no osc-lib class here.
            cause = exc.__cause__
            status = getattr(cause, 'http_status', None)
            if status == 406:
                raise self._version_error(version, cause) from exc
            raise osc_exc.CommandError(
                'Placement rejected %s %s (HTTP %s): %s'
                % (method, _path(url), status, exc.args[-1])) from exc
        except ks_exc.EndpointNotFound as exc:
            raise osc_exc.CommandError(
                'No Placement endpoint found (%s); add one to the service '
                'catalog or set placement_endpoint_override.' % exc) from exc
        except ks_exc.ConnectionError as exc:
            raise osc_exc.CommandError(
                'Cannot reach the Placement API (%s); check the endpoint and '
                'that the service is running.'
                % errors.connection_problem(exc)) from exc
        except ks_exc.HttpError as exc:
            raise osc_exc.CommandError(
                'Placement failed on %s %s (HTTP %s: %s); try again or check '
                'the Placement service logs.'
                % (method, _path(url), exc.http_status,
                   errors.first_line(exc))) from exc
        except (ValueError, KeyError) as exc:
            # An error answer whose body is not Placement's JSON: a proxy,
            # a load balancer or Keystone answered.
            cause = exc.__context__
            if isinstance(cause, ks_exc.Unauthorized):
                raise osc_exc.CommandError(
                    'The credentials were not accepted (HTTP 401); check the '
                    'cloud configuration or token.') from exc
            if isinstance(cause, ks_exc.HttpError):
                raise osc_exc.CommandError(
                    'Placement endpoint answered HTTP %s to %s %s with a '
                    'non-Placement body; check the Placement endpoint URL.'
                    % (cause.http_status, method, _path(url))) from exc
            raise
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def _version_error(self, version, http_error):
        server_max = None
        try:
            body = json.loads(http_error.response.content)
            server_max = body['errors'][0].get('max_version')
        except (ValueError, KeyError, IndexError, AttributeError):
            pass
        return MicroversionUnsupported(
            'This command needs Placement API microversion %s or later; '
            'the cloud\'s Placement supports up to %s.'
            % (version, server_max or 'an older version'))

    def map(self, func, items):
        """Run ``func`` over ``items`` with this client's bounded pool."""
        return pool.bounded_map(func, items, self.max_workers)

    # -- reads ------------------------------------------------------------

    def list_providers(self, required_traits=()):
        """All resource providers, with parent and root UUIDs."""
        return self.find_providers(required_traits=required_traits)

    def find_providers(self, name=None, in_tree=None, required_traits=()):
        """``GET /resource_providers`` filtered by Placement.

        ``name``: the provider of that name (a list of at most one);
        ``in_tree``: every provider of the tree of that provider UUID;
        ``required_traits``: providers having all of them. Each provider
        carries its generation, parent and root UUIDs.
        """
        query = {}
        if name is not None:
            query['name'] = name
        if in_tree is not None:
            query['in_tree'] = in_tree
        version = PROVIDER_TREE
        if required_traits:
            query['required'] = ','.join(required_traits)
            version = REQUIRED_TRAITS
        url = '/resource_providers'
        if query:
            url += '?' + urllib.parse.urlencode(query)
        return self._request('GET', url, version)['resource_providers']

    def get_provider(self, uuid):
        """One provider (generation, parent and root UUIDs); NotFound."""
        return self._request('GET', '/resource_providers/%s' % uuid,
                             PROVIDER)

    def get_allocation_candidates(self, resources, in_tree=None):
        """``GET /allocation_candidates?resources=...``: the raw answer.

        Its ``provider_summaries`` give capacity, used and traits of every
        provider in the candidates' trees. Raises MicroversionUnsupported
        on a Placement older than 1.31.
        """
        query = {'resources': resources}
        if in_tree is not None:
            query['in_tree'] = in_tree
        return self._request(
            'GET', '/allocation_candidates?' + urllib.parse.urlencode(query),
            ALLOCATION_CANDIDATES)

    def get_inventories(self, uuid):
        """``(generation, {resource class: inventory})``."""
        body = self._request(
            'GET', '/resource_providers/%s/inventories' % uuid, INVENTORIES)
        return body['resource_provider_generation'], body['inventories']

    def get_usages(self, uuid):
        body = self._request(
            'GET', '/resource_providers/%s/usages' % uuid, USAGES)
        return body['usages']

    def get_traits(self, uuid):
        return self.get_traits_and_generation(uuid)[1]

    def get_traits_and_generation(self, uuid):
        body = self._request(
            'GET', '/resource_providers/%s/traits' % uuid, TRAITS)
        return body['resource_provider_generation'], body['traits']

    def get_provider_allocations(self, uuid):
        body = self._request(
            'GET', '/resource_providers/%s/allocations' % uuid,
            PROVIDER_ALLOCATIONS)
        return body['allocations']

    def get_consumer_allocations(self, consumer):
        """``{provider uuid: {'resources': {...}}}``; empty if none."""
        return self._request('GET', '/allocations/%s' % consumer,
                             CONSUMER_ALLOCATIONS)['allocations']

    def get_consumer_type(self, consumer):
        """``INSTANCE``, ``MIGRATION``...; None for a consumer without
        allocations or a Placement older than 1.38."""
        try:
            body = self._request('GET', '/allocations/%s' % consumer,
                                 CONSUMER_TYPES)
        except MicroversionUnsupported:
            return None
        return body.get('consumer_type') if body['allocations'] else None

    def _exists(self, url, version):
        try:
            self._request('GET', url, version)
        except NotFound:
            return False
        return True

    def resource_class_exists(self, name):
        return self._exists('/resource_classes/%s' % name, RESOURCE_CLASS)

    def trait_exists(self, name):
        return self._exists('/traits/%s' % name, TRAITS)

    # -- writes -----------------------------------------------------------

    def ensure_trait(self, name):
        """Create custom trait ``name`` unless it exists (PUT is idempotent).
        """
        self._request('PUT', '/traits/%s' % name, TRAITS)

    def put_traits(self, uuid, generation, traits):
        """Replace a provider's traits; GenerationConflict if it moved on."""
        body = self._request(
            'PUT', '/resource_providers/%s/traits' % uuid, TRAITS,
            json={'resource_provider_generation': generation,
                  'traits': sorted(traits)})
        return body['resource_provider_generation']

    def update_traits(self, uuid, change, dry_run=False,
                      attempts=UPDATE_ATTEMPTS, backoff=UPDATE_BACKOFF,
                      known=None):
        """Read-modify-write a provider's traits, safe against other writers.

        ``change(current traits) -> new traits``. A generation conflict
        (another writer, such as nova-compute, changed the provider in
        between) re-reads the provider and applies ``change`` again, up to
        ``attempts`` times with jittered exponential backoff. Returns
        ``(before, after)``; with ``dry_run`` nothing is written.

        ``known`` is ``(generation, traits)`` from earlier bulk reads, used
        instead of the first read. The generation must have been read no
        later than the traits (a provider listing, then the summaries):
        then a change in between makes the write conflict rather than
        drop someone's trait.
        """
        for attempt in range(attempts):
            if attempt == 0 and known is not None:
                generation, current = known
            else:
                generation, current = self.get_traits_and_generation(uuid)
            wanted = frozenset(change(frozenset(current)))
            if dry_run or wanted == frozenset(current):
                return frozenset(current), wanted
            try:
                self.put_traits(uuid, generation, wanted)
                return frozenset(current), wanted
            except GenerationConflict:
                if attempt == 0 and known is not None:
                    continue  # the bulk read was stale: re-read at once
                delay = min(backoff * 2 ** attempt, 2.0)
                time.sleep(random.uniform(delay / 2, delay))
        raise osc_exc.CommandError(
            'Provider %s kept changing under %d attempts to update its '
            'traits; run the command again.' % (uuid, attempts))

    def get_provider_details(self, uuids, usages=True, traits=True,
                             allocations=False):
        """Read what the device rows need for many providers at once.

        Every (provider, part) request is independent and runs in the
        bounded pool. Returns ``{uuid: {...}}``; a provider that vanished
        since it was listed (404) is left out.
        """
        getters = {'inventories': self.get_inventories}
        if usages:
            getters['usages'] = self.get_usages
        if traits:
            getters['traits'] = self.get_traits
        if allocations:
            getters['allocations'] = self.get_provider_allocations
        jobs = [(uuid, part) for uuid in uuids for part in getters]

        def fetch(job):
            uuid, part = job
            try:
                return getters[part](uuid)
            except NotFound:
                return NotFound

        details = {}
        gone = set()
        for (uuid, part), result in zip(jobs, self.map(fetch, jobs)):
            if result is NotFound:
                gone.add(uuid)
            else:
                details.setdefault(uuid, {})[part] = result
        for uuid in gone:
            details.pop(uuid, None)
        return details


def _message(exc):
    return getattr(exc, 'message', None) or errors.first_line(exc)


def _path(url):
    return url.split('?', 1)[0]
