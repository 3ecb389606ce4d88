"""Use that counts: an entry rendered in a served memory block is a usage hit (source
"prompt", once per entry and UTC day), so memory in daily use is never swept; and usage never moves
evidence: no recall, prompt render or AI mention changes reinforcement or disputation."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from credence.config.usage import UsageSettings
from credence.tables.clock import format_instant
from credence.tables.entries import new_persona_entry, new_reflection
from credence.tables.evidence import Evidence
from credence.tables.rendering import render_memory_block
from credence.tables.scope import Scope
from credence.tables.usage import PROMPT, RECALL, prompt_hits, reinforce

from .conftest import T0

SCOPE = Scope("acme", "u1", "aria")
DAY = timedelta(days=1)


def usage_record(ids: list[str], source: str, at) -> dict:
    return {"v": 1, **SCOPE.fields(), "entry_ids": ids, "source": source, "ts": format_instant(at)}


def persona(entry_id: str, text: str):
    return new_persona_entry(entry_id, SCOPE, text, T0, evidence=Evidence(reinforcement=1.5, rein_last_signal_at=T0))


def serve_prompt(d, at) -> list[str]:
    """What GET …/prompt does for the scope at `at`: render, then send the not-yet-counted hits."""
    block = render_memory_block(SCOPE, d.state.entries.values(), at, settings=d.memory)
    hits = prompt_hits(block.entries, at)
    if hits:
        d.step("usage", usage_record(hits, PROMPT, at), at)
    return [e.id for e in block.entries]


def test_prompt_hits_count_once_per_entry_and_utc_day():
    card = new_persona_entry("card", SCOPE, "The character is a barista.", T0, protected=True)
    tea = persona("p-tea", "The user likes tea.")
    assert prompt_hits([card, tea], T0) == ["p-tea"]  # card entries keep no usage
    counted = replace(tea, usage=reinforce(tea.usage, T0, PROMPT))
    assert prompt_hits([counted], T0 + timedelta(hours=5)) == []  # the same UTC day
    assert prompt_hits([counted], T0 + DAY) == ["p-tea"]  # the next one
    recalled = replace(tea, usage=reinforce(tea.usage, T0, RECALL))
    assert prompt_hits([recalled], T0) == ["p-tea"]  # another source's use does not count as the prompt's


def test_an_entry_rendered_daily_through_the_prompt_is_never_soft_archived_over_90_days(driver_factory):
    on = UsageSettings(decay_enabled=True)
    served, idle = driver_factory(usage=on), driver_factory(usage=on)
    for d in (served, idle):
        d.state.entries["p-tea"] = persona("p-tea", "The user likes tea.")
    archived_on = None
    for day in range(1, 91):
        at = T0 + day * DAY + timedelta(hours=9)
        assert "p-tea" in serve_prompt(served, at), f"day {day}: the served entry left the block"
        assert served.state.entries["p-tea"].status == "active"
        idle.tick(at)
        if archived_on is None and idle.state.entries["p-tea"].status == "archived":
            archived_on = day
    # The same entry never rendered is soft-archived by the same sweep well within the 90 days (so the
    # served one stays because it is used, not because the sweep never ran).
    assert archived_on is not None and archived_on < 90
    assert served.state.entries["p-tea"].usage.reinforced_sources == (PROMPT,)
    assert served.state.entries["p-tea"].evidence == persona("p-tea", "The user likes tea.").evidence


OPS = st.lists(st.tuples(st.sampled_from(["recall", "prompt", "mention", "tick"]), st.integers(1, 72)),
               min_size=1, max_size=12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_usage_never_moves_evidence(driver_factory, ops):
    d = driver_factory(usage=UsageSettings(decay_enabled=True))
    held = [persona("p-tea", "The user likes tea."),
            new_reflection("r-jazz", SCOPE, "The user likes jazz.", T0, subject="jazz"),
            new_persona_entry("p-rust", SCOPE, "The user is learning Rust.", T0,
                              evidence=Evidence(reinforcement=2.0, disputation=1.0, rein_last_signal_at=T0,
                                                disp_last_signal_at=T0))]
    for entry in held:
        d.state.entries[entry.id] = entry
    evidence = {e.id: e.evidence for e in held}
    at = T0
    for op, hours in ops:
        at += timedelta(hours=hours)
        if op == "recall":
            d.step("usage", usage_record(sorted(d.state.entries), RECALL, at), at)
        elif op == "prompt":
            serve_prompt(d, at)
        elif op == "mention":
            d.turn("You like tea and jazz, and you are learning Rust!", at, role="ai")
        else:
            d.tick(at)
    for entry_id, before in evidence.items():
        entry = d.state.entries.get(entry_id)
        if entry is not None:  # a soft-archived entry keeps its evidence too, in the scope
            assert entry.evidence.reinforcement == before.reinforcement
            assert entry.evidence.disputation == before.disputation
            assert (entry.evidence.rein_last_signal_at, entry.evidence.disp_last_signal_at) == (
                before.rein_last_signal_at, before.disp_last_signal_at)
