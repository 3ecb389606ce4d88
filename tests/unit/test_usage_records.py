"""credence.usage v1 and the restore control record: decoded with validation, refused with a reason."""

import json

import pytest

from credence.errors import RecordError
from credence.records.control import decode_control
from credence.records.usage import decode_usage


def raw(**fields) -> bytes:
    base = {"v": 1, "tenant": "acme", "user": "u1", "character": "aria", "entry_ids": ["p1", "p2", "p1"],
            "source": "recall", "ts": "2026-03-02T12:00:00+01:00"}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not ...}).encode()


def test_usage_record_decodes_to_utc_and_unique_ids():
    rec = decode_usage(raw()).to_dict()
    assert rec == {"tenant": "acme", "user": "u1", "character": "aria", "entry_ids": ["p1", "p2"],
                   "source": "recall", "ts": "2026-03-02T11:00:00+00:00"}  # the one UTC spelling


@pytest.mark.parametrize("fields, reason", [
    ({"entry_ids": []}, "entry_ids"),
    ({"entry_ids": "p1"}, "entry_ids"),
    ({"entry_ids": [""]}, "entry_ids"),
    ({"entry_ids": [f"e{i}" for i in range(101)]}, "entry_ids"),
    ({"source": " "}, "source"),
    ({"source": ...}, "source"),
    ({"ts": "2026-03-02T12:00:00"}, "UTC offset"),
    ({"tenant": ""}, "tenant"),
    ({"v": 2}, "version"),
])
def test_bad_usage_records_are_refused_with_a_reason(fields, reason):
    with pytest.raises(RecordError, match=reason):
        decode_usage(raw(**fields))


def test_restore_control_record():
    body = {"v": 1, "type": "restore", "tenant": "acme", "user": "u1", "character": "aria", "entry_id": "p1",
            "ts": "2026-03-02T12:00:00Z"}
    assert decode_control(json.dumps(body).encode())["entry_id"] == "p1"
    with pytest.raises(RecordError, match="entry_id"):
        decode_control(json.dumps({**body, "entry_id": 3}).encode())


def test_the_builders_write_what_the_decoders_read():
    from datetime import UTC, datetime

    from credence.records.control import restore_record
    from credence.records.usage import usage_record

    at = datetime(2026, 3, 2, 11, 0, tzinfo=UTC)
    rec = decode_usage(json.dumps(usage_record("acme/u1/aria", ["p1"], "recall", at)).encode()).to_dict()
    assert rec["entry_ids"] == ["p1"] and rec["ts"] == "2026-03-02T11:00:00+00:00"  # tables/clock.format_instant
    ctl = decode_control(json.dumps(restore_record("acme/u1/aria", "p1", "ops", at)).encode())
    assert (ctl["type"], ctl["entry_id"], ctl["by"]) == ("restore", "p1", "ops")


CONSENSUS = {"v": 1, "type": "consensus", "tenant": "acme", "user": "u1", "character": "aria", "entry_id": "p1",
             "score": 0.8, "by": "verifier", "ts": "2026-03-02T12:00:00+01:00"}


def test_consensus_control_record_decodes_and_the_builder_writes_it():
    from datetime import UTC, datetime

    from credence.records.control import consensus_record

    ctl = decode_control(json.dumps(CONSENSUS).encode())
    assert (ctl["entry_id"], ctl["score"], ctl["by"]) == ("p1", 0.8, "verifier")
    assert ctl["ts"] == "2026-03-02T11:00:00+00:00"
    at = datetime(2026, 3, 2, 11, 0, tzinfo=UTC)
    built = decode_control(json.dumps(consensus_record("acme/u1/aria", "p1", 1, "ops", at)).encode())
    assert (built["type"], built["score"], built["by"]) == ("consensus", 1.0, "ops")


@pytest.mark.parametrize("fields, reason", [
    ({"score": 1.01}, "score"), ({"score": -0.1}, "score"), ({"score": "0.8"}, "score"), ({"score": True}, "score"),
    ({"score": None}, "score"), ({"by": ""}, "by"), ({"by": None}, "by"), ({"entry_id": ""}, "entry_id"),
    ({"ts": "2026-03-02T12:00:00"}, "UTC offset"),
])
def test_bad_consensus_records_are_refused_with_a_reason(fields, reason):
    with pytest.raises(RecordError, match=reason):
        decode_control(json.dumps({**CONSENSUS, **fields}).encode())
