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
    d = driver_factory(pipeline=pipeline_factory(stage1_max_batch=8, stage1_max_wait_seconds=60,
                                                 stage1_quiet_seconds=3600), auto=False)
    d.turn("I love hiking", T0)
    d.turn("I like tea", T0 + 59 * SEC)
    assert d.requests_of("stage1") == []
    d.tick(T0 + 60 * SEC)
    assert stage1_turn_ids(d) == [["t1", "t2"]]


def test_window_wait_is_counted_from_the_first_turn_of_the_window(driver_factory, pipeline_factory):
    d = driver_factory(pipeline=pipeline_factory(stage1_max_batch=8, stage1_max_wait_seconds=60,
                                                 stage1_quiet_seconds=3600))
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


def test_a_quiet_gap_closes_the_window_before_the_turn_after_it(driver_factory, pipeline_factory):
    d = driver_factory(pipeline=pipeline_factory(stage1_max_batch=8, stage1_quiet_seconds=300,
                                                 stage1_max_wait_seconds=3600), auto=False)
    d.turn("I love hiking", T0)
    d.turn("nice!", T0 + 10 * SEC, role="ai")
    d.turn("I like tea", T0 + 200 * SEC)
    d.turn("tea is great", T0 + 210 * SEC, role="ai")
    assert d.requests_of("stage1") == []  # 200 s between turns is still one conversation
    d.turn("I have a dog", T0 + 510 * SEC)  # 300 s of quiet before it: a new conversation
    assert stage1_turn_ids(d) == [["t1", "t2", "t3", "t4"]]
    assert [t["id"] for t in d.state.buffer] == ["t5"] and d.state.window_started_at == T0 + 510 * SEC


def test_a_tick_after_the_quiet_time_closes_the_window(driver_factory, pipeline_factory):
    """Live traffic: the wall clock reaches the scope as a tick record, so going idle closes the window
    in the scope's order like any other input."""
    d = driver_factory(pipeline=pipeline_factory(stage1_max_batch=8, stage1_quiet_seconds=300,
                                                 stage1_max_wait_seconds=3600), auto=False)
    d.turn("I love hiking", T0)
    d.turn("nice!", T0 + 20 * SEC, role="ai")
    d.tick(T0 + 319 * SEC)
    assert d.requests_of("stage1") == []
    d.tick(T0 + 320 * SEC)
    assert stage1_turn_ids(d) == [["t1", "t2"]]


def test_a_window_closes_at_its_max_age_while_the_conversation_goes_on(driver_factory, pipeline_factory):
    d = driver_factory(pipeline=pipeline_factory(stage1_max_batch=100, stage1_quiet_seconds=300,
                                                 stage1_max_wait_seconds=600), auto=False)
    for n in range(6):
        d.turn("I like tea", T0 + n * 100 * SEC)
    assert d.requests_of("stage1") == []
    d.turn("I have a dog", T0 + 600 * SEC)
    assert stage1_turn_ids(d) == [[f"t{n}" for n in range(1, 8)]]


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
@given(ops=ops, batch=st.integers(1, 4), wait=st.integers(0, 120), quiet=st.integers(0, 600), auto=st.booleans())
def test_every_turn_ends_up_in_exactly_one_stage1_request_in_order(driver_factory, pipeline_factory, ops, batch,
                                                                   wait, quiet, auto):
    d = driver_factory(pipeline=pipeline_factory(stage1_max_batch=batch, stage1_max_wait_seconds=wait,
                                                 stage1_quiet_seconds=quiet), auto=auto)
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


def test_switch_off_extracts_each_user_turn_and_back_on_windows_from_the_cursor(driver_factory, pipeline_factory):
    d = driver_factory(pipeline=pipeline_factory(stage1_max_batch=3, stage1_max_wait_seconds=600), auto=False)
    d.turn("I love hiking", T0)  # a window is open when the switch goes off
    d.powerful = False
    d.turn("Lovely!", T0 + SEC, role="ai")
    assert stage1_turn_ids(d) == [["t1", "t2"]]  # the open window closes at the first step while off
    d.turn("I like tea", T0 + 2 * SEC)
    d.pump()
    assert stage1_turn_ids(d) == [["t1", "t2"], ["t3"]]
    for i, (text, role) in enumerate([("So do I.", "ai"), ("I have a dog", "user"), ("I live in Berlin", "user")]):
        d.turn(text, T0 + (3 + i) * SEC, role=role)
    d.pump()  # the second user turn waited in the queue behind the first one's extraction
    # the per-turn baseline: one extraction per user turn, the AI turn before it riding along
    assert stage1_turn_ids(d)[2:] == [["t4", "t5"], ["t6"]]
    d.turn("Nice.", T0 + 10 * SEC, role="ai")
    d.tick(T0 + timedelta(hours=1))
    assert len(d.requests_of("stage1")) == 4  # an AI turn alone is never extracted
    d.powerful = True  # back on: windows again, from the current cursor
    d.turn("I play chess", T0 + timedelta(hours=1, seconds=1))
    d.turn("I read a lot", T0 + timedelta(hours=1, seconds=2))
    assert len(d.requests_of("stage1")) == 4
    d.turn("I cook on Sundays", T0 + timedelta(hours=1, seconds=3))
    assert stage1_turn_ids(d)[4:] == [["t7", "t8", "t9", "t10"]]


@given(texts=st.lists(st.sampled_from(["I love hiking", "Cool.", "I like tea", "I have a dog"]), max_size=12),
       roles=st.lists(st.sampled_from(["user", "ai"]), min_size=12, max_size=12))
@FIXTURES_OK
def test_switch_off_one_extraction_per_user_turn(driver_factory, pipeline_factory, texts, roles):
    d = driver_factory(pipeline=pipeline_factory(stage1_max_batch=8), powerful=False, auto=False)
    for i, text in enumerate(texts):
        d.turn(text, T0 + i * SEC, role=roles[i])
        d.pump()
    users = [f"t{i + 1}" for i in range(len(texts)) if roles[i] == "user"]
    assert [ids[-1] for ids in stage1_turn_ids(d)] == users
    extracted = [t for ids in stage1_turn_ids(d) for t in ids]
    assert extracted == [f"t{i + 1}" for i in range(len(extracted))]  # each turn once, in order
