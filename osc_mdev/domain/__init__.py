"""Pure domain logic: no network, no client objects."""
