"""Forgetting a user in the Parquet archive: rewrite every affected shard without their rows.

Each shard is replaced atomically (temp + rename, or a whole-object upload), and a shard left
empty is deleted, so a reader never sees a half-forgotten file. Running it again finds nothing
to remove.

The archive and evidence topics keep the user's records until retention removes them, and the
sink rewrites an open span's shards as it grows (or all of them on a replay). So forgetting
first leaves a marker, ``<root>/_forgotten/<tenant>/<user>``, which the sink reads before every
write and leaves those rows out of; then it rewrites the shards. A sink write racing with the
marker can still put rows back; running forget again (idempotent) removes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote

import pyarrow.compute as pc
import pyarrow.fs as pafs

from credence.config.archive import ArchiveSettings
from credence.errors import ArchiveError
from credence.sinks.schema import TABLES, tenant_segment
from credence.sinks.shards import (
    Archive,
    list_shards,
    open_archive,
    parquet_bytes,
    publish,
    read_shard,
    remove_shard,
)

FORGOTTEN_DIR = "_forgotten"


@dataclass(frozen=True)
class ForgetReport:
    rows_removed: int
    shards_rewritten: int
    shards_deleted: int


def forget_user(root: str, tenant: str, user: str, settings: ArchiveSettings | None = None) -> ForgetReport:
    """Remove every row of ``tenant``/``user`` from the archive and evidence shards under ``root``.

    ``settings`` supplies the writer options (compression) for rewritten shards; defaults otherwise.
    """
    settings = settings or ArchiveSettings(root=root)
    archive = open_archive(root, settings)
    mark_forgotten(archive, tenant, user)
    removed = rewritten = deleted = 0
    for table in TABLES:
        for path in list_shards(archive, table, tenant):
            if not pc.any(pc.equal(read_shard(archive, path, ["user"]).column("user"), user)).as_py():
                continue  # most shards of a tenant hold none of the user's rows: read one column only
            shard = read_shard(archive, path)
            keep = pc.not_equal(shard.column("user"), user)
            kept = shard.filter(pc.fill_null(keep, True))
            gone = shard.num_rows - kept.num_rows
            if gone == 0:
                continue
            removed += gone
            if kept.num_rows == 0:
                remove_shard(archive, path)
                deleted += 1
            else:
                publish(archive, path, parquet_bytes(kept, settings))
                rewritten += 1
    return ForgetReport(removed, rewritten, deleted)


def mark_forgotten(archive: Archive, tenant: str, user: str) -> None:
    """Record that ``tenant``/``user`` is forgotten, so sink writes leave their rows out."""
    if not isinstance(user, str) or not user:
        raise ArchiveError(f"user must be a non-empty string, got {user!r}")
    name = quote(user, safe="")
    name = "%2E" + name[1:] if name.startswith(".") else name  # a dot name would be hidden, or a path
    publish(archive, f"{archive.base}/{FORGOTTEN_DIR}/{tenant_segment(tenant)}/{name}", b"")


def forgotten_users(archive: Archive) -> frozenset[tuple[str, str]]:
    """Every forgotten (tenant, user) pair under the archive root."""
    base = f"{archive.base}/{FORGOTTEN_DIR}"
    try:
        infos = archive.fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    except OSError as exc:
        raise ArchiveError(f"cannot list forgotten users under {base}: {exc}") from exc
    pairs = set()
    for info in infos:
        parts = info.path[len(base) + 1:].split("/")
        if info.type == pafs.FileType.File and len(parts) == 2 and not parts[1].startswith("."):
            pairs.add((unquote(parts[0]), unquote(parts[1])))
    return frozenset(pairs)
