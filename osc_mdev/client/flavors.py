"""Flavors and the mdev devices that can serve them: Nova and Placement.

The flavor (Nova) and the cloud's devices, classes and traits (Placement)
are read at once in the bounded pool, checked, then written.
"""

import dataclasses

from osc_lib import exceptions

from osc_mdev.client import devices as device_reads
from osc_mdev.client import naming
from osc_mdev.client import pool
from osc_mdev.domain import flavors as domain
from osc_mdev.domain import names
from osc_mdev.domain import providers
from osc_mdev.domain import traits as trait_logic


@dataclasses.dataclass
class Configured:
    flavor: dict
    changes: list


@dataclasses.dataclass
class FlavorView:
    flavor: dict
    request: domain.MdevRequest | None
    extra_specs: dict
    fit: domain.Fit | None
    servers_that_fit: int | None


def find_flavor(compute, reference):
    flavor = compute.get_flavor(reference)
    if flavor is not None:
        return flavor
    match = naming.one_named(
        compute.flavors_named(reference), reference, 'flavor',
        "No flavor named or with ID '%s'; see 'openstack flavor list "
        "--all'." % reference)
    # Flavor listings carry extra_specs too (the same microversion).
    return match


def _all_devices(placement):
    return device_reads.list_devices(placement, providers.DeviceFilter())


def _cloud_traits(devices):
    return {t for d in devices for t in (d.traits or ())
            if not trait_logic.is_owner_trait(t)}


def configure(compute, placement, reference, request, validate=True,
              dry_run=False):
    """Check ``request`` against the cloud and write it onto the flavor."""
    traits = sorted(set(request.required) | set(request.forbidden))
    calls = [lambda: find_flavor(compute, reference)]
    if validate:
        calls.append(
            lambda: placement.resource_class_exists(request.resource_class))
        calls.extend(lambda t=t: placement.trait_exists(t) for t in traits)
    results = pool.call_all(calls, placement.max_workers)
    flavor = results[0]
    devices = []
    if validate:
        # After the pool, not in it: the device reads run their own
        # bounded steps, and pools never nest.
        devices = _all_devices(placement)
        rc_exists, exists = results[1], results[2:]
        if not rc_exists:
            raise exceptions.CommandError(
                "Resource class %s does not exist in Placement; check "
                "[mdev_<type>] mdev_class in nova.conf, or see 'openstack "
                "resource class list'." % request.resource_class)
        missing = [t for t, ok in zip(traits, exists) if not ok]
        if missing:
            raise exceptions.CommandError(
                "Trait %s does not exist in Placement; tag devices with "
                "'openstack mdev trait set' first." % ', '.join(missing))
        result = domain.fit(request, devices)
        if result.problem:
            raise exceptions.CommandError(
                'No device in the cloud can serve this flavor: %s; use '
                '--no-validate to configure it anyway.' % result.problem)

    mdev_classes = {names.VGPU} | {d.resource_class for d in devices}
    device_traits = _cloud_traits(devices) | set(traits)
    current = flavor.get('extra_specs') or {}
    to_set, to_delete, changes = domain.plan(
        current, request, mdev_classes, device_traits)
    if not dry_run:
        if to_set:
            compute.set_extra_specs(flavor['id'], to_set)
        compute.map(lambda key: compute.delete_extra_spec(flavor['id'], key),
                    to_delete)
    return Configured(flavor, changes)


def show(compute, placement, reference):
    """The flavor's mdev request and where it fits now."""
    flavor = find_flavor(compute, reference)
    devices = _all_devices(placement)
    specs = flavor.get('extra_specs') or {}
    mdev_classes = {names.VGPU} | {d.resource_class for d in devices}
    request = domain.parse(specs, mdev_classes)
    managed = domain.managed_keys(specs, mdev_classes, _cloud_traits(devices))
    shown = {k: v for k, v in sorted(specs.items()) if k in managed}
    if request is None:
        return FlavorView(flavor, None, shown, None, None)
    result = domain.fit(request, devices)
    return FlavorView(flavor, request, shown, result,
                      domain.servers_that_fit(request, result.devices))
