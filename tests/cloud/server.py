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

"""An embedded OpenStack test cloud whose compute hosts have vGPUs.

Run as::

    python -m tests.cloud.server --workdir DIR [--topology FILE.json]
                                 [--keystone-url URL] [--exit-with-parent]

One process runs Nova's own functional test harness (the libvirt vGPU
test case shipped in the ``nova`` package): the Nova API (the real WSGI
application), conductor, scheduler and one nova-compute service per host
on a fake libvirt whose PCI devices are mdev-capable GPUs, against a real
in-process Placement. Every compute host gets its own ``[devices]`` and
``[mdev_<type>]`` configuration before its service starts, so Nova itself
writes the providers, inventories and allocations into Placement.
A host may also have SR-IOV GPUs whose virtual functions Nova reports
through PCI in Placement (``[pci] report_in_placement``), asked for by
flavors with ``pci_passthrough:alias``.

The Nova API, Placement and a small control API are served over HTTP on
ephemeral ports of 127.0.0.1. ``DIR/clouds.yaml`` gets a cloud named
``mdev-sandbox`` for the ``openstack`` CLI: ``auth_type: admin_token``
with token ``admin`` (Placement's noauth2 admin; the Nova API takes any
request without ``X-Auth-User`` headers as the admin of the harness's
project), ``placement_endpoint_override``, ``compute_endpoint_override``
(``<compute_url>``, ending in ``/v2.1``), ``compute_api_version`` (the
newest microversion of the installed Nova) and an identity endpoint on the
control port that only answers Keystone v3 version discovery: there is no
Keystone, but ``openstack server list`` builds an identity v3 client and
fails without one. When everything answers, exactly one line goes to
stdout::

    READY {"compute_url": ..., "placement_url": ..., "control_url": ...,
           "clouds_yaml": ..., "cloud": "mdev-sandbox", "hosts": {...}}

Logs go to ``DIR/cloud.log`` (``OS_DEBUG=1`` for debug logs). SIGTERM,
SIGINT or the ``stop`` operation shut the cloud down; the process then
exits 0 (1 when the cloud could not start).

Unlike the plain fake libvirt, a GPU's ``availableInstances`` drops as
mdevs are created on it, as on real hardware, so Nova's inventory total
stays at the GPU's capacity and a GPU can be filled up. Deleting a server
does not remove its mdev (Nova keeps and reuses it).

Topology
========

A JSON file ``{"hosts": [HOST, ...], "pci_alias": [ALIAS, ...]}``; each
HOST is::

    {"name": "compute1",
     "gpus": 2,
     "bus": "0x81",
     "enabled_mdev_types": ["nvidia-11", "nvidia-12"],
     "mdev": {"nvidia-11": {"device_addresses": ["0000:81:00.0"],
                            "mdev_class": "VGPU",
                            "max_instances": 4}}}

``name``
    The compute host name: the service host (``[DEFAULT] host``,
    ``OS-EXT-SRV-ATTR:host`` of its servers) and, unless
    ``hypervisor_hostname`` says otherwise, also its node name. ``_`` and
    ``.`` are allowed.
``hypervisor_hostname``
    The compute node's name, as libvirt reports the hostname
    (``OS-EXT-SRV-ATTR:hypervisor_hostname``); the root resource provider
    is named after it. Defaults to ``name``; an FQDN such as
    ``gpu4.dc2.example.net`` makes a host whose node is not its service
    host, as on many production clouds.
``gpus``
    Either a number of GPUs of kind ``nvidia`` or a list of kinds, one per
    GPU. Kinds are the fake libvirt's devices: ``nvidia`` offers
    ``nvidia-11`` (16 instances) and ``nvidia-12`` (8); ``generic`` offers
    ``mlx5_core`` (16) and ``nvidia-12`` (8). GPU ``i`` sits at PCI address
    ``0000:<bus>:<i>.0`` (libvirt name ``pci_0000_<bus>_<i>_0``).
``bus``
    PCI bus of the GPUs, ``"0x81"`` by default.
``enabled_mdev_types``
    ``[devices] enabled_mdev_types`` of this host.
``mdev``
    Per type, the options of its ``[mdev_<type>]`` group:
    ``device_addresses``, ``mdev_class``, ``max_instances``.
``pci``
    SR-IOV devices and this host's ``[pci] device_spec``::

        {"pfs": [{"pfs": 2, "vfs_per_pf": 4, "vendor_id": "10de",
                  "product_id": "26b9", "pf_product_id": "26b8"}],
         "device_spec": [{"vendor_id": "10de", "product_id": "26b9",
                          "resource_class": "CUSTOM_NVIDIA_L40S_VF",
                          "traits": "CUSTOM_GPU_L40S"}]}

    Each ``pfs`` entry adds ``pfs`` physical functions (product
    ``pf_product_id``) with ``vfs_per_pf`` (1 to 6) virtual functions each
    (product ``product_id``; ``vendor_id`` defaults to ``10de``). PFs take
    the next slots of ``bus`` after the mdev GPUs, one slot each; a PF is
    function 0 of its slot, its VFs functions 1 to ``vfs_per_pf``.
    ``device_spec`` entries match by ``vendor_id`` and ``product_id`` (and,
    given, the one VF at ``address``), may carry ``resource_class`` and
    ``traits`` (comma-separated) and ``managed``;
    they must match VFs, not PFs. The fake mdev GPUs (``10de:0ffe``) are
    PCI devices too: the cloud plans no PCI provider for them, so no spec
    may match them. Every host is started with ``[pci]
    report_in_placement = True`` and only its own ``device_spec``.

``nova_conf`` (top level, optional) gives more Nova options to every
service of the cloud, as ``{group: {option: value}}``: for example
``{"api": {"max_limit": 2}}`` makes the Nova API answer at most two
items per page of a listing, as a cloud with a small ``[api]
max_limit`` does. The control API's own reads of Nova follow every
page.

``pci_alias`` (top level) is the controller's ``[pci] alias`` list, each
ALIAS as Nova takes it (``name``, ``vendor_id``, ``product_id``,
``device_type``, ``resource_class``, ``traits``...); the scheduler runs
with ``[filter_scheduler] pci_in_placement = True`` and the
``PciPassthroughFilter``. Two top-level keys turn Nova's switches of PCI
in Placement off: ``"pci_in_placement": false`` (the scheduler asks
Placement for no PCI device, only the PCI filter picks them; nova-compute
still reports them and heals their allocations into Placement) and, with
it, ``"report_in_placement": false`` (classic PCI passthrough: Placement
knows nothing of the PCI devices; the ``providers`` of the READY line are
then those Nova would report with it on).

Without ``--topology`` the built-in ``demo`` topology (``DEMO_TOPOLOGY``)
is used, a mixed cloud: four mdev hosts with two GPUs each, the vGPU
types ``nvidia-11`` and ``nvidia-12`` (class ``VGPU``) and the generic
type ``mlx5_core`` with class ``CUSTOM_MLX5``; three hosts carry two types,
and host ``gpu4`` is the node ``gpu4.dc2.example.net``. A fifth host,
``sriov1``, has no mdev GPU but SR-IOV GPUs reported through PCI in
Placement: two PFs of four ``10de:26b9`` VFs each, class
``CUSTOM_NVIDIA_L40S_VF`` (set in ``device_spec``, alias ``l40s-vf``),
and one PF of two ``10de:2330`` VFs, class ``CUSTOM_PCI_10DE_2330``
(Nova's default, alias ``h100-vf``); providers
``sriov1_0000:C1:00.0``, ``sriov1_0000:C1:01.0`` and
``sriov1_0000:C1:02.0``. With a Keystone it has unified limits: registered
``servers`` 20, ``class:VGPU`` 2 and ``class:CUSTOM_NVIDIA_L40S_VF`` 0,
and project limits for ``demo`` (the harness's project), ``ml-team`` and
``render-farm`` (tests.cloud.client.DEMO_PROJECTS).

The ``hosts`` value of the READY line describes, per host (keyed by its
service host), its ``service_host``, its ``hypervisor_hostname`` (the node
name, which names the root provider), its ``enabled_mdev_types`` and its
``gpus``: ``parent_device`` (libvirt
name), ``pci_address``, ``kind``, ``offers`` (type to instance count),
``mdev_type`` (the type Nova is configured to use on it, or null when none
applies or the GPU does not offer it), ``resource_class`` and ``total``
(the class and total of the inventory Nova is expected to report for it;
null and 0 when none) and ``provider_name``
(``<hypervisor_hostname>_<parent_device>``), and its ``pci``:
``device_spec`` (as configured), ``devices`` (every PF and VF:
``pci_address``, ``dev_type`` ``type-PF`` or ``type-VF``, ``parent_addr``
(a VF's PF), ``vendor_id``, ``product_id``, ``libvirt_name``, and for a
VF a device spec matches, the ``provider_name`` and ``resource_class`` it
is reported with) and ``providers`` (one per PF with matched VFs:
``provider_name`` ``<hypervisor_hostname>_<PF ADDRESS IN UPPER CASE>``,
the PF's ``pci_address``, ``resource_class``, ``total`` (its matched
VFs), ``traits`` (the spec's plus ``COMPUTE_MANAGED_PCI_DEVICE`` and
``OWNER_NOVA``, sorted) and ``vfs``).
The mdev entries follow Nova's rules from the configuration alone: a
GPU listed in a type's ``device_addresses`` takes that type and its
``mdev_class``; other
GPUs take the first enabled type without ``device_addresses`` and are
always ``VGPU``, whatever that type's ``mdev_class`` says; with
``max_instances``, GPUs are counted in address order and those that would
exceed the limit get no inventory.

Control API
===========

``POST /control`` with a JSON object ``{"op": OP, ...arguments}``; the
answer is JSON. Errors are ``{"error": "..."}`` with status 400 (unknown
op, bad arguments, unknown flavor/server/host, or a 4xx answer of the Nova
API, whose body is quoted and whose status is ``nova_status``, such as 403
for a quota exceeded) or 500 (anything else, such as a timeout).
Operations run one at a time.

``create_flavor`` {name, vcpus=1, ram=512, disk=1, ephemeral=0,
extra_specs={}}
    -> ``{"id", "name"}``; for a PCI alias, ``extra_specs``
    ``{"pci_passthrough:alias": "l40s-vf:1"}``.
``boot`` {flavor (name or id), name?, host?, count=1, timeout=120,
project?}
    Boots ``count`` servers (one request with min/max count; names get
    ``-1``, ``-2``... suffixes) from the harness's image, without network,
    in the harness's project or, with ``project`` (an ID), as a member of
    that project.
    ``host`` is the requested host of microversion 2.74: the scheduler
    still checks it, so Placement allocations are made as usual. Waits
    until each server leaves BUILD -> ``[{"id", "name", "host", "status",
    "fault"}]``; ``fault`` is the fault message of a server in ERROR (for
    example "No valid host was found."), else null.
``delete`` {server, timeout=120}
    Deletes the server and waits until it is gone -> ``{"deleted": id}``.
``mdev_truth`` {}
    The fake libvirt's view, independent of Placement: one entry per mdev
    that a guest uses, ``{"server", "host", "node", "parent_device",
    "pci_address", "mdev_type", "mdev_uuid"}``: ``host`` is the service
    host of the compute whose hypervisor runs the guest, ``node`` that
    hypervisor's hostname.
``pci_truth`` {}
    One entry per PCI device that a guest uses, from the fake hypervisor's
    domains, with the compute's record of that device in Nova's database
    (its PCI tracker): ``{"server", "host", "node", "pci_address",
    "dev_type", "parent_addr", "vendor_id", "product_id", "status",
    "instance_uuid"}`` (the record's fields are null if it has none).
    Nova asks Placement for each VF of ``alias:N`` separately, so the VFs
    of one server may sit on different PFs.
``periodic`` {}
    Runs every compute's ``update_available_resource`` -> ``{"hosts"}``.
``resize`` {server, flavor, timeout=120, confirm=true} / ``migrate``
{server, host?, timeout=120, confirm=true}
    Resizes (cold-migrates), confirms, and answers ``{"id", "status",
    "source_host", "host"}``. With ``confirm`` false the server is left
    in VERIFY_RESIZE: its migration still holds the source host's
    allocation.
``hosts`` {}
    The ``hosts`` value of the READY line.
``reconfigure`` {host, enabled_mdev_types, mdev={}, device_spec?}
    Gives one host a new ``[devices] enabled_mdev_types`` and ``[mdev_*]``
    options (as in the topology) and, with ``device_spec``, a new ``[pci]
    device_spec`` list, and restarts its nova-compute, then runs the
    periodic update -> the host's new entry of ``hosts``. A host's ``pci``
    devices stay as they are.
``compute_requests`` {}
    Every request the served Nova API answered so far, oldest first:
    ``{"count", "requests": ["GET /v2.1/servers/detail?...", ...]}``
    (the control API's own calls to Nova are not counted).
``live_migrate`` {server, host?, timeout=120}
    Live-migrates a server (``os-migrateLive``, ``block_migration``
    auto; ``host`` is a service host, checked by the scheduler) and waits
    for the migration to end -> ``{"id", "accepted", "migration_status",
    "status", "source_host", "host", "error", "skipped"}``: ``accepted``
    is false when the Nova API refused the request (``error`` quotes its
    answer); ``migration_status`` is Nova's last migration record status
    (``completed``, ``error``, ``failed``); ``skipped`` the conductor's
    reasons for refusing targets (its "Skipping host" debug messages:
    pre-check errors, a hypervisor too old). A refusal is an answer, not
    an error.
``set_service`` {host, disabled?, forced_down?, reason?}
    Disables or enables nova-compute of a service host (``disabled``) and
    marks it forced down or up (``forced_down``), through the Nova API
    -> the service as ``os-services`` shows it.
``hypervisor_versions`` {host, libvirt_version, qemu_version}
    Gives one host's fake hypervisor new libvirt and QEMU versions (a
    package upgrade or downgrade, ``"8.6.0"`` or ``8006000``) and restarts
    its nova-compute keeping its guests, then runs the periodic update
    -> ``{"host", "libvirt_version", "qemu_version",
    "hypervisor_version"}`` (the last as ``os-hypervisors`` shows it).
``post_copy`` {host, permitted}
    Sets one host's ``[libvirt] live_migration_permit_post_copy`` (also a
    topology key of a host) and restarts its nova-compute keeping its
    guests -> ``{"host", "post_copy"}``: whether its driver's live
    migration flags now carry ``VIR_MIGRATE_POSTCOPY``. As QEMU does, the
    fake hypervisor refuses a migration with post-copy enabled of a guest
    with an mdev or PCI device ("VFIO migration is not supported with
    postcopy migration").
``reset_state`` {server, state="active"}
    Resets a server's state (``os-resetState``) -> the server.
``placement_requests`` {}
    Every request the served Placement answered so far, oldest first, as
    ``compute_requests`` lists the Nova API's.
``stop`` {}
    Answers ``{"stopping": true}``, then shuts the cloud down.
``provider_config`` {host, location=null}
    Points one host's ``[compute] provider_config_location`` at directory
    ``location`` (null: one that does not exist, so no file) for this and
    every later start of its nova-compute, restarts it and runs the
    periodic update -> ``{"host", "location", "providers"}``:
    ``providers`` are the names and UUIDs of the provider config entries
    nova-compute loaded. A file Nova refuses fails the operation with
    Nova's message, and the host's nova-compute is left stopped.

Keystone and unified limits
===========================

With ``--keystone-url`` (a ``tests.fixtures.keystone_server`` the caller
started; tests.cloud.client does it) Nova enforces that Keystone's unified
limits (``[quota] driver = nova.quota.UnifiedLimitsDriver``, oslo.limit
reading the limits of the compute service's endpoint over HTTP), a second
Placement port validates Keystone's tokens, Keystone's catalog gets the
compute service and that Placement, and ``clouds.yaml`` a second cloud,
``mdev-sandbox-keystone``, that logs in as Keystone's admin with a
password (see ``tests.cloud.keystone``). The topology may then give::

    "quota": {"strategy": "require", "resource_list": ["servers"]},
    "unified_limits": {"registered": {"servers": 20, "class:VGPU": 2},
                       "projects": {"ml-team": {"class:VGPU": 4}}}

``quota``: Nova's ``[quota] unified_limits_resource_strategy`` and
``unified_limits_resource_list`` (Nova's defaults without it), and
``driver`` (``nova.quota.UnifiedLimitsDriver`` without it);
``unified_limits``: limits created in Keystone for the compute service in
``RegionOne``, project limits by project name. The READY line then also
has ``keystone_url``, ``keystone_cloud`` (the clouds.yaml entry),
``compute_service_id`` and ``projects`` (every Keystone project, name to
ID).

Migrations
==========

A host may give its hypervisor's versions in the topology:
``"libvirt_version": "8.6.0", "qemu_version": "8.1.0"`` (also as
integers, ``8006000``); without them a host has the harness's
(``FAKE_LIBVIRT_VERSION`` 8.0.0 and ``FAKE_QEMU_VERSION`` 6.2.0). Nova
live-migrates servers with mdevs only between hosts with libvirt 8.6.0
and QEMU 8.1.0 or later, and refuses a target whose QEMU
(``hypervisor_version``) is older than the source's.

Live migrations run as on real hosts: the guest is defined on the target
from Nova's migration XML (with the target's mdevs) and made persistent,
as ``VIR_MIGRATE_PERSIST_DEST`` does (Nova's own stub leaves it
transient, so a later power-off would undefine it), and the source's job
completes. The target's mdevs are created as any other (its GPU's
``availableInstances`` drops).
"""

import argparse
import collections
import inspect
import json
import logging
import os
import re
import signal
import sys
import time
from unittest import mock
import urllib.parse
from xml.etree import ElementTree

# Importing Nova's test package applies eventlet monkey patching, so it
# comes before any other third-party import.
from nova.tests.functional.libvirt import test_vgpu

import eventlet
from eventlet import wsgi as eventlet_wsgi
import fixtures
from nova.api import auth
from nova.api.openstack import api_version_request
import nova.conf
from nova import context as nova_context
from nova import objects
from nova.tests import fixtures as nova_fixtures
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.api import client as api_client
from nova.virt.libvirt import utils as libvirt_utils
import os_traits
from oslo_utils.fixture import uuidsentinel as uuids
from placement import deploy as placement_deploy
import yaml

from tests.cloud import keystone as cloud_keystone
from tests.cloud.topologies import DEMO_TOPOLOGY

CONF = nova.conf.CONF
LOG = logging.getLogger('tests.cloud')

CLOUD_NAME = 'mdev-sandbox'
KEYSTONE_CLOUD_NAME = 'mdev-sandbox-keystone'
IMAGE_ID = '155d900f-4e14-4e4c-a73d-069cbf4541e6'

#: What each kind of fake GPU offers: mdev type -> available instances.
GPU_KINDS = {
    'nvidia': {fakelibvirt.NVIDIA_11_VGPU_TYPE: 16,
               fakelibvirt.NVIDIA_12_VGPU_TYPE: 8},
    'generic': {fakelibvirt.MLX5_CORE_TYPE: 16,
                fakelibvirt.NVIDIA_12_VGPU_TYPE: 8},
}
MDEV_OPTIONS = ('device_addresses', 'mdev_class', 'max_instances')
#: Keys of a PCI function group (``pci.pfs`` of a host), with defaults.
PF_GROUP_DEFAULTS = {'vendor_id': '10de', 'pf_product_id': '26b8'}
PF_GROUP_KEYS = ('pfs', 'vfs_per_pf', 'vendor_id', 'product_id',
                 'pf_product_id')
#: ``[pci] device_spec`` keys the cloud can plan for: it matches devices
#: by vendor and product only.
DEVICE_SPEC_KEYS = ('vendor_id', 'product_id', 'resource_class', 'traits',
                    'one_time_use', 'address', 'managed')
#: Keys of a group of whole PCI devices (``pci.whole`` of a host).
WHOLE_GROUP_KEYS = ('count', 'vendor_id', 'product_id')
#: Traits Nova puts on every PCI-in-Placement provider.
PCI_PROVIDER_TRAITS = ('COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA')
ALL_DOMAINS = (fakelibvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE |
               fakelibvirt.VIR_CONNECT_LIST_DOMAINS_INACTIVE)


class BadRequest(Exception):
    """A control request that cannot be served as asked (HTTP 400)."""


def _bus(host):
    bus = host.get('bus', 0x81)
    return int(bus, 0) if isinstance(bus, str) else int(bus)


def plan_hosts(topology):
    """Validate a topology; answer per host what it has and should report.

    This is the READY line's ``hosts`` value, computed from the
    configuration alone (never from Placement).
    """
    hosts = topology.get('hosts')
    if not isinstance(hosts, list) or not hosts:
        raise ValueError('topology needs a non-empty "hosts" list')
    plan = {}
    nodes = set()
    for host in hosts:
        name = host.get('name')
        if not name or not isinstance(name, str):
            raise ValueError('every host needs a "name"')
        if name in plan:
            raise ValueError('duplicate host name %r' % name)
        node = _node(host)
        if not isinstance(node, str) or not node:
            raise ValueError('%s: "hypervisor_hostname" must be a '
                             'non-empty string' % name)
        if node in nodes:
            raise ValueError('duplicate hypervisor hostname %r' % node)
        nodes.add(node)
        plan[name] = _plan_host(host)
    _check_aliases(topology)
    _check_nova_conf(topology)
    return plan


def _node(host):
    """The compute node name (libvirt's hostname) of a topology host."""
    return host.get('hypervisor_hostname', host['name'])


def _plan_host(host):
    name = host['name']
    node = _node(host)
    gpus = host.get('gpus', 2)
    kinds = ['nvidia'] * gpus if isinstance(gpus, int) else list(gpus)
    for kind in kinds:
        if kind not in GPU_KINDS:
            raise ValueError('%s: unknown GPU kind %r (known: %s)' % (
                name, kind, ', '.join(sorted(GPU_KINDS))))
    bus = _bus(host)
    enabled = list(host.get('enabled_mdev_types', []))
    mdev = host.get('mdev', {})
    for mdev_type, options in mdev.items():
        if mdev_type not in enabled:
            raise ValueError('%s: [mdev_%s] given but the type is not '
                             'enabled' % (name, mdev_type))
        unknown = set(options) - set(MDEV_OPTIONS)
        if unknown:
            raise ValueError('%s: unknown [mdev_%s] options: %s' % (
                name, mdev_type, ', '.join(sorted(unknown))))

    # Nova's rules: a listed address takes its type and that type's class;
    # other devices take the first type without addresses, always as VGPU.
    listed = {}
    default_type = None
    for mdev_type in enabled:
        addresses = mdev.get(mdev_type, {}).get('device_addresses')
        if not addresses:
            default_type = default_type or mdev_type
        for address in addresses or ():
            listed[address] = mdev_type
    # max_instances: devices are taken in order while the type's running
    # total stays within the limit; the others get no inventory.
    counted = collections.Counter()
    gpu_plan = []
    for slot, kind in enumerate(kinds):
        parent = fakelibvirt._get_libvirt_nodedev_name(bus, slot, 0)
        address = '0000:%02x:%02x.0' % (bus, slot)
        mdev_type = listed.get(address, default_type)
        options = mdev.get(mdev_type, {})
        resource_class = (options.get('mdev_class', 'VGPU')
                          if address in listed else 'VGPU')
        total = GPU_KINDS[kind].get(mdev_type, 0)
        if not total:
            mdev_type = None
        limit = options.get('max_instances')
        if limit and counted[mdev_type] + total > limit:
            total = 0
        counted[mdev_type] += total
        gpu_plan.append({
            'parent_device': parent,
            'pci_address': address,
            'kind': kind,
            'offers': dict(GPU_KINDS[kind]),
            'mdev_type': mdev_type,
            'resource_class': resource_class if total else None,
            'total': total,
            'provider_name': '%s_%s' % (node, parent),
        })
    return {'service_host': name, 'hypervisor_hostname': node,
            'enabled_mdev_types': enabled, 'gpus': gpu_plan,
            'pci': _plan_pci(host, len(kinds))}


_HEX4 = re.compile(r'^[0-9a-f]{4}$')
_CUSTOM = re.compile(r'^CUSTOM_[A-Z0-9_]+$')


def _hex4(host, where, value):
    value = str(value).lower()
    if not _HEX4.match(value):
        raise ValueError('%s: %s must be 4 hex digits, not %r' % (
            host, where, value))
    return value


def _check_traits(host, traits):
    names = [t for t in (traits or '').split(',') if t]
    for trait in names:
        if not (_CUSTOM.match(trait) or os_traits.is_custom(trait) or
                trait in os_traits.get_traits()):
            raise ValueError('%s: trait %r is neither a standard trait nor '
                             'CUSTOM_[A-Z0-9_]+' % (host, trait))
    return names


def _plan_pci(host, first_slot):
    """The SR-IOV functions of a host and the PCI-in-Placement providers
    Nova is expected to report for them.

    PF ``i`` of the host sits at ``0000:<bus>:<slot>.0`` (slots follow the
    mdev GPUs'), its VFs at functions 1 to ``vfs_per_pf`` of the same
    slot. A device takes the first ``device_spec`` entry whose vendor and
    product match; matched VFs are reported on one provider per PF,
    ``<node>_<PF ADDRESS>`` (upper case, nova's
    ``nova.pci.placement_translator``), with the entry's ``resource_class`` or
    ``CUSTOM_PCI_<VENDOR>_<PRODUCT>``, its traits plus
    ``COMPUTE_MANAGED_PCI_DEVICE`` and ``OWNER_NOVA``, and a total of the
    matched VFs.
    """
    name = host['name']
    node = _node(host)
    pci = host.get('pci')
    if pci is None:
        return {'device_spec': [], 'devices': [], 'providers': []}
    if not isinstance(pci, dict):
        raise ValueError('%s: "pci" must be an object' % name)
    unknown = set(pci) - {'pfs', 'device_spec', 'whole'}
    if unknown:
        raise ValueError('%s: unknown "pci" keys: %s' % (
            name, ', '.join(sorted(unknown))))
    specs = []
    for spec in pci.get('device_spec', []):
        unknown = set(spec) - set(DEVICE_SPEC_KEYS)
        if unknown:
            raise ValueError('%s: device_spec keys the cloud cannot plan '
                             'for: %s' % (name, ', '.join(sorted(unknown))))
        if 'vendor_id' not in spec or 'product_id' not in spec:
            raise ValueError('%s: every device_spec entry needs vendor_id '
                             'and product_id' % name)
        resource_class = spec.get('resource_class')
        if resource_class is not None and not _CUSTOM.match(resource_class):
            raise ValueError('%s: resource_class %r is not '
                             'CUSTOM_[A-Z0-9_]+' % (name, resource_class))
        _check_traits(name, spec.get('traits'))
        specs.append(dict(spec))

    def matching(vendor, product, address=None):
        for spec in specs:
            if (_hex4(name, 'vendor_id', spec['vendor_id']),
                    _hex4(name, 'product_id', spec['product_id'])) == (
                    vendor, product) and spec.get('address') in (
                    None, address):
                return spec
        return None

    gpu_ids = (fakelibvirt.MDEV_CAPABLE_VEND_ID.lower(),
               fakelibvirt.MDEV_CAPABLE_PROD_ID.lower())
    if matching(*gpu_ids):
        raise ValueError('%s: device_spec matches the mdev GPUs (%s:%s)' % (
            (name,) + gpu_ids))

    bus = _bus(host)
    slot = first_slot
    devices = []
    providers = []
    for group in pci.get('pfs', []):
        unknown = set(group) - set(PF_GROUP_KEYS)
        if unknown:
            raise ValueError('%s: unknown "pfs" keys: %s' % (
                name, ', '.join(sorted(unknown))))
        group = dict(PF_GROUP_DEFAULTS, **group)
        count = int(group.get('pfs', 1))
        vfs = int(group.get('vfs_per_pf', 0))
        # The fake libvirt names a VF's PF wrongly from 7 VFs per PF up.
        if count < 1 or not 1 <= vfs <= 6:
            raise ValueError('%s: "pfs" must be at least 1 and '
                             '"vfs_per_pf" 1 to 6' % name)
        if 'product_id' not in group:
            raise ValueError('%s: every "pfs" entry needs the product_id '
                             'of its VFs' % name)
        vendor = _hex4(name, 'vendor_id', group['vendor_id'])
        product = _hex4(name, 'product_id', group['product_id'])
        pf_product = _hex4(name, 'pf_product_id', group['pf_product_id'])
        if pf_product == product:
            raise ValueError('%s: a PF and its VFs need different product '
                             'ids' % name)
        if matching(vendor, pf_product):
            raise ValueError('%s: device_spec matches PFs (%s:%s); the '
                             'cloud only plans for VFs' % (
                                 name, vendor, pf_product))
        for _ in range(count):
            if slot > 0x1f:
                raise ValueError('%s: more devices than slots on bus '
                                 '%#x' % (name, bus))
            pf_address = '0000:%02x:%02x.0' % (bus, slot)
            devices.append({
                'pci_address': pf_address, 'dev_type': 'type-PF',
                'parent_addr': None, 'vendor_id': vendor,
                'product_id': pf_product,
                'libvirt_name': fakelibvirt._get_libvirt_nodedev_name(
                    bus, slot, 0),
                'provider_name': None, 'resource_class': None})
            # A spec by address matches one VF; the VFs of a PF take one
            # class (Nova refuses to start otherwise).
            vf_specs = [matching(vendor, product, '0000:%02x:%02x.%d' % (
                bus, slot, function)) for function in range(1, vfs + 1)]
            spec = next((s for s in vf_specs if s), None)
            resource_class = traits = provider_name = None
            if spec:
                resource_class = spec.get(
                    'resource_class',
                    'CUSTOM_PCI_%s_%s' % (vendor, product)).upper()
                traits = sorted(set(_check_traits(name, spec.get('traits')))
                                | set(PCI_PROVIDER_TRAITS))
                provider_name = '%s_%s' % (node, pf_address.upper())
            vf_addresses = []
            for function, vf_spec in enumerate(vf_specs, 1):
                address = '0000:%02x:%02x.%d' % (bus, slot, function)
                if vf_spec:
                    vf_addresses.append(address)
                devices.append({
                    'pci_address': address, 'dev_type': 'type-VF',
                    'parent_addr': pf_address, 'vendor_id': vendor,
                    'product_id': product,
                    'libvirt_name': fakelibvirt._get_libvirt_nodedev_name(
                        bus, slot, function),
                    'provider_name': provider_name if vf_spec else None,
                    'resource_class': resource_class if vf_spec else None})
            if spec:
                providers.append({
                    'provider_name': provider_name,
                    'pci_address': pf_address,
                    'resource_class': resource_class,
                    'total': len(vf_addresses),
                    'traits': traits,
                    'vfs': vf_addresses})
            slot += 1
    slot = _plan_whole(host, pci, matching, slot, devices, providers)
    return {'device_spec': specs, 'devices': devices,
            'providers': providers}


def _plan_whole(host, pci, matching, slot, devices, providers):
    """Whole PCI devices (``type-PCI``, ``pci.whole``: groups of
    ``count`` devices of ``vendor_id:product_id``), one slot each after
    the PFs; a matched one has its own provider of total 1, with
    HW_PCI_ONE_TIME_USE when its spec sets ``one_time_use``
    (``nova.compute.pci_placement_translator``). Answers the next slot.
    """
    name = host['name']
    bus = _bus(host)
    for group in pci.get('whole', []):
        unknown = set(group) - set(WHOLE_GROUP_KEYS)
        if unknown:
            raise ValueError('%s: unknown "whole" keys: %s' % (
                name, ', '.join(sorted(unknown))))
        vendor = _hex4(name, 'vendor_id', group.get('vendor_id', '10de'))
        product = _hex4(name, 'product_id', group['product_id'])
        spec = matching(vendor, product)
        for _ in range(int(group.get('count', 1))):
            address = '0000:%02x:%02x.0' % (bus, slot)
            provider_name = resource_class = None
            if spec:
                resource_class = spec.get(
                    'resource_class',
                    'CUSTOM_PCI_%s_%s' % (vendor, product)).upper()
                provider_name = '%s_%s' % (_node(host), address.upper())
                traits = set(_check_traits(name, spec.get('traits')))
                traits |= set(PCI_PROVIDER_TRAITS)
                if spec.get('one_time_use') == 'true':
                    traits.add('HW_PCI_ONE_TIME_USE')
                providers.append({
                    'provider_name': provider_name,
                    'pci_address': address,
                    'resource_class': resource_class, 'total': 1,
                    'traits': sorted(traits), 'vfs': []})
            devices.append({
                'pci_address': address, 'dev_type': 'type-PCI',
                'parent_addr': None, 'vendor_id': vendor,
                'product_id': product,
                'libvirt_name': fakelibvirt._get_libvirt_nodedev_name(
                    bus, slot, 0),
                'provider_name': provider_name,
                'resource_class': resource_class})
            slot += 1
    return slot


def _check_aliases(topology):
    """The topology's ``pci_alias`` entries (``[pci] alias``)."""
    aliases = topology.get('pci_alias', [])
    if not isinstance(aliases, list):
        raise ValueError('"pci_alias" must be a list')
    names = set()
    for alias in aliases:
        if not isinstance(alias, dict) or not alias.get('name'):
            raise ValueError('every pci_alias entry needs a "name"')
        if alias['name'] in names:
            raise ValueError('duplicate pci_alias %r' % alias['name'])
        names.add(alias['name'])
    return aliases


def _check_nova_conf(topology: dict) -> dict:
    """The topology's ``nova_conf``: ``{group: {option: value}}``."""
    options = topology.get('nova_conf', {})
    if not isinstance(options, dict) or not all(
            isinstance(group, str) and isinstance(values, dict)
            for group, values in options.items()):
        raise ValueError('"nova_conf" must map groups to {option: value}')
    return options


def _next_marker(body: dict, key: str) -> str | None:
    """The marker of the ``next`` link of a Nova listing, or None."""
    for link in body.get(key + '_links', ()):
        if link.get('rel') == 'next':
            query = urllib.parse.urlsplit(link['href']).query
            return urllib.parse.parse_qs(query)['marker'][0]
    return None


class CloudHarness(test_vgpu.VGPUTestBase):
    """Nova's vGPU functional test case, kept running as a cloud.

    ``setUp`` builds the whole cloud; ``doCleanups`` tears it down. The
    ``op_*`` methods are the control API's operations.
    """

    ADMIN_API = True
    microversion = 'latest'
    ADDITIONAL_FILTERS = ['PciPassthroughFilter']

    def __init__(self, topology: dict, keystone_url: str | None = None
                 ) -> None:
        super().__init__('runTest')
        self.topology = topology
        self.keystone_url = keystone_url
        self.host_plan = plan_hosts(topology)
        self._mdev_groups = set()
        # Compute node name -> service host, for hosts where they differ.
        self._service_of_node = {}
        # Requests the served Nova API answered ("METHOD /path?query").
        self.compute_requests = []
        # Requests the served Placement answered, the same way.
        self.placement_requests = []

    def runTest(self):
        """Unused: the cloud is driven by ``setUp`` and the control API."""

    def _setup_services(self):
        # The harness looks for api-paste.ini relative to site-packages;
        # the nova wheel installs it elsewhere.
        self.flags(api_paste_config=find_api_paste(), group='wsgi')
        # A test cloud has no quota: tests may boot many servers.
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        if self.keystone_url:
            # Unless it has a Keystone: then Nova enforces its limits.
            cloud_keystone.use_unified_limits(
                self, self.keystone_url, self.topology.get('quota'))
        # PCI in Placement: every compute reports its [pci] device_spec
        # devices to Placement, and the scheduler asks Placement for them.
        # The aliases are the controller's, shared by the whole cloud.
        self.flags(report_in_placement=self.topology.get(
                       'report_in_placement', True),
                   alias=[json.dumps(alias) for alias in
                          self.topology.get('pci_alias', [])],
                   group='pci')
        self.flags(pci_in_placement=self.topology.get('pci_in_placement',
                                                      True),
                   group='filter_scheduler')
        for group, options in _check_nova_conf(self.topology).items():
            self.flags(group=group, **options)
        super()._setup_services()

    def setUp(self):
        """Start Placement, the control plane and every compute host."""
        super().setUp()
        header_context = auth.NovaKeystoneContext._create_context

        def create_context(env, **kwargs):
            if 'HTTP_X_AUTH_USER' in env:
                return header_context(env, **kwargs)
            return nova_context.RequestContext(
                'admin', nova_fixtures.PROJECT_ID, is_admin=True,
                roles=['reader', 'member', 'admin'], **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.api.auth.NovaKeystoneContext._create_context',
            create_context))

        def is_physical_function(domain, bus, slot, function):
            # What a device_spec by address asks sysfs, from the plan.
            address = '%04x:%02x:%02x.%x' % tuple(
                int(str(part), 16) for part in (domain, bus, slot, function))
            return any(d['pci_address'] == address
                       and d['dev_type'] == 'type-PF'
                       for plan in self.host_plan.values()
                       for d in plan['pci']['devices'])

        self.useFixture(fixtures.MonkeyPatch(
            'nova.pci.utils.is_physical_function', is_physical_function))
        self._setup_live_migration()
        for host in self.topology['hosts']:
            self._start_host(host)

    def _configure_host(self, host):
        for group in self._mdev_groups:
            self.reset_flags(*MDEV_OPTIONS, group=group)
        self.flags(enabled_mdev_types=list(host.get('enabled_mdev_types',
                                                    [])),
                   group='devices')
        nova.conf.devices.register_dynamic_opts(CONF)
        for mdev_type, options in host.get('mdev', {}).items():
            group = 'mdev_%s' % mdev_type
            self._mdev_groups.add(group)
            self.flags(group=group, **options)
        # Read by the libvirt driver when it starts (its migration flags),
        # so each host keeps its own.
        self.flags(live_migration_permit_post_copy=bool(
            host.get('live_migration_permit_post_copy', False)),
            group='libvirt')
        # Read once by the compute's PCI tracker when it starts, so each
        # host keeps its own.
        self.flags(device_spec=[
            json.dumps(spec)
            for spec in (host.get('pci') or {}).get('device_spec', [])],
            group='pci')

    def _start_host(self, host):
        name = host['name']
        self._configure_host(host)
        pci_info = fakelibvirt.HostPCIDevicesInfo(
            num_pci=0, num_pfs=0, num_vfs=0, num_mdevcap=0)
        for slot, gpu in enumerate(self.host_plan[name]['gpus']):
            pci_info.add_device(
                dev_type='MDEV_TYPES', bus=_bus(host), slot=slot, function=0,
                iommu_group=40 + slot,
                numa_node=pci_info._calc_numa_node(slot, None),
                multiple_gpu_types=gpu['kind'] == 'nvidia',
                generic_types=gpu['kind'] == 'generic')
        self._add_pci_functions(pci_info, host)
        started = time.monotonic()
        node = _node(host)
        if node == name:
            self.start_compute(
                hostname=name, pci_info=pci_info,
                libvirt_version=self.FAKE_LIBVIRT_VERSION,
                qemu_version=self.FAKE_QEMU_VERSION)
        else:
            self._start_compute_node(name, node, pci_info)
        LOG.info('Compute %s (node %s) started in %.1f s', name, node,
                 time.monotonic() - started)

    def _add_pci_functions(self, pci_info, host):
        """Give the fake host the SR-IOV PFs and VFs of its plan."""
        plan = self.host_plan[host['name']]['pci']['devices']
        vf_counts = collections.Counter(
            d['parent_addr'] for d in plan if d['dev_type'] == 'type-VF')
        for index, device in enumerate(plan):
            bus, slot, function = _split_address(device['pci_address'])
            pf_address = device['parent_addr'] or device['pci_address']
            extra = {}
            if device['dev_type'] == 'type-VF':
                extra['parent'] = _split_address(pf_address)
            pci_info.add_device(
                dev_type=device['dev_type'][len('type-'):],
                bus=bus, slot=slot, function=function,
                iommu_group=100 + index,
                numa_node=pci_info._calc_numa_node(slot, None),
                vf_ratio=vf_counts[pf_address],
                vend_id=device['vendor_id'], vend_name='NVIDIA Corporation',
                prod_id=device['product_id'],
                prod_name='GPU %s %s' % (device['product_id'],
                                         device['dev_type'][len('type-'):]),
                **extra)

    def _start_compute_node(self, host, node, pci_info=None,
                            connection=None):
        """Start nova-compute as service host ``host`` on a hypervisor
        whose hostname (the compute node) is ``node``.

        The harness's ``start_compute`` uses one name for both; this does
        what it does (nova/tests/functional/libvirt/base.py) with a fake
        libvirt connection of its own hostname (``connection``: the one of
        the service it restarts, with its devices and guests).
        """
        self.assertNotIn(host, self.computes)
        if connection is None:
            connection = self._get_connection(
                pci_info=pci_info, libvirt_version=self.FAKE_LIBVIRT_VERSION,
                qemu_version=self.FAKE_QEMU_VERSION, hostname=node)
            self.libvirt.update_sriov_mac_address_mapping(
                pci_info.get_pci_address_mac_mapping())
        original = self.mock_conn.return_value
        self.mock_conn.return_value = connection
        try:
            with mock.patch('nova.virt.node.get_local_node_uuid') as local:
                local.return_value = str(getattr(uuids, 'node_%s' % node))
                compute = self.start_service('compute', host=host)
                compute.driver._host.get_connection = lambda: connection
                compute.driver._host.get_node_uuid()
        finally:
            self.mock_conn.return_value = original
        self.computes[host] = compute
        self._service_of_node[node] = host
        self.compute_rp_uuids[host] = self.placement.get(
            '/resource_providers?name=%s' % node).body[
            'resource_providers'][0]['uuid']

    def restart_compute_service(self, hostname, **kwargs):
        """Restart nova-compute of service host ``hostname`` on the same
        hypervisor. The harness's own restart knows only hosts whose
        compute node has the service's name; a node of another name keeps
        its node UUID (as a real node keeps its ``compute_id`` file).
        """
        node = next((n for n, h in self._service_of_node.items()
                     if h == hostname), hostname)
        if node == hostname:
            return super().restart_compute_service(hostname, **kwargs)
        compute = self.computes.pop(hostname)
        self.compute_rp_uuids.pop(hostname)
        compute.stop()
        connection = compute.manager.driver._get_connection()
        self._start_compute_node(hostname, node, connection=connection)
        return self.computes[hostname]

    def _create_mdev(self, dev_name, mdev_type, uuid=None):
        """Create the mdev as the harness does, then lower the parent's
        ``availableInstances`` like real hardware.

        The fake GPUs otherwise offer the same number of instances however
        many mdevs exist, and Nova's inventory total (existing mdevs plus
        available instances) would grow with every mdev created.
        """
        # The harness keys computes by the hypervisor's hostname; here
        # they are keyed by service host.
        self._current_host = self._service_of_node.get(
            self._current_host, self._current_host)
        uuid = super()._create_mdev(dev_name, mdev_type, uuid=uuid)
        connection = self.computes[
            self._current_host].driver._host.get_connection()
        created = collections.Counter(
            info['mdev_type']
            for info in (_mdev_xml_info(device.XMLDesc(0))
                         for device in connection.mdev_info.devices.values())
            if info['parent_device'] == dev_name)
        device = connection.pci_info.devices[dev_name]
        for offered_type, offered in self._offers(device).items():
            device.pci_device = re.sub(
                r"(<type id='%s'>.*?<availableInstances>)\d+" % re.escape(
                    offered_type),
                lambda match: match.group(1) + str(
                    max(0, offered - created[offered_type])),
                device.pci_device, count=1, flags=re.DOTALL)
        return uuid

    @staticmethod
    def _offers(device):
        if device.generic_types:
            return GPU_KINDS['generic']
        return GPU_KINDS['nvidia']

    # Control API operations.

    def _every(self, path: str, key: str) -> list[dict]:
        """Every item of the Nova listing ``path`` (``key`` of its
        answer), all pages: the topology may make them small.
        """
        items, marker = [], None
        separator = '&' if '?' in path else '?'
        while True:
            query = separator + urllib.parse.urlencode(
                {'marker': marker}) if marker else ''
            body = self.api.api_get(path + query).body
            items.extend(body[key])
            marker = _next_marker(body, key)
            if not body[key] or marker is None:
                return items

    def _flavor_id(self, flavor):
        for candidate in self._every('/flavors/detail?is_public=None',
                                     'flavors'):
            if flavor in (candidate['id'], candidate['name']):
                return candidate['id']
        raise BadRequest('no flavor %r' % flavor)

    def _server(self, server):
        try:
            return self.api.get_server(server)
        except api_client.OpenStackApiNotFoundException:
            raise BadRequest('no server %r' % server)

    def _wait(self, server_id, done, timeout):
        deadline = time.monotonic() + timeout
        while True:
            try:
                server = self.api.get_server(server_id)
            except api_client.OpenStackApiNotFoundException:
                server = None
            if done(server):
                return server
            if time.monotonic() > deadline:
                raise RuntimeError('server %s still %s after %s s' % (
                    server_id, server and server['status'], timeout))
            eventlet.sleep(0.2)

    @staticmethod
    def _summary(server):
        fault = server.get('fault') or {}
        return {'id': server['id'],
                'name': server['name'],
                'host': server.get('OS-EXT-SRV-ATTR:host'),
                'status': server['status'],
                'fault': fault.get('message')}

    def op_create_flavor(self, name, vcpus=1, ram=512, disk=1, ephemeral=0,
                         extra_specs=None):
        """Create a flavor, with extra specs if given."""
        flavor_id = self._create_flavor(
            name=name, memory_mb=int(ram), vcpu=int(vcpus), disk=int(disk),
            ephemeral=int(ephemeral),
            extra_spec={k: str(v) for k, v in (extra_specs or {}).items()})
        return {'id': flavor_id, 'name': name}

    def op_boot(self, flavor: str, name: str | None = None,
                host: str | None = None, count: int = 1,
                timeout: float = 120, project: str | None = None
                ) -> list[dict]:
        """Boot servers and wait until each is ACTIVE or ERROR."""
        count = int(count)
        if host is not None and host not in self.computes:
            raise BadRequest('no compute host %r' % host)
        body = self._build_server(
            name=name, image_uuid=IMAGE_ID,
            flavor_id=self._flavor_id(flavor), networks='none', host=host)
        if count > 1:
            body.update(min_count=count, max_count=count,
                        return_reservation_id=True)
        answer = self._project_api(project).post_server({'server': body})
        if count > 1:
            # Every project's: the servers may be another project's.
            ids = [s['id'] for s in self._every(
                '/servers?' + urllib.parse.urlencode(
                    {'reservation_id': answer['reservation_id'],
                     'all_tenants': 1}), 'servers')]
        else:
            ids = [answer['id']]
        servers = []
        for server_id in ids:
            server = self._wait(
                server_id,
                lambda s: s is not None and s['status'] != 'BUILD' and (
                    s['status'] != 'ERROR' or 'fault' in s),
                timeout)
            servers.append(self._summary(server))
        return servers

    def _project_api(self, project: str | None
                     ) -> api_client.TestOpenStackClient:
        """The harness's API client, or one of a member of ``project``
        (its servers count against that project's limits).
        """
        if project is None:
            return self.api
        client = api_client.TestOpenStackClient(
            'member-of-%s' % project, self.api.base_url, project_id=project,
            roles=['reader', 'member'])
        client.microversion = self.api.microversion
        return client

    def op_delete(self, server, timeout=120):
        """Delete a server and wait until it is gone."""
        server_id = self._server(server)['id']
        self.api.delete_server(server_id)
        self._wait(server_id, lambda s: s is None, timeout)
        return {'deleted': server_id}

    def op_mdev_truth(self):
        """Every mdev a guest uses, as the fake libvirt hosts know it."""
        truth = []
        for host, compute in sorted(self.computes.items()):
            connection = compute.driver._host.get_connection()
            for domain in connection.listAllDomains(ALL_DOMAINS):
                xml = ElementTree.fromstring(domain.XMLDesc(0))
                for hostdev in xml.iter('hostdev'):
                    if hostdev.get('type') != 'mdev':
                        continue
                    mdev_uuid = hostdev.find('./source/address').get('uuid')
                    truth.append(dict(
                        server=domain.UUIDString(), host=host,
                        node=connection.getHostname(),
                        mdev_uuid=mdev_uuid,
                        **self._mdev_info(connection, mdev_uuid)))
        return truth

    def op_domains(self, host):
        """The libvirt domain definitions of a host's guests, as the fake
        libvirt gives them (``XMLDesc``): what ``/etc/libvirt/qemu`` holds.
        """
        if host not in self.computes:
            raise BadRequest('no compute host %r' % host)
        connection = self.computes[host].driver._host.get_connection()
        return [{'uuid': domain.UUIDString(), 'name': domain.name(),
                 'xml': domain.XMLDesc(0)}
                for domain in connection.listAllDomains(ALL_DOMAINS)]

    def op_pci_truth(self):
        """Every PCI device a guest uses: from the fake hypervisor's
        domains, each with the compute's record of it in Nova's database
        (the PCI tracker's ``PciDevice``).
        """
        ctxt = nova_context.get_admin_context()
        truth = []
        for host, compute in sorted(self.computes.items()):
            connection = compute.driver._host.get_connection()
            node = connection.getHostname()
            records = {
                device.address: device
                for device in objects.PciDeviceList.get_by_compute_node(
                    ctxt, objects.ComputeNode.get_by_nodename(
                        ctxt, node).id)}
            for domain in connection.listAllDomains(ALL_DOMAINS):
                xml = ElementTree.fromstring(domain.XMLDesc(0))
                for hostdev in xml.iter('hostdev'):
                    if hostdev.get('type') != 'pci':
                        continue
                    source = hostdev.find('./source/address')
                    address = '%04x:%02x:%02x.%x' % tuple(
                        int(source.get(part), 16) for part in
                        ('domain', 'bus', 'slot', 'function'))
                    record = records.get(address)
                    truth.append({
                        'server': domain.UUIDString(), 'host': host,
                        'node': node, 'pci_address': address,
                        'dev_type': record and record.dev_type,
                        'parent_addr': record and record.parent_addr,
                        'vendor_id': record and record.vendor_id,
                        'product_id': record and record.product_id,
                        'status': record and record.status,
                        'instance_uuid': record and record.instance_uuid,
                    })
        return truth

    @staticmethod
    def _mdev_info(connection, mdev_uuid):
        name = libvirt_utils.mdev_uuid2name(mdev_uuid)
        device = connection.mdev_info.devices.get(name)
        if device is None:
            return {'parent_device': None, 'pci_address': None,
                    'mdev_type': None}
        return _mdev_xml_info(device.XMLDesc(0))

    def op_periodic(self):
        """Run every compute's update_available_resource."""
        self._run_periodics()
        return {'hosts': sorted(self.computes)}

    def _move(self, server, action, timeout, confirm=True):
        before = self._server(server)
        source = before['OS-EXT-SRV-ATTR:host']
        self.api.post_server_action(before['id'], action)
        moved = self._wait(
            before['id'],
            lambda s: s['status'] in ('VERIFY_RESIZE', 'ERROR', 'ACTIVE') and
            s.get('OS-EXT-STS:task_state') is None,
            timeout)
        if moved['status'] != 'VERIFY_RESIZE':
            fault = (moved.get('fault') or {}).get('message', '')
            raise RuntimeError('%s of %s ended %s %s' % (
                list(action)[0], before['id'], moved['status'], fault))
        if confirm:
            self._confirm_resize(moved, host=source)
        after = self.api.get_server(before['id'])
        return {'id': after['id'], 'status': after['status'],
                'source_host': source,
                'host': after['OS-EXT-SRV-ATTR:host']}

    def op_resize(self, server, flavor, timeout=120, confirm=True):
        """Resize a server to another flavor and confirm the resize
        (unless ``confirm`` is false: it stays in VERIFY_RESIZE).
        """
        return self._move(
            server, {'resize': {'flavorRef': self._flavor_id(flavor)}},
            timeout, bool(confirm))

    def op_migrate(self, server, host=None, timeout=120, confirm=True):
        """Cold-migrate a server and confirm the migration (unless
        ``confirm`` is false).
        """
        return self._move(
            server, {'migrate': {'host': host} if host else None}, timeout,
            bool(confirm))

    def op_hosts(self):
        """What each host has, as on the READY line."""
        return self.host_plan

    def op_reconfigure(self, host, enabled_mdev_types, mdev=None,
                       device_spec=None):
        """Give one host a new ``[devices]``/``[mdev_*]`` configuration
        (and, given, a new ``[pci] device_spec`` list) and restart its
        nova-compute, as an operator would; answers the host's new plan
        (as ``hosts`` does).
        """
        entry = next((h for h in self.topology['hosts']
                      if h['name'] == host), None)
        if entry is None:
            raise BadRequest('no host named %r' % host)
        changed = dict(entry, enabled_mdev_types=list(enabled_mdev_types),
                       mdev=dict(mdev or {}))
        if device_spec is not None:
            changed['pci'] = dict(entry.get('pci') or {},
                                  device_spec=list(device_spec))
        plan = _plan_host(changed)
        self._configure_host(changed)
        self.restart_compute_service(host)
        self._run_periodics()
        entry.update(changed)
        self.host_plan[host] = plan
        return plan

    def op_compute_requests(self):
        """Every request the served Nova API answered, oldest first."""
        return {'count': len(self.compute_requests),
                'requests': list(self.compute_requests)}

    # Migrations: per-host hypervisor versions, live migration, services.

    def _get_connection(self, host_info=None, pci_info=None, mdev_info=None,
                        vdpa_info=None, libvirt_version=None,
                        qemu_version=None, hostname=None):
        """A fake libvirt connection with the versions the topology gives
        the host whose hypervisor hostname is ``hostname``.
        """
        host = next((h for h in self.topology['hosts']
                     if _node(h) == hostname), {})
        if host.get('libvirt_version'):
            libvirt_version = _version_int(host['libvirt_version'])
        if host.get('qemu_version'):
            qemu_version = _version_int(host['qemu_version'])
        return super()._get_connection(
            host_info, pci_info, mdev_info, vdpa_info, libvirt_version,
            qemu_version, hostname)

    def _setup_live_migration(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.migrateToURI3',
            self._migrate_stub))

    def _compute_at(self, address):
        """The compute service a migration URI's host names."""
        host = self._service_of_node.get(address, address)
        if host not in self.computes:
            raise RuntimeError('no compute for migration URI host %r'
                               % address)
        return self.computes[host]

    def _migrate_stub(self, domain, destination, params, flags):
        """``migrateToURI3`` as a real pair of hosts does it: the guest is
        defined on the target from Nova's migration XML and kept there
        (``VIR_MIGRATE_PERSIST_DEST``), and the source's job completes.
        """
        if flags & fakelibvirt.VIR_MIGRATE_POSTCOPY:
            self._refuse_post_copy_with_vfio(domain)
        target = urllib.parse.urlparse(destination).hostname
        connection = self._compute_at(target).driver._host.get_connection()
        guest = connection.createXML(params['destination_xml'],
                                     'fake-createXML-doesnt-care-about-flags')
        guest._transient = False
        domain.complete_job()

    @staticmethod
    def _refuse_post_copy_with_vfio(domain):
        """QEMU's answer to a migration with post-copy enabled
        (``VIR_MIGRATE_POSTCOPY``) of a guest with a VFIO device, an mdev
        or a PCI device (hw/vfio/migration.c ``vfio_save_prepare``): the
        ``migrate`` command fails, and so does libvirt's call.
        """
        root = ElementTree.fromstring(domain.XMLDesc(0))
        for hostdev in root.iter('hostdev'):
            if hostdev.get('type') not in ('mdev', 'pci'):
                continue
            address = hostdev.find('source/address')
            name = (address.get('uuid') if address is not None and
                    address.get('uuid') else 'vfio-device')
            raise fakelibvirt.make_libvirtError(
                fakelibvirt.libvirtError,
                "internal error: unable to execute QEMU command 'migrate': "
                '%s: VFIO migration is not supported with postcopy '
                'migration' % name,
                error_code=fakelibvirt.VIR_ERR_INTERNAL_ERROR,
                error_domain=fakelibvirt.VIR_FROM_QEMU)

    def op_post_copy(self, host, permitted):
        """Set one host's ``[libvirt] live_migration_permit_post_copy`` and
        restart its nova-compute (keeping its guests), whose libvirt driver
        builds its migration flags from it when it starts.
        """
        if host not in self.computes:
            raise BadRequest('no compute host %r' % host)
        entry = next(h for h in self.topology['hosts'] if h['name'] == host)
        entry['live_migration_permit_post_copy'] = bool(permitted)
        self._configure_host(entry)
        self.restart_compute_service(host)
        self._run_periodics()
        flags = self.computes[host].driver._live_migration_flags
        # The other hosts keep theirs: they read it when they started.
        self.flags(live_migration_permit_post_copy=False, group='libvirt')
        return {'host': host, 'post_copy': bool(
            flags & fakelibvirt.VIR_MIGRATE_POSTCOPY)}

    def op_live_migrate(self, server, host=None, timeout=120):
        """Live-migrate a server; answer how it ended, refusals included."""
        before = self._server(server)
        source = before['OS-EXT-SRV-ATTR:host']
        if host is not None and host not in self.computes:
            raise BadRequest('no compute host %r' % host)
        skipped = []
        capture = _Capture(skipped)
        conductor = logging.getLogger('nova.conductor.tasks.live_migrate')
        level = conductor.level
        conductor.setLevel(logging.DEBUG)
        conductor.addHandler(capture)
        accepted, error = True, None
        try:
            self.api.post_server_action(before['id'], {'os-migrateLive': {
                'host': host, 'block_migration': 'auto'}})
        except api_client.OpenStackApiException as exc:
            accepted = False
            error = 'Nova API answered %s: %s' % (
                exc.response.status_code, exc.response.text)
        finally:
            conductor.removeHandler(capture)
            conductor.setLevel(level)
        migration = self._wait_migration(before['id'], timeout)
        after = self._wait(
            before['id'],
            lambda s: s.get('OS-EXT-STS:task_state') is None, timeout)
        return {'id': before['id'], 'accepted': accepted,
                'migration_status': migration and migration['status'],
                'status': after['status'], 'source_host': source,
                'host': after['OS-EXT-SRV-ATTR:host'], 'error': error,
                'skipped': skipped}

    def _wait_migration(self, server_id, timeout):
        """The server's newest live migration once it has ended."""
        deadline = time.monotonic() + timeout
        while True:
            found = self._every(
                '/os-migrations?instance_uuid=%s&migration_type='
                'live-migration' % server_id, 'migrations')
            found.sort(key=lambda m: m['id'])
            last = found[-1] if found else None
            if last is None or last['status'] in (
                    'completed', 'error', 'failed', 'cancelled'):
                return last
            if time.monotonic() > deadline:
                raise RuntimeError('live migration of %s still %s after '
                                   '%s s' % (server_id, last['status'],
                                             timeout))
            eventlet.sleep(0.2)

    def op_reset_state(self, server, state='active'):
        """``os-resetState``: an admin's way out of ERROR -> the server as
        the Nova API shows it.
        """
        self.api.post_server_action(server, {'os-resetState': {
            'state': state}})
        return self._server(server)

    def op_set_service(self, host, disabled=None, forced_down=None,
                       reason=None):
        """Disable/enable and force down/up a host's nova-compute."""
        if host not in self.computes:
            raise BadRequest('no compute host %r' % host)
        service = self.api.get_services(binary='nova-compute',
                                        host=host)[0]
        body = {}
        if disabled is not None:
            body['status'] = 'disabled' if disabled else 'enabled'
            if disabled and reason:
                body['disabled_reason'] = reason
        if forced_down is not None:
            body['forced_down'] = bool(forced_down)
        if not body:
            raise BadRequest('give disabled or forced_down')
        return self.api.put_service(service['id'], body)

    def op_hypervisor_versions(self, host, libvirt_version, qemu_version):
        """New libvirt and QEMU versions on one host's hypervisor; its
        nova-compute restarts with its guests kept.
        """
        if host not in self.computes:
            raise BadRequest('no compute host %r' % host)
        connection = self.computes[host].driver._host.get_connection()
        connection.fakeLibVersion = _version_int(libvirt_version)
        connection.fakeVersion = _version_int(qemu_version)
        entry = next(h for h in self.topology['hosts'] if h['name'] == host)
        entry.update(libvirt_version=libvirt_version,
                     qemu_version=qemu_version)
        # The restarted service reads the host's own configuration.
        self._configure_host(entry)
        self.restart_compute_service(host)
        self._run_periodics()
        node = _node(entry)
        hypervisor = next(
            h for h in self._every('/os-hypervisors/detail', 'hypervisors')
            if h['hypervisor_hostname'] == node)
        return {'host': host, 'libvirt_version': connection.fakeLibVersion,
                'qemu_version': connection.fakeVersion,
                'hypervisor_version': hypervisor['hypervisor_version']}

    def op_conductor_workarounds(
            self, skip_hypervisor_version_check_on_lm: bool) -> dict:
        """Set nova-conductor's ``[workarounds]
        skip_hypervisor_version_check_on_lm``, which it reads at each
        live migration (``LiveMigrationTask``); answers the value set.
        """
        value = bool(skip_hypervisor_version_check_on_lm)
        self.flags(skip_hypervisor_version_check_on_lm=value,
                   group='workarounds')
        return {'skip_hypervisor_version_check_on_lm':
                CONF.workarounds.skip_hypervisor_version_check_on_lm}

    def op_placement_requests(self):
        """Every request the served Placement answered, oldest first."""
        return {'count': len(self.placement_requests),
                'requests': list(self.placement_requests)}

    def start_service(self, name, host=None, **kwargs):
        """Start a service; a compute whose host has a provider config
        location (``op_provider_config``) reads it, as nova-compute reads
        ``[compute] provider_config_location`` when it starts.
        """
        locations = getattr(self, '_provider_config_locations', {})
        if name != 'compute' or host not in locations:
            return super().start_service(name, host=host, **kwargs)
        CONF.set_override('provider_config_location', locations[host],
                          group='compute')
        try:
            return super().start_service(name, host=host, **kwargs)
        finally:
            CONF.clear_override('provider_config_location', group='compute')

    def op_provider_config(self, host, location=None):
        """Give one host's nova-compute a provider config directory and
        restart it; answers what it loaded.
        """
        entry = next((h for h in self.topology['hosts']
                      if h['name'] == host), None)
        if entry is None or host not in self.computes:
            raise BadRequest('no compute named %r' % host)
        if location is None:
            location = os.path.join(os.path.dirname(__file__), 'no-such-dir')
        elif not os.path.isdir(location):
            raise BadRequest('%r is not a directory' % location)
        if not hasattr(self, '_provider_config_locations'):
            self._provider_config_locations = {}
        self._provider_config_locations[host] = location
        # The options are process-wide: give the host its own back.
        self._configure_host(entry)
        self.restart_compute_service(host)
        self._run_periodics()
        return {'host': host, 'location': location,
                'providers': sorted(
                    self.computes[host].manager.rt.provider_configs)}


def _version_int(version):
    """``"8.6.0"`` or ``8006000`` -> 8006000 (libvirt's integer form)."""
    if isinstance(version, int):
        return version
    parts = [int(p) for p in str(version).split('.')]
    if not 1 <= len(parts) <= 3:
        raise BadRequest('version %r is not MAJOR.MINOR.MICRO' % version)
    parts += [0] * (3 - len(parts))
    return parts[0] * 1000000 + parts[1] * 1000 + parts[2]


class _Capture(logging.Handler):
    """Collects the conductor's "Skipping host" messages of one request:
    why it refused a live migration target.
    """

    def __init__(self, into):
        super().__init__(logging.DEBUG)
        self.into = into

    def emit(self, record):
        try:
            message = record.getMessage()
        except Exception:  # noqa: B902 - a log record that cannot format
            return
        if message.startswith('Skipping host'):
            self.into.append(message)


def _split_address(address):
    """``DDDD:BB:SS.F`` -> (bus, slot, function) as integers."""
    _, bus, rest = address.split(':')
    slot, function = rest.split('.')
    return int(bus, 16), int(slot, 16), int(function, 16)


def _mdev_xml_info(xml):
    """Parent device, its PCI address and type of a libvirt mdev node."""
    tree = ElementTree.fromstring(xml)
    parent = tree.findtext('parent')
    address = None
    if parent.startswith('pci_'):
        address = '{}:{}:{}.{}'.format(*parent[4:].split('_'))
    return {'parent_device': parent, 'pci_address': address,
            'mdev_type': tree.find('./capability/type').get('id')}


def _check_sqlalchemy():
    import sqlalchemy
    if tuple(map(int, sqlalchemy.__version__.split('.')[:2])) >= (2, 1):
        LOG.warning('SQLAlchemy %s: resize and migrate fail in this harness '
                    'with SQLAlchemy 2.1 (Nova uses APIs it deprecates, and '
                    'the harness turns those warnings into errors); install '
                    'SQLAlchemy<2.1', sqlalchemy.__version__)


def find_api_paste():
    """Locate the api-paste.ini that the nova distribution installed."""
    from importlib import metadata
    for path in metadata.files('nova') or ():
        if path.name == 'api-paste.ini' and 'etc' in path.parts:
            located = path.locate()
            if os.path.exists(located):
                return os.path.abspath(str(located))
    for base in (sys.prefix, sys.exec_prefix, '/usr/local', '/usr'):
        candidate = os.path.join(base, 'etc', 'nova', 'api-paste.ini')
        if os.path.exists(candidate):
            return candidate
    raise RuntimeError('api-paste.ini of nova not found')


class Cloud:
    """The harness plus its HTTP servers, control API and lifecycle."""

    def __init__(self, workdir: str, topology: dict,
                 keystone_url: str | None = None) -> None:
        self.workdir = workdir
        self.keystone_url = keystone_url
        self.harness = CloudHarness(topology, keystone_url)
        self.stopping = False
        self.servers = []
        self.lock = eventlet.semaphore.Semaphore()

    def start(self):
        """Build the cloud and serve it; answer the READY information."""
        self.harness.setUp()
        compute_port = self._serve(
            self._counted(self.harness.api_fixture.app()), 'compute')
        placement_conf = self.harness.placement_fixture.conf_fixture.conf
        placement_port = self._serve(
            self._counted(placement_deploy.loadapp(placement_conf),
                          self.harness.placement_requests), 'placement')
        control_port = self._serve(self.control_app, 'control')
        base = 'http://127.0.0.1:%d'
        compute_url = base % compute_port + '/v2.1'
        placement_url = base % placement_port
        clouds_yaml = os.path.join(self.workdir, 'clouds.yaml')
        write_clouds_yaml(clouds_yaml, compute_url, placement_url,
                          base % control_port + '/identity/v3',
                          self.keystone_url)
        ready = {
            'compute_url': compute_url,
            'placement_url': placement_url,
            'control_url': base % control_port + '/control',
            'clouds_yaml': clouds_yaml,
            'cloud': CLOUD_NAME,
            'hosts': self.harness.host_plan,
        }
        if self.keystone_url:
            ready.update(self._keystone(compute_url, placement_conf))
        return ready

    def _keystone(self, compute_url: str, placement_conf: object) -> dict:
        """A Placement port for Keystone's tokens, the catalog and the
        topology's limits in Keystone; the READY line's part of it.
        """
        port = self._serve(self._counted(
            cloud_keystone.placement_app(placement_conf, self.keystone_url),
            self.harness.placement_requests), 'placement-keystone')
        ready = cloud_keystone.set_up(
            self.harness, self.keystone_url, compute_url,
            'http://127.0.0.1:%d' % port,
            self.harness.topology.get('unified_limits'))
        ready['keystone_cloud'] = KEYSTONE_CLOUD_NAME
        return ready

    def _counted(self, app, into=None):
        """``app``, recording each request in the harness's
        ``compute_requests`` (or the list ``into``).
        """
        into = self.harness.compute_requests if into is None else into

        def counting(environ, start_response):
            query = environ.get('QUERY_STRING')
            into.append('%s %s%s' % (
                environ['REQUEST_METHOD'], environ.get('SCRIPT_NAME', '') +
                environ['PATH_INFO'], '?' + query if query else ''))
            return app(environ, start_response)
        return counting

    def _serve(self, app, name):
        sock = eventlet.listen(('127.0.0.1', 0))
        thread = eventlet.spawn(
            eventlet_wsgi.server, sock, app,
            log=logging.getLogger('tests.cloud.http.' + name),
            log_output=LOG.isEnabledFor(logging.DEBUG), debug=False)
        self.servers.append((thread, sock))
        return sock.getsockname()[1]

    def control_app(self, environ, start_response):
        """WSGI application of the control API."""
        status, answer = self._control(environ)
        body = json.dumps(answer, default=str).encode()
        start_response(status, [('Content-Type', 'application/json'),
                                ('Content-Length', str(len(body)))])
        return [body]

    def _control(self, environ):
        if environ['PATH_INFO'].rstrip('/') == '/identity/v3':
            return '200 OK', identity_version(environ)
        if environ['PATH_INFO'] != '/control':
            return '404 Not Found', {'error': 'only /control is served'}
        if environ['REQUEST_METHOD'] != 'POST':
            return '405 Method Not Allowed', {'error': 'POST only'}
        try:
            length = int(environ.get('CONTENT_LENGTH') or 0)
            request = json.loads(environ['wsgi.input'].read(length) or '{}')
            op = request.pop('op')
        except (ValueError, KeyError, AttributeError, TypeError):
            return '400 Bad Request', {
                'error': 'the body must be a JSON object with "op"'}
        if op == 'stop':
            self.stopping = True
            return '200 OK', {'stopping': True}
        method = getattr(self.harness, 'op_' + str(op), None)
        if method is None:
            return '400 Bad Request', {'error': 'unknown op %r' % op}
        try:
            inspect.signature(method).bind(**request)
        except TypeError as exc:
            return '400 Bad Request', {'error': '%s: %s' % (op, exc)}
        LOG.info('Control: %s %s', op, request)
        with self.lock:
            try:
                return '200 OK', method(**request)
            except (BadRequest, ValueError) as exc:
                LOG.warning('Control %s refused: %s', op, exc)
                return '400 Bad Request', {'error': str(exc)}
            except api_client.OpenStackApiException as exc:
                LOG.warning('Control %s: Nova refused: %s', op, exc)
                code = exc.response.status_code
                return ('400 Bad Request' if code < 500
                        else '500 Internal Server Error'), {
                    'error': 'Nova API answered %s: %s' % (
                        code, exc.response.text), 'nova_status': code}
            except BaseException as exc:
                LOG.exception('Control %s failed', op)
                return '500 Internal Server Error', {
                    'error': '%s: %s' % (type(exc).__name__, exc)}

    def stop(self):
        """Stop serving and tear the harness down."""
        for thread, sock in self.servers:
            thread.kill()
            sock.close()
        self.harness.doCleanups()


def identity_version(environ):
    """A Keystone v3 version document, for the CLI's version discovery.

    There is no Keystone: the admin token needs none. ``openstack server
    list`` still builds an identity v3 client, and that needs an identity
    endpoint whose discovery answers v3.
    """
    url = 'http://%s%s' % (environ['HTTP_HOST'], environ['PATH_INFO'])
    return {'version': {
        'id': 'v3.14', 'status': 'stable', 'updated': '2020-04-07T00:00:00Z',
        'links': [{'rel': 'self', 'href': url.rstrip('/') + '/'}],
        'media-types': [{
            'base': 'application/json',
            'type': 'application/vnd.openstack.identity-v3+json'}],
    }}


def write_clouds_yaml(path: str, compute_url: str, placement_url: str,
                      identity_url: str, keystone_url: str | None = None
                      ) -> None:
    """Write a clouds.yaml with the mdev-sandbox cloud for the CLI (and,
    with a Keystone, mdev-sandbox-keystone: its admin with a password,
    the services from Keystone's catalog).
    """
    cloud = {
        'auth_type': 'admin_token',
        'auth': {'token': 'admin', 'endpoint': placement_url},
        'placement_endpoint_override': placement_url,
        'compute_endpoint_override': compute_url,
        'compute_api_version':
            api_version_request.max_api_version().get_string(),
        'identity_endpoint_override': identity_url,
        'identity_api_version': '3',
        'region_name': 'RegionOne',
    }
    clouds = {CLOUD_NAME: cloud}
    if keystone_url:
        clouds[KEYSTONE_CLOUD_NAME] = {
            'auth': {'auth_url': keystone_url + '/v3',
                     'username': cloud_keystone.ADMIN['username'],
                     'password': cloud_keystone.ADMIN['password'],
                     'project_name': cloud_keystone.ADMIN['project_name'],
                     'user_domain_name': 'Default',
                     'project_domain_name': 'Default'},
            'compute_api_version': cloud['compute_api_version'],
            'identity_api_version': '3',
            'region_name': cloud_keystone.REGION,
        }
    with open(path, 'w') as out:
        yaml.safe_dump({'clouds': clouds}, out, default_flow_style=False)


def _redirect_output(log_path):
    """Send fds 1 and 2 to the log; answer a stream on the real stdout."""
    sys.stdout.flush()
    sys.stderr.flush()
    ready = os.fdopen(os.dup(1), 'w')
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    return ready


def _log_to_file(log_path):
    """Make the root logger write to the log file only; answer its handler.

    Nova's harness swaps the root handlers for an in-memory capture while
    it runs and puts these back when it is cleaned up.
    """
    handler = logging.FileHandler(log_path)
    handler.setFormatter(logging.Formatter(
        '%(asctime)s %(levelname)s [%(name)s] %(message)s'))
    _use_only(handler)
    return handler


def _use_only(handler):
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    debug = os.environ.get('OS_DEBUG', '').lower() in ('1', 'true', 'yes')
    root.setLevel(logging.DEBUG if debug else logging.INFO)


def _take_back_logging(harness, handler):
    """Write out what the harness captured while starting; log to file."""
    captured = getattr(harness, 'stdlog', None)
    if captured is not None:
        handler.acquire()
        try:
            handler.stream.write(captured.logger.output)
            handler.flush()
        finally:
            handler.release()
    _use_only(handler)


def main(argv=None):
    """Run the cloud until told to stop."""
    parser = argparse.ArgumentParser(
        description='Run an embedded Nova + Placement cloud with vGPUs.')
    parser.add_argument('--workdir', required=True,
                        help='directory for clouds.yaml and cloud.log')
    parser.add_argument('--topology',
                        help='JSON topology file (default: the demo one)')
    parser.add_argument('--keystone-url',
                        help='a Keystone (tests.fixtures.keystone_server) '
                             'whose unified limits Nova enforces')
    parser.add_argument('--exit-with-parent', action='store_true',
                        help='stop when the process that started this one '
                             'ends (so a killed test run leaves no cloud)')
    args = parser.parse_args(argv)
    parent = os.getppid()

    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    log_path = os.path.join(workdir, 'cloud.log')
    ready = _redirect_output(log_path)
    for variable in ('OS_TEST_TIMEOUT', 'OS_STDOUT_CAPTURE',
                     'OS_STDERR_CAPTURE', 'OS_LOG_CAPTURE'):
        os.environ.pop(variable, None)

    handler = _log_to_file(log_path)
    _check_sqlalchemy()
    started = time.monotonic()
    cloud = None
    try:
        if args.topology:
            with open(args.topology) as source:
                topology = json.load(source)
        else:
            topology = DEMO_TOPOLOGY
        cloud = Cloud(workdir, topology, args.keystone_url)
        info = cloud.start()
    except BaseException as exc:
        if cloud is not None:
            _take_back_logging(cloud.harness, handler)
        LOG.exception('The cloud did not start')
        if cloud is not None:
            try:
                cloud.harness.doCleanups()
            except BaseException:
                LOG.exception('Error while cleaning up')
        LOG.error('The cloud did not start: %s: %s', type(exc).__name__, exc)
        logging.shutdown()
        return 1
    _take_back_logging(cloud.harness, handler)
    LOG.info('Cloud ready in %.1f s: %s', time.monotonic() - started,
             json.dumps(info))

    def on_signal(signum, frame):
        cloud.stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    ready.write('READY ' + json.dumps(info) + '\n')
    ready.flush()
    while not cloud.stopping:
        eventlet.sleep(0.2)
        if args.exit_with_parent and os.getppid() != parent:
            LOG.warning('The parent process ended')
            cloud.stopping = True
    LOG.info('Stopping the cloud')
    # Let the answer to a stop request leave before the servers go.
    eventlet.sleep(0.2)
    try:
        cloud.stop()
    except BaseException:
        LOG.exception('Error while stopping the cloud')
    LOG.info('Cloud stopped')
    logging.shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
