"""The state tests run over plain-mapping tables (tests/support/scope_tables.py, shared with the runtime's)."""

from tests.support.scope_tables import (  # noqa: F401 - fixtures and the helpers the tests import from here
    SCOPE,
    T0,
    Ownership,
    make_context,
    new_tables,
    ownership,
    store_over,
    tables,
    turn,
)
