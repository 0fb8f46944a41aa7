import subprocess
import sys

HEAVY = ('osc_lib', 'keystoneauth1', 'openstack', 'cliff', 'requests',
         'osc_placement', 'os_traits', 'concurrent.futures')


def test_plugin_import_is_cheap():
    # openstack imports every plugin's entry point on every run.
    code = ('import sys, osc_mdev.plugin; '
            'print("\\n".join(sorted(sys.modules)))')
    loaded = subprocess.run([sys.executable, '-c', code], check=True,
                            capture_output=True, text=True).stdout.split()
    heavy = [m for m in loaded if m.split('.')[0] in HEAVY or m in HEAVY]
    assert heavy == []
    assert [m for m in loaded if m.startswith('osc_mdev')] == [
        'osc_mdev', 'osc_mdev.plugin']


def test_plugin_declares_its_own_api_name():
    from osc_mdev import plugin
    assert plugin.API_NAME == 'mdev'
    assert plugin.API_VERSIONS == ('1',)
