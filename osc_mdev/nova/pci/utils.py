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

"""Nova's rules on PCI addresses (nova/pci/utils.py)."""

import re

# nova/pci/utils.py _PCI_ADDRESS_PATTERN: the ``.`` is any character.
_PCI_ADDRESS_RE = re.compile(
    r'^([\da-fA-F]{4}):([\da-fA-F]{2}):([\da-fA-F]{2}).([0-7]{1})$')


def parse_address(address: str) -> tuple[str, ...]:
    """Mirrors nova/pci/utils.py ``parse_address``: the (domain, bus,
    slot, function) of ``hex{4}:hex{2}:hex{2}.[0-7]``, upper or lower
    case; ValueError for anything else.
    """
    match = _PCI_ADDRESS_RE.match(address)
    if not match:
        raise ValueError("'%s' is not a PCI address" % address)
    return match.groups()
