"""Deterministic, size-bounded, atomically published Parquet shards.

Layout: ``<root>/<table>/tenant=T/kind=K/date=D/p{partition:03d}-{first:012d}-{last:012d}.parquet``; the
same rows in give the same names and byte-identical files out, so a replay overwrites instead of
duplicating. Local files are published by temp + fsync + rename; on object stores (s3://, gs://) the final
name is uploaded directly (an object appears whole when its upload completes).

Why either way is atomic for a reader: docs/design/archive.md ("Shards").
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from credence.config.archive import ArchiveSettings
from credence.errors import ArchiveError
from credence.sinks.schema import (
    FILE_OVERHEAD_BYTES,
    ROW_OVERHEAD_BYTES,
    SCHEMAS,
    Row,
    ShardKey,
    rows_to_table,
    tenant_segment,
)

SHARD_SUFFIX = ".parquet"
TEMP_SUFFIX = ".tmp"


@dataclass(frozen=True)
class Archive:
    """An opened archive root: the filesystem and the base path inside it."""

    fs: pafs.FileSystem
    base: str

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def table_dir(self, table: str) -> str:
        return f"{self.base}/{table}"

    def uri(self, path: str) -> str:
        """A path DuckDB can read (local absolute path, or the original URL form)."""
        if self.is_local:
            return path
        return f"{self.fs.type_name.replace('gcs', 'gs')}://{path}"


def open_archive(root: str, settings: ArchiveSettings | None = None) -> Archive:
    """Resolve a local folder or a filesystem URL (s3://bucket/prefix, gs://…, file:///…); an s3:// root
    connects with ``settings``' S3 fields where given, else with the standard AWS variables."""
    try:
        if root.startswith("s3://") and settings is not None and settings.s3_overridden:
            fs, base = _s3(settings), root.removeprefix("s3://")
        elif "://" in root:
            fs, base = pafs.FileSystem.from_uri(root)
        else:
            fs, base = pafs.LocalFileSystem(), os.path.abspath(root)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
        raise ArchiveError(f"cannot open archive root {root!r}: {exc}; use a folder or a URL pyarrow.fs supports") from exc
    if not isinstance(fs, pafs.LocalFileSystem) and not base.strip("/"):
        raise ArchiveError(f"archive root {root!r} names no bucket; use s3://bucket or s3://bucket/prefix")
    return Archive(fs, base.rstrip("/"))


def _s3(settings: ArchiveSettings) -> pafs.S3FileSystem:
    # Unlike FileSystem.from_uri, the constructor does not read AWS_ENDPOINT_URL itself.
    endpoint = settings.s3_endpoint_url or os.environ.get("AWS_ENDPOINT_URL")
    options: dict = {"region": settings.s3_region or os.environ.get("AWS_REGION")}
    if endpoint:
        url = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        options |= {"endpoint_override": url.netloc, "scheme": url.scheme}
    if settings.s3_access_key_id is not None:
        options |= {"access_key": settings.s3_access_key_id,
                    "secret_key": settings.s3_secret_access_key.get_secret_value()}
    return pafs.S3FileSystem(**{k: v for k, v in options.items() if v is not None})


def shard_name(partition: int, first_offset: int, last_offset: int) -> str:
    return f"p{partition:03d}-{first_offset:012d}-{last_offset:012d}{SHARD_SUFFIX}"


def keyed_table(table: str, rows: list[Row]) -> pa.Table:
    """Rows as one Arrow table: the table's columns plus the key columns tenant, kind, date."""
    data = rows_to_table(table, rows)
    keys = {"tenant": [r.key.tenant for r in rows], "kind": [r.key.kind for r in rows],
            "date": [r.key.date for r in rows]}
    for name, values in keys.items():
        data = data.append_column(name, pa.array(values, pa.string()))
    return data


def plan_shards(data: pa.Table, max_rows: int, max_bytes: int) -> list[tuple[ShardKey, int, int]]:
    """Cut ``data``, already ordered by ``sort_for_shards``, into bounded chunks.

    Returns the chunks as (key, start, stop) row ranges. Within one key the rows are
    cut greedily in offset order, which is prefix-stable: the chunks of a prefix of a group are the
    chunks of the whole group except that the last one may grow. That is what lets a later write
    of a longer span replace every file of an earlier, shorter write of it.
    """
    sizes = np.cumsum(pc.add(pc.multiply(pc.binary_length(data.column("snapshot_json")), 2),
                             ROW_OVERHEAD_BYTES).to_numpy(zero_copy_only=False).astype(np.int64))
    n = data.num_rows
    changed = np.zeros(max(n - 1, 0), dtype=bool)
    for name in ("tenant", "kind", "date"):
        column = data.column(name)
        changed |= pc.not_equal(column.slice(1), column.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    bounds = [0, *(np.flatnonzero(changed) + 1).tolist(), n] if n else [0]
    tenant, kind, day = (data.column(name) for name in ("tenant", "kind", "date"))
    plan = []
    for group_start, group_stop in zip(bounds, bounds[1:]):
        key = ShardKey(tenant[group_start].as_py(), kind[group_start].as_py(), day[group_start].as_py())
        start = group_start
        while start < group_stop:
            base = sizes[start - 1] if start else 0
            stop = min(group_stop, start + max_rows, int(np.searchsorted(sizes, base + max_bytes, side="right")))
            stop = max(stop, start + 1)
            plan.append((key, start, stop))
            start = stop
    return plan


def sort_for_shards(data: pa.Table) -> pa.Table:
    order = pc.sort_indices(data, sort_keys=[("tenant", "ascending"), ("kind", "ascending"),
                                             ("date", "ascending"), ("offset", "ascending")])
    return data.take(order)


def parquet_bytes(table: pa.Table, settings: ArchiveSettings) -> bytes:
    """Serialise with every writer option pinned, so equal tables give equal bytes."""
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        row_group_size=max(table.num_rows, 1),
        version="2.6",
        data_page_version="1.0",
        use_dictionary=True,
        compression=settings.compression,
        compression_level=settings.compression_level,
        write_statistics=True,
        write_page_index=False,
        store_schema=False,
    )
    return sink.getvalue().to_pybytes()


def parse_shard_name(name: str) -> tuple[int, int, int] | None:
    """(partition, first, last) of a shard file name, or None if ``name`` is not one."""
    if not name.startswith("p") or not name.endswith(SHARD_SUFFIX):
        return None
    parts = name[1:-len(SHARD_SUFFIX)].split("-")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    partition, first, last = map(int, parts)
    return partition, first, last


class ForgetFilter(Protocol):
    """The archive's forget markers (forget.Forgotten): which rows of a tenant's chunk they forget."""

    def drop(self, chunk: pa.Table, tenant: str, partition: int) -> pa.ChunkedArray | None: ...


def write_shards(archive: Archive, table: str, partition: int, rows: list[Row], settings: ArchiveSettings,
                 range_last: int | None = None, forgotten: ForgetFilter | None = None,
                 duplicates: frozenset[int] = frozenset()) -> list[str]:
    """Write validated rows of one topic partition as bounded shards; return the published paths."""
    if not rows:
        return []
    return write_table(archive, table, partition, keyed_table(table, rows), settings, range_last, forgotten,
                       duplicates)


def write_table(archive: Archive, table: str, partition: int, data: pa.Table, settings: ArchiveSettings,
                range_last: int | None = None, forgotten: ForgetFilter | None = None,
                duplicates: frozenset[int] = frozenset()) -> list[str]:
    """Write an Arrow table of one topic partition (the table's columns plus string key columns
    tenant, kind, date) as bounded shards; return the published paths.

    ``range_last`` is the last offset of the range these rows were cut from (the sink passes its
    span end); without it each shard is named by its own last row's offset.
    Rows ``forgotten`` drops (a forgotten user's, below the marker's cut-off) are left out *after* the
    shards are planned, so
    names do not depend on forgetting and stay those a replay or forget_user produces; a shard
    left empty is removed. Rows at the offsets in ``duplicates`` are left out the same way, so the
    names do not depend on de-duplication decisions either (parquet.py explains why that matters).
    """
    if table not in SCHEMAS:
        raise ArchiveError(f"unknown archive table {table!r}")
    schema = SCHEMAS[table]
    data = sort_for_shards(data)
    offsets = data.column("offset").to_numpy()
    duplicate_set = pa.array(sorted(duplicates), pa.int64()) if duplicates else None
    written = []
    max_bytes = settings.max_bytes_per_shard - FILE_OVERHEAD_BYTES
    for key, start, stop in plan_shards(data, settings.max_rows_per_shard, max_bytes):
        first, last = int(offsets[start]), int(offsets[stop - 1])
        if range_last is not None:
            if range_last < last:
                raise ArchiveError(f"range_last={range_last} is before offset {last} of the rows given")
            last = range_last
        chunk = data.slice(start, stop - start).select(schema.names).cast(schema)
        path = f"{archive.table_dir(table)}/{key.path()}/{shard_name(partition, first, last)}"
        gone = forgotten.drop(chunk, key.tenant, partition) if forgotten else None
        if gone is not None:
            chunk = chunk.filter(pc.invert(gone))
        if duplicate_set is not None:
            chunk = chunk.filter(pc.invert(pc.is_in(chunk.column("offset"), value_set=duplicate_set)))
        if gone is not None or duplicate_set is not None:
            if chunk.num_rows == 0:
                remove_shard(archive, path, missing_ok=True)
                continue
        publish(archive, path, parquet_bytes(chunk.combine_chunks(), settings))
        written.append(path)
    return written


def publish(archive: Archive, path: str, data: bytes) -> None:
    """Make ``path`` hold ``data`` all at once: readers see the old file or the new one, never a part."""
    directory, name = path.rsplit("/", 1)
    try:
        if not archive.is_local:
            archive.fs.create_dir(directory, recursive=True)
            with archive.fs.open_output_stream(path) as out:
                out.write(data)
            return
        os.makedirs(directory, exist_ok=True)
        temp = f"{directory}/.{name}.{uuid.uuid4().hex}{TEMP_SUFFIX}"
        try:
            with open(temp, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, path)
        except BaseException:
            if os.path.exists(temp):
                os.unlink(temp)
            raise
        _fsync_dir(directory)
    except OSError as exc:
        raise ArchiveError(f"cannot publish shard {path}: {exc}; check the archive root's permissions and space") from exc


def drop_rows(archive: Archive, path: str, shard: pa.Table, gone, settings: ArchiveSettings) -> tuple[int, str]:
    """The shard at ``path`` without the rows the boolean mask ``gone`` marks (None: none): removed when
    nothing is left, rewritten otherwise. Returns (rows removed, "deleted" | "rewritten" | "")."""
    kept = shard if gone is None else shard.filter(pc.invert(gone))
    removed = shard.num_rows - kept.num_rows
    if removed == 0:
        return 0, ""
    if kept.num_rows == 0:
        remove_shard(archive, path)
        return removed, "deleted"
    publish(archive, path, parquet_bytes(kept, settings))
    return removed, "rewritten"


def remove_shard(archive: Archive, path: str, missing_ok: bool = False) -> None:
    try:
        if missing_ok and archive.fs.get_file_info(path).type == pafs.FileType.NotFound:
            return
        archive.fs.delete_file(path)
        if archive.is_local:
            _fsync_dir(path.rsplit("/", 1)[0])
    except OSError as exc:
        raise ArchiveError(f"cannot delete shard {path}: {exc}; check the archive root's permissions") from exc


def list_shards(archive: Archive, table: str, tenant: str | None = None) -> list[str]:
    """Published shard paths of a table (optionally of one tenant), sorted; temp files excluded."""
    base = archive.table_dir(table)
    if tenant is not None:
        base = f"{base}/tenant={tenant_segment(tenant)}"
    try:
        infos = archive.fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    except OSError as exc:
        raise ArchiveError(f"cannot list shards under {base}: {exc}") from exc
    return sorted(
        i.path for i in infos
        if i.type == pafs.FileType.File and i.base_name.endswith(SHARD_SUFFIX) and not i.base_name.startswith(".")
    )


def remove_stale_temp_files(archive: Archive, older_than_s: float = 3600.0) -> int:
    """Delete temp files a killed writer left behind; young ones may belong to a live writer."""
    if not archive.is_local or not os.path.isdir(archive.base):
        return 0
    removed = 0
    cutoff = time.time() - older_than_s
    for directory, _, names in os.walk(archive.base):
        for name in names:
            path = os.path.join(directory, name)
            if not (name.startswith(".") and name.endswith(TEMP_SUFFIX)):
                continue
            try:
                if os.path.getmtime(path) < cutoff:
                    os.unlink(path)
                    removed += 1
            except FileNotFoundError:
                pass  # renamed or removed by its writer meanwhile
    return removed


def read_shard(archive: Archive, path: str, columns: list[str] | None = None) -> pa.Table:
    """One shard's columns as written (no partition columns)."""
    try:
        return pq.read_table(path, filesystem=archive.fs, partitioning=None, columns=columns)
    except (OSError, pa.ArrowException) as exc:
        raise ArchiveError(f"cannot read shard {path}: {exc}") from exc


def shard_columns(archive: Archive, path: str) -> list[str]:
    """The columns a shard was written with (its footer only): shards written before a column was added
    lack it."""
    try:
        return pq.read_schema(path, filesystem=archive.fs).names
    except (OSError, pa.ArrowException) as exc:
        raise ArchiveError(f"cannot read shard {path}: {exc}") from exc


def _fsync_dir(directory: str) -> None:
    # The rename is durable only once the directory entry is; not every platform allows it.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
