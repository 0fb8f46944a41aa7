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

"""Every Placement call osc-mdev makes, each with an explicit microversion.

Requests go through ``api.http.Service`` (keystoneauth's Adapter, the
shared retry policy and error mapper).
"""

from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from concurrent import futures
import copy
import random
import threading
import time
import typing
import urllib.parse

from osc_mdev.api import http
from osc_mdev.api import pool
from osc_mdev.base import errors

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
# root_required (1.35), any suffix (1.33), mappings (1.34), every provider
# of a candidate's tree in provider_summaries (1.29), in: (1.39).
ALLOCATION_CANDIDATES = '1.39'
CONSUMER_GENERATION = '1.28'  # consumer_generation; PUT of no allocations
PROVIDER = '1.14'           # GET /resource_providers/{uuid} with root UUID
# The bulk device reads: provider summaries of every provider in each
# candidate's tree, with traits, parents and roots (1.29), and in_tree=
# (1.31), so they work on Placements older than capacity's 1.39.
PROVIDER_SUMMARIES = '1.31'
# GET /usages?project_id=, as Nova reads it for unified limits
# (GET_USAGES_VERSION of nova/scheduler/client/report.py).
PROJECT_USAGES = '1.9'

UPDATE_ATTEMPTS = 10
UPDATE_BACKOFF = 0.05   # seconds before the second attempt; doubles

NotFound = http.NotFound
GenerationConflict = http.Conflict
MicroversionUnsupported = http.MicroversionUnsupported

#: A JSON object of Placement's answers.
Body = dict[str, typing.Any]


def pause_after_conflict(attempt: int,
                         backoff: float = UPDATE_BACKOFF) -> None:
    """Sleep before attempt ``attempt + 1`` of a write that met a
    generation conflict: jittered, ``backoff`` doubling per attempt, at
    most 2 seconds.
    """
    delay = min(backoff * 2 ** attempt, 2.0)
    time.sleep(random.uniform(delay / 2, delay))


#: The reads of the whole cloud ``shared_reads`` sends once.
SHARED = ('/resource_providers?resources=', '/allocation_candidates?')


class PlacementClient(pool.ServiceClient):
    """Placement requests used by the mdev commands."""

    def __init__(self, service: http.Service,
                 max_workers: int = pool.DEFAULT_MAX_WORKERS) -> None:
        super().__init__(service, max_workers)
        # The answers ``shared_reads`` shares: this client's own, never
        # another's.
        self._shared: dict[tuple[str, str | None],
                           futures.Future] | None = None
        self._shared_lock = threading.Lock()

    def shared_reads(self) -> 'PlacementClient':
        """A client of the same service whose reads of the whole cloud
        (the provider listing, allocation candidates, ``?resources=``
        listings) are each sent once and answered alike to every caller,
        those running at the same time included: for one run that reads
        the same cloud for several answers (``metrics``: the devices and
        every flavor).
        """
        shared = copy.copy(self)
        shared._shared = {}
        shared._shared_lock = threading.Lock()
        return shared

    def _request(self, method: str, url: str, version: str | None,
                 **kwargs: typing.Any) -> typing.Any:
        shared = self._shared
        if shared is None or method != 'GET' or not (
                url == '/resource_providers' or url.startswith(SHARED)):
            return pool.ServiceClient._request(self, method, url, version,
                                               **kwargs)
        with self._shared_lock:
            found = shared.get((url, version))
            mine = found is None
            if mine:
                found = shared[(url, version)] = futures.Future()
        assert found is not None
        if mine:
            try:
                found.set_result(pool.ServiceClient._request(
                    self, method, url, version, **kwargs))
            except BaseException as exc:  # noqa: B902 - each caller's
                found.set_exception(exc)
        return copy.deepcopy(found.result())

    # -- reads ------------------------------------------------------------

    def list_providers(self, required_traits: Collection[str] = ()
                       ) -> list[Body]:
        """All resource providers, with parent and root UUIDs."""
        return self.find_providers(required_traits=required_traits)

    def find_providers(self, name: str | None = None,
                       in_tree: str | None = None,
                       required_traits: Collection[str] = ()
                       ) -> list[Body]:
        """``GET /resource_providers`` filtered by Placement.

        ``name``: the provider of that name (a list of at most one);
        ``in_tree``: every provider of the tree of that provider UUID;
        ``required_traits``: providers having all of them. Each provider
        carries its generation, parent and root UUIDs.
        """
        query: dict[str, str] = {}
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

    def providers_with_room(self, resources: Mapping[str, int]
                            ) -> list[Body]:
        """Providers that can take ``resources`` (``{class: amount}``) in
        one allocation now: room, ``min_unit``, ``max_unit`` and
        ``step_size`` (``?resources=``, 1.4).

        Placement refuses (400) a class it does not have, with no error
        code of its own: a class it does not have, read as such, means
        nobody can take the resources; any other refusal is raised.
        """
        url = '/resource_providers?' + urllib.parse.urlencode(
            {'resources': ','.join('%s:%d' % rc for rc in sorted(
                resources.items()))})
        try:
            return self._request('GET', url, PROVIDER_TREE,
                                 conflicts=(400,))['resource_providers']
        except http.Conflict:
            if all(self.resource_class_exists(rc)
                   for rc in sorted(resources)):
                raise
            return []

    def get_provider(self, uuid: str) -> Body:
        """One provider (generation, parent and root UUIDs); NotFound."""
        return self._request('GET', '/resource_providers/%s' % uuid,
                             PROVIDER)

    def get_allocation_candidates(self, resources: str,
                                  in_tree: str | None = None) -> Body:
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
            PROVIDER_SUMMARIES)

    def get_inventories(self, uuid: str) -> tuple[int, dict[str, Body]]:
        """``(generation, {resource class: inventory})``."""
        body = self._request(
            'GET', '/resource_providers/%s/inventories' % uuid, INVENTORIES)
        return body['resource_provider_generation'], body['inventories']

    def get_usages(self, uuid: str) -> dict[str, int]:
        body = self._request(
            'GET', '/resource_providers/%s/usages' % uuid, USAGES)
        return body['usages']

    def get_traits(self, uuid: str) -> list[str]:
        return self.get_traits_and_generation(uuid)[1]

    def get_project_usages(self, project_id: str) -> dict[str, int]:
        """``{class: used}`` of every consumer of the project (instances
        and migrations alike), as Nova counts it for unified limits.
        """
        return self._request('GET', '/usages?' + urllib.parse.urlencode(
            {'project_id': project_id}), PROJECT_USAGES)['usages']

    def get_traits_and_generation(self, uuid: str
                                  ) -> tuple[int, list[str]]:
        body = self._request(
            'GET', '/resource_providers/%s/traits' % uuid, TRAITS)
        return body['resource_provider_generation'], body['traits']

    def get_allocations_and_generation(self, uuid: str
                                       ) -> tuple[int, dict[str, Body]]:
        """``(generation, {consumer: {'resources': {...}}})`` of the
        consumers on one provider; NotFound.
        """
        body = self._request(
            'GET', '/resource_providers/%s/allocations' % uuid,
            PROVIDER_ALLOCATIONS)
        return body['resource_provider_generation'], body['allocations']

    def get_provider_allocations(self, uuid: str) -> dict[str, Body]:
        body = self._request(
            'GET', '/resource_providers/%s/allocations' % uuid,
            PROVIDER_ALLOCATIONS)
        return body['allocations']

    def get_consumer_allocations(self, consumer: str
                                 ) -> dict[str, Body]:
        """``{provider uuid: {'resources': {...}}}``; empty if none."""
        return self._request('GET', '/allocations/%s' % consumer,
                             CONSUMER_ALLOCATIONS)['allocations']

    def get_consumer_type(self, consumer: str) -> str | None:
        """``INSTANCE``, ``MIGRATION``...; None for a consumer without
        allocations or a Placement older than 1.38.
        """
        try:
            body = self._request('GET', '/allocations/%s' % consumer,
                                 CONSUMER_TYPES)
        except MicroversionUnsupported:
            return None
        return body.get('consumer_type') if body['allocations'] else None

    def allocation_candidates(self, querystring: str) -> Body:
        """``GET /allocation_candidates?<querystring>``: the whole answer
        (``allocation_requests``, ``provider_summaries``).
        """
        return self._request('GET', '/allocation_candidates?' + querystring,
                             ALLOCATION_CANDIDATES)

    def _exists(self, url: str, version: str) -> bool:
        try:
            self._request('GET', url, version)
        except NotFound:
            return False
        return True

    def resource_class_exists(self, name: str) -> bool:
        return self._exists('/resource_classes/%s' % name, RESOURCE_CLASS)

    def trait_exists(self, name: str) -> bool:
        return self._exists('/traits/%s' % name, TRAITS)

    def traits_among(self, names: Collection[str],
                     associated: bool = False) -> set[str]:
        """The traits of ``names`` that exist in Placement, in one request.

        With ``associated``, only those at least one resource provider
        has. Names that do not exist are left out, not refused.
        """
        if not names:
            return set()
        query = {'name': 'in:' + ','.join(sorted(set(names)))}
        if associated:
            query['associated'] = 'true'
        body = self._request(
            'GET', '/traits?' + urllib.parse.urlencode(query), TRAITS)
        return set(body['traits'])

    # -- writes -----------------------------------------------------------

    def ensure_trait(self, name: str) -> None:
        """Create custom trait ``name`` unless it exists (PUT is idempotent).
        """
        self._request('PUT', '/traits/%s' % name, TRAITS)

    def put_traits(self, uuid: str, generation: int,
                   traits: Iterable[str]) -> int:
        """Replace a provider's traits; GenerationConflict if it moved on.

        Placement answers a race between two writers on one provider with
        409, or, when the other writer slips in between its generation
        check and its write, with 500 (no error code of its own); neither
        wrote anything. A 500 is told apart by re-reading the provider:
        a generation moved on since ``generation`` is a conflict (re-read
        and try again), never retried blindly; an unmoved one is
        Placement's failure. A retried PUT whose first answer was lost
        after Placement applied it meets a new generation: a conflict too,
        and the re-read shows the change made.
        """
        return self._put_at_generation(
            '/resource_providers/%s/traits' % uuid, TRAITS, uuid, generation,
            {'traits': sorted(traits)})

    def put_inventory(self, uuid: str, generation: int, resource_class: str,
                      inventory: Mapping[str, typing.Any]) -> int:
        """Replace one inventory of a provider if the provider is still at
        ``generation``: ``PUT /resource_providers/{uuid}/inventories/{rc}``.

        Returns the new generation. GenerationConflict when the provider
        changed since ``generation`` was read (another writer, a new
        allocation): nothing was written, re-read and decide again. A 500
        (Placement's answer to some races, as for traits) with the
        generation moved on is a conflict too; with it unmoved, Placement
        failed (errors.ServiceError).
        """
        return self._put_at_generation(
            '/resource_providers/%s/inventories/%s' % (uuid, resource_class),
            INVENTORIES, uuid, generation, dict(inventory))

    def _put_at_generation(self, path: str, microversion: str, uuid: str,
                           generation: int,
                           body: dict[str, typing.Any]) -> int:
        """PUT ``body`` to ``path`` if provider ``uuid`` is still at
        ``generation``; its new generation. GenerationConflict for a 409,
        or a 500 with the generation moved on (see ``put_traits``); a 500
        with it unmoved is Placement's failure (errors.ServiceError).
        """
        try:
            answer = self._request(
                'PUT', path, microversion,
                json=dict(body, resource_provider_generation=generation),
                transient=(502, 503, 504), conflicts=(409, 500))
        except GenerationConflict as exc:
            if exc.status == 500 and self.get_provider(
                    uuid)['generation'] == generation:
                raise errors.ServiceError(
                    'Placement failed on PUT %s with HTTP 500 (%s); try '
                    'again later or check the Placement service logs.'
                    % (path, exc), **exc.data) from exc
            raise
        return answer['resource_provider_generation']

    def update_traits(self, uuid: str,
                      change: Callable[[frozenset[str]], Iterable[str]],
                      dry_run: bool = False,
                      attempts: int = UPDATE_ATTEMPTS,
                      backoff: float = UPDATE_BACKOFF,
                      known: tuple[int, Iterable[str]] | None = None
                      ) -> tuple[frozenset[str], frozenset[str]]:
        """Read-modify-write a provider's traits, safe against other writers.

        ``change(current traits) -> new traits``. A generation conflict
        (another writer, such as nova-compute, changed the provider in
        between) re-reads the provider and applies ``change`` again, up to
        ``attempts`` times with jittered exponential backoff. Returns
        ``(before, after)``: the traits first read and those the provider
        has now, so a write whose answer was lost (it shows on the re-read)
        is reported as made. With ``dry_run`` nothing is written.

        ``known`` is ``(generation, traits)`` from earlier bulk reads, used
        instead of the first read. The generation must have been read no
        later than the traits (a provider listing, then the summaries):
        then a change in between makes the write conflict rather than
        drop someone's trait.
        """
        first: frozenset[str] | None = None
        for attempt in range(attempts):
            if attempt == 0 and known is not None:
                generation, current = known
            else:
                generation, current = self.get_traits_and_generation(uuid)
            current = frozenset(current)
            first = current if first is None else first
            wanted = frozenset(change(current))
            if dry_run or wanted == current:
                return first, wanted
            try:
                self.put_traits(uuid, generation, wanted)
                return first, wanted
            except GenerationConflict:
                if attempt == 0 and known is not None:
                    continue  # the bulk read was stale: re-read at once
                pause_after_conflict(attempt, backoff)
        raise errors.ServiceError(
            'Provider %s kept changing under %d attempts to update its '
            'traits; run the command again.' % (uuid, attempts),
            service='Placement', method='PUT',
            path='/resource_providers/%s/traits' % uuid, attempts=attempts)

    def get_provider_details(self, uuids: Iterable[str], usages: bool = True,
                             traits: bool = True, allocations: bool = False
                             ) -> dict[str, dict[str, typing.Any]]:
        """Read what the device rows need for many providers at once.

        Every (provider, part) request is independent and runs in the
        bounded pool. Returns ``{uuid: {...}}``; a provider that vanished
        since it was listed (404) is left out.
        """
        getters: dict[str, Callable[[str], typing.Any]] = {
            'inventories': self.get_inventories}
        if usages:
            getters['usages'] = self.get_usages
        if traits:
            getters['traits'] = self.get_traits
        if allocations:
            getters['allocations'] = self.get_provider_allocations
        jobs = [(uuid, part) for uuid in uuids for part in getters]

        def fetch(job: tuple[str, str]) -> typing.Any:
            uuid, part = job
            try:
                return getters[part](uuid)
            except NotFound:
                return NotFound

        details: dict[str, dict[str, typing.Any]] = {}
        gone: set[str] = set()
        for (uuid, part), result in zip(jobs, self.map(fetch, jobs)):
            if result is NotFound:
                gone.add(uuid)
            else:
                details.setdefault(uuid, {})[part] = result
        for uuid in gone:
            details.pop(uuid, None)
        return details

    # -- consumers (audit) ------------------------------------------------

    def get_consumer(self, consumer: str) -> Body:
        """``GET /allocations/{consumer}`` with its consumer generation.

        The body carries ``allocations``, ``consumer_generation``,
        ``project_id``, ``user_id`` and, from 1.38, ``consumer_type``;
        a Placement older than 1.38 is asked at 1.28.
        """
        url = '/allocations/%s' % consumer
        try:
            return self._request('GET', url, CONSUMER_TYPES)
        except MicroversionUnsupported:
            return self._request('GET', url, CONSUMER_GENERATION)

    def remove_consumer_allocations(self, consumer: str, generation: int,
                                    project_id: str, user_id: str) -> None:
        """Remove every allocation of ``consumer`` if it is still at
        ``generation``; GenerationConflict when it changed.

        ``DELETE /allocations/{consumer}`` has no generation guard, so
        this is ``PUT /allocations/{consumer}`` with no allocations and
        the consumer generation (microversion 1.28).
        """
        self._request(
            'PUT', '/allocations/%s' % consumer, CONSUMER_GENERATION,
            json={'allocations': {}, 'consumer_generation': generation,
                  'project_id': project_id, 'user_id': user_id},
            transient=(502, 503, 504))
