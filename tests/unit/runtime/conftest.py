"""The runtime's tests run over plain-mapping tables (tests/support/scope_tables.py, shared with state's)."""

from tests.support.scope_tables import ownership, tables  # noqa: F401 - fixtures
