"""Forgetting a user in the Parquet archive: rewrite every affected shard without their rows.

A marker first (the sink reads it before every write and leaves the forgotten rows out), then each
affected shard replaced atomically, an empty one deleted; running it again finds nothing to remove. A
marker forgets one life of the user (its cut-off is an incarnation per partition), and its key is a
plain SHA-256 of tenant and user, so the markers name no one.

The cut-off, ``--archive-only`` and why the digest is not keyed: docs/design/archive.md.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from credence.config.archive import ArchiveSettings
from credence.errors import ArchiveError
from credence.sinks.schema import ARCHIVE_TABLES, tenant_segment
from credence.sinks.shards import (
    Archive,
    drop_rows,
    list_shards,
    open_archive,
    publish,
    read_shard,
    remove_shard,
    shard_columns,
)

FORGOTTEN_DIR = "_forgotten"
Cutoff = dict[int, int] | None  # partition -> the first incarnation kept; None: no row of the user is kept
FIRST_KEPT = 1  # on a partition a cut-off does not name: every life but the one before any forget is kept


@dataclass(frozen=True)
class ForgetReport:
    rows_removed: int
    shards_rewritten: int
    shards_deleted: int


def marker_name(tenant: str, user: str) -> str:
    return hashlib.sha256(f"credence-forget\x1f{tenant}\x1f{user}".encode()).hexdigest()


@dataclass
class Forgotten:
    """The archive's forget markers: marker name -> cut-off. ``drop`` says which rows they forget."""

    cutoffs: dict[str, Cutoff] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.cutoffs)

    def knows(self, tenant: str, user: str) -> bool:
        return marker_name(tenant, user) in self.cutoffs

    def cutoff(self, tenant: str, user: str) -> Cutoff:
        return self.cutoffs[marker_name(tenant, user)]

    def drop(self, chunk: pa.Table, tenant: str, partition: int) -> pa.ChunkedArray | None:
        """Which rows of ``chunk`` (one tenant's rows of one topic partition) are forgotten; None: none."""
        users = [u for u in pc.unique(chunk.column("user")).to_pylist() if u is not None and self.knows(tenant, u)]
        if not users:
            return None
        life = pc.fill_null(chunk.column("incarnation"), 0) if "incarnation" in chunk.column_names else None
        dropped = None
        for user in users:
            theirs = pc.equal(chunk.column("user"), user)
            cutoff = self.cutoff(tenant, user)
            if cutoff is not None:
                below = pc.less(life, cutoff.get(partition, FIRST_KEPT)) if life is not None else pa.scalar(True)
                theirs = pc.and_(theirs, below)
            dropped = theirs if dropped is None else pc.or_(dropped, theirs)
        return pc.fill_null(dropped, False)


def forget_user(root: str, tenant: str, user: str, settings: ArchiveSettings | None = None,
                cutoff: Cutoff = None) -> ForgetReport:
    """Remove the rows of ``tenant``/``user`` below ``cutoff`` from the archive and evidence shards under
    ``root``; without one (``--archive-only``), every row of theirs archived so far (``archived_lives``).

    ``settings`` supplies the writer options (compression) for rewritten shards; defaults otherwise.
    """
    settings = settings or ArchiveSettings(root=root)
    archive = open_archive(root, settings)
    mark_forgotten(archive, tenant, user, archived_lives(archive, tenant, user) if cutoff is None else cutoff)
    forgotten = forgotten_markers(archive)
    removed = rewritten = deleted = 0
    for table in ARCHIVE_TABLES:
        for path in list_shards(archive, table, tenant):
            if not pc.any(pc.equal(read_shard(archive, path, ["user"]).column("user"), user)).as_py():
                continue  # most shards of a tenant hold none of the user's rows: read one column only
            shard = read_shard(archive, path)
            partition = shard.column("topic_partition")[0].as_py()  # a shard holds one topic partition
            gone = forgotten.drop(shard.select(["user"] + [c for c in ("incarnation",) if c in shard.column_names]),
                                  tenant, partition)
            n, done = drop_rows(archive, path, shard, gone, settings)
            removed, deleted, rewritten = removed + n, deleted + (done == "deleted"), rewritten + (done == "rewritten")
    return ForgetReport(removed, rewritten, deleted)


def archived_lives(archive: Archive, tenant: str, user: str) -> dict[int, int]:
    """Per partition, one past the newest incarnation of the user's archived rows: the cut-off that forgets
    everything archived of them so far."""
    newest: dict[int, int] = {}
    for table in ARCHIVE_TABLES:
        for path in list_shards(archive, table, tenant):
            columns = ["user", "topic_partition"] + [c for c in ("incarnation",) if c in shard_columns(archive, path)]
            shard = read_shard(archive, path, columns)
            rows = shard.filter(pc.fill_null(pc.equal(shard.column("user"), user), False)).to_pylist()
            for row in rows:
                p = row["topic_partition"]
                newest[p] = max(newest.get(p, FIRST_KEPT), (row.get("incarnation") or 0) + 1)
    return newest


def mark_forgotten(archive: Archive, tenant: str, user: str, cutoff: Cutoff = None) -> None:
    """Record that ``tenant``/``user`` is forgotten below ``cutoff``, so sink writes leave those rows out. A
    marker already there keeps the later cut-off of each partition; without a new cut-off it stays as it is.
    A marker of the older layout, which names the user, is deleted."""
    if not isinstance(user, str) or not user:
        raise ArchiveError(f"user must be a non-empty string, got {user!r}")
    path = f"{archive.base}/{FORGOTTEN_DIR}/{marker_name(tenant, user)}"
    known = forgotten_markers(archive)
    earlier = known.cutoff(tenant, user) if known.knows(tenant, user) else None
    if cutoff is None:
        cutoff = earlier
    elif earlier is not None:  # an older marker without a cut-off gives way: the new one forgets as much
        cutoff = {p: max(cutoff.get(p, FIRST_KEPT), earlier.get(p, FIRST_KEPT)) for p in {*cutoff, *earlier}}
    body = {"v": 1, "before": None if cutoff is None else {str(p): o for p, o in sorted(cutoff.items())}}
    publish(archive, path, json.dumps(body).encode())
    legacy = f"{archive.base}/{FORGOTTEN_DIR}/{tenant_segment(tenant)}/{_legacy_name(user)}"
    if archive.fs.get_file_info(legacy).type == pafs.FileType.File:
        remove_shard(archive, legacy)


def _legacy_name(user: str) -> str:
    name = quote(user, safe="")
    return "%2E" + name[1:] if name.startswith(".") else name  # a dot name would be hidden, or a path


def forgotten_markers(archive: Archive, cache: dict | None = None) -> Forgotten:
    """Every forget marker under the archive root: a listing, and a read of each marker not in ``cache``
    (path -> (size, mtime, cut-off): a sink keeps one, so a write reads only markers new or changed)."""
    base = f"{archive.base}/{FORGOTTEN_DIR}"
    try:
        infos = archive.fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    except OSError as exc:
        raise ArchiveError(f"cannot list forgotten users under {base}: {exc}") from exc
    cutoffs: dict[str, Cutoff] = {}
    for info in infos:
        parts = info.path[len(base) + 1:].split("/")
        if info.type != pafs.FileType.File or parts[-1].startswith("."):
            continue
        if len(parts) == 2:  # the older layout, by name: every row of the user
            cutoffs.setdefault(marker_name(unquote(parts[0]), unquote(parts[1])), None)
        elif len(parts) == 1:
            stamp = (info.size, info.mtime_ns)
            held = (cache or {}).get(info.path)
            cutoffs[parts[0]] = held[1] if held and held[0] == stamp else _read_cutoff(archive, info.path)
            if cache is not None:
                cache[info.path] = (stamp, cutoffs[parts[0]])
    return Forgotten(cutoffs)


def _read_cutoff(archive: Archive, path: str) -> Cutoff:
    try:
        with archive.fs.open_input_stream(path) as stream:
            raw = stream.read()
    except OSError as exc:
        raise ArchiveError(f"cannot read the forget marker {path}: {exc}") from exc
    try:
        before = json.loads(raw)["before"] if raw else None
        return None if before is None else {int(p): int(o) for p, o in before.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ArchiveError(f"the forget marker {path} is not a credence forget marker: {exc}") from exc
