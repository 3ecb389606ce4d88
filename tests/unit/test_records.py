"""credence.turns v1 decoding: every rejection reason, the dead-letter envelope, and TurnRecord round-trips."""

from __future__ import annotations

import base64
import json
import unicodedata
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credence.errors import RecordError
from credence.records.dead_letter import dead_letter
from credence.records.envelope import parse_utc
from credence.records.topics import TOPICS
from credence.records.turn import MAX_TEXT, TurnRecord, decode_turn
from credence.tables.clock import format_instant
from credence.tables.scope import MAX_PART

GOOD = {"v": 1, "tenant": "acme", "user": "alice", "character": "barista", "turn_id": "t-1",
        "role": "user", "text": "I love green tea.", "ts": "2026-09-01T09:00:00Z"}


def raw(**changes) -> bytes:
    obj = dict(GOOD)
    for name, value in changes.items():
        if value is DROP:
            obj.pop(name)
        else:
            obj[name] = value
    return json.dumps(obj).encode()


DROP = object()


def test_a_valid_turn_decodes():
    turn = decode_turn(raw(surfaced_ids=["e1", "e2"]))
    assert turn.scope == "acme/alice/barista"
    assert turn.ts == datetime(2026, 9, 1, 9, tzinfo=UTC)
    assert turn.surfaced_ids == ("e1", "e2")


def test_optional_fields_default():
    turn = decode_turn(raw(v=DROP, surfaced_ids=None))  # v defaults to 1; null surfaced_ids is none
    assert turn.surfaced_ids == ()


def test_offsets_are_normalised_to_utc():
    turn = decode_turn(raw(ts="2026-09-01T11:30:00+02:30"))
    assert turn.ts == datetime(2026, 9, 1, 9, tzinfo=UTC) and turn.ts.tzinfo == UTC


@pytest.mark.parametrize("record, reason", [
    (None, r"null value"),
    (b"", r"not valid JSON"),
    (b'{"v":1,"tenant":', r"not valid JSON"),
    (b"\xff\xfe\x00", r"not valid JSON"),
    (b"[1, 2, 3]", r"must be a JSON object"),
    (b'"a string"', r"must be a JSON object"),
    (b"42", r"must be a JSON object"),
    (b"null", r"must be a JSON object"),
    (raw(v=2), r"unsupported record version 2"),
    (raw(v="1"), r"unsupported record version '1'"),
    (raw(v=None), r"unsupported record version None"),
    (raw(turn_id=DROP), r"'turn_id' must be a non-empty string"),
    (raw(turn_id=""), r"'turn_id' must be a non-empty string"),
    (raw(turn_id=7), r"'turn_id' must be a non-empty string"),
    (raw(turn_id="x" * (MAX_PART + 1)), r"'turn_id' .*at most 200"),
    (raw(role="system"), r"'role' must be one of"),
    (raw(role=DROP), r"'role' must be one of"),
    (raw(text=""), r"'text' must be a non-empty string"),
    (raw(text="  \n"), r"'text' must be a non-empty string"),
    (raw(text=["hi"]), r"'text' must be a non-empty string"),
    (raw(text="x" * (MAX_TEXT + 1)), r"'text' is longer than 32000"),
    (raw(surfaced_ids="e1"), r"'surfaced_ids' must be a list"),
    (raw(surfaced_ids={"e1": 1}), r"'surfaced_ids' must be a list"),
    (raw(surfaced_ids=["e1", ""]), r"'surfaced_ids' must be a list of non-empty strings"),
    (raw(surfaced_ids=["e1", 2]), r"'surfaced_ids' must be a list of non-empty strings"),
    (raw(tenant=DROP), r"'tenant' must be a non-empty string"),
    (raw(tenant=""), r"'tenant' must be a non-empty string"),
    (raw(tenant="   "), r"'tenant' must be a non-empty string"),
    (raw(tenant=3), r"'tenant' must be a non-empty string"),
    (raw(user="ali/ce"), r"'user' .*without '/'"),
    (raw(user=" alice"), r"'user' .*edge spaces"),
    (raw(character="barista "), r"'character' .*edge spaces"),
    (raw(character="c" * (MAX_PART + 1)), r"'character' must be at most 200"),
    (raw(ts=DROP), r"'ts' must be an ISO-8601 string"),
    (raw(ts=1788000000), r"'ts' must be an ISO-8601 string"),
    (raw(ts="next tuesday"), r"'ts' is not ISO-8601"),
    (raw(ts="2026-13-01T00:00:00Z"), r"'ts' is not ISO-8601"),
    (raw(ts="2026-09-01T09:00:00"), r"'ts' needs a UTC offset"),
    (raw(ts="2026-09-01"), r"'ts' needs a UTC offset"),
])
def test_every_rejection_names_its_reason(record, reason):
    with pytest.raises(RecordError, match=reason):
        decode_turn(record)


# Records that must be dead-lettered like any other invalid record, never escape decode_turn with an
# error that is not a RecordError (a poison pill for the agent), nor be accepted by accident.
@pytest.mark.parametrize("record", [
    pytest.param(b"[" * 100_000, id="deeply-nested-json-RecursionError"),
    pytest.param(b'{"v":1' + b"0" * 5000 + b"}", id="huge-int-ValueError"),
    pytest.param(raw(ts="0001-01-01T00:00:00+01:00"), id="ts-before-year-1-in-utc-OverflowError"),
    pytest.param(raw(v=True), id="v-true-accepted-as-1"),
    pytest.param(raw(text="\ud800 lone surrogate"), id="lone-surrogate-cannot-be-re-encoded"),
])
def test_hostile_records_are_rejected_not_crashing(record):
    with pytest.raises(RecordError):
        decode_turn(record)


def test_dead_letter_carries_the_original_bytes_and_reason():
    at = datetime(2026, 9, 1, tzinfo=UTC)
    envelope = json.loads(dead_letter(topic="credence.turns", partition=3, offset=17, reason="bad role",
                                      original=b"\x00\xffnot json", at=at))
    assert envelope == {"v": 1, "topic": "credence.turns", "partition": 3, "offset": 17, "reason": "bad role",
                        "original": base64.b64encode(b"\x00\xffnot json").decode(), "at": "2026-09-01T00:00:00+00:00"}
    empty = json.loads(dead_letter(topic="t", partition=0, offset=0, reason="null", original=None, at=at))
    assert empty["original"] == ""


# --- properties --------------------------------------------------------------------------------------

# Scope parts: no '/', no edge spaces, no control characters, not a dot path (tables.scope.check_part).
part = st.text(min_size=1, max_size=MAX_PART).filter(
    lambda s: s == s.strip() and s.strip() and "/" not in s and s not in (".", "..")
    and not any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in s))
nonempty = st.text(min_size=1, max_size=50).filter(lambda s: s.strip())
aware = st.datetimes(min_value=datetime(2000, 1, 2), max_value=datetime(2099, 12, 30),
                     timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)),
                                                timezone(timedelta(hours=-8))]))
turns = st.builds(
    TurnRecord, tenant=part, user=part, character=part, turn_id=st.text(min_size=1, max_size=MAX_PART),
    role=st.sampled_from(["user", "ai"]), text=nonempty, ts=aware,
    surfaced_ids=st.lists(st.text(min_size=1, max_size=20), max_size=4).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(turns)
def test_encode_then_decode_is_the_same_turn(turn):
    decoded = decode_turn(turn.encode())
    assert decoded == turn
    assert decoded.ts.tzinfo == UTC
    assert decoded.encode() == TurnRecord(**{**decoded.__dict__}).encode()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_decode_or_raise_record_error(data):
    try:
        decode_turn(data)
    except RecordError as exc:
        assert str(exc)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(list(GOOD) + ["surfaced_ids", "extra"]),
                       st.none() | st.booleans() | st.integers() | st.text(max_size=30)
                       | st.lists(st.text(max_size=5), max_size=3)))
def test_arbitrary_objects_decode_or_raise_record_error(obj):
    try:
        turn = decode_turn(json.dumps(obj).encode())
    except RecordError as exc:
        assert str(exc)
    else:
        assert turn.scope.count("/") == 2


@given(aware)
def test_format_instant_and_parse_utc_round_trip(ts):
    assert parse_utc(format_instant(ts), "ts") == ts
    assert format_instant(ts).endswith("+00:00")  # one spelling of UTC everywhere (tables/clock.py)


def test_surfaced_ids_are_bounded():
    from credence.records.turn import MAX_SURFACED_IDS

    base = {"v": 1, "tenant": "acme", "user": "u1", "character": "aria", "turn_id": "t1", "role": "ai",
            "text": "hello", "ts": "2026-03-02T12:00:00Z"}
    assert len(decode_turn(json.dumps(base | {"surfaced_ids": ["e"] * MAX_SURFACED_IDS}).encode()).surfaced_ids) == 100
    for ids in (["e"] * (MAX_SURFACED_IDS + 1), ["e" * (MAX_PART + 1)]):
        with pytest.raises(RecordError, match="'surfaced_ids' must hold at most"):
            decode_turn(json.dumps(base | {"surfaced_ids": ids}).encode())


def test_an_input_carrying_large_unknown_fields_is_refused_with_the_reason():
    from credence.records.inputs import MAX_INPUT_BYTES, decode_input

    base = {"v": 1, "tenant": "acme", "user": "u1", "character": "aria", "turn_id": "t1", "role": "user",
            "text": "\U0001F600" * MAX_TEXT, "ts": "2026-03-02T12:00:00Z", "surfaced_ids": ["e" * MAX_PART] * 100}
    largest = json.dumps(base).encode()  # every known field at its largest, escaped: still taken
    assert decode_input(TOPICS.turns, largest).record.turn_id == "t1"
    padded = json.dumps(base | {"x-platform-blob": "a" * MAX_INPUT_BYTES}).encode()
    with pytest.raises(RecordError, match="over the 524288-byte input limit"):
        decode_input(TOPICS.turns, padded)
    assert decode_input(TOPICS.turns, json.dumps({**base, "x-small": "kept out of the state"}).encode())


def test_a_control_record_is_bounded_too_but_an_llm_answer_is_bounded_by_the_record_limit():
    from credence.records.inputs import MAX_INPUT_BYTES, decode_input

    scope = {"v": 1, "tenant": "acme", "user": "u1", "character": "aria"}
    with pytest.raises(RecordError, match="input limit"):
        decode_input(TOPICS.control, json.dumps(scope | {"type": "tick", "blob": "a" * MAX_INPUT_BYTES}).encode())
    answer = scope | {"type": "result", "request_id": "r1", "output": {"facts": ["a" * MAX_INPUT_BYTES]}}
    assert decode_input(TOPICS.facts, json.dumps(answer).encode()).kind == "result"


def test_what_a_scope_step_applies_is_typed_even_when_made_from_a_wire_form():
    # The step reads typed records only (no wire form is read back there): an Application made from a
    # queued input's or a test's dict carries its kind's record type, with the same fields.
    from credence.records.control import ControlRecord
    from credence.records.inputs import Application
    from credence.records.kind import Kind

    answer = {"v": 1, "type": "result", "request_id": "r1", "task": "stage1", "output": {"facts": []},
              "tenant": "acme", "user": "u1", "character": "aria"}
    assert Application(Kind.RESULT, answer).record == ControlRecord.of(answer)
    turn = Application(Kind.TURN, {**GOOD, "surfaced_ids": []}).record
    assert isinstance(turn, TurnRecord) and turn.text == GOOD["text"]
    typed = decode_turn(raw())
    assert Application(Kind.TURN, typed).record is typed
