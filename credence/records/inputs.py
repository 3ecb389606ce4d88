"""One input record of the scope agent, decoded by its topic's record type into a typed ``Input``.

A record that fails validation is never half-applied: it goes whole (original bytes) to credence.dlq
with the reason, and the records around it carry on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from credence.config.topics import TOPICS, TopicSpec
from credence.errors import RecordError
from credence.records.control import decode_control
from credence.records.feedback import decode_feedback
from credence.records.kind import ANSWERS, Kind
from credence.records.turn import decode_turn
from credence.records.usage import decode_usage
from credence.tables.clock import parse_instant
from credence.tables.scope import scope_key, user_prefix

# An input record as its producer sent it, at most (but an LLM answer): its known fields take far less (a
# turn's text of MAX_TEXT characters, each escaped to 12 bytes at worst, and its surfaced ids; a forget's
# offsets), so a record over it carries that much in fields credence does not know. Refused whole, never
# forwarded, never queued in a scope's state.
MAX_INPUT_BYTES = 512 * 1024
# Records bounded by the record limit (CREDENCE_KAFKA__MAX_RECORD_BYTES), not MAX_INPUT_BYTES: LLM answers, and
# an import, which carries a whole scope's entries (`credence import` refuses one over the limit before sending).
BOUNDED_BY_RECORD_LIMIT = (*ANSWERS, Kind.IMPORT)


class Applicable(Protocol):
    """What a scope step applies (streams/scope/step.py): a record's kind and its checked fields."""

    @property
    def kind(self) -> Kind: ...

    @property
    def record(self) -> dict: ...


@dataclass(frozen=True)
class Application:
    """An Applicable with nothing else: a record the scope makes for itself, or a test's input."""

    kind: Kind
    record: dict


@dataclass(frozen=True)
class Input:
    """One decoded input record."""

    topic: TopicSpec
    scope: str
    kind: Kind
    record: dict
    at: datetime | None  # event time, if the record carries one

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
    if topic is TOPICS.turns:
        turn = decode_turn(raw)
        return Input(topic, turn.scope, Kind.TURN, turn.to_dict(), turn.ts)
    if topic is TOPICS.feedback:
        fb = decode_feedback(raw)
        return Input(topic, scope_key(fb["tenant"], fb["user"], fb["character"]), Kind.FEEDBACK, fb,
                     parse_instant(fb["ts"]))
    if topic is TOPICS.usage:
        hit = decode_usage(raw)
        return Input(topic, scope_key(hit["tenant"], hit["user"], hit["character"]), Kind.USAGE, hit,
                     parse_instant(hit["ts"]))
    ctl = decode_control(raw)
    kind = Kind(ctl["type"])
    if kind is Kind.FORGET:
        return Input(topic, user_prefix(ctl["tenant"], ctl["user"]), kind, ctl, None)
    at = parse_instant(ctl.get("now") if kind is Kind.TICK else ctl.get("ts"))
    return Input(topic, scope_key(ctl["tenant"], ctl["user"], ctl["character"]), kind, ctl, at)
