"""The v1 JSON envelope of every credence record, checked in one place: the topics' decoders, the tenants'
and cards' directory, dead letters, the journal and the archive sinks all read a record through
``decode`` (bytes) or ``check`` (an object already parsed), so a record one reader accepts no other refuses
for its envelope. Record types and their fields are docs/records.md's; credence/records/topics.py names the record
type of each topic.

What the envelope fixes: a JSON object; ``v`` the integer 1 (not ``true``, not ``1.0``; records from
outside credence may leave it out, records credence writes for itself must carry it); every required
field of the type present with its JSON type. What a field means beyond its type (a text's length, a key
hash's shape) stays with the record's own decoder.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from credence.errors import DomainError, RecordError
from credence.records.journal import FIELDS as JOURNAL_FIELDS
from credence.records.kind import CONTROL_KINDS
from credence.tables.scope import check_part, scope_key

VERSION = 1
# Event times outside these are client bugs (or attacks): a turn in year 9999 would move its scope's
# clock — and every sweep between — millennia ahead; one in year 1 would make the next turn sweep 2,000
# years of days.
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(2100, 1, 1, tzinfo=UTC)
ROLES = ("user", "ai")
DECISIONS = ("confirm", "deny", "ignore")
CONTROL_TYPES = tuple(kind.value for kind in CONTROL_KINDS)  # plain strings: a refusal names them as such

Check = Callable[[Any, str], None]


class WireRecord:
    """A typed record that writes its own wire form (`to_dict`) as the compact JSON every producer sends."""

    def to_dict(self) -> dict:
        raise NotImplementedError

    def encode(self) -> bytes:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":")).encode()


class ScopedRecord(WireRecord):
    """A record addressed to one scope by its tenant, user and character fields."""

    tenant: str
    user: str
    character: str

    @property
    def scope(self) -> str:
        return scope_key(self.tenant, self.user, self.character)


def encodable(value: str, name: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RecordError(f"'{name}' is not valid Unicode text (lone surrogate)") from None
    return value


def parse_utc(value: Any, name: str) -> datetime:
    """ISO-8601 with an explicit offset (or Z), returned in UTC."""
    if not isinstance(value, str):
        raise RecordError(f"'{name}' must be an ISO-8601 string")
    try:
        ts = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        raise RecordError(f"'{name}' is not ISO-8601: {value[:40]!r}") from None
    if ts.tzinfo is None:
        raise RecordError(f"'{name}' needs a UTC offset (e.g. 2026-01-01T12:00:00Z): {value[:40]!r}")
    try:
        ts = ts.astimezone(UTC)
    except OverflowError:
        raise RecordError(f"'{name}' is out of range: {value[:40]!r}") from None
    if not EARLIEST <= ts < LATEST:
        raise RecordError(f"'{name}' is outside the accepted range {EARLIEST:%Y-%m-%d} .. {LATEST:%Y-%m-%d}: "
                          f"{value[:40]!r}")
    return ts


def part(value: Any, name: str) -> str:
    """A scope part (tenant, user, character) under the one scope-part rule."""
    try:
        return encodable(check_part(name, value), name)
    except DomainError as exc:
        raise RecordError(str(exc).replace(f"scope {name}", f"'{name}'", 1)) from None


def text(value: Any, name: str) -> None:
    if not isinstance(value, str) or not value:
        raise RecordError(f"'{name}' must be a non-empty string")


def string(value: Any, name: str) -> None:
    if not isinstance(value, str):
        raise RecordError(f"'{name}' must be a string")


def integer(value: Any, name: str) -> None:
    if type(value) is not int:
        raise RecordError(f"'{name}' must be an integer, got {value!r}"[:200])


def array(value: Any, name: str) -> None:
    if not isinstance(value, list):
        raise RecordError(f"'{name}' must be a list")


def mapping(value: Any, name: str) -> None:
    if not isinstance(value, dict):
        raise RecordError(f"'{name}' must be an object")


def one_of(values: tuple[str, ...]) -> Check:
    def check(value: Any, name: str) -> None:
        if value not in values:
            raise RecordError(f"'{name}' must be one of {values}, got {value!r}"[:300])
    return check


def instant(value: Any, name: str) -> None:
    parse_utc(value, name)


@dataclass(frozen=True, eq=False)  # one instance per type: equal and hashed by identity
class RecordType:
    name: str
    fields: dict[str, Check]  # the required fields, checked in this order
    # Records credence writes for itself (the journal, the archive, dead letters) always carry `v`; input
    # records from other producers may leave it out and are then v1.
    version_required: bool = False


SCOPE = {"tenant": part, "user": part, "character": part}
_JOURNAL = {**SCOPE, "entry_id": text, "entry_kind": text}
# The journal's fields are credence/records/journal.py's; the envelope checks the required ones by kind.
_REQUIRED = {"part": part, "text": text, "instant": instant, "snapshot": mapping}


def _journal(table: str) -> RecordType:
    return RecordType(table, {f.name: _REQUIRED[f.kind] for f in JOURNAL_FIELDS[table]
                              if f.required and f.kind != "version"}, version_required=True)


# The record types, each once: a topic's spec names its type (credence/records/topics.py: TopicSpec.record).
TURN = RecordType("turn", {**SCOPE, "turn_id": text, "role": one_of(ROLES), "text": text, "ts": instant})
FEEDBACK = RecordType("feedback", {**SCOPE, "feedback_id": text, "entry_id": text, "decision": one_of(DECISIONS),
                                   "ts": instant})
# A forget names no character; the control decoder asks for it on the other types.
CONTROL = RecordType("control", {"type": one_of(CONTROL_TYPES), "tenant": part, "user": part})
USAGE = RecordType("usage", {**SCOPE, "entry_ids": array, "source": string, "ts": instant})
TENANT = RecordType("tenant", {"tenant": part, "key_hash": string, "created_at": instant})
CARD = RecordType("card", {"tenant": part, "character": part, "entries": array, "updated_at": instant})
DEAD_LETTER = RecordType("dead letter", {"topic": string, "partition": integer, "offset": integer, "reason": string,
                                         "original": string, "at": instant}, version_required=True)
EVIDENCE = _journal("evidence")
ARCHIVE = _journal("archive")
FACT_CANDIDATE = RecordType("fact candidate", {"candidate_id": text, "status": text, **_JOURNAL, "nominated_by": text,
                                               "nominated_at": instant, "provenance": mapping}, version_required=True)
RECORDS: dict[str, RecordType] = {r.name: r for r in (
    TURN, FEEDBACK, CONTROL, USAGE, TENANT, CARD, DEAD_LETTER, EVIDENCE, ARCHIVE, FACT_CANDIDATE)}


def loads(raw: bytes | str | None) -> Any:
    """JSON text to a value; RecordError for anything a reader cannot take (null value, bad UTF-8, broken
    or absurd JSON), never another exception."""
    if raw is None:
        raise RecordError("empty record (null value)")
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(f"not valid JSON: {exc}") from None
    except (RecursionError, ValueError, TypeError) as exc:  # absurd nesting, a 5,000-digit number
        raise RecordError(f"JSON this worker refuses to decode: {type(exc).__name__}") from None


def check(obj: Any, record: RecordType | str) -> dict:
    """``obj`` as a v1 record of type ``record`` (a RecordType, or its name); RecordError names the first
    thing wrong."""
    spec = record if isinstance(record, RecordType) else RECORDS[record]
    record = spec.name
    if not isinstance(obj, dict):
        raise RecordError(f"a record must be a JSON object: {record} records are v1 JSON objects")
    if "v" in obj or spec.version_required:
        version = obj.get("v")
        if type(version) is not int or version != VERSION:
            raise RecordError(f"unsupported record version {version!r}"[:80]
                              + f"; {record} records are v1 JSON objects")
    for name, check_field in spec.fields.items():
        check_field(obj.get(name), name)
    return obj


def decode(raw: bytes | str | None, record: RecordType | str) -> dict:
    """One record's bytes as a checked v1 record of type ``record``."""
    return check(loads(raw), record)
