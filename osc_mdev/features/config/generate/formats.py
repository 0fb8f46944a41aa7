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

"""The layouts ``config generate`` writes its files in: its own
(``files``), kolla-ansible's (``kolla``) and OpenStack-Ansible's
(``openstack_ansible``). The deployment tools' layouts name the node as
their inventory does.
"""

from osc_mdev.base import errors
from osc_mdev.base import words
from osc_mdev.features.config.generate import files as generated
from osc_mdev.features.config.generate import kolla
from osc_mdev.features.config.generate import openstack_ansible
from osc_mdev.features.config.generate import plan as plans

FILES = 'files'
KOLLA_ANSIBLE = 'kolla-ansible'
OPENSTACK_ANSIBLE = 'openstack-ansible'
FORMATS = (FILES, KOLLA_ANSIBLE, OPENSTACK_ANSIBLE)


def check_inventory_host(name: str) -> str:
    """``name``, a node's inventory name, which names a file or a
    directory; GenerateError when it cannot.
    """
    bad = words.control_character(name)
    if bad is not None or not name or '/' in name or name in ('.', '..') \
            or name != name.strip() or ' ' in name:
        raise plans.GenerateError(
            "'%s' cannot name a node's file: give the node's inventory "
            'name, without spaces, slashes or control characters'
            % words.escaped(name))
    return name


def check(layout: str, inventory_host: str | None) -> str:
    """The node's name, for a layout that names files after the node;
    GenerateError when it is missing or cannot name a file.
    """
    if layout not in FORMATS:
        raise ValueError('unknown layout %r' % layout)
    if layout == FILES:
        return ''
    if inventory_host is None:
        raise plans.GenerateError(
            'The %s files are named after the node: give its inventory '
            'name with %s' % (layout, errors.given('inventory_host')))
    return check_inventory_host(inventory_host)


def files(layout: str, plan: plans.Plan,
          inventory_host: str | None) -> list[generated.GeneratedFile]:
    """The files of ``plan`` in ``layout`` (one of FORMATS)."""
    inventory_host = check(layout, inventory_host)
    if layout == FILES:
        return generated.files(plan)
    if layout == KOLLA_ANSIBLE:
        return kolla.files(plan, inventory_host)
    return openstack_ansible.files(plan, inventory_host)
