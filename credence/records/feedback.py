"""credence.feedback v1: the user's decision on one entry, decoded and checked."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from credence.errors import RecordError
from credence.records.envelope import FEEDBACK, ScopedRecord, decode, encodable, parse_utc
from credence.records.kind import Kind
from credence.tables.clock import format_instant, parse_instant
from credence.tables.scope import MAX_PART

VERSION = 1


@dataclass(frozen=True)
class FeedbackRecord(ScopedRecord):
    """credence.feedback v1: {tenant, user, character, feedback_id, entry_id, decision, ts}."""

    kind: ClassVar[Kind] = Kind.FEEDBACK
    tenant: str
    user: str
    character: str
    feedback_id: str
    entry_id: str
    decision: str  # confirm, deny or ignore
    ts: datetime

    def to_dict(self) -> dict:
        """Its wire form, as a scope's state queues it (no `v`: the stored form never had one)."""
        return {"tenant": self.tenant, "user": self.user, "character": self.character,
                "feedback_id": self.feedback_id, "entry_id": self.entry_id, "decision": self.decision,
                "ts": format_instant(self.ts)}

    @classmethod
    def from_dict(cls, d: dict) -> FeedbackRecord:
        """A wire form already checked (a scope's queued input): read back, not checked again."""
        return cls(d.get("tenant", ""), d.get("user", ""), d.get("character", ""), d.get("feedback_id", ""),
                   d["entry_id"], d["decision"], parse_instant(d.get("ts")))


def decode_feedback(raw: bytes | None) -> FeedbackRecord:
    """Decode and validate one feedback record; RecordError says exactly what is wrong."""
    obj = decode(raw, FEEDBACK)
    for name in ("feedback_id", "entry_id"):
        if len(obj[name]) > MAX_PART:
            raise RecordError(f"'{name}' must be a non-empty string of at most {MAX_PART} characters")
        encodable(obj[name], name)
    return FeedbackRecord(obj["tenant"], obj["user"], obj["character"], obj["feedback_id"], obj["entry_id"],
                          obj["decision"], parse_utc(obj.get("ts"), "ts"))
