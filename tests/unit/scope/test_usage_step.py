"""The usage channel in the scope step: recall hits, the gated daily decay sweep, restores."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from credence.config.memory import MemorySettings
from credence.config.pipeline import PipelineSettings
from credence.config.usage import UsageSettings
from credence.records.inputs import Application
from credence.records.kind import Kind
from credence.streams.scope.context import StepContext
from credence.streams.scope.requests import candidate_pool
from credence.streams.scope.scope_state import ScopeState
from credence.streams.scope.step import event_now, step
from credence.tables.clock import format_instant
from credence.tables.entries import new_persona_entry
from credence.tables.rendering import render_memory_block
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = Scope("acme", "u1", "aria")
ON = UsageSettings(decay_enabled=True)
# never recalled, initial 0.5: below 0.2 after 3 days + 28 * log2(2.5) days ≈ 2026-04-11 12:20 UTC
FIRST_DUE_SWEEP = datetime(2026, 4, 12, 3, 0, tzinfo=UTC)


def scope_with(*entries) -> ScopeState:
    state = ScopeState(scope=SCOPE.key, clock=T0, last_sweep_at=T0)
    for e in entries:
        state.entries[e.id] = e
    return state


def persona(id="p1", **fields):
    return replace(new_persona_entry(id, SCOPE, f"likes {id}", T0, subject="likes"), **fields)


def run(state, kind, record, at=None, usage=UsageSettings()) -> StepContext:
    ctx = StepContext(now=event_now(state, at), powerful=True, boot="b", memory=MemorySettings(),
                      pipeline=PipelineSettings(), usage=usage)
    step(state, Application(Kind(kind), record), ctx)
    return ctx


def hit(state, at, *ids, source="recall", usage=UsageSettings()):
    record = {"tenant": "acme", "user": "u1", "character": "aria", "entry_ids": list(ids), "source": source,
              "ts": format_instant(at)}
    return run(state, "usage", record, at, usage)


def tick(state, at, usage=UsageSettings()):
    return run(state, "tick", {"type": "tick", "now": format_instant(at)}, at, usage)


def events(ctx):
    return [(e.record["entry_id"], e.record["event"], e.record["cause"]) for e in ctx.emits if e.topic.name == "evidence"]


def test_a_recall_hit_reinforces_once_per_source_and_utc_day():
    state = scope_with(persona("p1"), persona("p2"))
    ctx = hit(state, T0 + timedelta(hours=1), "p1", "p2")
    assert events(ctx) == [("p1", "usage", "recall"), ("p2", "usage", "recall")]
    assert state.entries["p1"].usage.reinforce_count == 1 and state.entries["p1"].version == 2
    before = state.to_dict()
    again = hit(state, T0 + timedelta(hours=11, minutes=59), "p1")  # the same UTC day
    assert events(again) == [] and state.to_dict()["entries"] == before["entries"]
    assert events(hit(state, T0 + timedelta(hours=11), "p1", source="search")) == [("p1", "usage", "search")]
    assert events(hit(state, T0 + timedelta(hours=12), "p1")) == [("p1", "usage", "recall")]  # next UTC day
    assert state.entries["p1"].usage.reinforce_count == 3


def test_a_late_hit_counts_on_its_own_utc_day_once_and_a_replay_ends_in_the_same_state():
    state = scope_with(persona("p1"))
    day2 = T0 + timedelta(days=2)
    hits = [(day2, "recall"), (T0 + timedelta(hours=1), "recall"), (T0 + timedelta(hours=2), "recall")]
    counted = [events(hit(state, at, "p1", source=source)) for at, source in hits]
    # the scope's clock is on day 2 when the day-0 hit arrives: it is counted on day 0, once
    assert counted == [[("p1", "usage", "recall")], [("p1", "usage", "recall")], []]
    assert state.entries["p1"].usage.reinforce_count == 2
    replayed = scope_with(persona("p1"))
    for at, source in hits + hits:
        hit(replayed, at, "p1", source=source)
    assert replayed.to_dict()["entries"] == state.to_dict()["entries"]


def test_usage_never_changes_the_score_and_unknown_or_protected_entries_are_ignored():
    card = persona("card", protected=True)
    state = scope_with(persona("p1"), card)
    score = state.entries["p1"].score(T0)
    ctx = hit(state, T0, "p1", "card", "nope")
    assert events(ctx) == [("p1", "usage", "recall")]
    assert state.entries["p1"].score(T0) == score and state.entries["card"] == card
    assert any("nope" in line for line in ctx.log)


def test_gate_off_nothing_rots_even_after_a_year():
    state = scope_with(persona("p1"))
    ctx = tick(state, T0 + timedelta(days=365))
    assert [e for e in events(ctx) if e[2] == "usage_decay"] == []
    assert state.entries["p1"].status == "active" and state.last_usage_sweep_at is None


def test_the_daily_sweep_soft_archives_at_the_first_due_0300_utc_and_keeps_the_entry():
    recalled = persona("p2")
    state = scope_with(persona("p1"), recalled)
    tick(state, FIRST_DUE_SWEEP - timedelta(days=1), usage=ON)
    hit(state, FIRST_DUE_SWEEP - timedelta(hours=20), "p2", usage=ON)  # p2 was recalled: it stays
    assert state.entries["p1"].status == "active"
    ctx = tick(state, FIRST_DUE_SWEEP + timedelta(hours=5), usage=ON)
    assert events(ctx) == [("p1", "archived", "usage_decay")]
    gone = state.entries["p1"]  # never deleted: still in the state, out of the active view
    assert gone.status == "archived" and gone.archived_at == FIRST_DUE_SWEEP
    assert gone.usage.soft_archived_from == "active"
    assert [e.id for e in render_memory_block(SCOPE, state.entries.values(), FIRST_DUE_SWEEP).entries] == ["p2"]
    ctx = StepContext(now=FIRST_DUE_SWEEP, powerful=True, boot="b", memory=MemorySettings(),
                      pipeline=PipelineSettings())
    assert [e.id for e in candidate_pool(state, ctx)] == ["p2"]
    assert events(hit(state, FIRST_DUE_SWEEP + timedelta(hours=6), "p1", usage=ON)) == []  # recall cannot revive it


def test_a_long_gap_in_event_time_archives_on_the_first_due_day():
    state = scope_with(persona("p1"))
    tick(state, T0 + timedelta(hours=1), usage=ON)
    tick(state, T0 + timedelta(days=200), usage=ON)
    assert state.entries["p1"].archived_at == FIRST_DUE_SWEEP


def test_restore_puts_it_back_and_the_next_sweep_keeps_it():
    state = scope_with(persona("p1"))
    tick(state, T0 + timedelta(hours=1), usage=ON)
    tick(state, FIRST_DUE_SWEEP + timedelta(hours=1), usage=ON)
    restore = {"type": "restore", "tenant": "acme", "user": "u1", "character": "aria", "entry_id": "p1",
               "ts": format_instant(FIRST_DUE_SWEEP + timedelta(hours=2))}
    ctx = run(state, "restore", restore, FIRST_DUE_SWEEP + timedelta(hours=2), ON)
    assert events(ctx) == [("p1", "restored", "operator")]
    back = state.entries["p1"]
    assert back.status == "active" and back.archived_at is None and back.usage.soft_archived_from is None
    assert events(tick(state, FIRST_DUE_SWEEP + timedelta(days=1, hours=1), usage=ON)) == []
    assert events(run(state, "restore", restore, FIRST_DUE_SWEEP + timedelta(days=1, hours=2), ON)) == []


def test_duplicate_delivery_of_every_record_ends_in_the_same_state():
    def play(duplicate: bool) -> dict:
        state = scope_with(persona("p1"), persona("p2"))
        for day in range(0, 60, 3):
            at = T0 + timedelta(days=day)
            for _ in range(2 if duplicate else 1):
                hit(state, at, "p1", usage=ON)
                tick(state, at + timedelta(hours=1), usage=ON)
        return state.to_dict()

    once, twice = play(False), play(True)
    assert once == twice
    assert once["entries"]["p1"]["usage"]["reinforce_count"] == 20
    assert once["entries"]["p2"]["status"] == "archived"


def consensus(state, entry_id, score, at, by="verifier", usage=UsageSettings()):
    record = {"type": "consensus", "tenant": "acme", "user": "u1", "character": "aria", "entry_id": entry_id,
              "score": score, "by": by, "ts": format_instant(at)}
    return run(state, "consensus", record, at, usage)


def test_a_consensus_record_sets_score_who_and_when_once_and_journals_it():
    state = scope_with(persona("p1"), persona("card", protected=True))
    at = T0 + timedelta(hours=1)
    ctx = consensus(state, "p1", 0.8, at)
    assert events(ctx) == [("p1", "consensus", "verifier")]
    (journalled,) = [e.record for e in ctx.emits if e.topic.name == "evidence"]
    assert journalled["entry"]["consensus"] == {"score": 0.8, "by": "verifier", "at": format_instant(at)}
    entry = state.entries["p1"]
    assert (entry.consensus.score, entry.consensus.by, entry.consensus.at) == (0.8, "verifier", at)
    assert entry.score(at) == persona("p1").score(at)  # corroboration is not user evidence
    assert events(consensus(state, "p1", 0.8, at)) == []  # a duplicate record changes nothing
    assert events(consensus(state, "p1", 0.5, at + timedelta(hours=1), by="ops")) == [("p1", "consensus", "ops")]
    ignored = consensus(state, "card", 0.9, at)
    assert events(ignored) == [] and state.entries["card"].consensus is None
    assert any("card" in line for line in ignored.log)
    assert events(consensus(state, "nope", 0.9, at)) == []


def test_the_sweep_skips_entries_with_consensus_at_or_above_the_setting():
    state = scope_with(persona("p1"), persona("p2"), persona("p3"))
    tick(state, T0 + timedelta(hours=1), usage=ON)
    consensus(state, "p1", 0.75, T0 + timedelta(hours=2), usage=ON)
    consensus(state, "p2", 0.7499, T0 + timedelta(hours=2), usage=ON)
    ctx = tick(state, FIRST_DUE_SWEEP + timedelta(hours=1), usage=ON)
    assert sorted(events(ctx)) == [("p2", "archived", "usage_decay"), ("p3", "archived", "usage_decay")]
    assert state.entries["p1"].status == "active"
