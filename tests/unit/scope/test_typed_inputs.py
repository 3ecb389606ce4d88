"""A scope step takes typed input records; the inputs it queues keep the wire form scope state has always
stored (the changelog's bytes must not change), and read back as the same typed records."""

from __future__ import annotations

import json

import pytest

from credence.records.control import ControlRecord
from credence.records.feedback import FeedbackRecord
from credence.records.inputs import as_record, decode_input
from credence.records.topics import TOPICS
from credence.records.turn import TurnRecord
from credence.records.usage import UsageRecord
from credence.streams.scope.context import StepContext
from credence.streams.scope.scope_state import ScopeState
from credence.streams.scope.step import step
from credence.streams.state import codec

from .conftest import SCOPE_KEY, T0

SCOPE = {"tenant": "acme", "user": "u1", "character": "aria"}
# (topic, record as sent, its type, the wire form a scope's state stores for it: what it stored before
# the records were typed, byte for byte)
CASES = [
    (TOPICS.turns, {"v": 1, **SCOPE, "turn_id": "t1", "role": "ai", "text": "hi", "ts": "2026-03-02T12:00:00Z",
                    "surfaced_ids": ["e1"], "metadata": {"tags": ["x"], "other": 1}},
     TurnRecord, {"v": 1, **SCOPE, "turn_id": "t1", "role": "ai", "text": "hi", "ts": "2026-03-02T12:00:00+00:00",
                  "surfaced_ids": ["e1"], "metadata": {"tags": ["x"]}}),
    (TOPICS.feedback, {**SCOPE, "feedback_id": "f1", "entry_id": "e1", "decision": "deny",
                       "ts": "2026-03-02T13:00:00+01:00", "extra": True},
     FeedbackRecord, {**SCOPE, "feedback_id": "f1", "entry_id": "e1", "decision": "deny",
                      "ts": "2026-03-02T12:00:00+00:00"}),
    (TOPICS.usage, {"v": 1, **SCOPE, "entry_ids": ["e1", "e2", "e1"], "source": "recall", "ts": "2026-03-02T12:00:00Z"},
     UsageRecord, {**SCOPE, "entry_ids": ["e1", "e2"], "source": "recall", "ts": "2026-03-02T12:00:00+00:00"}),
    (TOPICS.control, {"v": 1, "type": "consensus", **SCOPE, "entry_id": "e1", "score": 1, "by": "ops",
                      "ts": "2026-03-02T12:00:00Z", "note": "kept"},
     ControlRecord, {"v": 1, "type": "consensus", **SCOPE, "entry_id": "e1", "score": 1.0, "by": "ops",
                     "ts": "2026-03-02T12:00:00+00:00", "note": "kept"}),
]


@pytest.mark.parametrize("topic, sent, typed, stored", CASES, ids=[c[0].name for c in CASES])
def test_a_queued_input_is_stored_in_its_wire_form_and_read_back_typed(topic, sent, typed, stored,
                                                                       memory_factory, pipeline_factory):
    item = decode_input(topic, json.dumps(sent).encode())
    assert isinstance(item.record, typed) and item.scope == SCOPE_KEY
    state = ScopeState(scope=SCOPE_KEY, queue=[{"kind": "flush", "record": {"type": "flush"}}])  # held
    ctx = StepContext(now=T0, powerful=True, boot="b", memory=memory_factory(), pipeline=pipeline_factory())
    step(state, item, ctx)
    assert state.queue[-1] == {"kind": item.kind, "record": stored}
    stored_bytes = codec.encode_item(state.queue[-1])  # a queued input as the changelog holds it
    assert stored_bytes == codec.encode_item({"kind": item.kind.value, "record": stored})  # keys in order
    back = codec.decode_item(stored_bytes)
    assert as_record(back["kind"], back["record"]) == item.record
