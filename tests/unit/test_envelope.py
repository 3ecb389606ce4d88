"""One v1 envelope for every record: the turns, cards and tenants decoders, the archive sinks and dead
letters take or refuse a record's envelope alike (they used to check it three ways: a `v` of `true` or
`1.0` passed the cards and tenants checks and the sinks but not the turns decoder, and absurdly nested
JSON escaped the cards and tenants decoders as a RecursionError)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credence.errors import ArchiveError, RecordError
from credence.records.dead_letter import dead_letter, read_dead_letter
from credence.records.envelope import RECORDS, decode
from credence.records.topics import TOPICS
from credence.records.turn import decode_turn
from credence.sinks.schema import EVIDENCE, to_row
from credence.streams.api.cards import Card, decode_card
from credence.streams.api.tenants import Tenant, decode_tenant, hash_key

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TURN = {"v": 1, "tenant": "acme", "user": "alice", "character": "barista", "turn_id": "t1", "role": "user",
        "text": "hi", "ts": "2026-01-01T00:00:00Z"}
CARD = Card("acme", "barista", (("tone", "Warm."),), NOW).to_dict()
TENANT = Tenant("acme", hash_key("k"), NOW).to_dict()
EVENT = {"v": 1, "event_id": "e1@1", "tenant": "acme", "user": "alice", "character": "barista",
         "entry_id": "e1", "entry_kind": "reflection", "event": "created", "cause": "stage2",
         "at": "2026-01-01T00:00:00Z", "entry": {"id": "e1", "kind": "reflection", "version": 1}}


def _sink(raw: bytes):
    try:
        return to_row(EVIDENCE, decode(raw, "evidence"), 0, 0)
    except ArchiveError as exc:  # the sink's own error, with the one decoder's reason
        raise RecordError(str(exc)) from None


# Each reader with a valid record of its own type.
READERS = {
    "turn": (decode_turn, TURN),
    "card": (decode_card, CARD),
    "tenant": (lambda raw: decode_tenant(b"acme", raw), TENANT),
    "evidence": (_sink, EVENT),
}


def _verdict(reader, raw: bytes) -> str:
    try:
        reader(raw)
    except RecordError as exc:
        return f"refused: {str(exc).split(';')[0]}"
    return "accepted"


@pytest.mark.parametrize("version", [True, 1.0, "1", 2, None, [1]])
def test_every_reader_refuses_a_version_that_is_not_the_integer_1(version):
    verdicts = {name: _verdict(reader, json.dumps(good | {"v": version}).encode())
                for name, (reader, good) in READERS.items()}
    assert set(verdicts.values()) == {f"refused: unsupported record version {version!r}"}, verdicts


def test_every_reader_accepts_its_record():
    assert {name: _verdict(reader, json.dumps(good).encode()) for name, (reader, good) in READERS.items()} == \
        dict.fromkeys(READERS, "accepted")


@pytest.mark.parametrize("raw, reason", [
    (b"[" * 100_000 + b"]" * 100_000, "refuses to decode"),
    (b'{"v":1' + b"0" * 5000 + b"}", "refuses to decode"),
    (b"\xff{}", "not valid JSON"),
    (b"[]", "must be a JSON object"),
    (None, "null value"),
])
def test_every_reader_refuses_broken_json_with_a_record_error(raw, reason):
    for name, (reader, _) in READERS.items():
        if raw is None and name in ("card", "tenant"):
            continue  # a tombstone on a compacted topic
        with pytest.raises(RecordError, match=reason):
            reader(raw)


@given(version=st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=3))
def test_readers_agree_on_any_version(version):
    verdicts = {_verdict(reader, json.dumps(good | {"v": version}).encode()) == "accepted"
                for reader, good in READERS.values()}
    assert verdicts == {type(version) is int and version == 1}


def test_records_from_outside_may_omit_the_version_but_credence_own_may_not():
    for name in ("turn", "card", "tenant"):
        reader, good = READERS[name]
        assert _verdict(reader, json.dumps({k: v for k, v in good.items() if k != "v"}).encode()) == "accepted"
    assert _verdict(_sink, json.dumps({k: v for k, v in EVENT.items() if k != "v"}).encode()) == \
        "refused: unsupported record version None"


def test_a_dead_letter_reads_back_through_the_decoder():
    envelope, original = read_dead_letter(dead_letter(topic="t", partition=1, offset=2, reason="why",
                                                      original=b"\x00raw", at=NOW))
    assert (envelope["topic"], envelope["offset"], original) == ("t", 2, b"\x00raw")
    with pytest.raises(RecordError, match="'partition' must be an integer"):
        read_dead_letter(json.dumps({"v": 1, "topic": "t", "partition": "1", "offset": 2, "reason": "r",
                                     "original": "", "at": "2026-01-01T00:00:00Z"}).encode())


def test_every_topic_names_a_known_record_type():
    assert {spec.record.name for spec in TOPICS.values()} <= set(RECORDS)


def test_a_topic_names_its_record_type_itself_and_readers_decode_by_it():
    from credence.records.envelope import CONTROL, TURN, RecordType

    assert all(isinstance(spec.record, RecordType) and RECORDS[spec.record.name] is spec.record
               for spec in TOPICS.values())
    assert TOPICS.turns.record is TURN and TOPICS.facts.record is TOPICS.control.record is CONTROL
    with pytest.raises(RecordError, match="'type' must be one of"):
        decode(b'{"v":1,"type":"nap","tenant":"acme","user":"u1"}', TOPICS.control.record)
