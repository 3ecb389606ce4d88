"""The journal's two records, written down once: credence.evidence (one event per evidence or lifecycle
change of an entry, with its full snapshot) and credence.archive (an entry leaving the active view).

The scope steps build them with ``evidence_record`` and ``archive_record``, the envelope decoder
(credence/records/envelope.py) takes their required fields from here, and the Parquet sinks (sinks/schema.py)
derive their columns from the same field lists: a field the journal gains is added to ``FIELDS`` and
nowhere else. docs/records.md says what each field means.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from credence.errors import CredenceError
from credence.tables.clock import format_instant
from credence.tables.scope import Scope

VERSION = 1
EVIDENCE = "evidence"
ARCHIVE = "archive"
ENTRY_KINDS = ("reflection", "persona")
# Facts have no snapshot of their own, yet what became of a request's facts must be on the record; their
# events keep the entry events' envelope under this entry_kind (evidence only, never archived).
FACTS_KIND = "facts"

# What a field holds on the wire: the version integer, a scope part, a non-empty string, a string or
# null, an ISO-8601 UTC instant, a number or null, the entry's snapshot object, or a count (an integer
# >= 0, left out when 0).
Kind = Literal["version", "part", "text", "string", "instant", "number", "snapshot", "count"]


@dataclass(frozen=True)
class Field:
    name: str
    kind: Kind
    required: bool  # absent or null is refused (every kind but ``string`` and ``number``)


def _fields(*spec: tuple[str, Kind]) -> tuple[Field, ...]:
    return tuple(Field(name, kind, kind not in ("string", "number", "count")) for name, kind in spec)


# Every journal record starts with the version and the entry's identity; the sinks store these columns
# in this order, then the table's own fields, then the snapshot's.
_HEAD = (("v", "version"), ("tenant", "part"), ("user", "part"), ("character", "part"),
         ("entry_id", "text"), ("entry_kind", "text"))
FIELDS: dict[str, tuple[Field, ...]] = {
    EVIDENCE: _fields(*_HEAD, ("event_id", "text"), ("event", "text"), ("cause", "string"),
                      ("from_status", "string"), ("to_status", "string"), ("at", "instant"),
                      ("score", "number"), ("tier", "string"), ("entry", "snapshot"), ("incarnation", "count")),
    ARCHIVE: _fields(*_HEAD, ("archived_at", "instant"), ("reason", "string"), ("entry", "snapshot"),
                     ("incarnation", "count")),
}
# Which life of its scope a record belongs to: 0 until the scope's user is first forgotten, then the
# forget's position (streams/state/incarnations.py). Written only when not 0, so a user never forgotten
# journals exactly what older workers did, and a record without it reads as 0.
INCARNATION = "incarnation"
# An evidence event's own fields, apart from the entry's identity and snapshot: what a fact candidate's
# provenance keeps of each signal.
EVENT_FIELDS = tuple(f.name for f in FIELDS[EVIDENCE][len(_HEAD):] if f.kind != "snapshot")
# The journal also says what became of a request's facts (docs/records.md, "Facts events"); the archive
# holds entries only.
KINDS = {ARCHIVE: ENTRY_KINDS, EVIDENCE: ENTRY_KINDS + (FACTS_KIND,)}
# The fields that identify a record, for the sinks' de-duplication (sinks/parquet.py): the worker delivers
# both topics at least once, so one archived entry / one journal event can sit at several offsets. An
# archival is one version of an entry (a deterministic id comes back and is archived again at a higher
# version) in one incarnation of its scope; an event's id names its version and incarnation already.
IDENTITY = {ARCHIVE: ("entry_id", "version", "incarnation"), EVIDENCE: ("event_id",)}


_NAMES = {table: tuple(f.name for f in fields) for table, fields in FIELDS.items()}
_INSTANTS = {table: tuple(f.name for f in fields if f.kind == "instant") for table, fields in FIELDS.items()}


def _record(table: str, scope: Scope, values: dict[str, Any]) -> dict:
    record = {"v": VERSION, "tenant": scope.tenant, "user": scope.user, "character": scope.character, **values}
    if not record.get(INCARNATION):
        record.pop(INCARNATION, None)
    if tuple(record) != tuple(n for n in _NAMES[table] if n in record or n != INCARNATION):
        raise CredenceError(f"a {table} record has exactly the fields {list(_NAMES[table])}, in this order; "
                            f"got {list(record)}")
    for name in _INSTANTS[table]:
        record[name] = format_instant(record[name])
    return record


def evidence_record(scope: Scope, *, entry_id: str, entry_kind: str, event_id: str, event: str,
                    cause: str | None, from_status: str | None, to_status: str | None, at: datetime,
                    score: float | None, tier: str | None, entry: dict, incarnation: int = 0) -> dict:
    """One credence.evidence event, its fields in the order of ``FIELDS``."""
    return _record(EVIDENCE, scope, {
        "entry_id": entry_id, "entry_kind": entry_kind, "event_id": event_id, "event": event, "cause": cause,
        "from_status": from_status, "to_status": to_status, "at": at, "score": score, "tier": tier,
        "entry": entry, INCARNATION: incarnation})


def archive_record(scope: Scope, *, entry_id: str, entry_kind: str, archived_at: datetime, reason: str,
                   entry: dict, incarnation: int = 0) -> dict:
    """One credence.archive record: an entry's last snapshot as it leaves the active view."""
    return _record(ARCHIVE, scope, {"entry_id": entry_id, "entry_kind": entry_kind, "archived_at": archived_at,
                                    "reason": reason, "entry": entry, INCARNATION: incarnation})


def incarnation_of(record: dict) -> int:
    """The incarnation a journal record was written in (0 when it carries none: before any forget)."""
    value = record.get(INCARNATION)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def event_id(entry_id: str, version: int, incarnation: int = 0) -> str:
    """The identity of one snapshot: ``<entry_id>@<version>``, and ``~<incarnation>`` after it once the scope
    was forgotten and began again, so a returning user's version line never reuses a forgotten event's id."""
    return f"{entry_id}@{version}" + (f"~{incarnation}" if incarnation else "")
