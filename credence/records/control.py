"""credence.control / credence.facts v1: LLM answers, timers and the user's and operator's requests to a
scope, decoded and checked by their type (a Kind), and built."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from types import MappingProxyType
from typing import Any

from credence.errors import RecordError
from credence.records.envelope import CONTROL, WireRecord, decode, encodable, parse_utc, part
from credence.records.kind import Kind
from credence.tables.clock import format_instant, parse_instant
from credence.tables.scope import MAX_PART, Scope, scope_key, user_prefix

VERSION = 1
MAX_IMPORT_ENTRIES = 10_000


def _part(obj: dict, name: str) -> str:
    return part(obj.get(name), name)


@dataclass(frozen=True, eq=False)
class ControlRecord(WireRecord, Mapping[str, Any]):
    """One checked credence.control / credence.facts v1 record: its Kind and the fields its type reads,
    typed. A control record is open by type (an LLM answer's `output` is its task's), so it is also a
    read-only mapping of its checked wire fields, which a scope's state queues as they are."""

    kind: Kind
    fields: Mapping[str, Any]

    @classmethod
    def of(cls, obj: dict) -> ControlRecord:
        """A checked wire form (decode_control's, or a scope's queued input read back)."""
        return cls(Kind(obj["type"]), MappingProxyType(obj))

    @classmethod
    def decode(cls, raw: bytes | None) -> ControlRecord:
        return cls.of(decode_control(raw))

    def __getitem__(self, name: str) -> Any:
        return self.fields[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ControlRecord) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]  # its fields are mutable JSON values

    def to_dict(self) -> dict:
        return dict(self.fields)

    @property
    def scope(self) -> str:
        """Its scope key; a forget's is its user's prefix (it names no character)."""
        if self.kind is Kind.FORGET:
            return user_prefix(self.fields["tenant"], self.fields["user"])
        return scope_key(self.fields["tenant"], self.fields["user"], self.fields["character"])

    @cached_property
    def at(self) -> datetime | None:
        """Its event time: a tick's `now`, the others' `ts` (None: the record carries none)."""
        return parse_instant(self.fields.get("now" if self.kind is Kind.TICK else "ts"))

    @cached_property
    def ts(self) -> datetime | None:
        return parse_instant(self.fields.get("ts"))

    @property
    def request_id(self) -> str:
        """An LLM answer's request ("" on the other types)."""
        return self.fields.get("request_id", "")

    @property
    def output(self) -> dict:
        """A result's answer, in its task's shape ({} when it has none)."""
        return self.fields.get("output") or {}

    @property
    def error(self) -> str:
        return str(self.fields.get("error", "?"))

    @property
    def transient(self) -> bool:
        """A failure the backend may recover from (it waits for it) rather than the request's own."""
        return bool(self.fields.get("transient"))

    @property
    def timed(self) -> bool:
        """A tick that moves the clock (False: it only re-issues lost requests)."""
        return bool(self.fields.get("now"))

    @property
    def after(self) -> dict[str, list[int]] | None:
        return self.fields.get("after")

    @property
    def entry_id(self) -> str:
        return self.fields["entry_id"]

    @property
    def by(self) -> str | None:
        return self.fields.get("by") or None

    @property
    def score(self) -> float:
        return self.fields["score"]

    @property
    def reason(self) -> str | None:
        return self.fields.get("reason") or None

    @property
    def text(self) -> str:
        return self.fields["text"]

    @property
    def importance(self) -> int:
        return self.fields["importance"]

    @property
    def subject(self) -> str:
        return self.fields.get("subject") or ""

    @property
    def remember_id(self) -> str:
        return self.fields["remember_id"]

    @property
    def import_id(self) -> str | None:
        return self.fields.get("import_id")

    @property
    def entries(self) -> list:
        return self.fields.get("entries") or []


def decode_control(raw: bytes | None) -> dict:
    """credence.control / credence.facts: LLM results and failures, ticks and flushes, keyed by scope; the
    checked wire form (``ControlRecord.decode`` types it)."""
    obj = decode(raw, CONTROL)
    if obj["type"] != "forget":
        _part(obj, "character")
    if obj["type"] in ("result", "failed") and not isinstance(obj.get("request_id"), str):
        raise RecordError("'request_id' must be a string")
    if obj["type"] == "tick" and obj.get("now") is not None:
        obj["now"] = format_instant(parse_utc(obj["now"], "now"))
    if obj["type"] == "forget" and obj.get("after") is not None:
        _after(obj["after"])
    if obj["type"] == "restore":
        entry_ref(obj, "entry_id")
    if obj["type"] in ("restore", "dedupe"):
        if obj.get("ts") is not None:
            obj["ts"] = format_instant(parse_utc(obj["ts"], "ts"))
    if obj["type"] == "consensus":
        _consensus(obj)
    if obj["type"] == "import":
        _import(obj)
    if obj["type"] == "erase":
        _erase(obj)
    if obj["type"] == "remember":
        _remember(obj)
    if obj["type"] == "edit":
        entry_ref(obj, "entry_id")
        _who(obj)
        _statement(obj)
    return obj


def _import(obj: dict) -> None:
    """{import_id, entries: [Entry snapshots], by, ts}: one scope's entries from `credence import`. Only the
    shape is checked here; the scope's owner reads every snapshot before applying any (scope/imports.py)."""
    entry_ref(obj, "import_id")
    entries = obj.get("entries")
    if not isinstance(entries, list) or len(entries) > MAX_IMPORT_ENTRIES or not all(
            isinstance(e, dict) for e in entries):
        raise RecordError(f"'entries' must be a list of at most {MAX_IMPORT_ENTRIES} entry snapshots (objects)")
    by = obj.get("by")
    if not isinstance(by, str) or len(by) > MAX_PART:
        raise RecordError(f"'by' must be a string of at most {MAX_PART} characters")
    obj["ts"] = format_instant(parse_utc(obj.get("ts"), "ts"))


MAX_REASON = 200  # a deletion's why, journalled
MAX_REMEMBER_TEXT = 1000  # a "remember this" statement: one observation, not a document


def _who(obj: dict) -> None:
    by = obj.get("by")
    if not isinstance(by, str) or not by.strip() or len(by) > MAX_PART:
        raise RecordError(f"'by' must name who asked: a non-empty string of at most {MAX_PART} characters")
    encodable(by, "by")
    obj["ts"] = format_instant(parse_utc(obj.get("ts"), "ts"))


def _erase(obj: dict) -> None:
    """{entry_id, by, reason?, ts}: the user deletes one entry (streams/scope/erase.py)."""
    entry_ref(obj, "entry_id")
    _who(obj)
    reason = obj.get("reason")
    if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON):
        raise RecordError(f"'reason' must be a string of at most {MAX_REASON} characters")
    if reason:
        encodable(reason, "reason")


def _statement(obj: dict) -> None:
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_REMEMBER_TEXT:
        raise RecordError(f"'text' must be a non-empty string of at most {MAX_REMEMBER_TEXT} characters")
    encodable(text, "text")


def _remember(obj: dict) -> None:
    """{remember_id, text, importance (1..10), subject?, by, ts}: a statement the user asks to be remembered."""
    entry_ref(obj, "remember_id")
    _who(obj)
    _statement(obj)
    importance = obj.get("importance")
    if isinstance(importance, bool) or not isinstance(importance, int) or not 1 <= importance <= 10:
        raise RecordError(f"'importance' must be an integer from 1 to 10, got {importance!r}")
    subject = obj.get("subject")
    if subject is not None and (not isinstance(subject, str) or len(subject) > MAX_PART):
        raise RecordError(f"'subject' must be a string of at most {MAX_PART} characters")


def _after(after) -> None:
    """A forget's optional `after` (since `credence forget` orders forgets against the other inputs): per
    input topic (logical name), the end offset of each partition when the forget was sent."""
    if not isinstance(after, dict) or not all(
            isinstance(name, str) and isinstance(ends, list)
            and all(type(end) is int and end >= 0 for end in ends) for name, ends in after.items()):
        raise RecordError("'after' must map input topic names to lists of end offsets (integers >= 0)")


def _consensus(obj: dict) -> None:
    """{entry_id, score (0..1), by, ts}: an external consensus on one entry."""
    entry_ref(obj, "entry_id")
    score = obj.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        raise RecordError(f"'score' must be a number from 0 to 1, got {score!r}")
    obj["score"] = float(score)
    by = obj.get("by")
    if not isinstance(by, str) or not by.strip() or len(by) > MAX_PART:
        raise RecordError(f"'by' must name who set the consensus: a non-empty string of at most {MAX_PART} "
                          "characters")
    encodable(by, "by")
    obj["ts"] = format_instant(parse_utc(obj.get("ts"), "ts"))


def entry_ref(obj: dict, name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value or len(value) > MAX_PART:
        raise RecordError(f"'{name}' must be a non-empty string of at most {MAX_PART} characters")
    return encodable(value, name)





def restore_record(scope: str, entry_id: str, by: str, at: datetime) -> dict:
    """A credence.control v1 restore request for a soft-archived entry."""
    return {"v": VERSION, "type": "restore", **Scope.parse(scope).fields(),
            "entry_id": entry_id, "by": by, "ts": format_instant(at)}


def consensus_record(scope: str, entry_id: str, score: float, by: str, at: datetime) -> dict:
    """A credence.control v1 consensus record: ``by`` corroborates ``entry_id`` at ``score`` (0..1)."""
    return {"v": VERSION, "type": "consensus", **Scope.parse(scope).fields(),
            "entry_id": entry_id, "score": score, "by": by, "ts": format_instant(at)}


def erase_record(scope: str, entry_id: str, by: str, reason: str | None, at: datetime) -> dict:
    """A credence.control v1 request to delete one entry of the scope (streams/scope/erase.py)."""
    return {"v": VERSION, "type": "erase", **Scope.parse(scope).fields(), "entry_id": entry_id, "by": by,
            "reason": reason, "ts": format_instant(at)}


def remember_record(scope: str, remember_id: str, text: str, importance: int, subject: str | None, by: str,
                    at: datetime) -> dict:
    """A credence.control v1 "remember this": a user-provenance statement for the evidence path."""
    return {"v": VERSION, "type": "remember", **Scope.parse(scope).fields(), "remember_id": remember_id, "text": text,
            "importance": importance, "subject": subject, "by": by, "ts": format_instant(at)}


def edit_record(scope: str, entry_id: str, text: str, by: str, at: datetime) -> dict:
    """A credence.control v1 user correction of one entry's wording (streams/scope/erase.py)."""
    return {"v": VERSION, "type": "edit", **Scope.parse(scope).fields(), "entry_id": entry_id, "text": text, "by": by,
            "ts": format_instant(at)}


def dedupe_record(scope: str, by: str, at: datetime) -> dict:
    """A credence.control v1 request to merge the scope's near-duplicate live entries (applied in order)."""
    return {"v": VERSION, "type": "dedupe", **Scope.parse(scope).fields(), "by": by,
            "ts": format_instant(at)}


def import_record(scope: str, import_id: str, entries: list[dict], by: str, at: datetime) -> dict:
    """A credence.control v1 import of one scope's entry snapshots (`credence import`)."""
    return {"v": VERSION, "type": "import", **Scope.parse(scope).fields(), "import_id": import_id,
            "entries": entries, "by": by, "ts": format_instant(at)}


def tick_record(scope: str, now: str | None) -> dict:
    """A credence.control v1 tick of the wall clock (``now`` an ISO instant, None: re-issue lost requests only)."""
    return {"v": VERSION, "type": "tick", **Scope.parse(scope).fields(), "now": now}


def forget_record(tenant: str, user: str, after: dict[str, list[int]]) -> bytes:
    """A credence.control v1 forget of the user, ordered after everything `after` (input topic -> end
    offset by partition) counts."""
    return json.dumps({"v": VERSION, "type": "forget", "tenant": tenant, "user": user, "after": after}).encode()

