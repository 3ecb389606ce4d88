"""Score-driven lifecycle with powerful memory on: confirm, merge-on-promote, late results, throttle, block."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from credence.streams.scope.requests import reflection_id
from credence.tables.entries import new_persona_entry
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = "acme/u1/aria"
HIKING = reflection_id(SCOPE, "The user loves hiking.")
TEA = reflection_id(SCOPE, "The user likes tea.")
MIN = timedelta(minutes=1)


def test_pending_becomes_confirmed_at_exactly_one(driver_factory):
    d = driver_factory()
    d.turn("I like tea", T0)  # importance 6: seed 0.0
    d.flush()
    d.feedback(TEA, "confirm", T0 + MIN)  # score exactly 1.0 at that instant
    tea = d.state.entries[TEA]
    assert tea.status == "confirmed" and tea.confirmed_at == T0 + MIN
    (transition,) = [j for j in d.journal() if j["event"] == "transition"]
    assert (transition["from_status"], transition["to_status"], transition["cause"]) == \
        ("pending", "confirmed", "threshold")
    assert transition["score"] == 1.0 and transition["tier"] == "confirmed"


def test_below_one_stays_pending(driver_factory):
    d = driver_factory()
    d.turn("I love hiking", T0)  # seed 0.4
    d.flush()
    d.turn("I really love hiking", T0 + MIN)  # +0.5 -> 0.9
    d.flush()
    assert d.state.entries[HIKING].status == "pending"
    d.tick(T0 + timedelta(days=30))
    assert d.state.entries[HIKING].status == "pending"  # powerful memory: age alone never confirms


def confirmed_hiking(driver_factory, **kw):
    d = driver_factory(**kw)
    d.turn("I love hiking", T0)
    d.flush()
    d.feedback(HIKING, "confirm", T0 + MIN)  # 1.4: confirmed, not yet promotable
    assert d.state.entries[HIKING].status == "confirmed"
    assert d.requests_of("promotion") == []
    return d


def test_promotion_attempt_is_counted_before_the_call(driver_factory):
    d = confirmed_hiking(driver_factory)
    d.auto = False
    d.feedback(HIKING, "confirm", T0 + 2 * MIN, feedback_id="fb2")  # 2.4
    (req,) = d.requests_of("promotion")
    stored = d.state.entries[HIKING]
    assert stored.status == "confirmed"
    assert stored.promote_attempts == 1 and stored.last_promote_attempt_at == T0 + 2 * MIN
    assert req.payload["ticket"] == {"version": stored.version, "attempt": 1}
    assert req.payload["entry_id"] == HIKING
    attempt = [j for j in d.journal() if j["event"] == "promote_attempt"]
    assert attempt[-1]["entry"] == stored.to_dict()


def test_promotion_result_creates_a_persona_entry(driver_factory):
    d = confirmed_hiking(driver_factory)
    d.feedback(HIKING, "confirm", T0 + 2 * MIN, feedback_id="fb2")
    reflection = d.state.entries[HIKING]
    (persona,) = d.personas()
    assert reflection.status == "promoted" and reflection.merged_into_id == persona.id
    assert persona.status == "active" and persona.merged_from_ids == (HIKING,)
    assert persona.text == "The user loves hiking."
    assert persona.evidence.reinforcement == reflection.evidence.reinforcement
    (merged,) = [j for j in d.journal() if j["event"] == "merged"]
    assert merged["entry_id"] == persona.id and merged["entry"] == persona.to_dict()
    promoted = [j for j in d.journal() if j["to_status"] == "promoted"]
    assert [j["entry_id"] for j in promoted] == [HIKING]


def test_promotion_result_merges_into_an_existing_persona_entry(driver_factory):
    d = confirmed_hiking(driver_factory)
    # a persona entry on the same subject appeared after the reflection was confirmed
    existing = new_persona_entry("p-hike", Scope("acme", "u1", "aria"), "The user enjoys hiking.", T0,
                                 subject="hiking")
    d.state.entries[existing.id] = existing
    d.feedback(HIKING, "confirm", T0 + 2 * MIN, feedback_id="fb2")
    (req,) = d.requests_of("promotion")
    assert req.payload["personas"] == [{"id": "p-hike", "text": "The user enjoys hiking.", "subject": "hiking"}]
    assert [p.id for p in d.personas()] == ["p-hike"]
    persona = d.state.entries["p-hike"]
    # the merge rewrote the text: the old meaning is closed as version 2, the new one is version 3
    assert persona.merged_from_ids == (HIKING,) and persona.version == 3 and persona.invalidated_at is None
    assert d.state.entries[HIKING].merged_into_id == "p-hike"
    (closed,) = [j for j in d.journal() if j["event"] == "invalidated"]
    assert closed["event_id"] == "p-hike@2" and closed["entry"]["text"] == "The user enjoys hiking."
    assert closed["entry"]["invalidated_at"] == persona.valid_from.isoformat()
    (merged,) = [j for j in d.journal() if j["event"] == "merged"]
    assert merged["event_id"] == "p-hike@3"


def test_a_denial_during_promotion_lands_on_the_persona_entry(driver_factory):
    d = confirmed_hiking(driver_factory)
    d.auto = False
    d.feedback(HIKING, "confirm", T0 + 2 * MIN, feedback_id="fb2")
    (req,) = d.outbox
    d.outbox.clear()
    d.feedback(HIKING, "deny", T0 + 3 * MIN, feedback_id="fb3")  # waits: promotion holds the scope
    assert d.state.entries[HIKING].status == "confirmed" and len(d.state.queue) == 1
    d.result(req, {"decision": {"action": "create", "target_id": None, "text": "The user loves hiking."}})
    (persona,) = d.personas()
    assert d.state.entries[HIKING].status == "promoted"
    assert persona.evidence.disputation == 1.0  # the user's denial reached where the observation lives
    assert d.state.entries[HIKING].evidence.disputation == 0.0


def test_promotion_result_for_a_changed_entry_is_discarded(driver_factory):
    d = confirmed_hiking(driver_factory)
    d.auto = False
    d.feedback(HIKING, "confirm", T0 + 2 * MIN, feedback_id="fb2")
    (req,) = d.outbox
    assert req.task == "promotion"
    d.outbox.clear()
    # A result from an earlier run's request can meet an entry that moved on (here: denied meanwhile).
    from credence.tables.lifecycle import deny as deny_entry
    d.state.entries[HIKING] = deny_entry(d.state.entries[HIKING], T0 + 3 * MIN)
    before = dict(d.state.entries)
    ctx = d.result(req, {"decision": {"action": "create", "target_id": None, "text": "The user loves hiking."}})
    assert any("late promotion" in line for line in ctx.log)
    assert d.state.entries == before and d.personas() == []
    assert req.id not in d.state.requests


def reject(d, req):
    return d.result(req, {"decision": {"action": "reject", "target_id": None, "text": ""}})


def test_rejected_promotions_are_throttled_then_blocked_after_five_attempts(driver_factory):
    d = confirmed_hiking(driver_factory)
    d.auto = False
    now = T0 + 2 * MIN
    d.feedback(HIKING, "confirm", now, feedback_id="fb2")
    for attempt in range(1, 6):
        (req,) = d.outbox
        d.outbox.clear()
        assert req.task == "promotion" and req.payload["ticket"]["attempt"] == attempt
        assert d.state.entries[HIKING].promote_attempts == attempt
        reject(d, req)
        assert d.state.entries[HIKING].status == "confirmed"
        d.tick(now + timedelta(minutes=29))
        assert d.outbox == []  # throttled: 30 minutes between attempts
        now += timedelta(minutes=30)
        d.tick(now)
    assert d.outbox == []
    entry = d.state.entries[HIKING]
    assert entry.status == "promote_blocked" and entry.promote_attempts == 5
    assert len(d.requests_of("promotion")) == 5
    blocked = [j for j in d.journal() if j["to_status"] == "promote_blocked"]
    assert len(blocked) == 1


def test_a_promotion_in_flight_is_not_attempted_again(driver_factory):
    d = confirmed_hiking(driver_factory)
    d.auto = False
    d.feedback(HIKING, "confirm", T0 + 2 * MIN, feedback_id="fb2")
    d.tick(T0 + timedelta(hours=3))  # long past the throttle, but the first call is still running
    assert len(d.requests_of("promotion")) == 1
    assert d.state.entries[HIKING].promote_attempts == 1


def test_journal_tier_uses_the_scope_settings(driver_factory, memory_factory):
    d = driver_factory(memory=memory_factory(confirmed_threshold=0.3, promoted_threshold=5.0))
    d.turn("I love hiking", T0)  # seed 0.4 >= 0.3
    d.flush()
    created = [j for j in d.journal() if j["event"] == "created"][0]
    assert created["tier"] == "confirmed"
    assert d.state.entries[HIKING].status == "confirmed"


def test_merge_into_a_protected_entry_is_rejected_not_raised(driver_factory):
    d = confirmed_hiking(driver_factory)
    card = new_persona_entry("p-card", Scope("acme", "u1", "aria"), "Aria loves hiking.", T0, subject="hiking",
                             protected=True)
    d.state.entries[card.id] = card
    d.auto = False
    d.feedback(HIKING, "confirm", T0 + 2 * MIN, feedback_id="fb2")
    (req,) = d.outbox
    assert req.payload["personas"] == []  # protected entries are never offered as merge targets
    ctx = d.result(req, {"decision": {"action": "merge", "target_id": "p-card", "text": "x"}})
    assert any("rejected" in line for line in ctx.log)
    assert d.state.entries["p-card"] == card
    assert d.state.entries[HIKING].status == "confirmed" and req.id not in d.state.requests


def test_failed_promotions_count_toward_promote_blocked(driver_factory):
    d = confirmed_hiking(driver_factory)
    d.auto = False
    now = T0 + 2 * MIN
    d.feedback(HIKING, "confirm", now, feedback_id="fb2")
    for attempt in range(1, 6):
        (req,) = d.outbox
        d.outbox.clear()
        assert req.payload["ticket"]["attempt"] == attempt
        d.fail(req)
        d.tick(now + timedelta(minutes=1))
        assert d.outbox == []  # the failed attempt is counted and throttled, not re-sent at once
        now += timedelta(minutes=30)
        d.tick(now)
    entry = d.state.entries[HIKING]
    assert entry.status == "promote_blocked" and entry.promote_attempts == 5
    assert d.state.requests == {}
