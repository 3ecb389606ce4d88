"""What Stage-2 is offered, and how AI repetition (recent_mentions) suppresses without adding evidence."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from credence.streams.scope.requests import reflection_id
from credence.tables.entries import new_persona_entry, new_reflection
from credence.tables.evidence import Evidence
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = "acme/u1/aria"
S = Scope("acme", "u1", "aria")
HIKING = reflection_id(SCOPE, "The user loves hiking.")
HOUR = timedelta(hours=1)


def test_stage2_is_offered_only_active_non_negative_unsuppressed_candidates(driver_factory, state_factory):
    state = state_factory()

    def add(entry):
        state.entries[entry.id] = entry

    add(new_reflection("r-pending", S, "The user hikes.", T0))
    add(replace(new_reflection("r-confirmed", S, "The user swims.", T0), status="confirmed"))
    for status in ("promoted", "denied", "promote_blocked"):
        add(replace(new_reflection(f"r-{status}", S, f"The user {status}.", T0), status=status))
    add(replace(new_reflection("r-negative", S, "The user runs.", T0),
                evidence=Evidence(disputation=0.5, disp_last_signal_at=T0)))
    add(replace(new_reflection("r-suppressed", S, "The user bikes.", T0), status="confirmed", suppressed_at=T0))
    add(new_persona_entry("p-active", S, "The user has a cat.", T0))
    add(new_persona_entry("p-card", S, "Aria is a pirate.", T0, protected=True))
    d = driver_factory(state=state, auto=False)
    d.turn("I like tea", T0)
    d.flush()
    d.pump_one()
    (req,) = d.outbox
    assert req.task == "stage2"
    # a promote_blocked reflection is still a confirmed observation: it keeps collecting evidence
    assert sorted(o["id"] for o in req.payload["observations"]) == \
        ["p-active", "r-confirmed", "r-pending", "r-promote_blocked"]


def test_repeated_ai_mentions_suppress_without_adding_evidence(driver_factory):
    d = driver_factory().with_candidate()
    d.turn("I love hiking", T0)
    d.flush()
    d.feedback(HIKING, "confirm", T0 + timedelta(minutes=1))  # confirmed reflections count mentions
    evidence = d.state.entries[HIKING].evidence
    for n in range(3):
        d.turn("You like hiking!", T0 + (n + 1) * HOUR, role="ai", surfaced_ids=[HIKING])
    entry = d.state.entries[HIKING]
    assert entry.suppressed_at == T0 + 3 * HOUR and len(entry.recent_mentions) == 3
    assert entry.evidence == evidence  # repetition is not user evidence
    mentions = [j for j in d.journal() if j["event"] == "mention" and j["entry_id"] == HIKING]
    assert len(mentions) == 3
    d.turn("Anyway.", T0 + 3 * HOUR, role="ai")  # nothing surfaced: the next user turn is no feedback
    d.turn("I really love hiking", T0 + 3 * HOUR + timedelta(minutes=1))
    d.flush()
    stage2 = d.requests_of("stage2")[-1]
    assert HIKING not in [o["id"] for o in stage2.payload["observations"]]  # suppressed: not a candidate
    d.tick(T0 + 9 * HOUR)  # the hourly sweep lifts a suppression that ran its course
    lifted = d.state.entries[HIKING]
    assert lifted.suppressed_at is None and lifted.recent_mentions == ()
    assert [j["event"] for j in d.journal() if j["entry_id"] == HIKING][-1] == "suppression_lifted"


def test_pending_reflections_are_surfaced_but_not_counted(driver_factory):
    d = driver_factory()
    d.turn("I love hiking", T0)
    d.flush()
    before = d.state.entries[HIKING]
    for n in range(4):
        d.turn("You like hiking!", T0 + (n + 1) * HOUR, role="ai", surfaced_ids=[HIKING])
    assert d.state.entries[HIKING] == before
    assert d.state.surfaced == [HIKING]


def test_large_candidate_pools_ask_for_a_rerank_best_lexical_match_first(driver_factory, state_factory):
    state = state_factory()
    for n in range(34):
        entry = new_persona_entry(f"p-{n:02d}", S, f"The user collects stamps from country {n}.", T0,
                                  subject=f"stamps {n}")
        state.entries[entry.id] = entry
    hike = new_persona_entry("p-hike", S, "The user loves hiking.", T0, subject="hiking")
    state.entries[hike.id] = hike
    d = driver_factory(state=state)
    d.turn("I really love hiking", T0)
    d.flush()
    (req,) = d.requests_of("stage2")
    assert req.payload["rerank_limit"] == 30 and len(req.payload["observations"]) == 35
    assert req.payload["observations"][0]["id"] == "p-hike"  # BM25 pre-rank against the facts' words
    reinforced = d.state.entries["p-hike"]
    assert reinforced.evidence.user_fact_reinforce_count == 1  # survived the rerank and was classified


def test_small_candidate_pools_are_not_reranked(driver_factory, state_factory):
    state = state_factory()
    for n in range(30):
        entry = new_persona_entry(f"p-{n:02d}", S, f"The user collects stamps from country {n}.", T0)
        state.entries[entry.id] = entry
    d = driver_factory(state=state, auto=False)
    d.turn("I really love hiking", T0)
    d.flush()
    d.pump_one()
    (req,) = d.outbox
    assert req.payload["rerank_limit"] is None and len(req.payload["observations"]) == 30


def test_without_surfaced_ids_the_ai_text_is_matched_against_renderable_entries(driver_factory):
    d = driver_factory()
    d.turn("I love hiking", T0)
    d.flush()
    d.feedback(HIKING, "confirm", T0 + timedelta(minutes=1))
    for n in range(3):
        d.turn("You love hiking, don't you?", T0 + (n + 1) * HOUR, role="ai")  # a client that sends no ids
    entry = d.state.entries[HIKING]
    assert len(entry.recent_mentions) == 3 and entry.suppressed_at == T0 + 3 * HOUR
    causes = [j["cause"] for j in d.journal() if j["event"] == "mention"]
    assert causes == ["ai_mention"] * 3


def test_surfaced_ids_win_over_the_text(driver_factory):
    d = driver_factory()
    d.turn("I love hiking", T0)
    d.flush()
    d.feedback(HIKING, "confirm", T0 + timedelta(minutes=1))
    d.turn("You love hiking!", T0 + HOUR, role="ai", surfaced_ids=["not-in-this-scope"])
    assert d.state.entries[HIKING].recent_mentions == ()
    d.turn("Nice weather today.", T0 + 2 * HOUR, role="ai")
    assert d.state.entries[HIKING].recent_mentions == ()


def test_a_pending_reflection_named_in_the_ai_text_is_surfaced_for_feedback(driver_factory):
    d = driver_factory()
    d.turn("I love hiking", T0)
    d.flush()
    assert d.state.entries[HIKING].status == "pending"
    d.turn("You love hiking, right?", T0 + HOUR, role="ai")
    assert d.state.surfaced == [HIKING]
    d.turn("No, that's wrong.", T0 + HOUR + timedelta(minutes=1))
    assert d.state.entries[HIKING].status == "denied"
    assert d.state.entries[HIKING].recent_mentions == ()  # pending reflections are never mention-counted
