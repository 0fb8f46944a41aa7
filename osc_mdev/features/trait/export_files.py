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

"""The provider config files ``trait export`` writes: one per compute
node, ``<host>.yaml``, keeping the custom traits of the node's mdev
devices by provider name.

What a file keeps of a device's traits (``exported_traits``), its YAML
document and its text, checked before it is written by the rules
nova-compute reads it with (``nova.compute.provider_config``).
``features.trait.writes`` writes it through ``osc_mdev.local``.
"""

from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
import typing

import yaml

from osc_mdev.base import findings
from osc_mdev.base import words
from osc_mdev.cloud import traits as trait_logic
from osc_mdev.nova.compute import provider_config
from osc_mdev.nova import names


def file_name(host: str) -> str:
    """``<host>.yaml``; ValueError for a name that cannot be a file of
    its own in the directory, or a line of a comment (a control
    character).
    """
    bad = words.control_character(host)
    if bad is not None:
        raise ValueError("Host name '%s' holds the control character %s"
                         % (words.escaped(host), words.escaped(bad)))
    if not host or '/' in host or host.startswith('.'):
        raise ValueError("Host name '%s' cannot name a file" % host)
    return host + provider_config.FILE_SUFFIX


def exported_traits(traits: Iterable[str], type_traits_only: bool = False,
                    prefix: str = trait_logic.DEFAULT_TRAIT_PREFIX
                    ) -> list[str]:
    """The traits of a device a file keeps: its custom traits (Nova
    refuses the others), or only its type traits.
    """
    kept = [t for t in traits if names.is_custom_name(t)]
    if type_traits_only:
        kept = [t for t in kept if trait_logic.is_type_trait(t, prefix)]
    return sorted(set(kept))


def document(providers: Mapping[str, Collection[str]]
             ) -> dict[str, typing.Any]:
    """The file's content: ``providers`` is ``{provider name: traits}``;
    providers with no trait are left out (Nova would ignore them).
    """
    return {
        'meta': {'schema_version': provider_config.SCHEMA_VERSION},
        'providers': [
            {'identification': {'name': name},
             'traits': {'additional': list(traits)}}
            for name, traits in sorted(providers.items()) if traits],
    }


def header(host: str) -> str:
    return (
        '# Provider config of compute node %s for nova-compute\n'
        '# ([compute] provider_config_location, default %s).\n'
        "# Written by 'openstack mdev trait export': the custom traits of "
        'the\n'
        "# node's mdev devices, by provider name. nova-compute adds them "
        'to\n'
        '# each provider on every update, also when it re-creates one; it '
        'reads\n'
        '# this file only when it starts: restart it after a change.\n'
        % (host, provider_config.DEFAULT_LOCATION))


def render(host: str, providers: Mapping[str, Collection[str]]) -> str:
    """The text of the file of ``host``; ValueError if Nova would refuse
    it or read anything else than ``document`` (it never should: a
    guard, checked with Nova's own rules).
    """
    name = file_name(host)
    meant = document(providers)
    text = header(host) + yaml.safe_dump(
        meant, default_flow_style=False, sort_keys=False)
    if yaml.safe_load(text) != meant:
        raise ValueError('the file of %s would not read as written'
                         % words.escaped(host))
    checked = provider_config.parse(text, name)
    errors = [f for f in provider_config.check_files([checked])
              if f.severity == findings.ERROR]
    if errors:
        raise ValueError('the file of %s would be refused by nova-compute: '
                         '%s' % (host, errors[0].message))
    return text
