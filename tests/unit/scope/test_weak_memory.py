"""Powerful memory off: no Stage-2, straight synthesis, age-driven confirm/promote in event time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from credence.streams.scope.requests import reflection_id

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = "acme/u1/aria"
HIKING = reflection_id(SCOPE, "The user loves hiking.")
TEA = reflection_id(SCOPE, "The user likes tea.")
MIN, HOUR, DAY = timedelta(minutes=1), timedelta(hours=1), timedelta(days=1)


def test_no_stage2_and_facts_go_straight_to_synthesis(driver_factory):
    d = driver_factory(powerful=False)
    d.turn("I love hiking", T0)
    d.flush()
    d.turn("I really love hiking", T0 + MIN)
    d.flush()
    assert d.requests_of("stage2") == []
    assert [len(r.payload["facts"]) for r in d.requests_of("synthesis")] == [1, 1]
    assert all(f["stage2"] == "skipped" and f["synthesis"] == "done" for f in d.state.facts.values())
    hiking = d.state.entries[HIKING]
    assert hiking.evidence.user_fact_reinforce_count == 0  # no Stage-2 signal while off


def test_fallback_confirms_after_7_days_and_promotes_7_days_later(driver_factory):
    d = driver_factory(powerful=False)
    d.turn("I love hiking", T0)
    d.flush()
    created = d.state.entries[HIKING].created_at
    at = T0
    while at < T0 + 6 * DAY + 23 * HOUR:
        at += HOUR
        d.tick(at)
    assert d.state.entries[HIKING].status == "pending"
    while at < T0 + 15 * DAY:
        at += HOUR
        d.tick(at)
    reflection = d.state.entries[HIKING]
    assert reflection.status == "promoted"
    assert 7 * DAY <= reflection.confirmed_at - created < 7 * DAY + HOUR
    assert 7 * DAY <= reflection.promoted_at - reflection.confirmed_at < 7 * DAY + HOUR
    (persona,) = d.personas()
    assert reflection.merged_into_id == persona.id and persona.merged_from_ids == (HIKING,)
    causes = [(j["event"], j["cause"], j["to_status"]) for j in d.journal() if j["event"] in ("transition", "merged")]
    assert causes == [("transition", "fallback", "confirmed"), ("merged", "fallback_merge", "active"),
                      ("transition", "fallback", "promoted")]
    assert d.requests_of("promotion") == []  # the simple non-LLM merge path


def test_fallback_catches_up_in_one_long_gap_one_transition_per_sweep(driver_factory):
    d = driver_factory(powerful=False)
    d.turn("I love hiking", T0)
    d.flush()
    d.tick(T0 + 20 * DAY)
    reflection = d.state.entries[HIKING]
    assert reflection.status == "promoted"
    assert reflection.confirmed_at < reflection.promoted_at  # never pending -> promoted in one visit
    assert reflection.promoted_at - reflection.confirmed_at >= 7 * DAY


def test_fallback_uses_age_not_score(driver_factory):
    d = driver_factory(powerful=False)
    d.turn("I love hiking", T0)
    d.flush()
    d.feedback(HIKING, "ignore", T0 + MIN)
    d.feedback(HIKING, "ignore", T0 + 2 * MIN, feedback_id="fb2")
    d.feedback(HIKING, "ignore", T0 + 3 * MIN, feedback_id="fb3")  # 0.4 - 0.6 < 0
    d.tick(T0 + 8 * DAY)
    assert d.state.entries[HIKING].status == "confirmed"


def test_score_transitions_do_not_run_while_off(driver_factory):
    d = driver_factory(powerful=False)
    d.turn("I love hiking", T0)
    d.flush()
    d.feedback(HIKING, "confirm", T0 + MIN)
    d.feedback(HIKING, "confirm", T0 + 2 * MIN, feedback_id="fb2")
    assert d.state.entries[HIKING].status == "pending"  # score 2.4, but confirmation is by age now
    assert d.requests_of("promotion") == []


def test_switching_back_on_does_not_send_facts_gathered_while_off_to_stage2(driver_factory, pipeline_factory):
    d = driver_factory(powerful=False, pipeline=pipeline_factory(synthesis_min_facts=5))
    d.turn("I love hiking", T0)
    d.turn("I like tea", T0 + MIN)
    d.flush()  # a flush synthesizes what is pending; gather two more facts that stay unsynthesized
    d.turn("I have a dog", T0 + 2 * MIN)
    d.turn("My name is Sam", T0 + 3 * MIN)
    d.tick(T0 + 4 * MIN)
    gathered_off = set(d.state.facts) | set(d.state.done_facts)
    assert len(gathered_off) == 4
    d.powerful = True
    d.turn("I live in Berlin", T0 + 5 * MIN)
    d.flush()
    stage2_ids = {f["id"] for r in d.requests_of("stage2") for f in r.payload["facts"]}
    assert stage2_ids and not stage2_ids & gathered_off
    assert {f["fact"]["text"] for f in d.state.facts.values() if f["stage2"] == "done"} == \
        {"The user lives in Berlin."}
    # the facts of the off period are still synthesized, not lost (the first flush only closed the window)
    d.flush()
    assert not gathered_off & set(d.state.facts) and gathered_off <= set(d.state.done_facts)


def test_switching_off_restarts_the_confirmed_clock(driver_factory):
    d = driver_factory(powerful=True)
    d.turn("I love hiking", T0)
    d.flush()
    d.feedback(HIKING, "confirm", T0 + MIN)  # confirmed by score while on
    d.tick(T0 + 5 * DAY)
    d.powerful = False
    d.tick(T0 + 5 * DAY + HOUR)  # switched off here
    d.tick(T0 + 11 * DAY)
    assert d.state.entries[HIKING].status == "confirmed"  # 7 days from switch-off, not from confirmation
    d.tick(T0 + 13 * DAY)
    assert d.state.entries[HIKING].status == "promoted"


def test_facts_waiting_for_stage2_when_switched_off_go_to_synthesis(driver_factory):
    d = driver_factory(auto=False).with_candidate()
    d.turn("I love hiking", T0)
    d.flush()
    stage1 = d.outbox.pop(0)
    facts = [{"id": f"f{n:02d}", "text": f"The user likes topic {n}.", "subject": f"topic {n}", "importance": 6,
              "polarity": "positive", "source_turn_ids": ["t1"], "origin": "user"} for n in range(25)]
    d.result(stage1, {"facts": facts})
    first = d.outbox.pop(0)
    assert first.task == "stage2" and len(first.payload["facts"]) == 20
    d.powerful = False
    d.result(first, {"classifications": []})
    d.pump()
    d.flush()
    assert len(d.requests_of("stage2")) == 1  # nothing more goes to Stage-2 while off
    synthesized = {f["id"] for r in d.requests_of("synthesis") for f in r.payload["facts"]}
    assert synthesized == {f["id"] for f in facts}  # the five left over are not stranded
    assert all(f["synthesis"] == "done" for f in d.state.facts.values())


def test_a_stage2_result_arriving_after_switch_off_is_not_evidence(driver_factory):
    d = driver_factory()
    d.turn("I love hiking", T0)
    d.flush()
    d.auto = False
    d.turn("I really love hiking and I like tea", T0 + MIN)
    d.flush()
    d.pump_one()  # stage1
    (stage2,) = d.outbox
    d.outbox.clear()
    d.powerful = False
    d.tick(T0 + 2 * MIN)  # switched off while Stage-2 runs
    assert d.outbox == []
    d.auto = True
    d.outbox.append(stage2)
    d.pump()
    assert d.state.entries[HIKING].evidence.user_fact_reinforce_count == 0
    synthesized = sorted(f["text"] for r in d.requests_of("synthesis")[1:] for f in r.payload["facts"])
    # both facts take the "off" path: straight to synthesis (the hiking one is the same observation)
    assert synthesized == ["The user likes tea.", "The user loves hiking."]


def test_a_stage2_result_arriving_after_the_switch_went_off_is_dropped(driver_factory):
    d = driver_factory(auto=False)
    d.turn("I love hiking", T0)
    d.flush()
    d.pump_one()  # Stage-1
    d.pump_one()  # Stage-2 (nothing to match yet) -> synthesis
    d.pump()
    d.turn("I really love hiking", T0 + MIN)
    d.flush()
    d.pump_one()  # Stage-1: the new fact waits for Stage-2
    (stage2,) = [r for r in d.outbox if r.task == "stage2"]
    d.outbox.clear()
    assert [o["id"] for o in stage2.payload["observations"]] == [HIKING]
    d.powerful = False
    before = d.state.entries[HIKING]
    ctx = d.result(stage2, {"classifications": [{"fact_id": stage2.payload["facts"][0]["id"],
                                                  "observation_id": HIKING, "relation": "reinforce"}]})
    assert any("dropped: powerful memory is off" in line for line in ctx.log)
    assert d.state.entries[HIKING].evidence == before.evidence  # no Stage-2 signal while off
    assert [j for j in d.journal() if j["event"] == "signal" and j["cause"] == "user_fact_reinforce"] == []
    # its fact takes the "off" path: straight to synthesis
    (synthesis,) = [r for r in d.outbox if r.task == "synthesis"]
    assert [f["id"] for f in synthesis.payload["facts"]] == [f["id"] for f in stage2.payload["facts"]]


def test_a_stage2_request_lost_or_failed_while_off_is_not_re_sent(driver_factory):
    d = driver_factory(auto=False).with_candidate()
    d.turn("I love hiking", T0)
    d.flush()
    d.pump_one()
    (stage2,) = [r for r in d.outbox if r.task == "stage2"]
    d.outbox.clear()
    d.powerful = False
    d.fail(stage2)
    d.boot = "boot-2"
    assert [r.task for r in d.outbox] == ["synthesis"] and stage2.id not in d.state.requests
    d.tick(T0 + MIN)  # a restart re-sends what is still in flight: never the Stage-2 call
    assert "stage2" not in [r.task for r in d.outbox]


@pytest.mark.parametrize("ending", ["result", "failed", "lost with the worker"])
def test_a_dropped_stage2_request_is_journalled_with_the_facts_that_took_the_off_path(driver_factory, ending):
    d = driver_factory(auto=False).with_candidate()
    d.turn("I love hiking and I like tea", T0)
    d.flush()
    d.pump_one()  # Stage-1: its facts wait for Stage-2
    (stage2,) = [r for r in d.outbox if r.task == "stage2"]
    d.outbox.clear()
    asked = [f["id"] for f in stage2.payload["facts"]]
    assert len(asked) == 2
    d.powerful = False
    if ending == "result":
        d.result(stage2, {"classifications": []})
    elif ending == "failed":
        d.fail(stage2)
    else:
        d.boot = "boot-2"
        d.tick(T0 + MIN)  # the new run would re-send it: dropped instead
    (dropped,) = [j for j in d.journal() if j["event"] == "stage2_dropped"]
    assert (dropped["cause"], dropped["entry_kind"], dropped["tenant"], dropped["user"], dropped["character"]) == \
        ("switch_off", "facts", "acme", "u1", "aria")
    facts = dropped["entry"]
    assert (facts["request_id"], facts["task"], facts["fact_ids"]) == (stage2.id, "stage2", asked)
    assert "powerful memory" in facts["reason"]
    assert dropped["event_id"] == f"{dropped['entry_id']}@1" and dropped["entry_id"] == facts["id"]
    # the facts it names are the ones that took the "off" path: no Stage-2, straight to synthesis
    assert all(d.state.facts[f]["stage2"] == "skipped" for f in asked)
    (synthesis,) = [r for r in d.outbox if r.task == "synthesis"]
    assert [f["id"] for f in synthesis.payload["facts"]] == asked
    # a replay of the same inputs journals the same event (the sink keeps one copy per event id)
    again = driver_factory(auto=False).with_candidate()
    again.turn("I love hiking and I like tea", T0)
    again.flush()
    again.pump_one()
    again.outbox.clear()
    again.powerful = False
    again.result(again.state.requests[stage2.id], {"classifications": []})
    assert [j for j in again.journal() if j["event"] == "stage2_dropped"][0]["event_id"] == dropped["event_id"]


def test_a_stage2_result_applied_while_on_journals_no_drop(driver_factory):
    d = driver_factory().with_candidate()
    d.turn("I love hiking", T0)
    d.flush()
    d.turn("I really love hiking", T0 + MIN)
    d.flush()
    assert len(d.requests_of("stage2")) == 2
    assert [j for j in d.journal() if j["entry_kind"] == "facts"] == []


def test_a_promotion_result_arriving_after_the_switch_went_off_is_dropped(driver_factory):
    d = driver_factory()
    d.turn("I love hiking", T0)
    d.flush()
    d.feedback(HIKING, "confirm", T0 + MIN)
    d.auto = False
    d.feedback(HIKING, "confirm", T0 + 2 * MIN, feedback_id="fb2")
    (req,) = d.outbox
    d.outbox.clear()
    assert d.state.entries[HIKING].promote_attempts == 1
    d.powerful = False
    ctx = d.result(req, {"decision": {"action": "create", "target_id": None, "text": "The user loves hiking."}})
    assert any("dropped" in line for line in ctx.log)
    hiking = d.state.entries[HIKING]
    assert hiking.status == "confirmed" and hiking.promote_attempts == 0 and d.personas() == []
    (dropped,) = [j for j in d.journal() if j["event"] == "promotion_dropped"]
    assert dropped["cause"] == "switch_off" and dropped["entry"] == hiking.to_dict()
    # the age-driven fallback takes over: promoted 7 days after the switch went off, without the LLM
    d.tick(T0 + 8 * DAY)
    assert d.state.entries[HIKING].status == "promoted" and d.requests_of("promotion") == [req]


def test_a_blocked_reflection_takes_the_age_driven_path_while_off(driver_factory):
    from dataclasses import replace

    d = driver_factory(powerful=False)
    d.turn("I love hiking", T0)
    d.flush()
    hiking = d.state.entries[HIKING]
    d.state.entries[HIKING] = replace(hiking, status="promote_blocked", confirmed_at=T0, promote_attempts=5,
                                      last_promote_attempt_at=T0)
    d.tick(T0 + 6 * DAY)
    assert d.state.entries[HIKING].status == "promote_blocked"
    d.tick(T0 + 7 * DAY + HOUR)
    assert d.state.entries[HIKING].status == "promoted" and len(d.personas()) == 1
    events = [(j["event"], j["cause"], j["to_status"]) for j in d.journal() if j["entry_id"] == HIKING][-2:]
    assert events == [("promotion_unblocked", "fallback", "confirmed"), ("transition", "fallback", "promoted")]
