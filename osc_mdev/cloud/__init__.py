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

"""The cloud as osc-mdev reads it: one typed model, its reads and the fit
engine.

The model: ``providers`` (GPUs as Nova reports them to Placement: mdev
parents and PCI devices, their inventories and traits), ``allocations``
(who holds what), ``traits`` (the type and owner traits of a device),
``units`` and ``reach`` (what the bulk reads tell). The reads that fill
it: ``reads`` (devices out of Placement, bulk first, in the bounded
pool), ``lookup`` (the one resource a name stands for) and
``payloads`` (Nova's answers made objects). The fit engine: ``fit``
(how many more servers of a request fit, and where), ``multicreate``
(what one multi-create places) and ``explanation`` (why none fits).
Imports ``api``, ``nova``, ``base`` and itself.
"""
