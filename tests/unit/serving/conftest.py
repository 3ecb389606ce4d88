"""Factories for the serving tests: hand-built entries of one scope at fixed instants (no clock read)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from credence.tables.entries import new_persona_entry, new_reflection
from credence.tables.evidence import Evidence
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SCOPE = Scope("acme", "u1", "aria")

# A user's memory: (id, kind, text, days after T0 it was formed).
CORPUS = [
    ("p-tea", "persona", "drinks green tea every morning", 0),
    ("p-rust", "persona", "is learning the Rust programming language", 1),
    ("r-lisbon", "reflection", "lives in Lisbon near the river", 2),
    ("r-hike", "reflection", "goes hiking in the mountains on weekends", 3),
    ("r-coffee", "reflection", "dislikes coffee because it is too bitter", 4),
    ("r-cat", "reflection", "has a cat called Miso", 5),
    ("r-piano", "reflection", "practises piano scales before work", 6),
]


def make_entry(id: str, kind: str, text: str, day: float = 0, **fields):
    created = T0 + timedelta(days=day)
    if kind == "persona":
        entry = new_persona_entry(id, SCOPE, text, created)
    else:
        entry = new_reflection(id, SCOPE, text, created)
    return replace(entry, **fields) if fields else entry


@pytest.fixture
def corpus():
    return [make_entry(*row) for row in CORPUS]


@pytest.fixture
def now():
    return T0 + timedelta(days=10)


def confirmed(entry, at=T0):
    return replace(entry, evidence=Evidence(reinforcement=1.5, rein_last_signal_at=at))
