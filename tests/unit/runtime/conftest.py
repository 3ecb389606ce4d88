"""The runtime's tests run over the state tests' plain-mapping tables (tests/unit/state/conftest.py)."""

from tests.unit.state.conftest import ownership, tables  # noqa: F401  (fixtures shared with state's tests)
