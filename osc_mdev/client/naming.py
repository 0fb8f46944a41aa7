"""Picking the one resource an operator's name stands for."""

from osc_lib import exceptions


def one_named(matches, reference, noun, not_found):
    """The single resource in ``matches`` (API dicts with an ``id``).

    No match raises ``not_found``; several raise an error that lists their
    IDs, so the operator can pick one.
    """
    if not matches:
        raise exceptions.CommandError(not_found)
    if len(matches) > 1:
        raise exceptions.CommandError(
            "%d %ss are named '%s' (%s); give the ID of one."
            % (len(matches), noun, reference,
               ', '.join(sorted(m['id'] for m in matches))))
    return matches[0]
