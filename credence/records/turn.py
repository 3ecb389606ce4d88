"""credence.turns v1: one message of a conversation between a user and a character, decoded and checked."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from credence.errors import DomainError, RecordError
from credence.records.envelope import TURN, ScopedRecord, decode, encodable, parse_utc
from credence.records.kind import Kind
from credence.tables.clock import format_instant, parse_instant
from credence.tables.scope import MAX_PART
from credence.tables.tags import check_tags

VERSION = 1
MAX_TEXT = 32_000
MAX_SURFACED_IDS = 100  # entries a turn's AI text can name: more than any prompt renders


@dataclass(frozen=True)
class TurnRecord(ScopedRecord):
    """credence.turns v1: one message of a conversation between a user and a character."""

    kind: ClassVar[Kind] = Kind.TURN
    tenant: str
    user: str
    character: str
    turn_id: str
    role: str
    text: str
    ts: datetime
    surfaced_ids: tuple[str, ...] = field(default=())
    tags: tuple[str, ...] = field(default=())  # metadata.tags: the tenant's labels, inherited by its entries

    def to_dict(self) -> dict:
        d = {"v": VERSION, "tenant": self.tenant, "user": self.user, "character": self.character,
             "turn_id": self.turn_id, "role": self.role, "text": self.text, "ts": format_instant(self.ts)}
        if self.surfaced_ids:
            d["surfaced_ids"] = list(self.surfaced_ids)
        if self.tags:
            d["metadata"] = {"tags": list(self.tags)}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> TurnRecord:
        """A wire form already checked (a scope's queued input): read back, not checked again."""
        return cls(d.get("tenant", ""), d.get("user", ""), d.get("character", ""), d["turn_id"], d["role"],
                   d["text"], parse_instant(d.get("ts")), tuple(d.get("surfaced_ids") or ()),
                   tuple((d.get("metadata") or {}).get("tags") or ()))


def decode_turn(raw: bytes | None) -> TurnRecord:
    """Decode and validate one turn record; RecordError says exactly what is wrong."""
    obj = decode(raw, TURN)
    turn_id, role, text = obj["turn_id"], obj["role"], obj["text"]
    if len(turn_id) > MAX_PART:
        raise RecordError(f"'turn_id' must be a non-empty string of at most {MAX_PART} characters")
    if not text.strip():
        raise RecordError("'text' must be a non-empty string")
    if len(text) > MAX_TEXT:
        raise RecordError(f"'text' is longer than {MAX_TEXT} characters")
    encodable(text, "text")
    encodable(turn_id, "turn_id")
    surfaced = obj.get("surfaced_ids", [])
    if surfaced is None:
        surfaced = []
    if not isinstance(surfaced, list) or not all(isinstance(s, str) and s for s in surfaced):
        raise RecordError("'surfaced_ids' must be a list of non-empty strings")
    if len(surfaced) > MAX_SURFACED_IDS or any(len(s) > MAX_PART for s in surfaced):
        raise RecordError(f"'surfaced_ids' must hold at most {MAX_SURFACED_IDS} ids of at most {MAX_PART} "
                          f"characters each, got {len(surfaced)}")
    for sid in surfaced:
        encodable(sid, "surfaced_ids")
    return TurnRecord(
        tenant=obj["tenant"], user=obj["user"], character=obj["character"],
        turn_id=turn_id, role=role, text=text, ts=parse_utc(obj.get("ts"), "ts"),
        surfaced_ids=tuple(surfaced), tags=_tags(obj.get("metadata")),
    )


def _tags(metadata) -> tuple[str, ...]:
    """A turn's `metadata.tags`; the rest of `metadata` is the tenant's and ignored."""
    if metadata is None:
        return ()
    if not isinstance(metadata, dict):
        raise RecordError(f"'metadata' must be an object, got {type(metadata).__name__}")
    try:
        tags = check_tags(metadata.get("tags", []))
    except DomainError as exc:
        raise RecordError(f"'metadata.tags': {exc}") from None
    for tag in tags:
        encodable(tag, "metadata.tags")
    return tags

