"""In-flight evidence requests hold the scope; stale, failed and orphaned results are handled safely."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from credence.streams.scope.requests import reflection_id
from credence.streams.scope.scope_state import ScopeState

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = "acme/u1/aria"
HIKING = reflection_id(SCOPE, "The user loves hiking.")
TEA = reflection_id(SCOPE, "The user likes tea.")
FIXTURES_OK = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_inputs_queue_while_an_evidence_request_is_in_flight(driver_factory):
    d = driver_factory(auto=False)
    d.turn("I love hiking", T0)
    d.flush()
    assert d.state.blocked
    d.turn("I like tea", T0 + timedelta(seconds=5))
    d.feedback(HIKING, "confirm", T0 + timedelta(seconds=6))
    assert [q["kind"] for q in d.state.queue] == ["turn", "feedback"]
    assert d.state.buffer == []  # the queued turn is not applied yet
    d.pump()
    assert d.state.queue == []
    hiking = d.state.entries[HIKING]
    # the feedback ran after the reflection it names was created (0.4 seed + 1.0 confirm)
    assert hiking.evidence.reinforcement == 1.4
    assert hiking.status == "confirmed"


def test_promotion_does_not_hold_the_scope(driver_factory):
    d = driver_factory()
    d.turn("I love hiking", T0)
    d.flush()
    d.auto = False
    d.feedback(HIKING, "confirm", T0 + timedelta(minutes=1))
    d.feedback(HIKING, "confirm", T0 + timedelta(minutes=2), feedback_id="fb2")
    assert [r.task for r in d.state.requests.values()] == ["promotion"]
    assert not d.state.blocked  # the seed runs merge-on-promote outside the per-character lock
    d.turn("I like tea", T0 + timedelta(minutes=3))
    assert d.state.queue == [] and [t["id"] for t in d.state.buffer] == ["t2"]


def test_unknown_request_id_is_discarded_as_stale(driver_factory):
    d = driver_factory(auto=False)
    d.turn("I love hiking", T0)
    d.flush()
    before = json.dumps(d.state.to_dict(), sort_keys=True)
    ctx = d.step("result", {"request_id": "stage1-999", "task": "stage1",
                            "output": {"facts": [{"id": "f1", "text": "x", "subject": "x", "importance": 9,
                                                  "polarity": "positive", "source_turn_ids": ["t1"]}]}})
    assert any("stale" in line for line in ctx.log)
    assert ctx.emits == [] and ctx.requests == []
    assert json.dumps(d.state.to_dict(), sort_keys=True) == before


def test_a_result_applied_twice_is_stale_the_second_time(driver_factory):
    d = driver_factory(auto=False)
    d.turn("I love hiking", T0)
    d.flush()
    req = d.pump_one()
    facts_after_first = dict(d.state.facts)
    ctx = d.result(req, {"facts": []})
    assert any("stale" in line for line in ctx.log)
    assert d.state.facts == facts_after_first


def test_failed_result_keeps_the_request_and_the_next_step_reissues_it(driver_factory):
    d = driver_factory(auto=False).with_candidate()
    d.turn("I love hiking", T0)
    d.flush()
    d.pump_one()  # stage1 answered; stage2 is in flight now
    d.outbox.clear()
    (stage2,) = [r for r in d.state.requests.values()]
    assert stage2.task == "stage2"
    d.outbox.clear()
    d.fail(stage2)
    assert d.state.requests[stage2.id].failed is True
    assert d.state.requests[stage2.id].failures == 1
    assert all(f["stage2"] == "pending" for f in d.state.facts.values())  # facts stay unprocessed
    assert d.requests_of("synthesis") == []
    ctx = d.step("tick", {"type": "tick"})  # any next step re-issues it
    assert [r.id for r in ctx.requests] == [stage2.id]
    assert ctx.requests[0].payload == stage2.payload and not ctx.requests[0].failed
    ctx = d.step("tick", {"type": "tick"})
    assert ctx.requests == []  # re-issued once, not on every step
    d.pump()
    assert all(f["stage2"] == "done" for f in d.state.facts.values())
    assert HIKING in d.state.entries


def test_a_failed_stage1_keeps_its_turns(driver_factory):
    d = driver_factory(auto=False)
    d.turn("I love hiking", T0)
    d.flush()
    (req,) = d.outbox
    d.outbox.clear()
    d.fail(req)
    d.turn("I like tea", T0 + timedelta(seconds=1))  # queued behind the failed request, and re-issues it
    assert [r.id for r in d.outbox] == [req.id]
    d.pump()
    d.flush()
    d.pump()
    assert set(d.state.entries) == {HIKING, TEA}


def test_request_of_another_boot_is_reissued_after_a_restart(driver_factory):
    d = driver_factory(auto=False, boot="boot-1")
    d.turn("I love hiking", T0)
    d.flush()
    (req,) = d.outbox
    saved = json.loads(json.dumps(d.state.to_dict()))
    restarted = driver_factory(state=ScopeState.from_dict(saved), auto=False, boot="boot-2")
    ctx = restarted.step("tick", {"type": "tick"})
    assert [r.id for r in ctx.requests] == [req.id]
    assert ctx.requests[0].boot == "boot-2" and ctx.requests[0].payload == req.payload
    assert restarted.step("tick", {"type": "tick"}).requests == []
    restarted.pump()
    assert HIKING in restarted.state.entries


# -- latency independence -----------------------------------------------------------------------------

TEXTS = ["I love hiking", "I really love hiking", "I hate hiking", "I like tea", "I don't like tea",
         "yes, exactly", "no, that's wrong", "ok cool", "My name is Sam"]
inputs = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.integers(0, 7200), st.sampled_from(TEXTS)),
        st.tuples(st.just("ai"), st.integers(0, 600), st.lists(st.sampled_from([HIKING, TEA]), max_size=2)),
        st.tuples(st.just("feedback"), st.integers(0, 600),
                  st.tuples(st.sampled_from([HIKING, TEA]), st.sampled_from(["confirm", "deny", "ignore"]))),
        st.tuples(st.just("flush"), st.just(0), st.none()),
    ),
    max_size=25,
)


def feed(d, steps) -> None:
    at = T0
    for n, (kind, gap, arg) in enumerate(steps):
        at += timedelta(seconds=gap)
        if kind == "user":
            d.turn(arg, at)
        elif kind == "ai":
            d.turn("As you said before...", at, role="ai", surfaced_ids=list(arg))
        elif kind == "feedback":
            d.feedback(arg[0], arg[1], at, feedback_id=f"fb{n}")
        else:
            d.flush()
    d.flush()
    d.pump()


@FIXTURES_OK
@given(steps=inputs, powerful=st.booleans())
def test_final_state_does_not_depend_on_result_latency(driver_factory, pipeline_factory, memory_factory, steps,
                                                       powerful):
    pipeline = pipeline_factory(stage1_max_batch=2)
    # Promotion runs beside the scope by design (its result lands whenever it lands, version-checked), so
    # it is kept out of reach here: the property is about the evidence requests that hold the scope.
    memory = memory_factory(promoted_threshold=1000.0)
    prompt = driver_factory(pipeline=pipeline, memory=memory, powerful=powerful, auto=True)
    late = driver_factory(pipeline=pipeline, memory=memory, powerful=powerful, auto=False)
    feed(prompt, steps)
    feed(late, steps)
    assert late.state.queue == [] and late.state.requests == {}
    assert {k: e.to_dict() for k, e in late.state.entries.items()} == \
        {k: e.to_dict() for k, e in prompt.state.entries.items()}
    assert late.state.facts == prompt.state.facts
    assert [j["event_id"] for j in late.journal()] == [j["event_id"] for j in prompt.journal()]


# A request the backend refused (a 4xx, a payload that does not validate: retrying cannot help) is
# dead-lettered after max_request_failures. One that failed because the backend was unavailable (the
# runner's "transient" failure: 429/5xx/timeouts after the client's retries) is not: it waits with a
# back-off and is re-issued (the tests after these three).
def test_a_refused_request_failing_max_request_failures_times_is_dead_lettered_and_the_scope_moves_on(
        driver_factory):
    import base64

    d = driver_factory(auto=False).with_candidate()
    d.turn("I love hiking", T0)
    d.flush()
    d.pump_one()  # Stage-1 answered; Stage-2 in flight
    (stage2,) = d.state.requests.values()
    d.outbox.clear()
    d.feedback(HIKING, "confirm", T0 + timedelta(seconds=30))  # queued behind it
    for attempt in range(1, 5):
        d.fail(stage2, error=f"HTTP 500 #{attempt}")
        ctx = d.step("tick", {"type": "tick"})
        assert [r.id for r in ctx.requests] == [stage2.id]  # retried up to the limit
    assert [e for e in d.emits if e.topic.name == "dlq"] == []
    d.outbox.clear()
    ctx = d.fail(stage2, error="HTTP 500 #5")
    (dead,) = [e.record for e in ctx.emits if e.topic.name == "dlq"]
    assert dead["topic"] == "request:stage2" and "failed 5 times" in dead["reason"] and "HTTP 500 #5" in dead["reason"]
    original = json.loads(base64.b64decode(dead["original"]))
    assert original["payload"] == stage2.payload and original["scope"] == SCOPE and original["failures"] == 5
    (fact_id,) = [f["id"] for f in stage2.payload["facts"]]
    assert fact_id in dead["reason"]
    # its facts are failed for good (out of the state, never re-sent), and the scope moves on
    assert stage2.id not in d.state.requests and fact_id not in d.state.facts and d.state.knows_fact(fact_id)
    assert d.state.queue == [] and d.requests_of("synthesis") == []
    ctx = d.step("tick", {"type": "tick"})
    assert ctx.requests == []


@pytest.mark.parametrize("task", ["stage2", "synthesis"])
def test_facts_of_a_dead_lettered_request_leave_the_state_failed_and_are_journalled(driver_factory, pipeline_factory,
                                                                                    monkeypatch, task):
    d = driver_factory(auto=False, powerful=task == "stage2", pipeline=pipeline_factory(max_request_failures=2)).with_candidate()
    d.turn("I love hiking and I like tea", T0)
    d.flush()
    d.pump_one()  # Stage-1 answered: its facts wait for the task
    (req,) = [r for r in d.state.requests.values() if r.task == task]
    asked = [f["id"] for f in req.payload["facts"]]
    assert len(asked) == 2
    left: dict[str, tuple[str, str]] = {}  # how each fact was marked when it left the state
    trim = d.state.trim_facts

    def note_then_trim() -> None:
        left.update({k: (f["stage2"], f["synthesis"]) for k, f in d.state.facts.items()})
        trim()

    monkeypatch.setattr(d.state, "trim_facts", note_then_trim)
    d.fail(req, error="HTTP 500 #1")
    d.step("tick", {"type": "tick"})
    assert [j for j in d.journal() if j["event"] == "facts_failed"] == []  # not before the limit
    ctx = d.fail(req, error="HTTP 500 #2")
    (dead,) = [e.record for e in ctx.emits if e.topic.name == "dlq"]
    (failed,) = [e.record for e in ctx.emits if e.topic.name == "evidence" and e.record["event"] == "facts_failed"]
    assert (failed["cause"], failed["entry_kind"], failed["entry_id"]) == ("max_request_failures", "facts",
                                                                          failed["entry"]["id"])
    facts = failed["entry"]
    assert (facts["request_id"], facts["task"], facts["fact_ids"]) == (req.id, task, asked)
    assert facts["reason"] == dead["reason"] and "HTTP 500 #2" in facts["reason"]
    # marked failed, then out of the state (remembered, so a re-extraction is dropped, never re-sent)
    expected = ("failed", "failed") if task == "stage2" else ("skipped", "failed")
    assert {f: left[f] for f in asked} == dict.fromkeys(asked, expected)
    assert all(f not in d.state.facts and d.state.knows_fact(f) for f in asked)
    assert req.id not in d.state.requests and d.step("tick", {"type": "tick"}).requests == []


def held(ctx) -> list:
    """The requests a step issued that hold the scope (not the windows asked ahead)."""
    return [r for r in ctx.requests if not r.speculative]


def test_a_request_failing_while_the_backend_is_unavailable_waits_and_is_retried_not_dropped(
        driver_factory, pipeline_factory):
    pipeline = pipeline_factory(max_request_failures=2, failed_request_retry_seconds=60, stage1_max_wait_seconds=60)
    d = driver_factory(auto=False, pipeline=pipeline).with_candidate()
    d.turn("I love hiking", T0)
    d.flush()
    d.pump_one()  # Stage-1 answered; Stage-2 in flight
    (stage2,) = d.state.requests.values()
    (fact_id,) = [f["id"] for f in stage2.payload["facts"]]
    d.fail(stage2, error="HTTP 503 #1", transient=True)
    ctx = d.fail(stage2, error="HTTP 503 #2", transient=True)
    assert [r.id for r in ctx.requests] == [stage2.id]  # the ordinary retry before the limit
    # past the limit: journalled as facts_failed, but nothing dead-lettered and the fact still waits
    (failed,) = [j for j in d.journal() if j["event"] == "facts_failed"]
    assert (failed["cause"], failed["entry"]["fact_ids"]) == ("max_request_failures", [fact_id])
    assert [e for e in d.emits if e.topic.name == "dlq"] == []
    assert stage2.id in d.state.requests and d.state.facts[fact_id]["stage2"] == "pending"
    # it waits for its back-off in the scope's event time: a turn 30 s later does not re-issue it ...
    # (the Stage-1 of the queued turns' window is asked ahead meanwhile: speculation.py)
    assert held(d.turn("I like tea", T0 + timedelta(seconds=30))) == []
    # ... one 60 s after it failed does
    assert [r.id for r in held(d.turn("I like jazz", T0 + timedelta(seconds=61)))] == [stage2.id]
    d.fail(stage2, error="HTTP 503 #3", transient=True)  # still down: the next wait is twice as long
    assert held(d.turn("I like rain", T0 + timedelta(seconds=100))) == []
    # a tick without a time (a replay's wall-clock pace) tries again whatever the event time
    assert [r.id for r in held(d.step("tick", {"type": "tick"}))] == [stage2.id]
    d.pump()  # the backend answers again: the fact is processed and the queued turns run
    assert fact_id not in d.state.facts and d.state.knows_fact(fact_id)
    assert d.state.queue == [] and d.state.requests == {}
    assert {HIKING, TEA} <= set(d.state.entries)
    assert len([j for j in d.journal() if j["event"] == "facts_failed"]) == 1  # once, superseded by the result


def test_a_stage1_window_failing_while_the_backend_is_unavailable_keeps_its_turns(driver_factory, pipeline_factory):
    d = driver_factory(auto=False, pipeline=pipeline_factory(max_request_failures=1))
    d.turn("I love hiking", T0)
    d.flush()
    (stage1,) = d.outbox
    ctx = d.fail(stage1, transient=True)
    assert ctx.emits == [] and ctx.requests == []  # nothing dead-lettered, nothing re-sent at once
    waiting = d.state.requests[stage1.id]
    assert waiting.payload["turns"][0]["text"] == "I love hiking"
    assert waiting.retry_at is not None and type(waiting).from_dict(waiting.to_dict()) == waiting  # saved as is
    assert [r.id for r in d.step("tick", {"type": "tick"}).requests] == [stage1.id]
    d.pump()
    assert HIKING in d.state.entries


def test_max_request_failures_is_a_setting(driver_factory, pipeline_factory):
    d = driver_factory(auto=False, pipeline=pipeline_factory(max_request_failures=1))
    d.turn("I love hiking", T0)
    d.flush()
    (stage1,) = d.outbox
    ctx = d.fail(stage1)
    assert [e.topic.name for e in ctx.emits] == ["dlq"]  # a request without facts journals no facts event
    (dead,) = [e.record for e in ctx.emits if e.topic.name == "dlq"]
    assert json.loads(__import__("base64").b64decode(dead["original"]))["payload"]["turns"][0]["text"] == \
        "I love hiking"
    assert d.state.requests == {}
