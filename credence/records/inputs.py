"""Versioned records on the topics: decoding with validation, and the dead-letter envelope.

A record that fails validation is never half-applied: it goes whole (original bytes) to credence.dlq
with the reason, and the records around it carry on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

from credence.errors import DomainError, RecordError
from credence.records.envelope import CONTROL_TYPES, DECISIONS, EARLIEST, LATEST, ROLES, decode, parse_utc, part
from credence.records.envelope import encodable as _encodable
from credence.tables.clock import format_instant, parse_instant
from credence.tables.scope import MAX_PART, Scope, scope_key, user_prefix
from credence.tables.tags import check_tags

__all__ = ["CONTROL_TYPES", "DECISIONS", "EARLIEST", "LATEST", "ROLES", "parse_utc", "scope_key"]  # read here by others

MAX_TEXT = 32_000
MAX_SURFACED_IDS = 100  # entries a turn's AI text can name: more than any prompt renders
# An input record as its producer sent it, at most (but an LLM answer): its known fields take far less (a
# turn's text of MAX_TEXT characters, each escaped to 12 bytes at worst, and its surfaced ids; a forget's
# offsets), so a record over it carries that much in fields credence does not know. Refused whole, never
# forwarded, never queued in a scope's state.
MAX_INPUT_BYTES = 512 * 1024
ANSWERS = ("result", "failed")  # LLM answers (control, facts): bounded by the runner at the record limit
# Records bounded by the record limit (CREDENCE_KAFKA__MAX_RECORD_BYTES), not MAX_INPUT_BYTES: LLM answers, and
# an import, which carries a whole scope's entries (`credence import` refuses one over the limit before sending).
BOUNDED_BY_RECORD_LIMIT = (*ANSWERS, "import")
MAX_IMPORT_ENTRIES = 10_000


def _part(obj: dict, name: str) -> str:
    return part(obj.get(name), name)


@dataclass(frozen=True)
class TurnRecord:
    """credence.turns v1: one message of a conversation between a user and a character."""

    tenant: str
    user: str
    character: str
    turn_id: str
    role: str
    text: str
    ts: datetime
    surfaced_ids: tuple[str, ...] = field(default=())
    tags: tuple[str, ...] = field(default=())  # metadata.tags: the tenant's (issue 33)

    @property
    def scope(self) -> str:
        return scope_key(self.tenant, self.user, self.character)

    def to_dict(self) -> dict:
        d = {"v": 1, "tenant": self.tenant, "user": self.user, "character": self.character,
             "turn_id": self.turn_id, "role": self.role, "text": self.text, "ts": format_instant(self.ts)}
        if self.surfaced_ids:
            d["surfaced_ids"] = list(self.surfaced_ids)
        if self.tags:
            d["metadata"] = {"tags": list(self.tags)}
        return d

    def encode(self) -> bytes:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":")).encode()


def decode_turn(raw: bytes | None) -> TurnRecord:
    """Decode and validate one turn record; RecordError says exactly what is wrong."""
    obj = decode(raw, "turn")
    turn_id, role, text = obj["turn_id"], obj["role"], obj["text"]
    if len(turn_id) > MAX_PART:
        raise RecordError(f"'turn_id' must be a non-empty string of at most {MAX_PART} characters")
    if not text.strip():
        raise RecordError("'text' must be a non-empty string")
    if len(text) > MAX_TEXT:
        raise RecordError(f"'text' is longer than {MAX_TEXT} characters")
    _encodable(text, "text")
    _encodable(turn_id, "turn_id")
    surfaced = obj.get("surfaced_ids", [])
    if surfaced is None:
        surfaced = []
    if not isinstance(surfaced, list) or not all(isinstance(s, str) and s for s in surfaced):
        raise RecordError("'surfaced_ids' must be a list of non-empty strings")
    if len(surfaced) > MAX_SURFACED_IDS or any(len(s) > MAX_PART for s in surfaced):
        raise RecordError(f"'surfaced_ids' must hold at most {MAX_SURFACED_IDS} ids of at most {MAX_PART} "
                          f"characters each, got {len(surfaced)}")
    for sid in surfaced:
        _encodable(sid, "surfaced_ids")
    return TurnRecord(
        tenant=obj["tenant"], user=obj["user"], character=obj["character"],
        turn_id=turn_id, role=role, text=text, ts=parse_utc(obj.get("ts"), "ts"),
        surfaced_ids=tuple(surfaced), tags=_tags(obj.get("metadata")),
    )


def _tags(metadata) -> tuple[str, ...]:
    """A turn's `metadata.tags` (issue 33); the rest of `metadata` is the tenant's and ignored."""
    if metadata is None:
        return ()
    if not isinstance(metadata, dict):
        raise RecordError(f"'metadata' must be an object, got {type(metadata).__name__}")
    try:
        tags = check_tags(metadata.get("tags", []))
    except DomainError as exc:
        raise RecordError(f"'metadata.tags': {exc}") from None
    for tag in tags:
        _encodable(tag, "metadata.tags")
    return tags


MAX_USAGE_IDS = 100  # entries one recall can return


def decode_feedback(raw: bytes | None) -> dict:
    """credence.feedback v1: {tenant, user, character, feedback_id, entry_id, decision, ts}."""
    obj = decode(raw, "feedback")
    for name in ("feedback_id", "entry_id"):
        if len(obj[name]) > MAX_PART:
            raise RecordError(f"'{name}' must be a non-empty string of at most {MAX_PART} characters")
        _encodable(obj[name], name)
    return {"tenant": obj["tenant"], "user": obj["user"], "character": obj["character"],
            "feedback_id": obj["feedback_id"], "entry_id": obj["entry_id"], "decision": obj["decision"],
            "ts": format_instant(parse_utc(obj.get("ts"), "ts"))}


def decode_control(raw: bytes | None) -> dict:
    """credence.control / credence.facts: LLM results and failures, ticks and flushes, keyed by scope."""
    obj = decode(raw, "control")
    if obj["type"] != "forget":
        _part(obj, "character")
    if obj["type"] in ("result", "failed") and not isinstance(obj.get("request_id"), str):
        raise RecordError("'request_id' must be a string")
    if obj["type"] == "tick" and obj.get("now") is not None:
        obj["now"] = format_instant(parse_utc(obj["now"], "now"))
    if obj["type"] == "forget" and obj.get("after") is not None:
        _after(obj["after"])
    if obj["type"] == "restore":
        _entry_ref(obj, "entry_id")
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
        _entry_ref(obj, "entry_id")
        _who(obj)
        _statement(obj)
    return obj


def _import(obj: dict) -> None:
    """{import_id, entries: [Entry snapshots], by, ts}: one scope's entries from `credence import`. Only the
    shape is checked here; the scope's owner reads every snapshot before applying any (scope/imports.py)."""
    _entry_ref(obj, "import_id")
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
    _encodable(by, "by")
    obj["ts"] = format_instant(parse_utc(obj.get("ts"), "ts"))


def _erase(obj: dict) -> None:
    """{entry_id, by, reason?, ts}: the user deletes one entry (streams/scope/erase.py)."""
    _entry_ref(obj, "entry_id")
    _who(obj)
    reason = obj.get("reason")
    if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON):
        raise RecordError(f"'reason' must be a string of at most {MAX_REASON} characters")
    if reason:
        _encodable(reason, "reason")


def _statement(obj: dict) -> None:
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_REMEMBER_TEXT:
        raise RecordError(f"'text' must be a non-empty string of at most {MAX_REMEMBER_TEXT} characters")
    _encodable(text, "text")


def _remember(obj: dict) -> None:
    """{remember_id, text, importance (1..10), subject?, by, ts}: a statement the user asks to be remembered."""
    _entry_ref(obj, "remember_id")
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
    """{entry_id, score (0..1), by, ts}: an external consensus on one entry (seed 002)."""
    _entry_ref(obj, "entry_id")
    score = obj.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        raise RecordError(f"'score' must be a number from 0 to 1, got {score!r}")
    obj["score"] = float(score)
    by = obj.get("by")
    if not isinstance(by, str) or not by.strip() or len(by) > MAX_PART:
        raise RecordError(f"'by' must name who set the consensus: a non-empty string of at most {MAX_PART} "
                          "characters")
    _encodable(by, "by")
    obj["ts"] = format_instant(parse_utc(obj.get("ts"), "ts"))


def _entry_ref(obj: dict, name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value or len(value) > MAX_PART:
        raise RecordError(f"'{name}' must be a non-empty string of at most {MAX_PART} characters")
    return _encodable(value, name)


def decode_usage(raw: bytes | None) -> dict:
    """credence.usage v1 (seed 002): recall hits actually returned to a caller,
    {tenant, user, character, entry_ids: [..], source, ts}; the scope's owner reinforces each entry once
    per (source, UTC day)."""
    obj = decode(raw, "usage")
    ids = obj["entry_ids"]
    if not ids or len(ids) > MAX_USAGE_IDS:
        raise RecordError(f"'entry_ids' must be a list of 1..{MAX_USAGE_IDS} entry ids")
    for i in range(len(ids)):
        _entry_ref({"entry_ids": ids[i]}, "entry_ids")
    source = obj.get("source")
    if not isinstance(source, str) or not source.strip() or len(source) > MAX_PART:
        raise RecordError(f"'source' must be a non-empty string of at most {MAX_PART} characters (e.g. 'recall')")
    _encodable(source, "source")
    return {"tenant": obj["tenant"], "user": obj["user"], "character": obj["character"],
            "entry_ids": list(dict.fromkeys(ids)), "source": source, "ts": format_instant(parse_utc(obj.get("ts"), "ts"))}


def usage_record(scope: str, entry_ids: list[str], source: str, at: datetime) -> dict:
    """A credence.usage v1 record for the hits one recall returned to its caller (source "recall")."""
    return {"v": 1, **Scope.parse(scope).fields(), "entry_ids": list(entry_ids),
            "source": source, "ts": format_instant(at)}


def restore_record(scope: str, entry_id: str, by: str, at: datetime) -> dict:
    """A credence.control v1 restore request for a soft-archived entry."""
    return {"v": 1, "type": "restore", **Scope.parse(scope).fields(),
            "entry_id": entry_id, "by": by, "ts": format_instant(at)}


def consensus_record(scope: str, entry_id: str, score: float, by: str, at: datetime) -> dict:
    """A credence.control v1 consensus record: ``by`` corroborates ``entry_id`` at ``score`` (0..1)."""
    return {"v": 1, "type": "consensus", **Scope.parse(scope).fields(),
            "entry_id": entry_id, "score": score, "by": by, "ts": format_instant(at)}


def erase_record(scope: str, entry_id: str, by: str, reason: str | None, at: datetime) -> dict:
    """A credence.control v1 request to delete one entry of the scope (streams/scope/erase.py)."""
    return {"v": 1, "type": "erase", **Scope.parse(scope).fields(), "entry_id": entry_id, "by": by,
            "reason": reason, "ts": format_instant(at)}


def remember_record(scope: str, remember_id: str, text: str, importance: int, subject: str | None, by: str,
                    at: datetime) -> dict:
    """A credence.control v1 "remember this": a user-provenance statement for the evidence path."""
    return {"v": 1, "type": "remember", **Scope.parse(scope).fields(), "remember_id": remember_id, "text": text,
            "importance": importance, "subject": subject, "by": by, "ts": format_instant(at)}


def edit_record(scope: str, entry_id: str, text: str, by: str, at: datetime) -> dict:
    """A credence.control v1 user correction of one entry's wording (streams/scope/erase.py)."""
    return {"v": 1, "type": "edit", **Scope.parse(scope).fields(), "entry_id": entry_id, "text": text, "by": by,
            "ts": format_instant(at)}


def dedupe_record(scope: str, by: str, at: datetime) -> dict:
    """A credence.control v1 request to merge the scope's near-duplicate live entries (applied in order)."""
    return {"v": 1, "type": "dedupe", **Scope.parse(scope).fields(), "by": by,
            "ts": format_instant(at)}


def import_record(scope: str, import_id: str, entries: list[dict], by: str, at: datetime) -> dict:
    """A credence.control v1 import of one scope's entry snapshots (`credence import`)."""
    return {"v": 1, "type": "import", **Scope.parse(scope).fields(), "import_id": import_id,
            "entries": entries, "by": by, "ts": format_instant(at)}


def forget_record(tenant: str, user: str, after: dict[str, list[int]]) -> bytes:
    """A credence.control v1 forget of the user, ordered after everything `after` (input topic -> end
    offset by partition) counts."""
    return json.dumps({"v": 1, "type": "forget", "tenant": tenant, "user": user, "after": after}).encode()


@dataclass(frozen=True)
class Input:
    """One decoded input record."""

    name: str  # logical topic
    scope: str
    kind: str
    record: dict
    at: datetime | None  # event time, if the record carries one


def decode_input(name: str, raw: bytes) -> Input:
    item = _decode_input(name, raw)
    if item.kind not in BOUNDED_BY_RECORD_LIMIT and len(raw) > MAX_INPUT_BYTES:  # checked after the known fields: their reasons first
        raise RecordError(f"a {len(raw)}-byte {name} record, over the {MAX_INPUT_BYTES}-byte input limit: "
                          "its fields credence does not know are too large")
    return item


def _decode_input(name: str, raw: bytes) -> Input:
    if name == "turns":
        turn: TurnRecord = decode_turn(raw)
        return Input(name, turn.scope, "turn", turn.to_dict(), turn.ts)
    if name == "feedback":
        fb = decode_feedback(raw)
        return Input(name, scope_key(fb["tenant"], fb["user"], fb["character"]), "feedback", fb,
                     parse_instant(fb["ts"]))
    if name == "usage":
        hit = decode_usage(raw)
        return Input(name, scope_key(hit["tenant"], hit["user"], hit["character"]), "usage", hit,
                     parse_instant(hit["ts"]))
    ctl = decode_control(raw)
    if ctl["type"] == "forget":
        return Input(name, user_prefix(ctl["tenant"], ctl["user"]), "forget", ctl, None)
    at = parse_instant(ctl.get("now") if ctl["type"] == "tick" else ctl.get("ts"))
    return Input(name, scope_key(ctl["tenant"], ctl["user"], ctl["character"]), ctl["type"], ctl, at)
