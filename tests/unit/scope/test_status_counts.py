"""/status counts reflections per stored status, promote_blocked included (they are not invisible)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from credence.streams.runtime.views import reflection_counts
from credence.streams.scope.scope_state import ScopeState
from credence.tables.entries import new_persona_entry, new_reflection
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def test_reflection_counts_per_status_over_every_scope():
    states = []
    for character in ("aria", "bob"):
        scope = Scope("acme", "u1", character)
        state = ScopeState(scope=scope.key)
        for i, status in enumerate(("pending", "promote_blocked", "promote_blocked", "confirmed")):
            r = replace(new_reflection(f"r{i}", scope, f"text {i}", T0), status=status)
            state.entries[r.id] = r
        state.entries["p"] = new_persona_entry("p", scope, "persona", T0)
        states.append(state)
    assert reflection_counts(states) == {"confirmed": 2, "pending": 2, "promote_blocked": 4}
    assert reflection_counts([]) == {}


def test_the_status_counts_are_recomputed_at_most_every_few_seconds():
    from credence.streams.runtime.views import Refreshed

    now, calls = [0.0], []
    value = Refreshed(lambda: calls.append(1) or len(calls), seconds=5.0, clock=lambda: now[0])
    assert value() == 1 and value() == 1
    now[0] = 4.9
    assert value() == 1
    now[0] = 5.0
    assert value() == 2 and len(calls) == 2
