"""The hostile corpus against the topic decoders the worker runs (no broker needed): every bad record
raises RecordError with its expected reason — never another exception, never acceptance — and every
odd-but-valid turn decodes to a scope of its own."""

from __future__ import annotations

import re
from datetime import UTC

import pytest

from credence.errors import RecordError
from credence.records.control import decode_control
from credence.records.feedback import decode_feedback
from credence.records.turn import decode_turn
from tests.faults.hostile import _enc, http_requests, isolated_turns, topic_corpus

DECODERS = {"turns": decode_turn, "feedback": decode_feedback, "control": decode_control}
CORPUS = topic_corpus(seed=3)


def test_the_corpus_is_big_and_covers_every_topic():
    assert len(CORPUS) >= 300
    assert {b.topic for b in CORPUS} == set(DECODERS)
    assert len(http_requests()) >= 20


@pytest.mark.parametrize("bad", CORPUS, ids=[f"{b.topic}-{b.kind}-{i}" for i, b in enumerate(CORPUS)])
def test_every_bad_record_is_refused_with_its_reason(bad):
    with pytest.raises(RecordError) as info:
        DECODERS[bad.topic](bad.value)
    assert re.search(bad.reason, str(info.value)), (bad.kind, str(info.value))


def test_odd_but_valid_turns_are_their_own_scopes():
    scopes = [decode_turn(_enc(t)).scope for t in isolated_turns()]
    assert "acme/alice/barista" not in scopes
    assert len(set(scopes)) == len(set(map(str, scopes)))


def test_a_huge_original_is_dead_lettered_truncated_and_says_so():
    import base64
    import json
    from datetime import datetime

    from credence.records.dead_letter import MAX_ORIGINAL_BYTES, dead_letter

    raw = b"y" * 3_000_000
    envelope = dead_letter(topic="t", partition=1, offset=2, reason="r" * 10_000, original=raw,
                           at=datetime(2026, 1, 1, tzinfo=UTC))
    assert len(envelope) < 1_000_000  # fits one Kafka record
    d = json.loads(envelope)
    assert base64.b64decode(d["original"]) == raw[:MAX_ORIGINAL_BYTES]
    assert (d["original_bytes"], d["original_truncated"]) == (3_000_000, True)
    small = json.loads(dead_letter(topic="t", partition=1, offset=2, reason="r", original=b"x", at=datetime.now(UTC)))
    assert "original_truncated" not in small
