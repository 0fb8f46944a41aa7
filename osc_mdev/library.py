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

"""osc-mdev as a Python library: what the commands read, for a program.

A program gives a keystoneauth session (or an ``MdevClient`` built from
one, to share its settings and request ID over several calls) and gets
typed objects back: the GPUs of a cloud (``gpus``), how many more
servers of a flavor fit (``capacity``), and the findings of a compute
node's nova.conf files (``host_findings``). Every error is an
``osc_mdev.base.errors.Error`` (``NotFound``, ``Invalid``,
``ServiceError``...): its class and ``data`` say what went wrong, and
``str()`` is one sentence naming the parameter it is about.

Nothing here knows the command line; the ``openstack mdev`` commands
word the same results and errors for operators.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Sequence
import dataclasses
import typing

from osc_mdev import api
from osc_mdev.base import errors
from osc_mdev.base import findings
from osc_mdev.cloud import fit
from osc_mdev.cloud import providers
from osc_mdev.cloud import reads as cloud_reads
from osc_mdev.features.capacity import reads as capacity_reads
from osc_mdev.features.config.check import reads as check_reads
from osc_mdev.features import nova_conf

if typing.TYPE_CHECKING:
    from keystoneauth1 import session as ks_session
    from openstack.config import cloud_region as sdk_cloud_region

__all__ = ('MdevClient', 'Device', 'HostCapacity', 'Capacity', 'Finding',
           'HostFindings', 'client', 'gpus', 'capacity', 'host_findings',
           'Error', 'MDEV', 'PCI')

MdevClient = api.MdevClient
#: One resource class of one GPU (or vGPU-capable VF parent) in
#: Placement: ``host``, ``device``, ``kind``, ``resource_class``,
#: ``capacity``, ``used``, ``free``, ``traits``...
Device = providers.Device
#: How many more servers of a flavor fit on one compute node.
HostCapacity = fit.HostCapacity
#: One finding of a check: ``severity``, ``where``, ``message``.
Finding = findings.Finding
Error = errors.Error
#: The kinds of device ``gpus`` lists: mdev parents, PCI-in-Placement
#: devices.
MDEV = providers.MDEV
PCI = providers.PCI

#: A keystoneauth session, or a client built from one.
Cloud = typing.Union['ks_session.Session', api.MdevClient]


def client(session: ks_session.Session,
           cloud_region: sdk_cloud_region.CloudRegion | None = None, *,
           region_name: str | None = None,
           interface: str | list[str] | None = None,
           max_workers: int = api.DEFAULT_MAX_WORKERS,
           timeout: float | None = None) -> api.MdevClient:
    """The client of one cloud, to pass to several calls: see
    ``osc_mdev.api.MdevClient`` for the parameters.
    """
    return api.MdevClient(session, cloud_region, region_name=region_name,
                          interface=interface, max_workers=max_workers,
                          timeout=timeout)


def _client(cloud: Cloud) -> api.MdevClient:
    if isinstance(cloud, api.MdevClient):
        return cloud
    return api.MdevClient(cloud)


def gpus(cloud: Cloud, *, hosts: Iterable[str] = (),
         resource_class: str | None = None,
         kinds: Iterable[str] = (MDEV,)) -> list[Device]:
    """The GPUs Placement has, one ``Device`` per resource class, sorted
    by host and device, as ``openstack mdev provider list --long``
    shows them (inventory, usage and traits read).

    :param cloud: a keystoneauth session or an ``MdevClient``.
    :param hosts: only these compute nodes (all when empty).
    :param resource_class: only inventories of this class.
    :param kinds: ``MDEV``, ``PCI`` or both.
    :raises errors.NotFound: an unknown host or resource class.
    :raises errors.ServiceError: Placement failed.
    """
    wanted = providers.DeviceFilter(
        hosts=tuple(hosts), resource_class=resource_class,
        kinds=tuple(kinds))
    return cloud_reads.list_devices(_client(cloud).placement, wanted)


@dataclasses.dataclass(frozen=True)
class Capacity:
    """How many more servers of ``flavor`` fit, per compute node."""

    flavor: str
    hosts: tuple[HostCapacity, ...]

    @property
    def total(self) -> int:
        """The servers that fit on all the nodes together."""
        return sum(h.fits for h in self.hosts)


def capacity(cloud: Cloud, flavor: str, *, hosts: Iterable[str] = (),
             controller_conf: Sequence[str] = ()) -> Capacity:
    """How many more servers of ``flavor`` (a name or ID) fit on the
    compute nodes, as Nova's scheduler and Placement would place them
    one after the other (``openstack mdev capacity --flavor``).

    :param cloud: a keystoneauth session or an ``MdevClient``; it needs
        Placement and Compute.
    :param hosts: only these compute nodes (all when empty).
    :param controller_conf: the controller's nova.conf files, read in
        order, for a flavor that asks for PCI devices through
        ``pci_passthrough:alias``.
    :raises errors.NotFound: no such flavor or host.
    :raises errors.Invalid: a flavor Nova refuses, or its PCI alias
        without ``controller_conf``.
    :raises errors.ServiceError: Placement or Compute failed.
    """
    mdev = _client(cloud)
    pci_config = (nova_conf.controller_pci(list(controller_conf))
                  if controller_conf else None)
    counted = capacity_reads.count(
        mdev.placement, mdev.compute, flavor=flavor, hosts=tuple(hosts),
        pci_config=pci_config)
    return Capacity(flavor, tuple(counted.per_host))


@dataclasses.dataclass(frozen=True)
class HostFindings:
    """What ``host_findings`` found: its findings, most severe first, and
    the files it read, in order.
    """

    findings: tuple[Finding, ...]
    files: tuple[str, ...]

    @property
    def errors(self) -> tuple[Finding, ...]:
        """The findings that stop nova-compute or make it fail."""
        return tuple(f for f in self.findings
                     if f.severity == findings.ERROR)


def _clients_of(mdev: api.MdevClient) -> check_reads.Clients:
    """What gives the Placement and Compute clients of ``mdev``."""
    return lambda: (mdev.placement, mdev.compute)


def host_findings(files: Sequence[str], *, sysfs_root: str | None = None,
                  host: str | None = None, cloud: Cloud | None = None
                  ) -> HostFindings:
    """The findings of a compute node's nova.conf ``files`` (read in
    order, as nova-compute reads them), by Nova's own rules
    (``openstack mdev config check``).

    :param sysfs_root: the node's sysfs (such as ``/sys``): the files are
        also checked against its devices and their mdev types.
    :param host: the node's name in Placement: the files are also checked
        against what Placement has for it; needs ``cloud``.
    :param cloud: a keystoneauth session or an ``MdevClient``.
    :raises errors.Invalid: files nova-compute cannot read, or ``host``
        without ``cloud``.
    """
    clients: check_reads.Clients | None = None
    if host is not None:
        if cloud is None:
            raise errors.Invalid(
                'A host is checked against Placement: give %s too.'
                % errors.given('cloud'), parameter='cloud')
        clients = _clients_of(_client(cloud))
    checked = check_reads.check(list(files), sysfs_root, host,
                                clients=clients)
    return HostFindings(tuple(findings.by_severity(checked.findings)),
                        tuple(checked.files))
