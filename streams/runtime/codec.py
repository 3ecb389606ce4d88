"""The bytes of every stored table value, encoded once by us (orjson) and stored raw, so the local store
and the changelog share one encoding. Every value carries its schema version `v`.

Schema 1 is what workers before the split wrote: one JSON state per scope (entries inside) with no `v`,
and a duplicate mark as a bare JSON string. Both are still read; a scope in schema 1 is split into the
schema-2 keys the first time its partition's worker touches it (see ScopeStore.load).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from credence.errors import StateError
from credence.streams.scope.state import ScopeState
from credence.tables.entries import Entry

SCHEMA = 2
SEP = "\x1f"  # cannot appear in a validated scope part or an entry id


def entry_key(scope: str, entry_id: str) -> str:
    return f"{scope}{SEP}{entry_id}"


def history_key(scope: str, entry_id: str, slot: int) -> str:
    """One of the entry's history chunks (a ring of slots)."""
    return f"{scope}{SEP}{entry_id}{SEP}{slot}"


def split_key(key: str) -> list[str]:
    return key.split(SEP)


def _load(raw: bytes | str | None, what: str) -> Any:
    if raw is None:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise StateError(f"stored {what} value is not JSON: {exc}") from None


def _version(obj: dict, what: str) -> int:
    v = obj.get("v", 1)
    if v not in (1, SCHEMA):
        raise StateError(f"stored {what} value has schema {v!r}; this worker reads 1 and {SCHEMA}")
    return v


# -- the control value: everything of a scope but its entries ----------------------------------------

def queue_key(scope: str, seq: int) -> str:
    return f"{scope}{SEP}{seq}"


def encode_control(state: ScopeState, queue_head: int = 0) -> bytes:
    """The control value. Queued inputs are stored under their own keys (`queue_key`, sequence numbers
    `queue_head` .. `queue_head + queue_len - 1`): a scope waiting for an LLM result may queue hundreds
    of turns, and rewriting them all with every batch would dominate what a batch writes."""
    control = state.control_dict()
    queued = len(control.pop("queue"))
    return orjson.dumps(control | {"v": SCHEMA, "queue_head": queue_head, "queue_len": queued})


@dataclass
class Control:
    state: ScopeState  # entries (and queue) empty unless `legacy`
    legacy: bool  # a schema-1 value: the whole state, entries included, still to be split
    queue_head: int = 0
    queue_len: int = 0


def decode_control(raw: bytes | str | None) -> Control | None:
    obj = _load(raw, "scope")
    if obj is None:
        return None
    if not isinstance(obj, dict) or "scope" not in obj:
        raise StateError("stored scope value is not a scope state")
    legacy = _version(obj, "scope") == 1
    return Control(ScopeState.from_dict(obj), legacy, int(obj.get("queue_head", 0)), int(obj.get("queue_len", 0)))


def encode_queued(item: dict) -> bytes:
    return orjson.dumps({"v": SCHEMA, "item": item})


def decode_queued(raw: bytes | str) -> dict:
    obj = _load(raw, "queued input")
    if not isinstance(obj, dict) or _version(obj, "queued input") != SCHEMA or "item" not in obj:
        raise StateError("stored queued input is not a schema-2 queue item")
    return obj["item"]


# -- entries and their signal history ----------------------------------------------------------------

def encode_entry(entry: Entry, history: int) -> bytes:
    """`history`: journal events recorded for the entry so far (the next history slot is history % max)."""
    return orjson.dumps({"v": SCHEMA, "entry": entry.to_dict(), "history": history})


def decode_entry(raw: bytes | str) -> tuple[Entry, int]:
    obj = _load(raw, "entry")
    if not isinstance(obj, dict) or _version(obj, "entry") != SCHEMA or "entry" not in obj:
        raise StateError("stored entry value is not a schema-2 entry")
    return Entry.from_dict(obj["entry"]), int(obj.get("history", 0))


def history_item(journal_record: dict) -> dict:
    """One signal-history item from a journal (evidence) record."""
    entry = journal_record["entry"]
    evidence = entry.get("evidence") or {}
    return {"event": journal_record["event"], "cause": journal_record["cause"], "at": journal_record["at"],
            "score": journal_record["score"], "tier": journal_record["tier"],
            "reinforcement": evidence.get("reinforcement"), "disputation": evidence.get("disputation"),
            "version": entry.get("version")}


def encode_history(first: int, items: list[dict]) -> bytes:
    """A chunk of an entry's history: items numbered `first`, `first + 1`, ... of the entry's journal."""
    return orjson.dumps({"v": SCHEMA, "first": first, "items": items})


def decode_history(raw: bytes | str) -> tuple[int, list[dict]]:
    obj = _load(raw, "history")
    if not isinstance(obj, dict) or _version(obj, "history") != SCHEMA or "items" not in obj:
        raise StateError("stored history value is not a schema-2 history chunk")
    return int(obj["first"]), list(obj["items"])


# -- duplicate marks ---------------------------------------------------------------------------------

def encode_mark(position: str, at: str | None) -> bytes:
    """`position`: topic:partition:offset of the record that first carried the id; `at` its event time."""
    return orjson.dumps({"v": SCHEMA, "position": position, "at": at})


def decode_mark(raw: bytes | str | None) -> tuple[str, str | None] | None:
    """(position, event time or None). A schema-1 mark is the bare position string, with no time."""
    obj = _load(raw, "mark")
    if obj is None:
        return None
    if isinstance(obj, str):
        return obj, None
    if not isinstance(obj, dict) or _version(obj, "mark") != SCHEMA:
        raise StateError("stored duplicate mark is neither a position nor a schema-2 mark")
    return obj["position"], obj.get("at")
