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

"""``type list``, what it reads: the node's sysfs (``local.sysfs``) and
the nova.conf files nova-compute reads (``local.conf_files``); no cloud.
"""

from collections.abc import Sequence
import logging
import os

from osc_mdev.base import errors
from osc_mdev.base import findings
from osc_mdev.features.type import gpu_types as gpu_type_model
from osc_mdev.local import conf_files
from osc_mdev.local import sysfs
from osc_mdev.nova.conf import settings as conf_settings
from osc_mdev.nova.pci import config as pci_rules
from osc_mdev.nova.virt.libvirt import driver as libvirt_driver

LOG = logging.getLogger(__name__)


def gpu_types(files: Sequence[str] = (), sysfs_root: str = '/sys'
              ) -> list[gpu_type_model.GpuType]:
    """The types each GPU of the node whose sysfs is under
    ``sysfs_root`` can serve; with the nova.conf ``files`` (read in
    order, as nova-compute reads them), whether Nova uses each.

    Raises ``errors.Invalid`` for a root that is no directory, and for
    files nova-compute cannot read or refuses to start with (it then
    uses no type at all).
    """
    if not os.path.isdir(sysfs_root):
        raise errors.Invalid(
            "%s is not a directory; give the root of the node's sysfs (/sys "
            'on the compute node) as %s.' % (sysfs_root,
                                             errors.given('sysfs')),
            parameter='sysfs', path=sysfs_root)
    # The files are judged before the node is read: bad input is one
    # error, with nothing said of the node before it.
    configured = _read_files(files, sysfs_root) if files else None
    host = sysfs.read_host(sysfs_root)
    if not host.mdev_bus and not host.vgpu_gpus():
        LOG.warning('%s has no mdev parent (no class/mdev_bus: no mdev '
                    'driver is loaded) and no NVIDIA GPU whose VFs are '
                    'typed through sysfs.', sysfs_root)
    if configured is None:
        return gpu_type_model.gpu_types(host)
    return gpu_type_model.gpu_types(host, *configured)


def _read_files(files: Sequence[str], sysfs_root: str
                ) -> tuple[libvirt_driver.MdevConfig, pci_rules.PciConfig]:
    """The mdev and PCI configuration of the files, or ``errors.Invalid``
    for files nova-compute cannot read or refuses to start with.
    """
    try:
        conf = conf_files.parse_files(
            files, sysfs.sysfs_virtual_parent(sysfs_root))
    except conf_settings.NovaConfError as exc:
        raise errors.Invalid('%s.' % str(exc).rstrip('.'),
                             parameter='files', files=list(files)) from exc
    assert conf.settings is not None    # parsed from the files
    pci = pci_rules.pci_config(conf.settings)
    fatal = [f for f in list(conf.findings) + list(pci.findings)
             if f.severity == findings.ERROR]
    if fatal:
        raise errors.Invalid(
            'nova-compute refuses to start with these files (%s: %s), so '
            'it uses no type; openstack mdev config check %s shows every '
            'error.' % (fatal[0].where, fatal[0].message.rstrip('.'),
                        ' '.join(files)),
            parameter='files', files=list(files), where=fatal[0].where)
    return conf, pci
