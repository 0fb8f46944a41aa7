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

"""The GPUs of a cloud, how many more servers of a flavor fit, and the
findings of a compute node's nova.conf, with osc-mdev's library.

Usage: gpu_report.py CLOUD FLAVOR NOVA_CONF SYSFS_ROOT
(CLOUD: an entry of clouds.yaml)
"""

import sys

import openstack.config

from osc_mdev import library


def main(cloud: str, flavor: str, nova_conf: str, sysfs_root: str) -> int:
    # The session and the per-service settings of clouds.yaml.
    region = openstack.config.get_cloud_region(cloud=cloud)
    mdev = library.client(region.get_session(), region)

    for gpu in library.gpus(mdev):
        print('gpu %s %s %s used %d of %d' % (
            gpu.host, gpu.device, gpu.resource_class, gpu.used,
            gpu.capacity))

    try:
        fits = library.capacity(mdev, flavor)
    except library.Error as exc:
        print('cannot count %s: %s' % (flavor, exc))
        return 1
    for host in fits.hosts:
        print('fits %s %d' % (host.host, host.fits))
    print('total %d' % fits.total)

    checked = library.host_findings([nova_conf], sysfs_root=sysfs_root)
    for finding in checked.findings:
        print('finding %s %s' % (finding.severity, finding.message))
    return 1 if checked.errors else 0


if __name__ == '__main__':
    sys.exit(main(*sys.argv[1:]))
