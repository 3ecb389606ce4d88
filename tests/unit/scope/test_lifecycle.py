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
    assert req.payload["personas"] == [{"id": "p-hike", "text": "The user enjoys hiking.", "subject": "hiking", "score": 0.0}]
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


CREATE = {"decision": {"action": "create", "target_id": None, "text": "The user loves hiking."}}


def promotion_in_flight(driver_factory, **kw):
    d = confirmed_hiking(driver_factory, **kw)
    d.auto = False
    d.feedback(HIKING, "confirm", T0 + 2 * MIN, feedback_id="fb2")  # 2.4: merge-on-promote starts
    (req,) = d.outbox
    assert req.task == "promotion"
    d.outbox.clear()
    return d, req


def assert_denied_not_promoted(d, req):
    hiking = d.state.entries[HIKING]
    assert hiking.status == "denied" and hiking.merged_into_id is None
    assert d.personas() == [] and [j for j in d.journal() if j["event"] == "merged"] == []
    assert req.id not in d.state.requests
    assert [j for j in d.journal() if j["to_status"] == "promoted"] == []


def test_an_explicit_denial_during_promotion_denies_the_reflection(driver_factory):
    d, req = promotion_in_flight(driver_factory)
    d.feedback(HIKING, "deny", T0 + 3 * MIN, feedback_id="fb3")  # applied at once: promotion holds nothing
    assert d.state.entries[HIKING].status == "denied" and d.state.queue == []
    ctx = d.result(req, CREATE)
    assert any("late promotion" in line for line in ctx.log)
    assert_denied_not_promoted(d, req)
    assert d.state.entries[HIKING].evidence.disputation == 1.0


def test_a_surfaced_denial_during_promotion_wins_even_when_the_promotion_answers_first(driver_factory):
    d, req = promotion_in_flight(driver_factory)
    d.turn("Do you still love hiking?", T0 + 3 * MIN, role="ai", surfaced_ids=[HIKING])
    d.turn("No, that's wrong.", T0 + 4 * MIN)
    (check,) = [r for r in d.outbox if r.task == "feedback"]
    assert [o["id"] for o in check.payload["surfaced"]] == [HIKING]
    d.result(req, CREATE)  # the merge answer lands first: it waits behind the reply being checked
    assert d.state.entries[HIKING].status == "confirmed" and d.personas() == []
    assert [q["kind"] for q in d.state.queue] == ["result"]
    d.outbox.remove(check)
    d.result(check, {"decisions": [{"id": HIKING, "decision": "deny"}]})
    d.pump()  # the turns' Stage-1 window, then the waiting merge answer
    assert d.state.queue == []
    assert_denied_not_promoted(d, req)


def test_a_reply_checked_by_the_rules_backend_during_promotion_denies_the_reflection(driver_factory):
    d, req = promotion_in_flight(driver_factory)
    d.turn("You love hiking, as always.", T0 + 3 * MIN, role="ai", surfaced_ids=[HIKING])
    d.turn("Stop saying that, it's not true", T0 + 4 * MIN)  # a reply to a surfaced confirmed reflection
    d.pump()  # the reply check (rules backend) and then the promotion result, in that order
    d.result(req, CREATE)
    assert_denied_not_promoted(d, req)


def test_a_rebuttal_by_keyword_during_promotion_denies_the_reflection(driver_factory):
    d, req = promotion_in_flight(driver_factory)
    d.turn("You love hiking, as always.", T0 + 3 * MIN, role="ai", surfaced_ids=[HIKING])
    d.state.surfaced = []  # not a surfaced reply: only the negative-keyword hook sees it
    d.turn("No, I never said I love hiking", T0 + 4 * MIN)
    (target,) = [r for r in d.outbox if r.task == "target"]
    d.result(req, CREATE)  # waits behind the target check
    d.outbox.remove(target)
    d.result(target, {"ids": [HIKING]})
    d.pump()
    assert_denied_not_promoted(d, req)
    (rebuttal,) = [j for j in d.journal() if j["cause"] == "negative_keyword"]
    assert (rebuttal["from_status"], rebuttal["to_status"]) == ("confirmed", "denied")


def test_an_archive_transition_during_promotion_discards_the_result(driver_factory, memory_factory):
    # Archive after one sub-zero day: a reflection argued below zero is swept while its promotion runs.
    d, req = promotion_in_flight(driver_factory, memory=memory_factory(archive_after_sub_zero_days=1))
    d.state.entries[HIKING] = d.state.entries[HIKING].__class__.from_dict(
        {**d.state.entries[HIKING].to_dict(), "evidence": {"disputation": 9.0}})
    d.tick(T0 + 2 * timedelta(hours=1))  # the hourly sweep runs: promotion does not hold the scope
    assert HIKING not in d.state.entries and [a["entry_id"] for a in d.archives()] == [HIKING]
    ctx = d.result(req, CREATE)
    assert any("late promotion" in line for line in ctx.log)
    assert d.personas() == [] and HIKING not in d.state.entries


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


def test_a_rejected_promotion_is_final_not_a_failed_attempt(driver_factory):
    d = confirmed_hiking(driver_factory)
    d.auto = False
    now = T0 + 2 * MIN
    d.feedback(HIKING, "confirm", now, feedback_id="fb2")
    (req,) = d.outbox
    d.outbox.clear()
    reject(d, req)
    entry = d.state.entries[HIKING]
    assert entry.status == "confirmed" and entry.promote_attempts == 0 and entry.promotion_rejected_at == now
    (rejected,) = [j for j in d.journal() if j["event"] == "promotion_rejected"]
    assert rejected["cause"] == "promotion_reject" and rejected["entry"] == entry.to_dict()
    for hours in (1, 5, 30):
        d.tick(now + timedelta(hours=hours))
    assert d.outbox == [] and len(d.requests_of("promotion")) == 1  # never retried, never blocked
    assert d.state.entries[HIKING].status == "confirmed"
    # a new positive signal makes it eligible again
    d.feedback(HIKING, "confirm", now + timedelta(hours=31), feedback_id="fb3")
    (again,) = d.outbox
    assert again.task == "promotion" and again.payload["ticket"]["attempt"] == 1


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


def blocked_hiking(driver_factory, **kw):
    d = confirmed_hiking(driver_factory, **kw)
    d.auto = False
    now = T0 + 2 * MIN
    d.feedback(HIKING, "confirm", now, feedback_id="fb2")
    for _ in range(5):
        (req,) = d.outbox
        d.outbox.clear()
        d.fail(req)
        now += timedelta(minutes=30)
        d.tick(now)
    assert d.state.entries[HIKING].status == "promote_blocked"
    return d, now


def test_a_blocked_promotion_is_retried_after_the_retry_hours(driver_factory):
    d, blocked_at = blocked_hiking(driver_factory)
    last_attempt = d.state.entries[HIKING].last_promote_attempt_at
    d.tick(last_attempt + timedelta(hours=23, minutes=59))
    assert d.state.entries[HIKING].status == "promote_blocked" and d.outbox == []
    d.tick(last_attempt + timedelta(hours=24))
    entry = d.state.entries[HIKING]
    assert entry.status == "confirmed" and entry.promote_attempts == 1  # a fresh series, attempted at once
    (req,) = d.outbox
    assert req.task == "promotion" and req.payload["ticket"]["attempt"] == 1
    (unblocked,) = [j for j in d.journal() if j["event"] == "promotion_unblocked"]
    assert (unblocked["from_status"], unblocked["to_status"], unblocked["cause"]) == \
        ("promote_blocked", "confirmed", "blocked_retry_time")
    d.result(req, CREATE)
    assert d.state.entries[HIKING].status == "promoted"


def test_a_blocked_promotion_is_retried_when_the_backend_answers_again(driver_factory):
    d, now = blocked_hiking(driver_factory)
    d.turn("I like tea", now + MIN)
    d.flush()
    (stage1,) = d.outbox
    d.outbox.clear()
    d.fail(stage1)  # a failure is no sign of health
    assert d.state.entries[HIKING].status == "promote_blocked"
    d.tick(now + 2 * MIN)
    (stage1,) = d.outbox  # re-issued after the failure
    d.outbox.clear()
    d.step("result", {"request_id": stage1.id, "task": "stage1", "output": {"facts": []}})
    assert [j["cause"] for j in d.journal() if j["event"] == "promotion_unblocked"] == ["backend_healthy"]
    assert d.state.entries[HIKING].status == "confirmed"
    assert [r.task for r in d.outbox] == ["promotion"]


def test_the_healthy_backend_retry_can_be_switched_off(driver_factory, memory_factory):
    d, now = blocked_hiking(driver_factory, memory=memory_factory(promote_blocked_retry_on_healthy_backend=False))
    d.turn("I like tea", now + MIN)
    d.flush()
    d.pump()
    assert d.state.entries[HIKING].status == "promote_blocked"


def test_a_blocked_reflection_stays_in_the_prompt_and_takes_feedback(driver_factory):
    from credence.tables.rendering import render_memory_block

    d, now = blocked_hiking(driver_factory)
    block = render_memory_block(Scope("acme", "u1", "aria"), d.state.entries.values(), now)
    assert [e.id for e in block.reflections] == [HIKING]
    d.feedback(HIKING, "deny", now + MIN, feedback_id="fb-deny")
    assert d.state.entries[HIKING].status == "denied"


def test_a_promotion_result_waiting_in_the_queue_is_not_asked_again_after_a_restart(driver_factory):
    from credence.streams.scope.scope_state import ScopeState

    d, req = promotion_in_flight(driver_factory)
    d.turn("I like tea", T0 + 3 * MIN)
    d.flush()  # Stage-1 in flight: the scope is held
    d.result(req, CREATE)
    assert [q["record"]["request_id"] for q in d.state.queue] == [req.id]
    d.state, d.boot = ScopeState.from_dict(d.state.to_dict()), "boot-2"
    d.outbox.clear()
    d.tick(T0 + 3 * MIN)
    assert [r.task for r in d.outbox] == ["stage1"]  # re-sent: lost with the old run; the merge was answered
    d.auto = True
    d.pump()
    assert d.state.entries[HIKING].status == "promoted" and d.state.queue == []
