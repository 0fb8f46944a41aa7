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

"""Sphinx configuration of the osc-mdev documentation."""

extensions = [
    'cliff.sphinxext',
    'myst_parser',
    'openstackdocstheme',
]

project = 'osc-mdev'
copyright = '2026, The osc-mdev Authors'
master_doc = 'index'
source_suffix = {'.rst': 'restructuredtext'}
# Command outputs included by the pages (written by tools/demo.py).
exclude_patterns = ['samples']
pygments_style = 'native'
# Keep '--option' as typed: no en dashes in option names.
smartquotes = False

html_theme = 'openstackdocs'
html_static_path = []

# openstackdocstheme: no bug tracker link, no edit-on links.
openstackdocs_repo_name = 'osc-mdev'
openstackdocs_pdf_link = False
openstackdocs_bug_project = ''
openstackdocs_bug_tag = ''
openstackdocs_auto_name = False

# The command reference is generated from the installed entry points.
autoprogram_cliff_application = 'openstack'
autoprogram_cliff_app_dist_name = 'osc-mdev'

# The benchmark's Markdown tables (doc/bench-results.md).
myst_enable_extensions = []
