"""DuckDB over the Parquet archive: views, ad-hoc queries, the lifecycle funnel and its chart.

Every connection pins TimeZone='UTC' (days are UTC days, as in the records). The views read
``<root>/<table>/**/*.parquet`` with hive partitioning (tenant, kind, date typed explicitly, so a
tenant called "2024" stays a string) and union_by_name, so shards written before an entry model
gained a column still read as one table. Values are always bound as parameters.
The evidence column `at` is a DuckDB keyword: write it quoted, "at".
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import astuple, dataclass, fields
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds

from credence.config.archive import ArchiveSettings
from credence.errors import ArchiveError
from credence.sinks.schema import ARCHIVE_TABLES, EVIDENCE, FACTS_KIND, PARTITION_SCHEMA, SCHEMAS
from credence.sinks.shards import Archive, list_shards, open_archive

FORMATS = ("table", "csv", "json")
_HIVE_TYPES = "{'tenant': VARCHAR, 'kind': VARCHAR, 'date': DATE}"


@dataclass(frozen=True)
class FunnelRow:
    tenant: str
    day: date
    created: int
    confirmed: int
    promoted: int
    merged: int
    denied: int
    archived: int
    # Merge-on-promote outcomes besides promoted/merged (defaults keep older callers' rows comparable).
    rejected: int = 0
    blocked: int = 0
    unblocked: int = 0
    dropped: int = 0
    # Requests whose facts took another way (facts events, one per request; the fact ids are in the
    # event's snapshot_json, left unread here so the funnel never reads the widest column).
    stage2_dropped: int = 0
    facts_failed: int = 0


STAGES = tuple(f.name for f in fields(FunnelRow))[2:]

# docs/records.md: funnel counts per tenant per UTC day of `at`; the date partition is that day.
FUNNEL_SELECT = """
SELECT tenant, "date" AS day,
       count(*) FILTER (WHERE event = 'created')       AS created,
       count(*) FILTER (WHERE to_status = 'confirmed' AND event <> 'promotion_unblocked') AS confirmed,
       count(*) FILTER (WHERE to_status = 'promoted')  AS promoted,
       count(*) FILTER (WHERE event = 'merged')        AS merged,
       count(*) FILTER (WHERE to_status = 'denied')    AS denied,
       count(*) FILTER (WHERE event = 'archived')      AS archived,
       count(*) FILTER (WHERE event = 'promotion_rejected')      AS rejected,
       count(*) FILTER (WHERE to_status = 'promote_blocked')     AS blocked,
       count(*) FILTER (WHERE event = 'promotion_unblocked')     AS unblocked,
       count(*) FILTER (WHERE event = 'promotion_dropped')       AS dropped,
       count(*) FILTER (WHERE event = 'stage2_dropped')          AS stage2_dropped,
       count(*) FILTER (WHERE event = 'facts_failed')            AS facts_failed
"""
FUNNEL_COLUMNS = ["tenant", "date", "event", "to_status"]


# Bi-temporal validity: one row per journalled version of an entry, with the span it was the
# entry's current version (recorded_at until the next version's, NULL = still current) and the span its
# meaning held (valid_from until invalidated_at). What was valid at T (bind T as $1):
#   SELECT * FROM entry_versions WHERE recorded_at <= $1 AND (superseded_at IS NULL OR superseded_at > $1)
#     AND valid_from <= $1 AND (invalidated_at IS NULL OR invalidated_at > $1) AND status <> 'archived'
# Shards written before validity was journalled have no validity columns: their meaning held from created_at on.
VALID_AT_SQL = """SELECT tenant, "user", "character", entry_id, entry_kind, version, status, text, valid_from
FROM entry_versions
WHERE recorded_at <= $1 AND (superseded_at IS NULL OR superseded_at > $1)
  AND valid_from <= $1 AND (invalidated_at IS NULL OR invalidated_at > $1) AND status <> 'archived'
ORDER BY tenant, "user", "character", entry_id"""


def _entry_versions_view(conn: duckdb.DuckDBPyConnection) -> None:
    have = {row[0] for row in conn.execute("DESCRIBE evidence").fetchall()}
    valid_from = "coalesce(valid_from, created_at)" if "valid_from" in have else "created_at"
    invalidated_at = "invalidated_at" if "invalidated_at" in have else "CAST(NULL AS TIMESTAMPTZ)"
    incarnation = "coalesce(incarnation, 0)" if "incarnation" in have else "0"
    # Only a scope's newest incarnation (records.journal.INCARNATION): a user forgotten and back again
    # restarts the version lines under the same entry ids, and the forgotten lines are not theirs.
    conn.execute(f"""
        CREATE VIEW entry_versions AS
        SELECT tenant, "user", "character", entry_id, entry_kind, version, status, text, event, cause,
               "at" AS recorded_at,
               lead("at") OVER (PARTITION BY tenant, "user", "character", entry_id
                                ORDER BY version, "offset") AS superseded_at,
               held_from AS valid_from, held_until AS invalidated_at, snapshot_json
        FROM (SELECT *, {valid_from} AS held_from, {invalidated_at} AS held_until,
                     {incarnation} AS life,
                     max({incarnation}) OVER (PARTITION BY tenant, "user", "character") AS newest_life
              FROM evidence WHERE entry_kind <> '{FACTS_KIND}')
        WHERE life = newest_life""")


def valid_at(root: str, at: datetime, settings: ArchiveSettings | None = None) -> list[dict[str, Any]]:
    """What was valid at ``at`` according to the journal's Parquet copy (VALID_AT_SQL)."""
    conn = connect(root, settings=settings)
    try:
        result = conn.execute(VALID_AT_SQL, [at])
        columns = [d[0] for d in result.description]
        return [dict(zip(columns, row)) for row in result.fetchall()]
    except duckdb.Error as exc:
        raise ArchiveError(f"valid-at query failed: {exc}") from exc
    finally:
        conn.close()


def connect(root: str, database: str = ":memory:", settings: ArchiveSettings | None = None) -> duckdb.DuckDBPyConnection:
    """A connection with the views ``archive``, ``evidence`` and ``entry_versions`` over the shards under
    ``root`` (``settings`` supplies the S3 connection fields of an s3:// root)."""
    archive = open_archive(root, settings)
    conn = _new_connection(database)
    try:
        for table in ARCHIVE_TABLES:
            if not archive.is_local:
                _remote_view(conn, archive, table)
                continue
            try:
                conn.execute(
                    f"CREATE VIEW {table} AS SELECT * FROM read_parquet({_literal(_pattern(archive, table))}, "
                    f"hive_partitioning = true, union_by_name = true, hive_types = {_HIVE_TYPES})"
                )
            except duckdb.IOException as exc:
                if not _no_files(exc):
                    raise
                _empty_view(conn, table)
        _entry_versions_view(conn)
    except duckdb.Error as exc:
        conn.close()
        raise ArchiveError(f"cannot open the archive views under {root!r}: {exc}") from exc
    except ArchiveError:
        conn.close()
        raise
    return conn


def _new_connection(database: str = ":memory:") -> duckdb.DuckDBPyConnection:
    conn = duckdb.connect(database)
    conn.execute("SET TimeZone = 'UTC'")
    # union_by_name reads every shard's footer when a query binds; a reused connection keeps them.
    conn.execute("SET parquet_metadata_cache = true")
    return conn


def shard_dataset(archive: Archive, table: str, columns: list[str] | None = None) -> ds.Dataset | None:
    """The published shards of ``table`` as one Arrow dataset read through the archive's own filesystem
    (how DuckDB reads a remote root: nothing to install, and only the listed shards are reachable), or
    None when there are none. Shards written before a column existed read it as null (union_by_name)."""
    paths = list_shards(archive, table)
    if not paths:
        return None
    schema = pa.schema(list(SCHEMAS[table]) + list(PARTITION_SCHEMA))
    if columns is not None:
        schema = pa.schema([schema.field(c) for c in columns])
    try:
        return ds.dataset(paths, schema=schema, format="parquet", filesystem=archive.fs,
                          partitioning=ds.partitioning(PARTITION_SCHEMA, flavor="hive"),
                          partition_base_dir=archive.table_dir(table))
    except (OSError, pa.ArrowException) as exc:
        raise ArchiveError(f"cannot read the {table} shards under {archive.table_dir(table)}: {exc}") from exc


def _remote_view(conn: duckdb.DuckDBPyConnection, archive: Archive, table: str) -> None:
    dataset = shard_dataset(archive, table)
    if dataset is None:
        _empty_view(conn, table)
        return
    conn.register(f"_{table}_shards", dataset)
    # The columns in a local root's order (read_parquet appends the hive columns as date, kind, tenant),
    # so `SELECT *` reads alike from either root.
    conn.execute(f'CREATE VIEW {table} AS SELECT * EXCLUDE (tenant, kind, "date"), "date", kind, tenant '
                 f"FROM _{table}_shards")


def _pattern(archive: Archive, table: str) -> str:
    return archive.uri(f"{archive.table_dir(table)}/**/*.parquet")


def _no_files(exc: duckdb.Error) -> bool:
    return "No files found" in str(exc)


def query(root: str, sql: str, params: list | dict | None = None, fmt: str = "table",
          settings: ArchiveSettings | None = None) -> str:
    """Run one SQL statement over the views and render the result as a table, CSV or JSON."""
    if fmt not in FORMATS:
        raise ArchiveError(f"unknown output format {fmt!r}; use one of {FORMATS}")
    _read_only_statement(sql)
    archive = open_archive(root, settings)
    conn = connect(root, settings=settings)
    try:
        _sandbox(conn, archive)
        result = conn.execute(sql, params) if params is not None else conn.execute(sql)
        columns = [d[0] for d in result.description or []]
        rows = result.fetchall() if columns else []
    except duckdb.Error as exc:
        raise ArchiveError(f"query failed: {exc}") from exc
    finally:
        conn.close()
    return render(columns, rows, fmt)


READ_ONLY = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}


def _read_only_statement(sql: str) -> None:
    """`archive query` answers questions: exactly one SELECT (WITH, FROM-first, DESCRIBE, SUMMARIZE, SHOW
    and VALUES parse as one) or EXPLAIN; never COPY, ATTACH, SET, INSTALL, CREATE or a second statement."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise ArchiveError(f"query failed: {exc}") from exc
    if len(statements) != 1:
        raise ArchiveError(f"query refused: one statement expected, got {len(statements)}")
    kind = statements[0].type
    if kind not in READ_ONLY:
        raise ArchiveError(f"query refused: only SELECT (or EXPLAIN) is allowed here, not {kind.name}")


def _sandbox(conn: duckdb.DuckDBPyConnection, archive: Archive) -> None:
    """After the views exist: files outside the archive root are out of reach (no read_csv('/etc/…'), no
    read_parquet('s3://…') of another prefix), and the query cannot switch that back. A local root's views
    read its folder; a remote root's views read registered Arrow datasets, so DuckDB itself may read nothing."""
    if archive.is_local:
        conn.execute(f"SET allowed_directories = [{_literal(archive.base + '/')}]")
    conn.execute("SET enable_external_access = false")
    # A table name the query does not define must never resolve to a Python variable of the caller.
    conn.execute("SET python_enable_replacements = false")
    conn.execute("SET lock_configuration = true")


def funnel(conn: duckdb.DuckDBPyConnection, tenant: str | None = None,
           since: date | None = None, until: date | None = None) -> list[FunnelRow]:
    """The lifecycle funnel per tenant per UTC day over the ``evidence`` view of ``conn``;
    ``since`` and ``until`` are inclusive days."""
    return _funnel(conn, "evidence", [], tenant, since, until)


def report(root: str, png_path: str | Path | None = None, tenant: str | None = None,
           since: date | None = None, until: date | None = None, settings: ArchiveSettings | None = None) -> str:
    """The funnel as a text table (returned) and, given ``png_path``, a chart of it."""
    archive = open_archive(root, settings)
    conn = _new_connection()
    try:
        # Straight from the shards, not through the view: the funnel reads only columns every
        # evidence shard has had since v1, so it needs neither union_by_name (a footer pass over
        # every shard) nor the view's own listing of the shards when it is created.
        if archive.is_local:
            source = f"read_parquet(?, hive_partitioning = true, hive_types = {_HIVE_TYPES})"
            rows = _funnel(conn, source, [_pattern(archive, EVIDENCE)], tenant, since, until)
        else:
            dataset = shard_dataset(archive, EVIDENCE, FUNNEL_COLUMNS)
            if dataset is not None:
                conn.register("_evidence_shards", dataset)
            rows = [] if dataset is None else _funnel(conn, "_evidence_shards", [], tenant, since, until)
    finally:
        conn.close()
    if png_path is not None:
        write_chart(rows, Path(png_path))
    return render([f.name for f in fields(FunnelRow)], [astuple(r) for r in rows], "table")


def _funnel(conn: duckdb.DuckDBPyConnection, source: str, params: list, tenant: str | None,
            since: date | None, until: date | None) -> list[FunnelRow]:
    clauses = []
    for condition, value in (("tenant = ?", tenant), ('"date" >= ?', since), ('"date" <= ?', until)):
        if value is not None:
            clauses.append(condition)
            params = [*params, value]
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    sql = f"{FUNNEL_SELECT} FROM {source} {where} GROUP BY tenant, day ORDER BY tenant, day"
    try:
        return [FunnelRow(*row) for row in conn.execute(sql, params).fetchall()]
    except duckdb.IOException as exc:
        if _no_files(exc):
            return []
        raise ArchiveError(f"funnel query failed: {exc}") from exc
    except duckdb.Error as exc:
        raise ArchiveError(f"funnel query failed: {exc}") from exc


def write_chart(rows: list[FunnelRow], png_path: Path) -> None:
    """One line per funnel stage over days, summed over the tenants shown."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    days = sorted({r.day for r in rows})
    totals = {stage: dict.fromkeys(days, 0) for stage in STAGES}
    for r in rows:
        for stage in STAGES:
            totals[stage][r.day] += getattr(r, stage)
    tenants = sorted({r.tenant for r in rows})
    fig, ax = plt.subplots(figsize=(10, 5), dpi=100)
    try:
        for stage in STAGES:
            ax.plot(days, [totals[stage][d] for d in days], marker="o", markersize=3, label=stage)
        label = tenants[0] if len(tenants) == 1 else f"{len(tenants)} tenants"
        ax.set_title(f"credence lifecycle funnel per day (UTC), {label}")
        ax.set_xlabel("day")
        ax.set_ylabel("events")
        ax.legend(loc="upper left")
        ax.grid(alpha=0.3)
        fig.autofmt_xdate()
        png_path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(png_path, format="png")
    finally:
        plt.close(fig)


def render(columns: list[str], rows: list[tuple], fmt: str) -> str:
    if fmt == "json":
        return json.dumps([dict(zip(columns, map(_plain, row))) for row in rows], ensure_ascii=False)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_cell(v) for v in row] for row in rows])
        return out.getvalue()
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(columns, widths)), "-+-".join("-" * w for w in widths)]
    lines += [" | ".join(v.ljust(w) for v, w in zip(r, widths)) for r in cells]
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines) + "\n"


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _cell(value: Any) -> str:
    if value is None:
        return ""
    plain = _plain(value)
    return plain if isinstance(plain, str) else json.dumps(plain, ensure_ascii=False)


def _empty_view(conn: duckdb.DuckDBPyConnection, table: str) -> None:
    # No shards yet: same columns, zero rows, so queries and the funnel still run.
    schema = pa.schema(list(SCHEMAS[table]) + list(PARTITION_SCHEMA))
    conn.register(f"_{table}_empty", schema.empty_table())
    conn.execute(f"CREATE VIEW {table} AS SELECT * FROM _{table}_empty")


def _literal(text: str) -> str:
    # DDL cannot take bound parameters; the path is configuration, quoted as a SQL string literal.
    return "'" + text.replace("'", "''") + "'"
