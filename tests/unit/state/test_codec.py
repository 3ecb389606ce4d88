from datetime import timedelta

import orjson
import pytest

from credence.errors import StateError
from credence.streams.scope.scope_state import Request, ScopeState
from credence.streams.state import codec
from credence.tables.entries import new_reflection
from credence.tables.scope import Scope

from .conftest import SCOPE, T0


def _state() -> ScopeState:
    state = ScopeState(scope=SCOPE, clock=T0, turns=3, buffer=[{"id": "t1"}], seq=2,
                       requests={"stage1-1": Request("stage1-1", "stage1", {"turns": []}, T0, "b")})
    entry = new_reflection("r-1", Scope.parse(SCOPE), "likes hiking", T0)
    state.entries[entry.id] = entry
    return state


def test_control_round_trip_leaves_entries_out_and_carries_the_schema():
    state = _state()
    raw = codec.encode_control(state)
    assert orjson.loads(raw)["v"] == codec.SCHEMA and "entries" not in orjson.loads(raw)
    control = codec.decode_control(raw)
    assert not control.legacy and control.state.entries == {}
    assert control.state.control_dict() == state.control_dict() | {"queue": [], "buffer": [], "done_facts": []}


def test_a_schema_1_scope_value_is_read_whole_and_flagged_for_migration():
    state = _state()
    legacy = orjson.dumps(state.to_dict())  # what a worker before the split stored (Faust's json codec)
    control = codec.decode_control(legacy)
    assert control.legacy and control.state.to_dict() == state.to_dict()


def test_entry_and_history_round_trip():
    entry = next(iter(_state().entries.values()))
    assert codec.decode_entry(codec.encode_entry(entry, 7)) == (entry, 7)
    item = {"event": "created", "cause": "synthesis", "at": "x", "score": 0.5, "tier": "pending",
            "reinforcement": 0.5, "disputation": 0.0, "version": 1}
    assert codec.decode_history(codec.encode_history(40, [item])) == (40, [item])


def test_marks_of_both_schemas():
    assert codec.decode_mark(codec.encode_mark("turns:0:5", "2026-03-02T12:00:00+00:00")) == (
        "turns:0:5", "2026-03-02T12:00:00+00:00")
    assert codec.decode_mark(b'"turns:0:5"') == ("turns:0:5", None)  # schema 1: the bare position
    assert codec.decode_mark(None) is None


@pytest.mark.parametrize("raw", [b"{not json", b'{"v": 9, "scope": "a/b/c"}', b"[1, 2]"])
def test_unreadable_scope_values_raise_a_state_error(raw):
    with pytest.raises(StateError):
        codec.decode_control(raw)


def test_unknown_entry_schema_is_refused():
    with pytest.raises(StateError, match="schema"):
        codec.decode_entry(b'{"v": 3, "entry": {}}')


def test_history_item_is_taken_from_a_journal_record():
    entry = next(iter(_state().entries.values()))
    record = {"entry_id": entry.id, "event": "signal", "cause": "user_confirm", "at": (T0 + timedelta(1)).isoformat(),
              "score": 1.5, "tier": "confirmed", "entry": entry.to_dict()}
    item = codec.history_item(record)
    assert item["reinforcement"] == entry.evidence.reinforcement and item["version"] == entry.version
    assert item["cause"] == "user_confirm" and item["tier"] == "confirmed"


def test_a_list_still_inline_in_a_schema_2_value_is_kept():
    """A value written before a field joined LISTS keeps that field inline; it is read, not dropped."""
    state = _state()
    value = orjson.loads(codec.encode_control(state))
    value["buffer"] = [{"id": "t9"}]
    value["lists"].pop("buffer")
    control = codec.decode_control(orjson.dumps(value))
    assert control.state.buffer == [{"id": "t9"}] and "buffer" not in control.spans
