"""credence.feedback v1: the user's decision on one entry, decoded and checked."""

from __future__ import annotations

from credence.errors import RecordError
from credence.records.envelope import decode, encodable, parse_utc
from credence.tables.clock import format_instant
from credence.tables.scope import MAX_PART

VERSION = 1


def decode_feedback(raw: bytes | None) -> dict:
    """credence.feedback v1: {tenant, user, character, feedback_id, entry_id, decision, ts}."""
    obj = decode(raw, "feedback")
    for name in ("feedback_id", "entry_id"):
        if len(obj[name]) > MAX_PART:
            raise RecordError(f"'{name}' must be a non-empty string of at most {MAX_PART} characters")
        encodable(obj[name], name)
    return {"tenant": obj["tenant"], "user": obj["user"], "character": obj["character"],
            "feedback_id": obj["feedback_id"], "entry_id": obj["entry_id"], "decision": obj["decision"],
            "ts": format_instant(parse_utc(obj.get("ts"), "ts"))}
