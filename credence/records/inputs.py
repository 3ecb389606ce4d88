"""One input record of the scope agent, decoded by its topic's record type into a typed ``Input``.

A record that fails validation is never half-applied: it goes whole (original bytes) to credence.dlq
with the reason, and the records around it carry on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Protocol

from credence.errors import RecordError
from credence.records.control import ControlRecord
from credence.records.feedback import FeedbackRecord, decode_feedback
from credence.records.kind import ANSWERS, Kind
from credence.records.topics import TOPICS, TopicSpec
from credence.records.turn import TurnRecord, decode_turn
from credence.records.usage import UsageRecord, decode_usage
from credence.tables.scope import user_prefix

# An input record as its producer sent it, at most (but an LLM answer): its known fields take far less (a
# turn's text of MAX_TEXT characters, each escaped to 12 bytes at worst, and its surfaced ids; a forget's
# offsets), so a record over it carries that much in fields credence does not know. Refused whole, never
# forwarded, never queued in a scope's state.
MAX_INPUT_BYTES = 512 * 1024
# Records bounded by the record limit (CREDENCE_KAFKA__MAX_RECORD_BYTES), not MAX_INPUT_BYTES: LLM answers, and
# an import, which carries a whole scope's entries (`credence import` refuses one over the limit before sending).
BOUNDED_BY_RECORD_LIMIT = (*ANSWERS, Kind.IMPORT)


InputRecord = TurnRecord | FeedbackRecord | UsageRecord | ControlRecord
_BY_KIND = {Kind.TURN: TurnRecord, Kind.FEEDBACK: FeedbackRecord, Kind.USAGE: UsageRecord}


def as_record(kind: Kind | str, record: InputRecord | dict) -> InputRecord:
    """An input as its typed record: a typed one as it is, a wire form (what a scope's state queues, an
    in-process LLM answer, a test's input) read back by its kind's type."""
    if not isinstance(record, dict):
        return record
    typed = _BY_KIND.get(Kind(kind))
    return typed.from_dict(record) if typed is not None else ControlRecord(Kind(kind), MappingProxyType(record))


class Applicable(Protocol):
    """What a scope step applies (streams/scope/step.py): a record's kind and its typed record."""

    @property
    def kind(self) -> Kind: ...

    @property
    def record(self) -> InputRecord: ...


@dataclass(frozen=True)
class Application:
    """An Applicable with nothing else: a record the scope makes for itself, or a test's input (a wire
    form is typed here, so the step only ever sees typed records)."""

    kind: Kind
    record: InputRecord | dict

    def __post_init__(self) -> None:
        object.__setattr__(self, "record", as_record(self.kind, self.record))


@dataclass(frozen=True)
class Input:
    """One decoded input record."""

    topic: TopicSpec
    scope: str
    kind: Kind
    record: InputRecord
    at: datetime | None  # event time, if the record carries one
    # the scope's parts the worker asks about, read from the record's own fields (never parsed from the key)
    tenant: str
    prefix: str  # the user's key prefix (tables/scope.py): the incarnation and forgets are kept under it

    @property
    def name(self) -> str:
        """The topic's logical name: positions and marks are kept under it."""
        return self.topic.name


def decode_input(topic: TopicSpec, raw: bytes) -> Input:
    item = _decode_input(topic, raw)
    if item.kind not in BOUNDED_BY_RECORD_LIMIT and len(raw) > MAX_INPUT_BYTES:  # checked after the known fields: their reasons first
        raise RecordError(f"a {len(raw)}-byte {topic.name} record, over the {MAX_INPUT_BYTES}-byte input limit: "
                          "its fields credence does not know are too large")
    return item


def _decode_input(topic: TopicSpec, raw: bytes) -> Input:
    record: InputRecord
    if topic is TOPICS.turns:
        record = decode_turn(raw)
    elif topic is TOPICS.feedback:
        record = decode_feedback(raw)
    elif topic is TOPICS.usage:
        record = decode_usage(raw)
    else:
        control = ControlRecord.decode(raw)
        tenant, user = control.fields["tenant"], control.fields["user"]
        return Input(topic, control.scope, control.kind, control, None if control.kind is Kind.FORGET else control.at,
                     tenant, user_prefix(tenant, user))
    return Input(topic, record.scope, record.kind, record, record.ts, record.tenant,
                 user_prefix(record.tenant, record.user))
