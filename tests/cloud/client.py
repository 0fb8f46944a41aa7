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

"""Start and drive an embedded test cloud from any Python process.

``EmbeddedCloud`` runs ``python -m tests.cloud.server`` as a child
process (the cloud needs eventlet; the caller does not import it), waits
for its READY line and talks to its control API over HTTP::

    with EmbeddedCloud(tmp_path) as cloud:
        cloud.control('create_flavor', name='vgpu',
                      extra_specs={'resources:VGPU': '1'})
        server, = cloud.control('boot', flavor='vgpu')
        subprocess.run(['openstack', '--os-cloud', cloud.cloud_name,
                        'server', 'show', server['id']],
                       env=cloud.cli_environ())

Only the standard library is used here (and tests.fixtures.servers,
which uses nothing else).
"""

import importlib.util
import json
import os
import pathlib
import select
import subprocess
import sys
import time
import urllib.error
import urllib.request

from tests.fixtures import servers

REPO = pathlib.Path(__file__).resolve().parents[2]

#: Modules the cloud process needs beyond the project's own requirements:
#: Nova with its shipped functional test harness and what that imports.
SERVER_MODULES = ('nova', 'placement', 'testtools', 'oslotest',
                  'wsgi_intercept', 'eventlet')

#: The controller's nova.conf for the demo topology: its ``[pci] alias``
#: is the ``pci_alias`` of server.DEMO_TOPOLOGY (not imported here:
#: importing Nova's test package monkey-patches the process).
DEMO_CONTROLLER_CONF = """[pci]
alias = {"name": "l40s-vf", "vendor_id": "10de", "product_id": "26b9",
    "device_type": "type-VF", "resource_class": "CUSTOM_NVIDIA_L40S_VF"}
alias = {"name": "h100-vf", "vendor_id": "10de", "product_id": "2330",
    "device_type": "type-VF"}

[filter_scheduler]
pci_in_placement = True
"""


#: The project the control API boots servers in unless told otherwise
#: (the Nova harness's ``nova.tests.fixtures.PROJECT_ID``, not imported
#: here for the same reason).
HARNESS_PROJECT_ID = '6f70656e737461636b20342065766572'

#: The projects a cloud with a Keystone starts with, by name, with fixed
#: IDs (so that the documentation's samples show the same ones): the
#: harness's project, where the demo's servers go, and two more.
DEMO_PROJECTS = {
    'demo': HARNESS_PROJECT_ID,
    'ml-team': '5f1b4c2a9d0e4e7fb3a6c8d1e2f30a41',
    'render-farm': '8c2d7e1f0a3b4c5d9e6f7a8b1c2d3e4f',
}


def missing_modules():
    """Names of the SERVER_MODULES this Python cannot import."""
    return [name for name in SERVER_MODULES
            if importlib.util.find_spec(name) is None]


class CloudError(RuntimeError):
    """The cloud did not start, or a control operation failed.

    ``nova_status``: the HTTP status of the Nova API's refusal (such as
    403 for a quota exceeded), when the operation failed on one.
    """

    def __init__(self, message: str, nova_status: int | None = None
                 ) -> None:
        super().__init__(message)
        self.nova_status = nova_status


class EmbeddedCloud:
    """An embedded Nova + Placement cloud running in a child process.

    :param workdir: directory for ``clouds.yaml``, ``cloud.log`` and the
        topology file; created if missing.
    :param topology: ``None`` for the server's demo topology, a dict (it is
        written to ``workdir/topology.json``) or the path of a JSON file.
    :param timeout: seconds to wait for the cloud to be ready.
    :param control_timeout: default seconds to wait for a control answer.
    :param keystone: also start a real Keystone (``tests.fixtures.
        keystone_server``, with the DEMO_PROJECTS) whose unified limits
        Nova enforces (see ``tests.cloud.keystone``); ``keystone`` is then
        that KeystoneProcess and ``keystone_cloud`` the clouds.yaml entry
        that logs in to it with a password.

    The cloud starts when the object is created; ``stop()`` (or leaving the
    ``with`` block) ends it.
    """

    def __init__(self, workdir: str | pathlib.Path,
                 topology: dict | str | None = None, timeout: float = 120,
                 control_timeout: float = 300, keystone: bool = False
                 ) -> None:
        self.workdir = pathlib.Path(workdir).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / 'cloud.log'
        self.control_timeout = control_timeout
        self.proc = None
        self.keystone = None
        command = [sys.executable, '-m', 'tests.cloud.server',
                   '--workdir', str(self.workdir), '--exit-with-parent']
        if keystone:
            # Set up while the cloud starts; the cloud waits for it.
            self.keystone = servers.KeystoneProcess(
                self.workdir / 'keystone', wait=False,
                projects=DEMO_PROJECTS)
            command += ['--keystone-url', self.keystone.url]
        if isinstance(topology, dict):
            path = self.workdir / 'topology.json'
            path.write_text(json.dumps(topology, indent=2))
            command += ['--topology', str(path)]
        elif topology is not None:
            command += ['--topology', str(pathlib.Path(topology).resolve())]
        env = dict(os.environ)
        env['PYTHONPATH'] = os.pathsep.join(
            [str(REPO)] + [p for p in env.get('PYTHONPATH', '').split(
                os.pathsep) if p])
        started = time.monotonic()
        with open(self.log_path, 'ab') as log:
            self.proc = subprocess.Popen(
                command, cwd=str(REPO), env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=log)
        try:
            self.ready = self._wait_ready(timeout)
            if self.keystone is not None:
                self.keystone.wait()
        except BaseException:
            self._terminate()
            raise
        finally:
            self.proc.stdout.close()
        self.start_seconds = time.monotonic() - started
        self.compute_url = self.ready['compute_url']
        self.placement_url = self.ready['placement_url']
        self.control_url = self.ready['control_url']
        self.clouds_yaml = self.ready['clouds_yaml']
        self.cloud_name = self.ready['cloud']
        self.hosts = self.ready['hosts']
        self.keystone_cloud = self.ready.get('keystone_cloud')
        self.projects = self.ready.get('projects', {})

    def _wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        buffered = b''
        while True:
            while b'\n' in buffered:
                line, buffered = buffered.split(b'\n', 1)
                if line.startswith(b'READY '):
                    return json.loads(line[len(b'READY '):])
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CloudError('the cloud was not ready after %s s%s' % (
                    timeout, self._log_tail()))
            readable, _, _ = select.select([fd], [], [], min(remaining, 1))
            chunk = os.read(fd, 65536) if readable else b''
            if readable and not chunk:
                code = self.proc.wait()
                raise CloudError('the cloud exited with %s before it was '
                                 'ready%s' % (code, self._log_tail()))
            buffered += chunk

    def _log_tail(self, lines=40):
        try:
            text = self.log_path.read_text(errors='replace')
        except OSError:
            return ''
        tail = '\n'.join(text.splitlines()[-lines:])
        return '; end of %s:\n%s' % (self.log_path, tail)

    def control(self, op, timeout=None, **kwargs):
        """Run one control operation; answer its parsed JSON result.

        Raises ``CloudError`` with the server's message when it answers
        ``{"error": ...}``.
        """
        body = json.dumps(dict(kwargs, op=op)).encode()
        request = urllib.request.Request(
            self.control_url, data=body, method='POST',
            headers={'Content-Type': 'application/json'})
        try:
            with urllib.request.urlopen(
                    request, timeout=timeout or self.control_timeout) as rsp:
                return json.loads(rsp.read())
        except urllib.error.HTTPError as exc:
            try:
                answer = json.loads(exc.read())
                message = answer['error']
            except (ValueError, KeyError, TypeError):
                answer, message = {}, str(exc)
            raise CloudError('%s failed (HTTP %s): %s' % (
                op, exc.code, message),
                nova_status=answer.get('nova_status')) from None

    def cli_environ(self, base: dict | None = None,
                    cloud: str | None = None) -> dict:
        """Environment for an ``openstack`` process that uses this cloud
        (``cloud``: the clouds.yaml entry, the admin token's by default).
        """
        env = dict(os.environ if base is None else base)
        env['OS_CLIENT_CONFIG_FILE'] = str(self.clouds_yaml)
        env['OS_CLOUD'] = cloud or self.cloud_name
        return env

    def stop(self, timeout: float = 30) -> None:
        """Ask the cloud to stop; terminate it if it does not."""
        if self.proc is None or self.proc.poll() is not None:
            self._stop_keystone()
            return
        try:
            self.control('stop', timeout=5)
        except (CloudError, OSError):
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._terminate()
        self._stop_keystone()

    def _terminate(self) -> None:
        servers.terminate(self.proc)
        self._stop_keystone()

    def _stop_keystone(self) -> None:
        if self.keystone is not None:
            self.keystone.stop()
            self.keystone = None

    @property
    def returncode(self):
        """The child's exit status, or None while it runs."""
        return self.proc.poll()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()
