"""credence.usage v1: recall hits actually returned to a caller, decoded and checked, and built."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from credence.errors import RecordError
from credence.records.control import entry_ref
from credence.records.envelope import USAGE, ScopedRecord, decode, encodable, parse_utc
from credence.records.kind import Kind
from credence.tables.clock import format_instant, parse_instant
from credence.tables.scope import MAX_PART, Scope

VERSION = 1
MAX_USAGE_IDS = 100  # entries one recall can return


@dataclass(frozen=True)
class UsageRecord(ScopedRecord):
    """credence.usage v1: {tenant, user, character, entry_ids: [..], source, ts}."""

    kind: ClassVar[Kind] = Kind.USAGE
    tenant: str
    user: str
    character: str
    entry_ids: tuple[str, ...]  # distinct, in the order the recall returned them
    source: str
    ts: datetime

    def to_dict(self) -> dict:
        """Its wire form, as a scope's state queues it (no `v`: the stored form never had one)."""
        return {"tenant": self.tenant, "user": self.user, "character": self.character,
                "entry_ids": list(self.entry_ids), "source": self.source, "ts": format_instant(self.ts)}

    @classmethod
    def from_dict(cls, d: dict) -> UsageRecord:
        """A wire form already checked (a scope's queued input): read back, not checked again."""
        return cls(d.get("tenant", ""), d.get("user", ""), d.get("character", ""), tuple(d["entry_ids"]),
                   d["source"], parse_instant(d.get("ts")))


def decode_usage(raw: bytes | None) -> UsageRecord:
    """credence.usage v1: recall hits actually returned to a caller,
    {tenant, user, character, entry_ids: [..], source, ts}; the scope's owner reinforces each entry once
    per (source, UTC day)."""
    obj = decode(raw, USAGE)
    ids = obj["entry_ids"]
    if not ids or len(ids) > MAX_USAGE_IDS:
        raise RecordError(f"'entry_ids' must be a list of 1..{MAX_USAGE_IDS} entry ids")
    for i in range(len(ids)):
        entry_ref({"entry_ids": ids[i]}, "entry_ids")
    source = obj.get("source")
    if not isinstance(source, str) or not source.strip() or len(source) > MAX_PART:
        raise RecordError(f"'source' must be a non-empty string of at most {MAX_PART} characters (e.g. 'recall')")
    encodable(source, "source")
    return UsageRecord(obj["tenant"], obj["user"], obj["character"], tuple(dict.fromkeys(ids)), source,
                       parse_utc(obj.get("ts"), "ts"))


def usage_record(scope: str, entry_ids: list[str], source: str, at: datetime) -> dict:
    """A credence.usage v1 record for the hits one recall returned to its caller (source "recall")."""
    return {"v": VERSION, **Scope.parse(scope).fields(), "entry_ids": list(entry_ids),
            "source": source, "ts": format_instant(at)}

