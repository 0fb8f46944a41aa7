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
