"""Usage strength in the prompt: only ever a tie-break after score and importance, never in the score."""

from dataclasses import replace
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from credence.tables.entries import new_persona_entry
from credence.tables.evidence import Evidence, derived_tier
from credence.tables.rendering import by_priority, render_memory_block
from credence.tables.scope import Scope
from credence.tables.usage import Usage, reinforce

from .conftest import SCOPE, T0


def _persona(id: str, *, reinforcement: float = 1.0, importance: int = 5, strength: float | None = None):
    entry = new_persona_entry(id, SCOPE, f"fact {id}", T0, importance=importance,
                              evidence=Evidence(reinforcement, 0.0, T0, None))
    return replace(entry, usage=Usage(strength=strength, last_reinforced_at=T0)) if strength is not None else entry


def test_strength_breaks_ties_of_score_and_importance():
    weak, strong = _persona("a", strength=0.2), _persona("b", strength=0.9)
    assert [e.id for e in by_priority([weak, strong], T0)] == ["b", "a"]


def test_strength_never_beats_score_or_importance():
    high_score = _persona("a", reinforcement=2.0, strength=0.1)
    high_importance = _persona("b", importance=9, strength=0.1)
    recalled = _persona("c", strength=1.0)
    assert [e.id for e in by_priority([recalled, high_importance, high_score], T0)] == ["a", "b", "c"]


def test_budget_pressure_keeps_the_more_recalled_of_two_equal_entries():
    counter = lambda text: 10  # noqa: E731
    weak, strong = _persona("a", strength=0.2), _persona("b", strength=0.9)
    from credence.config.memory import MemorySettings
    block = render_memory_block(Scope("acme", "u1", "aria"), [weak, strong], T0,
                                settings=MemorySettings(persona_token_budget=10), count_tokens=counter)
    assert [e.id for e in block.persona] == ["b"]


@given(st.integers(0, 30), st.sampled_from(["recall", "search"]))
def test_reinforcing_usage_never_changes_score_or_tier(days, source):
    entry = _persona("a", reinforcement=1.5)
    now = T0 + timedelta(days=days)
    used = replace(entry, usage=reinforce(entry.usage, now, source))
    assert used.score(now) == entry.score(now)
    assert derived_tier(used.score(now)) == derived_tier(entry.score(now))
