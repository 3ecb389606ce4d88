"""Factories for the evidence-core tests. Time is always a fixed instant: no clock is read."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from credence.tables.entries import Entry, new_persona_entry, new_reflection
from credence.tables.evidence import Evidence
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SCOPE = Scope("acme", "u1", "aria")


@pytest.fixture
def t0() -> datetime:
    return T0


@pytest.fixture
def scope() -> Scope:
    return SCOPE


@pytest.fixture
def reflection_factory():
    counter = iter(range(1, 10_000))

    def make(
        *, text: str = "prefers tea to coffee", status: str = "pending", evidence: Evidence | None = None,
        created_at: datetime = T0, importance: int = 5, scope: Scope = SCOPE, id: str | None = None, **fields,
    ) -> Entry:  # fmt: skip
        entry = new_reflection(id or f"r{next(counter)}", scope, text, created_at, importance=importance)
        return replace(entry, status=status, evidence=evidence or Evidence(), **fields)

    return make


@pytest.fixture
def persona_factory():
    counter = iter(range(1, 10_000))

    def make(
        *, text: str = "is learning Rust", evidence: Evidence | None = None, created_at: datetime = T0,
        importance: int = 5, scope: Scope = SCOPE, protected: bool = False, id: str | None = None, **fields,
    ) -> Entry:  # fmt: skip
        entry = new_persona_entry(
            id or f"p{next(counter)}",
            scope,
            text,
            created_at,
            importance=importance,
            protected=protected,
            evidence=evidence,
        )
        return replace(entry, **fields) if fields else entry

    return make
