"""credence.usage v1: recall hits actually returned to a caller, decoded and checked, and built."""

from __future__ import annotations

from datetime import datetime

from credence.errors import RecordError
from credence.records.control import entry_ref
from credence.records.envelope import decode, encodable, parse_utc
from credence.tables.clock import format_instant
from credence.tables.scope import MAX_PART, Scope

VERSION = 1
MAX_USAGE_IDS = 100  # entries one recall can return


def decode_usage(raw: bytes | None) -> dict:
    """credence.usage v1: recall hits actually returned to a caller,
    {tenant, user, character, entry_ids: [..], source, ts}; the scope's owner reinforces each entry once
    per (source, UTC day)."""
    obj = decode(raw, "usage")
    ids = obj["entry_ids"]
    if not ids or len(ids) > MAX_USAGE_IDS:
        raise RecordError(f"'entry_ids' must be a list of 1..{MAX_USAGE_IDS} entry ids")
    for i in range(len(ids)):
        entry_ref({"entry_ids": ids[i]}, "entry_ids")
    source = obj.get("source")
    if not isinstance(source, str) or not source.strip() or len(source) > MAX_PART:
        raise RecordError(f"'source' must be a non-empty string of at most {MAX_PART} characters (e.g. 'recall')")
    encodable(source, "source")
    return {"tenant": obj["tenant"], "user": obj["user"], "character": obj["character"],
            "entry_ids": list(dict.fromkeys(ids)), "source": source, "ts": format_instant(parse_utc(obj.get("ts"), "ts"))}


def usage_record(scope: str, entry_ids: list[str], source: str, at: datetime) -> dict:
    """A credence.usage v1 record for the hits one recall returned to its caller (source "recall")."""
    return {"v": VERSION, **Scope.parse(scope).fields(), "entry_ids": list(entry_ids),
            "source": source, "ts": format_instant(at)}

