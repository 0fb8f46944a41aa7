"""End-to-end tests against the embedded test cloud (tests.cloud)."""
