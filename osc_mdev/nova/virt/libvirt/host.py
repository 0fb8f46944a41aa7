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

"""Nova's libvirt host: the name a compute node reports."""


def get_hostname(hostname: str, canonical: str | None) -> str:
    """Mirrors nova/virt/libvirt/host.py ``Host.get_hostname``: the
    compute node's name (its provider's, ``hypervisor_hostname``) is what
    libvirt's ``virConnectGetHostname`` answers. libvirt
    (``virGetHostname``) takes the host name when it has a dot or starts
    with ``localhost``, else the canonical name the resolver gives it
    (``AI_CANONNAME``), else the host name.
    """
    if '.' in hostname or hostname.startswith('localhost'):
        return hostname
    if canonical and not canonical.startswith('localhost'):
        return canonical
    return hostname
