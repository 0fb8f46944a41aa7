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

"""The central check's pure parts: one node's share of the cloud, the
servers asked for only where a finding names them, and the rows."""

from osc_mdev.cloud import providers
from osc_mdev.features.config.check import fleet
from osc_mdev.features.config.check import mdev as configcheck
from osc_mdev.features.config.check import usage


def _device(host, nodedev, used, rc='VGPU', kind=providers.MDEV,
            traits=('CUSTOM_NVIDIA_36',)):
    candidate = providers.Candidate(
        uuid='%s-%s' % (host, nodedev), name='%s_%s' % (host, nodedev),
        host=host, root_uuid=host, nodedev=nodedev,
        pci_address=nodedev[4:].replace('_', ':', 2).replace('_', '.'),
        generation=1, kind=kind)
    return providers.Device(candidate, rc, None, used, 1, traits,
                            summary_capacity=4)


CLOUD = fleet.Cloud(frozenset({'a', 'b'}), {
    'a': [_device('a', 'pci_0000_84_00_0', 2),
          _device('a', 'pci_0000_85_00_0', 0)],
    'b': [_device('b', 'pci_0000_84_00_0', 1)]})


def test_servers_are_asked_for_only_where_a_finding_names_them():
    asked = set()
    [used, free] = fleet.FleetPlacement(CLOUD, 'a', None, asked).devices()
    assert (used.address, used.total, used.used) == ('0000:84:00.0', 4, 2)
    assert free.servers == () and asked == set()
    # A finding that does not name the servers leaves them unread.
    usage.spare_mdevs('a', used, 3)
    assert asked == set()
    usage.lost_mdev('a', used, 1, True)
    assert asked == {'a'}
    assert CLOUD.in_use(asked) == {'a-pci_0000_84_00_0': 'VGPU'}


def test_servers_once_read_are_named():
    servers = {'a-pci_0000_84_00_0': ('s1 (1)', 's2 (2)')}
    [used, _] = fleet.FleetPlacement(CLOUD, 'a', servers, set()).devices()
    assert isinstance(used, configcheck.PlacementDevice)
    assert 'for servers s1 (1) and s2 (2)' in usage.lost_mdev(
        'a', used, 1, True).message


def test_rows_lead_with_the_node_and_errors_fail():
    nodes = [fleet.unreachable('c', 'dir/c.unreachable', 'ssh: refused\n'),
             fleet.unknown_host('d', 'dir/d.json')]
    columns, rows = fleet.report(nodes)
    assert columns == ('Node', 'Severity', 'Where', 'Message')
    assert rows == [
        ('c', 'error', 'dir/c.unreachable', 'Node unreachable: ssh: '
         'refused.'),
        ('d', 'error', 'Placement', "No compute host named 'd' in "
         "Placement (from dir/d.json); hosts are named as in 'openstack "
         "hypervisor list'.")]
    assert fleet.failure(nodes) == '2 error(s) on 2 nodes of 2: c, d.'
    assert fleet.failure([]) is None
    long_columns, _ = fleet.report([], long=True)
    assert long_columns[0] == 'Node' and 'Traits' in long_columns
