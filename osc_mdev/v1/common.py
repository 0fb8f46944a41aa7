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

"""Argument checks shared by the command modules.

Bad names are refused before any request, as one-line CommandErrors
(exit status 1).
"""

from osc_lib import exceptions

from osc_mdev.domain import names


def check(func, *args):
    """Run a domain validator; its ValueError becomes a CommandError."""
    try:
        return func(*args)
    except ValueError as exc:
        raise exceptions.CommandError('%s.' % exc) from exc


def resource_class(value):
    """A valid mdev resource class, or None when none was given."""
    return value and check(names.validate_mdev_resource_class, value)


def trait_names(values):
    """Every trait name valid, in the order given."""
    return tuple(check(names.validate_trait_name, t) for t in values)
