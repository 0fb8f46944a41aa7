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

"""Short, one-line descriptions of transport errors."""

import re

_URL = re.compile(r'(https?://[^\s:]+(?::\d+)?[^\s:]*)')
_REASONS = (
    ('Connection refused', 'connection refused'),
    ('timed out', 'timed out'),
    ('Name or service not known', 'unknown host name'),
    ('Temporary failure in name resolution', 'host name not resolved'),
    ('No route to host', 'no route to host'),
    ('CERTIFICATE_VERIFY_FAILED', 'TLS certificate not trusted'),
)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


def connection_problem(exc: BaseException) -> str:
    """``http://host:port/path: connection refused`` from a keystoneauth
    connection error, instead of urllib3's nested repr.
    """
    text = str(exc)
    match = _URL.search(text)
    reason = next((short for needle, short in _REASONS if needle in text),
                  None)
    if match and reason:
        return '%s: %s' % (match.group(1), reason)
    return first_line(exc)
