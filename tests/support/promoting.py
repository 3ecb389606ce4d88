"""A scope whose reflections are all confirmed and due for promotion at once, with active persona
entries beside them: the state a long-lived scope reaches, built directly (unit tests step it; the
integration test writes it through the worker's codec as its starting state)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from credence.streams.scope.scope_state import ScopeState
from credence.tables.entries import new_persona_entry, new_reflection
from credence.tables.evidence import Evidence
from credence.tables.scope import Scope

HOBBIES = ["sailing", "pottery", "chess", "climbing", "baking", "cycling", "painting", "gardening", "rowing",
           "knitting", "fishing", "surfing", "singing", "running", "dancing", "archery"]


def promoting_scope(scope: str, reflections: int, personas: int, at: datetime) -> ScopeState:
    """`reflections` confirmed reflections scored past the promotion threshold and `personas` active
    persona entries, all distinct in wording; event time `at`."""
    parts, state = Scope.parse(scope), ScopeState(scope=scope, clock=at, last_sweep_at=at, powerful=True)
    strong = Evidence(reinforcement=2.6, rein_last_signal_at=at)
    for i in range(reflections):
        hobby = HOBBIES[i % len(HOBBIES)]
        entry = new_reflection(f"r-{i:05d}", parts, f"The user practises {hobby} with club number {i}", at,
                               subject=hobby)
        state.entries[entry.id] = replace(entry, status="confirmed", evidence=strong)
    for j in range(personas):
        entry = new_persona_entry(f"p-{j:05d}", parts, f"The user keeps a collection item{j} of old coins",
                                  at, subject=f"item{j}", evidence=Evidence(reinforcement=2.2, rein_last_signal_at=at))
        state.entries[entry.id] = entry
    state.entries_version = 1
    return state
