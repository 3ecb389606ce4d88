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
from credence.streams.scope.scope_state import ScopeState
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

# Fields of the state stored outside the control value, one key per item (`list_key`): lists that
# steps only append to and pop from the front of (or clear), and that can grow long — inputs queued behind
# an LLM request (hundreds of turns while a scope waits), the Stage-1 window's turns and the ids of
# processed facts (up to 500). Rewriting them with every batch would dominate what a batch writes.
LISTS = ("queue", "buffer", "done_facts")


def list_key(scope: str, name: str, seq: int) -> str:
    return f"{scope}{SEP}{name}{SEP}{seq}"


def encode_control(state: ScopeState, heads: dict[str, int] | None = None) -> bytes:
    """The control value; for each of LISTS its span of stored items: [first sequence number, length]."""
    control = state.control_dict()
    spans = {name: [(heads or {}).get(name, 0), len(control.pop(name))] for name in LISTS}
    return orjson.dumps(control | {"v": SCHEMA, "lists": spans})


@dataclass
class Control:
    state: ScopeState  # entries (and LISTS) empty unless `legacy`
    legacy: bool  # a schema-1 value: the whole state, entries included, still to be split
    spans: dict[str, tuple[int, int]]  # list name -> (first sequence number, length)


def decode_control(raw: bytes | str | None) -> Control | None:
    obj = _load(raw, "scope")
    if obj is None:
        return None
    if not isinstance(obj, dict) or "scope" not in obj:
        raise StateError("stored scope value is not a scope state")
    legacy = _version(obj, "scope") == 1
    # A list missing from `lists` (a value written before it joined LISTS) is still inline in the value.
    spans = {name: tuple(span) for name, span in obj.get("lists", {}).items() if name in LISTS}
    return Control(ScopeState.from_dict(obj), legacy, spans)


def encode_item(item: object) -> bytes:
    return orjson.dumps({"v": SCHEMA, "item": item})


def decode_item(raw: bytes | str | None) -> object:
    obj = _load(raw, "list item")
    if not isinstance(obj, dict) or _version(obj, "list item") != SCHEMA or "item" not in obj:
        raise StateError("stored list item is missing or not a schema-2 list item")
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
            "version": entry.get("version"),
            **({"consensus": entry.get("consensus")} if journal_record["event"] == "consensus" else {})}


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
