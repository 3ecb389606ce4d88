"""Stage-1 window: user turns buffer until the batch is full, the oldest waited long enough, or a flush."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SEC = timedelta(seconds=1)
FIXTURES_OK = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def stage1_turn_ids(driver) -> list[list[str]]:
    return [[t["id"] for t in r.payload["turns"]] for r in driver.requests_of("stage1")]


def test_user_turns_wait_until_the_batch_is_full(driver_factory, pipeline_factory):
    d = driver_factory(pipeline=pipeline_factory(stage1_max_batch=3), auto=False)
    d.turn("I love hiking", T0)
    d.turn("nice!", T0 + SEC, role="ai")
    d.turn("I like tea", T0 + 2 * SEC)
    assert d.requests_of("stage1") == []
    assert [t["id"] for t in d.state.buffer] == ["t1", "t2", "t3"]
    d.turn("I have a dog", T0 + 3 * SEC)
    assert stage1_turn_ids(d) == [["t1", "t2", "t3", "t4"]]  # AI turns ride along, only user turns count
    assert d.state.buffer == [] and d.state.window_started_at is None


def test_window_closes_after_max_wait_of_event_time(driver_factory, pipeline_factory):
    d = driver_factory(pipeline=pipeline_factory(stage1_max_batch=8, stage1_max_wait_seconds=60), auto=False)
    d.turn("I love hiking", T0)
    d.turn("I like tea", T0 + 59 * SEC)
    assert d.requests_of("stage1") == []
    d.tick(T0 + 60 * SEC)
    assert stage1_turn_ids(d) == [["t1", "t2"]]


def test_window_wait_is_counted_from_the_first_turn_of_the_window(driver_factory, pipeline_factory):
    d = driver_factory(pipeline=pipeline_factory(stage1_max_batch=8, stage1_max_wait_seconds=60))
    d.turn("I love hiking", T0)
    d.turn("I like tea", T0 + 61 * SEC)  # closes the first window, itself included
    d.turn("I have a dog", T0 + 100 * SEC)  # a new window starts here
    d.turn("My name is Sam", T0 + 150 * SEC)
    assert stage1_turn_ids(d) == [["t1", "t2"]]
    d.turn("I live in Berlin", T0 + 160 * SEC)
    assert stage1_turn_ids(d) == [["t1", "t2"], ["t3", "t4", "t5"]]


def test_ai_turns_alone_never_close_a_window_by_time(driver_factory):
    d = driver_factory(auto=False)
    d.turn("Hello, how are you?", T0, role="ai")
    d.tick(T0 + timedelta(hours=2))
    assert d.requests_of("stage1") == []
    assert [t["id"] for t in d.state.buffer] == ["t1"]


def test_flush_closes_the_window(driver_factory):
    d = driver_factory(auto=False)
    d.turn("I love hiking", T0)
    d.flush()
    assert stage1_turn_ids(d) == [["t1"]]
    d.flush()  # nothing buffered: nothing to extract
    assert len(d.requests_of("stage1")) == 1


def test_turns_arriving_while_stage1_runs_wait_in_the_queue(driver_factory):
    d = driver_factory(auto=False)
    d.turn("I love hiking", T0)
    d.flush()
    d.turn("I like tea", T0 + SEC)
    d.flush()
    assert [q["kind"] for q in d.state.queue] == ["turn", "flush"]
    assert d.state.buffer == []
    d.pump()
    assert stage1_turn_ids(d) == [["t1"], ["t2"]]
    assert d.state.queue == []


TEXTS = ["I love hiking", "I like tea", "hello", "I have a dog", "My name is Sam", "yes, exactly"]

ops = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["user", "ai"]), st.integers(0, 400), st.sampled_from(TEXTS)),
        st.tuples(st.just("flush"), st.just(0), st.just("")),
        st.tuples(st.just("tick"), st.integers(0, 400), st.just("")),
    ),
    max_size=30,
)


@FIXTURES_OK
@given(ops=ops, batch=st.integers(1, 4), wait=st.integers(0, 120), auto=st.booleans())
def test_every_turn_ends_up_in_exactly_one_stage1_request_in_order(driver_factory, pipeline_factory, ops, batch,
                                                                   wait, auto):
    d = driver_factory(pipeline=pipeline_factory(stage1_max_batch=batch, stage1_max_wait_seconds=wait), auto=auto)
    at, sent, users = T0, [], []
    for kind, gap, text in ops:
        at += gap * SEC
        if kind == "flush":
            d.flush()
        elif kind == "tick":
            d.tick(at)
        else:
            d.turn(text, at, role=kind)
            sent.append(f"t{d.turn_seq}")
            if kind == "user":
                users.append(f"t{d.turn_seq}")
    d.flush()
    d.pump()
    windows = stage1_turn_ids(d)
    flat = [i for w in windows for i in w]
    assert flat == sent  # every turn exactly once, in order: a window never drops turns
    assert [i for i in flat if i in users] == users
    assert all(sum(1 for i in w if i in users) <= batch for w in windows[:-1] if w)
    assert d.state.buffer == [] and d.state.queue == [] and d.state.requests == {}
