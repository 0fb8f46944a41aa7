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

"""Picking the one resource an operator's name stands for."""

from collections.abc import Sequence
import typing

from osc_mdev.api import compute as compute_client
from osc_mdev.base import errors
from osc_mdev.nova import names

#: A resource of the Compute API (a server, a flavor) as it answers it.
Resource = dict[str, typing.Any]


def one_named(matches: Sequence[Resource], reference: str, noun: str,
              not_found: str) -> Resource:
    """The single resource in ``matches`` (API dicts with an ``id``).

    No match raises errors.NotFound with the sentence ``not_found``;
    several raise errors.Ambiguous, which lists their IDs, so the
    operator can pick one.
    """
    if not matches:
        raise errors.NotFound(not_found, kind=noun, name=reference)
    if len(matches) > 1:
        ids = sorted(m['id'] for m in matches)
        raise errors.Ambiguous(
            "%d %ss are named '%s' (%s); give the ID of one."
            % (len(matches), noun, reference, ', '.join(ids)),
            kind=noun, name=reference, matches=ids)
    return matches[0]


def find_flavor(compute: compute_client.ComputeClient,
                reference: str) -> Resource:
    if not reference.strip():
        raise errors.NotFound(
            "No flavor named or with ID '%s'; see 'openstack flavor list "
            "--all'." % reference, kind='flavor', name=reference)
    flavor = compute.get_flavor(reference)
    if flavor is not None:
        return flavor
    match = one_named(
        compute.flavors_named(reference), reference, 'flavor',
        "No flavor named or with ID '%s'; see 'openstack flavor list "
        "--all'." % reference)
    # Flavor listings carry extra_specs too (the same microversion).
    return match


def find_server_id(compute: compute_client.ComputeClient,
                   reference: str) -> tuple[str, Resource | None]:
    """The server ID ``reference`` (a name or an ID) names, and the
    server if it was read on the way (a name is looked up in every
    project).
    """
    if names.is_uuid(reference):
        return names.canonical_uuid(reference), None
    server = one_named(
        compute.servers_named(reference), reference, 'server',
        "No server named '%s' in any project; give its name or ID as "
        "'openstack server list --all-projects' shows it." % reference)
    return server['id'], server
