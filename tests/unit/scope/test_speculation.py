"""Speculative Stage-1 (streams/scope/speculation.py): a held scope's next windows are asked ahead, and the
scope still ends exactly where it ends when every answer comes right after its request."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from credence.streams.scope import results, speculation
from credence.streams.scope.requests import reflection_id
from credence.streams.scope.scope_state import Request, ScopeState
from credence.streams.scope.tasks import TaskName
from credence.streams.scope.window import buffered
from credence.tables.clock import format_instant

from .conftest import run_request

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = "acme/u1/aria"
USER_TEXTS = ("I love hiking", "I like tea", "I work as a nurse", "I have a dog named Rex", "I live in Lyon",
              "I don't like tea", "No, that's not true", "ok", "I really love jazz", "My name is Sam")
AI_TEXTS = ("You love hiking, right?", "Tea again?", "Tell me more.", "How is Rex?")
# Reflections the rules logic writes from some of the user texts: feedback and surfaced ids name them.
TARGETS = tuple(reflection_id(SCOPE, t) for t in ("The user loves hiking.", "The user likes tea.",
                                                   "The user works as a nurse.", "The user lives in Lyon."))
GAPS = (5, 40, 130, 700)  # seconds between inputs: around the windows' quiet gap and maximum age below
WINDOWS = dict(stage1_max_batch=3, stage1_quiet_seconds=120, stage1_max_wait_seconds=600)


def window_pipeline(pipeline_factory, **kw):
    return pipeline_factory(**WINDOWS | kw)


# -- inputs ------------------------------------------------------------------------------------------

_input = st.one_of(
    st.tuples(st.just("turn"), st.just("user"), st.sampled_from(USER_TEXTS), st.sampled_from(GAPS)),
    st.tuples(st.just("turn"), st.just("ai"), st.sampled_from(AI_TEXTS), st.sampled_from(GAPS),
              st.lists(st.sampled_from(TARGETS), max_size=2, unique=True)),
    st.tuples(st.just("feedback"), st.sampled_from(TARGETS), st.sampled_from(("confirm", "deny", "ignore")),
              st.sampled_from(GAPS)),
    st.tuples(st.just("tick"), st.sampled_from(GAPS)),
    st.tuples(st.just("flush")),
)


def feed(d, op: tuple, at: datetime, n: int) -> None:
    """One input of the scope, as the agent would apply it."""
    if op[0] == "turn":
        d.turn(op[2], at, role=op[1], surfaced_ids=op[4] if op[1] == "ai" else None, turn_id=f"t{n}")
    elif op[0] == "feedback":
        d.feedback(op[1], op[2], at, feedback_id=f"fb{n}")
    elif op[0] == "tick":
        d.tick(at)
    else:
        d.flush()


def times(ops: list[tuple]) -> list[datetime]:
    at, out = T0, []
    for op in ops:
        at += timedelta(seconds=op[3] if op[0] in ("turn", "feedback") else op[1] if op[0] == "tick" else 0)
        out.append(at)
    return out


# -- the pipelined run: answers late, out of order, duplicated, a speculative call failing, restarts ---

class Late:
    """Answers a held scope's requests at positions drawn by hypothesis."""

    def __init__(self, d, draw):
        self.d, self.draw, self.failed_once = d, draw, set()

    def answer(self, k: int) -> None:
        req = self.d.outbox.pop(k)
        if self.draw(st.integers(0, 4)) == 4:
            self.d.outbox.insert(self.draw(st.integers(0, len(self.d.outbox))), req)  # a duplicate, later
        record = {"request_id": req.id, "task": req.task}
        if req.id.startswith("stage1-s") and req.id not in self.failed_once and self.draw(st.booleans()):
            self.failed_once.add(req.id)
            self.d.step("failed", record | {"error": "boom"})
            return
        self.d.step("result", record | {"output": run_request(req)})

    def some(self) -> None:
        for _ in range(self.draw(st.integers(0, 3))):
            if self.d.outbox:
                self.answer(self.draw(st.integers(0, len(self.d.outbox) - 1)))

    def stray(self) -> None:
        """A wrong guess: a speculative request for some run of the scope's waiting turns (a window that
        may never be cut), as a prediction the switch or a bug made wrong would be."""
        s = self.d.state
        turns = s.buffer + [buffered(q["record"]) for q in s.queue if q["kind"] == "turn"]
        if not turns:
            return
        i = self.draw(st.integers(0, len(turns) - 1))
        window = turns[i:self.draw(st.integers(i + 1, len(turns)))]
        req = Request(id=speculation.request_id(window), task="stage1", payload={"turns": window},
                      issued_at=s.clock or T0, boot=self.d.boot, speculative=True)
        if req.id not in s.requests:
            s.requests[req.id] = req
            self.d.outbox.append(req)

    def restart(self) -> None:
        """A crash: the state as stored, a new worker run; the answers not yet posted are lost."""
        self.d.state = ScopeState.from_dict(orjson.loads(orjson.dumps(self.d.state.to_dict())))
        self.d.boot = f"boot-{self.draw(st.integers(2, 10**6))}"
        self.d.outbox = [r for r in self.d.outbox if self.draw(st.booleans())]

    def all(self) -> None:
        """Everything answered, lost requests asked again (a tick without a time), until nothing waits."""
        for _ in range(100):
            while self.d.outbox:
                self.answer(0)
            if not self.d.state.queue and not self.d.state.blocked:
                return
            self.d.step("tick", {"type": "tick"})
        raise AssertionError("the scope still waits after every answer came")


def outcome(d, windows: list) -> dict:
    s = d.state
    return {"entries": {k: e.to_dict() for k, e in sorted(s.entries.items())}, "facts": s.facts,
            "done_facts": s.done_facts, "buffer": s.buffer, "clock": s.clock, "queue": s.queue,
            "held": s.blocked, "emits": [(e.topic, e.record) for e in d.emits], "windows": windows}


def applied_windows(monkeypatch) -> list:
    """Stage-1 payloads in the order their answers are applied."""
    seen, stage1 = [], results.SCOPE_TASKS[TaskName.STAGE1]

    def recording(state, payload, output, ctx):
        seen.append([t["id"] for t in payload["turns"]])
        stage1.handle(state, payload, output, ctx)

    monkeypatch.setitem(results.SCOPE_TASKS, TaskName.STAGE1, replace(stage1, handle=recording))
    return seen


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(ops=st.lists(_input, min_size=1, max_size=30), data=st.data())
def test_pipelined_and_serialised_runs_end_equal(ops, data, driver_factory, memory_factory, pipeline_factory):
    # No promotion: it never holds the scope, so where its answer lands depends on latency by design (the
    # version check decides); every evidence request here holds it.
    memory = memory_factory(promoted_threshold=1000.0)
    at = times(ops)
    with pytest.MonkeyPatch.context() as mp:
        windows = applied_windows(mp)
        serial = driver_factory(memory=memory, pipeline=window_pipeline(pipeline_factory))
        for n, op in enumerate(ops):
            feed(serial, op, at[n], n)
        serial.flush()
        expected = outcome(serial, list(windows))
        windows.clear()
        piped = driver_factory(memory=memory, pipeline=window_pipeline(pipeline_factory), auto=False)
        late = Late(piped, data.draw)
        for n, op in enumerate(ops):
            if op[0] == "tick":
                late.all()  # a tick while held is not queued (step.py): it comes when the scope waits for nothing
            feed(piped, op, at[n], n)
            late.some()
            if data.draw(st.integers(0, 9)) == 9:
                late.restart()
            if data.draw(st.integers(0, 4)) == 4:
                late.stray()
        piped.flush()
        late.all()
        assert outcome(piped, list(windows)) == expected


# -- examples ----------------------------------------------------------------------------------------

def held_with_queued_windows(driver_factory, pipeline_factory, **kw):
    """A scope held by its first window's Stage-1, with four more user turns queued (two windows of two)."""
    d = driver_factory(auto=False, pipeline=window_pipeline(pipeline_factory, stage1_max_batch=2, **kw))
    d.turn("I love hiking", T0)
    d.turn("I like tea", T0 + timedelta(seconds=5))
    assert [r.task for r in d.outbox] == ["stage1"] and d.state.blocked
    for i, text in enumerate(("I work as a nurse", "I live in Lyon", "I really love jazz", "I have a dog")):
        d.turn(text, T0 + timedelta(seconds=10 + 5 * i))
    return d


def test_the_next_windows_stage1_goes_out_while_the_scope_is_held(driver_factory, pipeline_factory):
    d = held_with_queued_windows(driver_factory, pipeline_factory)
    ahead = [r for r in d.outbox if r.speculative]
    assert [[t["id"] for t in r.payload["turns"]] for r in ahead] == [["t3", "t4"], ["t5", "t6"]]
    assert [q["kind"] for q in d.state.queue] == ["turn"] * 4  # nothing of the queue ran
    assert d.state.blocked and [r.id for r in d.state.requests.values() if not r.speculative] == ["stage1-1"]


def test_an_early_answer_is_applied_only_when_its_window_is_due(driver_factory, pipeline_factory):
    d = held_with_queued_windows(driver_factory, pipeline_factory, stage1_speculative_windows=1)
    held, ahead = d.outbox
    d.step("result", {"request_id": ahead.id, "task": "stage1", "output": run_request(ahead)})
    assert d.state.facts == {} and d.state.requests[ahead.id].answer is not None  # kept, not applied
    d.outbox = [held]
    d.pump()
    # the window [t3, t4] was never asked again: its stored answer was applied when the scope cut it
    asked = [[t["id"] for t in r.payload["turns"]] for r in d.issued if r.task == "stage1"]
    assert asked.count(["t3", "t4"]) == 1 and ["t5", "t6"] in asked
    texts = {e.text for e in d.state.entries.values()}
    assert {"The user works as a nurse.", "The user lives in Lyon."} <= texts
    assert d.state.requests == {} and d.state.queue == []


def test_a_window_still_in_flight_is_adopted_and_holds_the_scope(driver_factory, pipeline_factory):
    d = held_with_queued_windows(driver_factory, pipeline_factory, stage1_speculative_windows=1)
    held, ahead = d.outbox
    d.outbox = [held]
    while d.state.requests[ahead.id].speculative:  # the first window's calls, until the drain reaches [t3, t4]
        d.pump_one()
    assert d.state.blocked and [r.id for r in d.state.requests.values() if not r.speculative] == [ahead.id]
    d.outbox.append(ahead)
    d.pump()
    assert d.state.requests == {} and d.state.queue == [] and d.state.buffer == []


def test_a_mispredicted_window_is_dropped_and_its_late_answer_is_stale(driver_factory, pipeline_factory,
                                                                       monkeypatch):
    windows = applied_windows(monkeypatch)
    d = held_with_queued_windows(driver_factory, pipeline_factory, stage1_speculative_windows=1)
    held, ahead = d.outbox
    d.powerful = False  # switched off: each user turn is a window of its own, not [t3, t4]
    d.outbox = [held]
    d.pump()
    assert ahead.id not in d.state.requests  # dropped when t3 went out alone
    ctx = d.step("result", {"request_id": ahead.id, "task": "stage1", "output": run_request(ahead)})
    assert any("stale" in line for line in ctx.log)
    assert windows[:3] == [["t1", "t2"], ["t3"], ["t4"]]


def test_a_failed_speculative_call_is_asked_normally_when_its_window_comes(driver_factory, pipeline_factory):
    d = held_with_queued_windows(driver_factory, pipeline_factory, stage1_speculative_windows=1)
    held, ahead = d.outbox
    ctx = d.step("failed", {"request_id": ahead.id, "task": "stage1", "error": "HTTP 500"})
    assert ctx.requests == [] and d.state.requests[ahead.id].failed  # not asked again meanwhile
    assert d.step("tick", {"type": "tick"}).requests == []
    d.outbox, before = [held], len(d.issued)
    d.pump()
    # asked again when the scope cut [t3, t4], as the window's own request (its failure not counted)
    again = [r for r in d.issued[before:] if r.payload == ahead.payload]
    assert [r.id for r in again] == [ahead.id] and not again[0].speculative and again[0].failures == 0
    assert d.state.requests == {} and d.state.queue == []
    assert "The user works as a nurse." in {e.text for e in d.state.entries.values()}


def test_a_speculative_request_lost_with_a_worker_is_asked_again_and_its_answer_round_trips(
        driver_factory, pipeline_factory):
    d = held_with_queued_windows(driver_factory, pipeline_factory)
    held, first, second = d.outbox
    d.step("result", {"request_id": first.id, "task": "stage1", "output": run_request(first)})
    d.state = ScopeState.from_dict(orjson.loads(orjson.dumps(d.state.to_dict())))
    assert d.state.requests[first.id].answer == {"request_id": first.id, "task": "stage1",
                                                 "output": run_request(first)}
    d.boot = "boot-2"
    ctx = d.step("tick", {"type": "tick"})
    # the held request and the unanswered window go out again; the answered one is not asked twice
    assert sorted(r.id for r in ctx.requests) == sorted([held.id, second.id])


def test_nothing_is_asked_ahead_when_disabled_or_when_not_held(driver_factory, pipeline_factory):
    d = held_with_queued_windows(driver_factory, pipeline_factory, stage1_speculative_windows=0)
    assert [r.speculative for r in d.outbox] == [False]
    free = driver_factory(pipeline=window_pipeline(pipeline_factory, stage1_max_batch=2))  # answered at once
    for i in range(6):
        free.turn("I love hiking" if i % 2 else "I like tea", T0 + timedelta(seconds=5 * i))
    assert not any(r.speculative for r in free.issued)


def test_a_queued_flush_and_quiet_gap_are_predicted(driver_factory, pipeline_factory):
    d = driver_factory(auto=False, pipeline=window_pipeline(pipeline_factory, stage1_max_batch=8))
    d.turn("I love hiking", T0)
    d.flush()
    d.turn("I like tea", T0 + timedelta(seconds=5))
    d.turn("I work as a nurse", T0 + timedelta(seconds=500))  # after the quiet gap: [t2] closes
    d.turn("I live in Lyon", T0 + timedelta(seconds=505))
    d.step("flush", {"type": "flush", "ts": format_instant(T0 + timedelta(seconds=506))})
    ahead = [[t["id"] for t in r.payload["turns"]] for r in d.outbox if r.speculative]
    assert ahead == [["t2"], ["t3", "t4"]]
