"""Evidence signals reaching a scope: Stage-2 reinforce/negate, surfaced and explicit feedback, rebuttals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from credence.streams.scope.requests import reflection_id
from credence.tables.entries import new_persona_entry
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = "acme/u1/aria"
HIKING = reflection_id(SCOPE, "The user loves hiking.")
TEA = reflection_id(SCOPE, "The user likes tea.")
MIN = timedelta(minutes=1)


def hiking_driver(driver_factory, **kw):
    d = driver_factory(**kw)
    d.turn("I love hiking", T0)
    d.flush()
    assert d.state.entries[HIKING].evidence.reinforcement == 0.4
    return d


def signal_events(d, entry_id, cause):
    return [j for j in d.journal() if j["entry_id"] == entry_id and j["event"] == "signal" and j["cause"] == cause]


def test_user_fact_reinforce_adds_half_then_combo_from_the_third(driver_factory):
    d = hiking_driver(driver_factory)
    for n in range(1, 5):
        d.turn("I really love hiking", T0 + n * MIN)
        d.flush()
    events = signal_events(d, HIKING, "user_fact_reinforce")
    assert len(events) >= 3
    rein = [0.4] + [e["entry"]["evidence"]["reinforcement"] for e in events]
    assert [round(b - a, 9) for a, b in zip(rein, rein[1:])][:3] == [0.5, 0.5, 1.0]
    assert [e["entry"]["evidence"]["user_fact_reinforce_count"] for e in events][:3] == [1, 2, 3]
    assert events[0]["entry"]["evidence"]["rein_last_signal_at"] == (T0 + MIN).isoformat()


def test_user_fact_negate_adds_one_disputation(driver_factory):
    d = hiking_driver(driver_factory)
    d.turn("I hate hiking", T0 + MIN)
    d.flush()
    (event,) = signal_events(d, HIKING, "user_fact_negate")
    ev = d.state.entries[HIKING].evidence
    assert ev.disputation == 1.0 and ev.disp_last_signal_at == T0 + MIN
    assert ev.reinforcement == 0.4 and ev.user_fact_reinforce_count == 0
    assert event["entry"]["evidence"]["disputation"] == 1.0
    # the negating fact was evidence, so it is not synthesized into a new reflection
    assert reflection_id(SCOPE, "The user hates hiking.") not in d.state.entries


@pytest.mark.parametrize("reply, cause, rein, disp, status", [
    ("yes, exactly", "user_confirm", 1.4, 0.0, "confirmed"),
    ("no, that's wrong", "user_deny", 0.4, 1.0, "denied"),
    ("what's the weather today", "user_ignore", 0.2, 0.0, "pending"),
])
def test_reply_to_a_surfaced_reflection_is_feedback(driver_factory, reply, cause, rein, disp, status):
    d = hiking_driver(driver_factory)
    d.turn("You love hiking, right?", T0 + MIN, role="ai", surfaced_ids=[HIKING])
    d.turn(reply, T0 + 2 * MIN)
    (request,) = d.requests_of("feedback")
    assert request.payload["surfaced"] == [{"id": HIKING, "text": "The user loves hiking.", "subject": "hiking"}]
    entry = d.state.entries[HIKING]
    assert (round(entry.evidence.reinforcement, 9), entry.evidence.disputation, entry.status) == (rein, disp, status)
    assert len(signal_events(d, HIKING, cause)) == 1
    assert d.requests_of("target") == []  # a reply to surfaced reflections is feedback, not a rebuttal hook
    d.turn("I went to the shop", T0 + 3 * MIN)  # the surfaced list is used once
    assert len(d.requests_of("feedback")) == 1


def test_surfaced_ids_of_unknown_entries_are_ignored(driver_factory):
    d = hiking_driver(driver_factory)
    d.turn("Remember?", T0 + MIN, role="ai", surfaced_ids=["r-not-here", reflection_id("acme/u2/aria", "x")])
    d.turn("yes, exactly", T0 + 2 * MIN)
    assert d.requests_of("feedback") == []
    assert d.state.entries[HIKING].evidence.reinforcement == 0.4


@pytest.mark.parametrize("decision, cause, rein, disp, status", [
    ("confirm", "user_confirm", 1.4, 0.0, "confirmed"),
    ("deny", "user_deny", 0.4, 1.0, "denied"),
    ("ignore", "user_ignore", 0.2, 0.0, "pending"),
])
def test_explicit_feedback_records(driver_factory, decision, cause, rein, disp, status):
    d = hiking_driver(driver_factory)
    d.feedback(HIKING, decision, T0 + MIN)
    entry = d.state.entries[HIKING]
    assert (round(entry.evidence.reinforcement, 9), entry.evidence.disputation, entry.status) == (rein, disp, status)
    (event,) = signal_events(d, HIKING, f"explicit:{cause}")
    assert event["entry"]["evidence"] == entry.evidence.to_dict()
    assert event["event_id"] == f"{HIKING}@{event['entry']['version']}"
    assert event["at"] == (T0 + MIN).isoformat()


def test_explicit_feedback_for_unknown_or_protected_entry_changes_nothing(driver_factory, state_factory):
    state = state_factory()
    card = new_persona_entry("card-1", Scope("acme", "u1", "aria"), "Aria is a pirate.", T0, protected=True)
    state.entries[card.id] = card
    d = driver_factory(state=state)
    d.feedback("card-1", "deny", T0)
    d.feedback("nope", "deny", T0, feedback_id="fb2")
    assert d.state.entries["card-1"] == card
    assert d.journal() == []


def personas_driver(driver_factory, state_factory):
    state = state_factory()
    scope = Scope("acme", "u1", "aria")
    for pid, text, subject in [("p-dog", "The user has a dog.", "dog"), ("p-tea", "The user likes tea.", "tea")]:
        state.entries[pid] = new_persona_entry(pid, scope, text, T0, subject=subject)
    return driver_factory(state=state)


def test_negative_keyword_targets_only_entries_the_ai_mentioned(driver_factory, state_factory):
    d = personas_driver(driver_factory, state_factory)
    d.turn("How is your dog doing?", T0, role="ai", surfaced_ids=["p-dog"])
    assert d.state.entries["p-dog"].recent_mentions == (T0,)
    d.turn("no, I don't have a dog and I never liked tea", T0 + MIN)
    (target,) = d.requests_of("target")
    assert [o["id"] for o in target.payload["observations"]] == ["p-dog"]
    dog, tea = d.state.entries["p-dog"], d.state.entries["p-tea"]
    assert dog.evidence.disputation == 1.0 and dog.evidence.disp_last_signal_at == T0 + MIN
    assert tea.evidence.disputation == 0.0
    assert len(signal_events(d, "p-dog", "negative_keyword")) == 1


def test_negative_keyword_without_ai_mentions_asks_nothing(driver_factory, state_factory):
    d = personas_driver(driver_factory, state_factory)
    d.turn("no, I never said that", T0)
    assert d.requests_of("target") == []
    assert all(e.evidence.disputation == 0.0 for e in d.state.entries.values())


def test_no_negative_keyword_no_target_check(driver_factory, state_factory):
    d = personas_driver(driver_factory, state_factory)
    d.turn("How is your dog doing?", T0, role="ai", surfaced_ids=["p-dog"])
    d.turn("my dog is great", T0 + MIN)
    assert d.requests_of("target") == []
