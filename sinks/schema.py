"""Arrow schemas of the two Parquet tables (archive, evidence) and the record -> row conversion.

Each journal record field (credence/records/journal.py's FIELDS) is a column; tenant, kind and date come
from the hive path; every Entry snapshot key is a column of its own (counters flattened), and
snapshot_json keeps the exact snapshot. docs/records.md is the source of the record formats.

The column rules in full: docs/design/archive.md ("Columns").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import quote

import pyarrow as pa

from credence.errors import ArchiveError, DomainError, RecordError
from credence.records.envelope import check
from credence.records.journal import ARCHIVE, EVIDENCE, FACTS_KIND, FIELDS, IDENTITY, KINDS, Field, event_id
from credence.tables.scope import check_part

ARCHIVE_TABLES = (ARCHIVE, EVIDENCE)
__all__ = ["ARCHIVE", "EVIDENCE", "FACTS_KIND", "IDENTITY", "ARCHIVE_TABLES", "identity"]  # the journal's names, read here by the sinks

TS = pa.timestamp("us", tz="UTC")
STRINGS = pa.list_(pa.string())

# (snapshot key, column name, arrow type); evidence.* and usage.* keys are read from those nested dicts.
SNAPSHOT_FIELDS: tuple[tuple[str, str, pa.DataType], ...] = (
    ("text", "text", pa.string()),
    ("subject", "subject", pa.string()),
    ("importance", "importance", pa.int16()),
    ("source_fact_ids", "source_fact_ids", STRINGS),
    ("protected", "protected", pa.bool_()),
    ("status", "status", pa.string()),
    ("evidence.reinforcement", "reinforcement", pa.float64()),
    ("evidence.disputation", "disputation", pa.float64()),
    ("evidence.rein_last_signal_at", "rein_last_signal_at", TS),
    ("evidence.disp_last_signal_at", "disp_last_signal_at", TS),
    ("evidence.sub_zero_days", "sub_zero_days", pa.int32()),
    ("evidence.sub_zero_last_increment_date", "sub_zero_last_increment_date", pa.date32()),
    ("evidence.user_fact_reinforce_count", "user_fact_reinforce_count", pa.int32()),
    ("created_at", "created_at", TS),
    ("confirmed_at", "confirmed_at", TS),
    ("promoted_at", "promoted_at", TS),
    ("merged_from_ids", "merged_from_ids", STRINGS),
    ("merged_into_id", "merged_into_id", pa.string()),
    ("promote_attempts", "promote_attempts", pa.int32()),
    ("last_promote_attempt_at", "last_promote_attempt_at", TS),
    ("recent_mentions", "recent_mentions", STRINGS),
    ("suppressed_at", "suppressed_at", TS),
    ("version", "version", pa.int64()),
    ("updated_at", "updated_at", TS),
    ("archived_at", "entry_archived_at", TS),
    ("promotion_rejected_at", "promotion_rejected_at", TS),
    ("valid_from", "valid_from", TS),
    ("invalidated_at", "invalidated_at", TS),
    ("usage.strength", "usage_strength", pa.float64()),
    ("usage.reinforce_count", "reinforce_count", pa.int32()),
    ("usage.last_reinforced_at", "last_reinforced_at", TS),
    ("tags", "tags", STRINGS),  # the turns' tenant tags, additive; shards written before it read as null
)
# Snapshot keys that repeat the record's own identity; checked, not stored twice.
IDENTITY_KEYS = {"id": "entry_id", "kind": "entry_kind", "tenant": "tenant", "user": "user", "character": "character"}

# The column type of each kind of journal field (credence/records/journal.py). The tenant is the hive
# path's, and the snapshot is spread over the snapshot columns, so neither is a record column.
COLUMN_TYPES = {"version": pa.int16(), "part": pa.string(), "text": pa.string(), "string": pa.string(),
                "instant": TS, "number": pa.float64(), "count": pa.int64()}
PATH_FIELDS = ("tenant", "entry")


# The journal fields stored as columns of their own, in column order.
RECORD_FIELDS = {table: tuple(f for f in FIELDS[table] if f.name not in PATH_FIELDS) for table in (ARCHIVE, EVIDENCE)}
_SOURCE = [("snapshot_json", pa.string()), ("topic_partition", pa.int32()), ("offset", pa.int64())]
_SNAPSHOT = [(column, typ) for _, column, typ in SNAPSHOT_FIELDS]
SCHEMAS = {table: pa.schema([(f.name, COLUMN_TYPES[f.kind]) for f in fields] + _SNAPSHOT + _SOURCE)
           for table, fields in RECORD_FIELDS.items()}
ARCHIVE_SCHEMA, EVIDENCE_SCHEMA = SCHEMAS[ARCHIVE], SCHEMAS[EVIDENCE]
# The instant a row's date partition is the UTC day of.
DAY_FIELD = {ARCHIVE: "archived_at", EVIDENCE: "at"}
# A row's size for the shard byte bound is estimated as 2 * len(snapshot_json) + this: the
# flattened columns roughly repeat the JSON. Deterministic, and above the compressed size.
ROW_OVERHEAD_BYTES = 256
# Room kept for a shard's footer (schema and column chunk metadata: ~5 KiB for these tables).
FILE_OVERHEAD_BYTES = 16 * 1024
# Partition columns as the readers see them (appended from the hive path).
PARTITION_SCHEMA = pa.schema([("tenant", pa.string()), ("kind", pa.string()), ("date", pa.date32())])


@dataclass(frozen=True, order=True)
class ShardKey:
    """The hive partition a row lands in."""

    tenant: str
    kind: str
    date: str  # YYYY-MM-DD (UTC)

    def path(self) -> str:
        if self.kind not in KINDS[EVIDENCE]:
            raise ArchiveError(f"kind {self.kind!r} is not one of {KINDS[EVIDENCE]}")
        try:
            date.fromisoformat(self.date)
        except (TypeError, ValueError):
            raise ArchiveError(f"date {self.date!r} is not YYYY-MM-DD") from None
        return f"tenant={tenant_segment(self.tenant)}/kind={self.kind}/date={self.date}"


@dataclass(frozen=True)
class Row:
    key: ShardKey
    values: dict[str, Any]  # column -> python value, in the table schema's columns


def tenant_segment(tenant: str) -> str:
    """The tenant as a hive path segment: percent-encoded (DuckDB and pyarrow decode it back)."""
    _check_scope_part("tenant", tenant)
    return quote(tenant, safe="")


def to_row(table: str, record: Any, partition: int, offset: int) -> Row:
    """Validate one decoded topic record and turn it into a row; ArchiveError says what is wrong."""
    if table not in SCHEMAS:
        raise ArchiveError(f"unknown archive table {table!r}; use one of {ARCHIVE_TABLES}")
    if not isinstance(record, dict):
        raise ArchiveError(f"record is {type(record).__name__}, expected a JSON object")
    try:
        check(record, table)  # the envelope and required fields every reader of the topic checks alike
    except RecordError as exc:
        raise ArchiveError(str(exc)) from None
    kind = record["entry_kind"]
    if kind not in KINDS[table]:
        raise ArchiveError(f"entry_kind is {kind!r}, expected one of {KINDS[table]}")
    values: dict[str, Any] = {"tenant": record["tenant"]}
    for f in RECORD_FIELDS[table]:
        values[f.name] = _column(record, f)
    when = values[DAY_FIELD[table]]
    entry = record.get("entry")
    if not isinstance(entry, dict):
        raise ArchiveError("record has no 'entry' snapshot object")
    for key, column in IDENTITY_KEYS.items():
        if key in entry and entry[key] != values[column]:
            raise ArchiveError(f"entry.{key}={entry[key]!r} disagrees with the record's {column}={values[column]!r}")
    for nested in ("evidence", "usage"):
        if entry.get(nested) is not None and not isinstance(entry[nested], dict):
            raise ArchiveError(f"entry.{nested} must be an object or null")
    if kind == FACTS_KIND and _convert(entry, "fact_ids", STRINGS, "entry.fact_ids") is None:
        raise ArchiveError("a facts event's entry.fact_ids must be a list of strings")
    for key, column, typ in SNAPSHOT_FIELDS:
        outer, _, inner = key.partition(".")
        source, name = (entry.get(outer) or {}, inner) if inner else (entry, key)
        values[column] = _convert(source, name, typ, f"entry.{key}")
    try:
        values["snapshot_json"] = json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ArchiveError(f"entry snapshot is not JSON-serialisable: {exc}") from exc
    values["topic_partition"] = partition
    values["offset"] = offset
    key = ShardKey(values.pop("tenant"), kind, when.date().isoformat())
    return Row(key, values)


def identity(table: str, values: dict[str, Any]) -> str:
    """The de-duplication identity of a row (or of a shard's columns ``IDENTITY[table]`` as a dict): an
    evidence event's id, an archival's entry id, version and incarnation in the same form. A column an older
    shard lacks (incarnation) reads as 0."""
    if table == EVIDENCE:
        return values["event_id"]
    return event_id(values["entry_id"], values.get("version") or 0, values.get("incarnation") or 0)


def _column(record: dict, field: Field) -> Any:
    """A journal field's column value; the envelope checked the required fields' presence already."""
    if field.kind == "count":
        value = _int(record, field.name, field.name)
        if value is not None and value < 0:
            raise ArchiveError(f"{field.name} must be >= 0, got {value}")
        return value
    if field.kind == "instant":
        return _timestamp(record, field.name, required=field.required)
    if field.kind == "number":
        return _float(record, field.name)
    if field.kind == "version":
        return record[field.name]
    return _string(record, field.name, required=field.required)


def rows_to_table(table: str, rows: list[Row]) -> pa.Table:
    schema = SCHEMAS[table]
    return pa.Table.from_pylist([r.values for r in rows], schema=schema)


def _check_scope_part(name: str, value: Any) -> None:
    try:
        check_part(name, value)  # the same rule the worker applied when the record came in
    except DomainError as exc:
        raise ArchiveError(str(exc)) from None


def _string(obj: dict, name: str, required: bool = False, label: str | None = None) -> str | None:
    value = obj.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise ArchiveError(f"{label or name} must be a {'non-empty ' if required else ''}string, got {value!r}")
    return value


def _float(obj: dict, name: str, label: str | None = None) -> float | None:
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArchiveError(f"{label or name} must be a number, got {value!r}")
    return float(value)


def _int(obj: dict, name: str, label: str) -> int | None:
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArchiveError(f"{label} must be an integer, got {value!r}")
    return value


def _timestamp(obj: dict, name: str, required: bool = False, label: str | None = None) -> datetime | None:
    value = obj.get(name)
    label = label or name
    if value is None:
        if required:
            raise ArchiveError(f"{label} is missing; it must be an ISO-8601 UTC timestamp")
        return None
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise ArchiveError(f"{label}={value!r} is not an ISO-8601 timestamp")
    if parsed.tzinfo is None:
        raise ArchiveError(f"{label}={value!r} has no UTC offset; write timestamps as ISO-8601 UTC ('…Z')")
    return parsed.astimezone(UTC)


def _convert(obj: dict, name: str, typ: pa.DataType, label: str) -> Any:
    if typ == TS:
        return _timestamp(obj, name, label=label)
    if typ == STRINGS:
        value = obj.get(name)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ArchiveError(f"{label} must be a list of strings, got {value!r}")
        return value
    if typ == pa.string():
        return _string(obj, name, label=label)
    if typ == pa.float64():
        return _float(obj, name, label=label)
    if typ == pa.bool_():
        value = obj.get(name)
        if value is not None and not isinstance(value, bool):
            raise ArchiveError(f"{label} must be true/false, got {value!r}")
        return value
    if typ == pa.date32():
        value = obj.get(name)
        if value is None:
            return None
        try:
            return date.fromisoformat(value[:10]) if isinstance(value, str) else _bad_date(label, value)
        except ValueError:
            return _bad_date(label, value)
    value = _int(obj, name, label)
    if name == "importance" and value is not None and not 1 <= value <= 10:
        raise ArchiveError(f"{label}={value} is outside 1..10")
    return value


def _bad_date(label: str, value: Any) -> None:
    raise ArchiveError(f"{label}={value!r} is not a YYYY-MM-DD date")
