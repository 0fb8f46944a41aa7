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

"""What the end-to-end tests share: the CLI, and the services read
directly (not through osc-mdev) to check what the commands did.

Every e2e module has a module-scoped ``cloud`` (an EmbeddedCloud);
tests/e2e/conftest.py points the in-process CLI at it.
"""

import re

import requests

from tests.fixtures import cli


def mdev(*args):
    """``openstack mdev ARGS`` in this process."""
    return cli.openstack('mdev', *args)


def mdev_json(*args):
    return mdev(*args, '-f', 'json').json()


def mdev_table(*args):
    """The rows of the table format (cells as text), summary rows
    included.
    """
    return mdev(*args, '-f', 'table').table()


def placement_request(cloud, method, path, **kwargs):
    """One admin request to the cloud's Placement; its JSON body."""
    rsp = requests.request(
        method, cloud.placement_url + path, timeout=30,
        headers={'X-Auth-Token': 'admin',
                 'OpenStack-API-Version': 'placement 1.39'}, **kwargs)
    assert rsp.status_code < 400, (method, path, rsp.text)
    return rsp.json() if rsp.content else None


def nova_request(cloud, method, path, version='latest', **kwargs):
    """One admin request to the cloud's Nova API; its JSON body."""
    rsp = requests.request(
        method, cloud.compute_url + path, timeout=30,
        headers={'X-Auth-Token': 'admin',
                 'OpenStack-API-Version': 'compute %s' % version}, **kwargs)
    assert rsp.status_code < 400, (method, path, rsp.text)
    return rsp.json() if rsp.content else None


def rewrite_allocations(cloud, consumer, change):
    """PUT the consumer's allocations through ``change(allocations)``."""
    body = placement_request(cloud, 'GET', '/allocations/%s' % consumer)
    allocations = {rp: {'resources': a['resources']}
                   for rp, a in body['allocations'].items()}
    placement_request(cloud, 'PUT', '/allocations/%s' % consumer, json={
        'allocations': change(allocations),
        'consumer_generation': body['consumer_generation'],
        'project_id': body['project_id'], 'user_id': body['user_id'],
        # Nova writes at a microversion older than 1.38: type 'unknown'.
        'consumer_type': ('INSTANCE' if body['consumer_type'] == 'unknown'
                          else body['consumer_type'])})


def flavor_specs(cloud, flavor_id):
    """A flavor's extra specs, from the Nova API."""
    rsp = requests.get(
        '%s/flavors/%s/os-extra_specs' % (cloud.compute_url, flavor_id),
        headers={'X-Auth-Token': 'admin'}, timeout=30)
    rsp.raise_for_status()
    return rsp.json()['extra_specs']


def fits(flavor, *args):
    """How many more servers of ``flavor`` fit, from ``openstack mdev
    capacity --flavor`` (``args``: more options of the command).
    """
    rows = mdev_table('capacity', '--flavor', flavor, *args)
    assert rows[-1]['Host'] == 'Total', rows
    return int(rows[-1]['Fits'])


def apply_diff(diff_text, old_text):
    """The new text a unified diff of ``old_text`` gives (as ``type
    change`` writes it: two header lines, context lines kept).
    """
    old = old_text.splitlines()
    out, at = [], 0
    for line in diff_text.splitlines()[2:]:
        hunk = re.match(r'^@@ -(\d+)', line)
        if hunk:
            start = int(hunk.group(1)) - 1
            out += old[at:start]
            at = start
        elif line.startswith('-'):
            at += 1
        elif line.startswith('+'):
            out.append(line[1:])
        else:
            out.append(old[at])
            at += 1
    return '\n'.join(out + old[at:]) + '\n'


def servers_nova_places(cloud, flavor, name, most):
    """How many servers of ``flavor`` Nova places, booted one at a time
    (``NAME-0``, ``NAME-1``, ...) until one is not ACTIVE or ``most`` are
    booted.
    """
    booted = 0
    for i in range(most):
        server, = cloud.control('boot', flavor=flavor,
                                name='%s-%d' % (name, i))
        if server['status'] != 'ACTIVE':
            break
        booted += 1
    return booted
