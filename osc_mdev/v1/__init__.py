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

"""The ``openstack mdev`` commands, version 1 of the command set.

Each command turns its arguments into one feature call
(``osc_mdev.features``) and its result into rows; shared options are
defined once in ``options``, argument checks in ``common``, the wording
of the library's errors in ``errors``. Imports ``features``, the cores
(``cloud``, ``nova``, ``host``, ``base``: names and constants), itself,
and ``api`` only for the client manager of a command that skips
authentication.
"""

import logging

# oslo.config logs a warning each time it reads an option under a
# deprecated name; the commands report those names as findings of their
# own (``config check``), so the command line leaves oslo.config's notices
# out. A program using the library below decides for itself.
logging.getLogger('oslo_config.cfg').setLevel(logging.ERROR)
