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

"""Client layer: every HTTP call osc-mdev makes lives below this package."""


class MdevClient:
    """What ``client_manager.mdev`` gives the commands.

    Service clients are built on first use, so a command that needs only
    Placement never looks up another service.
    """

    def __init__(self, instance, max_workers):
        self._instance = instance
        self.max_workers = max_workers
        self._placement = None
        self._compute = None

    def _endpoint_override(self, service_type):
        config = self._instance.get_configuration()
        key = '%s_endpoint_override' % service_type.replace('-', '_')
        return config.get(key)

    @property
    def placement(self):
        if self._placement is None:
            from osc_mdev.client import placement
            self._placement = placement.PlacementClient(
                self._instance.session,
                region_name=self._instance.region_name,
                interface=self._instance.interface,
                endpoint_override=self._endpoint_override('placement'),
                max_workers=self.max_workers)
        return self._placement

    @property
    def compute(self):
        if self._compute is None:
            from osc_mdev.client import compute
            self._compute = compute.ComputeClient(
                lambda: self._instance.sdk_connection.compute,
                max_workers=self.max_workers)
        return self._compute
