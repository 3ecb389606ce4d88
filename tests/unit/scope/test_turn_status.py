"""A turn's state read from its scope's state: accepted -> applied -> extracted, and the bounded
memory of which entries a recent turn's facts touched."""

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from credence.streams.scope import turn_status as ts
from credence.streams.scope.scope_state import Request, ScopeState
from credence.streams.scope.tasks import TaskName

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def state(**kw) -> ScopeState:
    return ScopeState(scope="acme/alice/barista", applied={"turns:2": 40}, **kw)


def fact(fid: str, turns: list[str], stage2="done", synthesis="done") -> dict:
    return {"fact": {"id": fid, "source_turn_ids": turns}, "stage2": stage2, "synthesis": synthesis}


def test_a_turn_past_the_applied_offset_is_accepted_and_one_at_or_before_it_is_applied_or_extracted():
    s = state()
    assert ts.turn_state(s, "t9", 2, 41) == ts.ACCEPTED
    assert ts.turn_state(s, "t9", 2, 40) == ts.EXTRACTED
    assert ts.turn_state(s, "t9", 3, 1) == ts.ACCEPTED  # another partition's offsets say nothing


def test_a_turn_queued_behind_an_evidence_request_is_not_applied_yet():
    s = state(queue=[{"kind": "turn", "record": {"turn_id": "t1"}}])
    assert ts.turn_state(s, "t1", 2, 39) == ts.ACCEPTED
    assert ts.turn_state(s, "t0", 2, 38) == ts.EXTRACTED
    assert not ts.reached(s, 2, 30, ts.APPLIED)  # a token cannot tell which queued turn is its own


def test_a_turn_in_the_open_window_in_a_stage1_request_or_with_facts_left_is_applied_not_extracted():
    waiting = [
        state(buffer=[{"id": "t1", "role": "user", "text": "x", "ts": "2026-01-01T00:00:00Z"}]),
        state(requests={"r1": Request("r1", TaskName.STAGE1, {"turns": [{"id": "t1"}]}, T0, "b")}),
        state(facts={"f1": fact("f1", ["t1"], stage2="pending", synthesis="after_stage2")}),
        state(facts={"f1": fact("f1", ["t1"], synthesis="pending")}),
    ]
    for s in waiting:
        assert ts.turn_state(s, "t1", 2, 39) == ts.APPLIED
        assert ts.turn_state(s, "t2", 2, 39) == ts.EXTRACTED
        assert ts.reached(s, 2, 39, ts.APPLIED) and not ts.reached(s, 2, 39, ts.EXTRACTED)
    done = state(facts={"f1": fact("f1", ["t1"])}, requests={
        "r2": Request("r2", TaskName.STAGE2, {"facts": []}, T0, "b")})
    assert ts.turn_state(done, "t1", 2, 39) == ts.EXTRACTED  # a Stage-2 request holds only its facts
    assert ts.reached(done, 2, 40, ts.EXTRACTED) and not ts.reached(done, 2, 41, ts.APPLIED)


def test_no_scope_state_reaches_nothing():
    assert not ts.reached(None, 0, 0, ts.APPLIED)


def test_the_entries_a_turn_touched_are_kept_once_each_for_every_turn_the_fact_cites():
    s = state()
    ts.touched(s, {"id": "f1", "source_turn_ids": ["t1", "t2"]}, "r-1")
    ts.touched(s, {"id": "f1", "source_turn_ids": ["t1"]}, "r-1")
    ts.touched(s, {"id": "f2", "source_turn_ids": ["t1"]}, "p-7")
    assert s.turn_entries == {"t1": ["r-1", "p-7"], "t2": ["r-1"]}
    assert ScopeState.from_dict(s.to_dict()).turn_entries == s.turn_entries
    assert "turn_entries" not in state().control_dict()  # a state that never had one stores nothing new


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 80)), max_size=400))
def test_the_memory_of_touched_entries_stays_bounded_and_keeps_the_newest_turns(touches):
    s = state()
    for turn, entry in touches:
        ts.touched(s, {"id": "f", "source_turn_ids": [f"t{turn}"]}, f"e{entry}")
    assert len(s.turn_entries) <= ts.KEEP_TURN_ENTRIES
    assert all(len(ids) <= ts.MAX_ENTRIES_PER_TURN and len(set(ids)) == len(ids) for ids in s.turn_entries.values())
    if touches:
        assert f"t{touches[-1][0]}" in s.turn_entries


def test_states_order():
    assert ts.at_least(ts.EXTRACTED, ts.APPLIED) and ts.at_least(ts.APPLIED, ts.APPLIED)
    assert not ts.at_least(ts.ACCEPTED, ts.APPLIED)


def test_a_token_raised_by_other_scopes_on_the_partition_is_reached_by_the_partitions_position():
    s = state()  # this scope applied up to 40; the token's 45 is another scope's turn on partition 2
    assert not ts.reached(s, 2, 45, ts.APPLIED)  # the scope's own offset alone never gets there
    assert not ts.reached(s, 2, 45, ts.APPLIED, partition_next=45)
    assert ts.reached(s, 2, 45, ts.APPLIED, partition_next=46)
    assert ts.reached(None, 2, 45, ts.EXTRACTED, partition_next=46)  # no state: nothing of the token is here
    assert not ts.reached(None, 2, 45, ts.APPLIED, partition_next=None)
