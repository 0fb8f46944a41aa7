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

"""``openstack mdev metrics``: the cloud's mdev state for Prometheus.

The devices are read as ``mdev provider list`` reads its default view
(``provider.list_devices`` without inventory fields: the provider
listing and the allocation candidate summaries, a few requests at any
size); each flavor is counted by ``capacity.count``, as ``mdev capacity
--flavor`` counts it (its 3 Placement requests, and Nova's flavor and
services). All of it runs at once in the bounded pool; the text is
``domain.metrics``'s, the file is written by ``local.textfile``.
"""

import dataclasses
import logging
import time

from osc_lib import exceptions

from osc_mdev.api import pool
from osc_mdev.domain import metrics as domain
from osc_mdev.domain import providers
from osc_mdev.local import textfile
from osc_mdev.usecases import capacity
from osc_mdev.usecases import provider
from osc_mdev.usecases import quota

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Scrape:
    """One run: its exposition text, and why its reads failed (or None).
    """

    text: str
    error: str | None = None


def scrape(placement: object, compute: object | None = None,
           flavors: tuple | list = (),
           kinds: tuple[str, ...] = (providers.MDEV,),
           identity: object | None = None) -> Scrape:
    """Read the cloud and render its metrics; a failed read gives the
    text of a failed run (``openstack_mdev_scrape_success 0``) and its
    error, never an exception. With ``identity`` (Keystone's client),
    also each project's GPU usage and limit (``quota.metric_families``).
    """
    flavors = list(dict.fromkeys(flavors))
    stamp = time.time()
    start = time.monotonic()
    calls = [lambda: provider.list_devices(
        placement, providers.DeviceFilter(kinds=tuple(kinds)),
        read_traits=True, read_inventory=False)]
    calls += [lambda f=f: capacity.count(placement, compute, flavor=f,
                                         auto_explain=False).total
              for f in flavors]
    if identity is not None:
        calls.append(lambda: quota.metric_families(placement, identity,
                                                   compute))
    try:
        results = pool.call_all(calls, placement.max_workers)
    except Exception as exc:  # noqa: B902 - any failure is a failed run
        LOG.debug('Reading the cloud failed', exc_info=True)
        return Scrape(domain.render(domain.failed(
            time.monotonic() - start, stamp)), str(exc) or repr(exc))
    fits = dict(zip(flavors, results[1:])) if flavors else None
    extra = results[1 + len(flavors)] if identity is not None else []
    return Scrape(domain.render(domain.families(
        results[0], fits, time.monotonic() - start, stamp) + extra))


def check_output(path):
    """Refuse an output file that cannot be written, before any read."""
    try:
        textfile.check_writable(path)
    except OSError as exc:
        raise exceptions.CommandError(
            'Cannot write %s (%s); give a file in an existing directory '
            'this user may write to.' % (path, exc.strerror or exc)) from exc


def write(path, text):
    """Replace ``path`` by ``text`` atomically; on failure the old file
    stays and a CommandError says why.
    """
    try:
        textfile.write_atomically(path, text)
    except OSError as exc:
        raise exceptions.CommandError(
            'Writing %s failed (%s); the previous file was left as it '
            'was.' % (path, exc.strerror or exc)) from exc
