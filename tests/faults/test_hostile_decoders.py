"""The hostile corpus against the topic decoders the worker runs (no broker needed): every bad record
raises RecordError with its expected reason — never another exception, never acceptance — and every
odd-but-valid turn decodes to a scope of its own."""

from __future__ import annotations

import re

import pytest

from credence.errors import RecordError
from credence.streams.runtime.records import decode_control, decode_feedback, decode_turn
from tests.faults.hostile import http_requests, isolated_turns, topic_corpus, _enc

DECODERS = {"turns": decode_turn, "feedback": decode_feedback, "control": decode_control}
CORPUS = topic_corpus(seed=3)


def test_the_corpus_is_big_and_covers_every_topic():
    assert len(CORPUS) >= 300
    assert {b.topic for b in CORPUS} == set(DECODERS)
    assert len(http_requests()) >= 50


@pytest.mark.parametrize("bad", CORPUS, ids=[f"{b.topic}-{b.kind}-{i}" for i, b in enumerate(CORPUS)])
def test_every_bad_record_is_refused_with_its_reason(bad):
    with pytest.raises(RecordError) as info:
        DECODERS[bad.topic](bad.value)
    assert re.search(bad.reason, str(info.value)), (bad.kind, str(info.value))


def test_odd_but_valid_turns_are_their_own_scopes():
    scopes = [decode_turn(_enc(t)).scope for t in isolated_turns()]
    assert "acme/alice/barista" not in scopes
    assert len(set(scopes)) == len(set(map(str, scopes)))
