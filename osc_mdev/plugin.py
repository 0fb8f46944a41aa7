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

"""OpenStackClient plugin entry point for osc-mdev.

``openstack`` imports every plugin's entry point module on every run, so
this module imports only the standard library; the API layer is loaded
when a command first asks for ``client_manager.mdev``.
"""

from collections.abc import Callable
import os
import typing

if typing.TYPE_CHECKING:
    import argparse

    from osc_lib import clientmanager

    from osc_mdev import api

API_NAME = 'mdev'
API_VERSION_OPTION = 'os_mdev_api_version'
DEFAULT_API_VERSION = '1'
API_VERSIONS = ('1',)

DEFAULT_MAX_WORKERS = 8
DEFAULT_TIMEOUT = 60


def make_client(instance: 'clientmanager.ClientManager'
                ) -> 'api.MdevClient':
    """The MdevClient of an authenticated command: osc's session, and the
    settings of each service from the CloudRegion osc's openstacksdk
    connection holds (``clouds.yaml``, ``OS_*`` variables and ``--os-*``
    options as osc merged them).
    """
    from osc_mdev import api

    config = instance.get_configuration()
    workers = config.get('mdev_max_workers') or DEFAULT_MAX_WORKERS
    timeout = config.get('mdev_timeout')
    return api.MdevClient(
        instance.session, instance.sdk_connection.config,
        max_workers=int(workers),
        timeout=float(timeout) if timeout else None)


def _positive(cast: Callable[[str], float],
              noun: str) -> Callable[[str], float]:
    """An argparse type: ``cast(text)`` if it is above 0, else an error
    naming ``noun``.
    """
    def parse(text: str) -> float:
        import argparse

        try:
            value = cast(text)
        except ValueError:
            value = 0
        if not 0 < value < float('inf'):
            raise argparse.ArgumentTypeError(
                '%r is not a positive %s' % (text, noun))
        return value
    return parse


def _env_option(parser: 'argparse.ArgumentParser', name: str,
                metavar: str, help_text: str,
                parse: Callable[[str], float] | None = None) -> None:
    """``--<name>``, whose default is the ``<NAME>`` environment variable
    (dashes as underscores), named at the end of ``help_text``.
    """
    env = name.upper().replace('-', '_')
    typed: dict[str, typing.Any] = {} if parse is None else {'type': parse}
    parser.add_argument(
        '--' + name, metavar=metavar, default=os.environ.get(env),
        help='%s (Env: %s)' % (help_text, env), **typed)


def build_option_parser(parser: 'argparse.ArgumentParser'
                        ) -> 'argparse.ArgumentParser':
    _env_option(
        parser, 'os-mdev-api-version', '<mdev-api-version>',
        'osc-mdev command set version, default=%s' % DEFAULT_API_VERSION)
    _env_option(
        parser, 'os-mdev-max-workers', '<count>',
        'Most API requests osc-mdev commands run at once, default=%d'
        % DEFAULT_MAX_WORKERS,
        parse=_positive(int, 'whole number'))
    _env_option(
        parser, 'os-mdev-timeout', '<seconds>',
        'Seconds osc-mdev waits for each Placement or Compute answer '
        'before it retries, default=%d' % DEFAULT_TIMEOUT,
        parse=_positive(float, 'number of seconds'))
    return parser
