"""Erasing one entry from the Parquet archive: rewrite the shards that hold its rows without them.

As for a forgotten user (forget.py): a marker first, which the sink honours in every write, then the
shards rewritten; running it again finds nothing to remove. A marker removes the entry's versions below
the erased event's, in the scope's incarnation; the erased event itself and a later life of the entry stay.
Its key, ``<root>/_erased/<sha256 hex>``, names no one.

The rules in full: docs/design/archive.md ("Erasing one entry").
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from credence.config.archive import ArchiveSettings
from credence.errors import ArchiveError
from credence.sinks.forget import ForgetReport, Forgotten, forgotten_markers
from credence.sinks.schema import ARCHIVE_TABLES
from credence.sinks.shards import Archive, drop_rows, list_shards, open_archive, publish, read_shard
from credence.tables.scope import Scope

ERASED_DIR = "_erased"
ErasureReport = ForgetReport  # rows removed, shards rewritten, shards deleted


def marker_name(scope: Scope, entry_id: str) -> str:
    key = "\x1f".join(("credence-erase", scope.tenant, scope.user, scope.character, entry_id))
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class Cut:
    entry_id: str
    incarnation: int
    below: int  # versions below this one are erased (the erased event's own version)


@dataclass
class Erased:
    """The archive's erase markers: marker name -> cut. ``drop`` says which rows of a chunk they erase."""

    cuts: dict[str, Cut] = field(default_factory=dict)

    def drop(self, chunk: pa.Table, tenant: str, partition: int) -> pa.ChunkedArray | None:
        if not self.cuts or "entry_id" not in chunk.column_names:
            return None
        ids = pa.array(sorted({c.entry_id for c in self.cuts.values()}), pa.string())
        candidates = pc.fill_null(pc.is_in(chunk.column("entry_id"), value_set=ids), False)
        if not pc.any(candidates).as_py():
            return None
        names = [n for n in ("user", "character", "entry_id", "version", "incarnation") if n in chunk.column_names]
        rows = chunk.select(names).to_pylist()
        mask = [False] * chunk.num_rows
        for i in pc.indices_nonzero(candidates).to_pylist():
            row = rows[i]
            cut = self.cuts.get(marker_name(Scope(tenant, row["user"], row["character"]), row["entry_id"]))
            if cut is not None and (row.get("incarnation") or 0) == cut.incarnation \
                    and (row.get("version") or 0) < cut.below:
                mask[i] = True
        return pa.chunked_array([pa.array(mask, pa.bool_())])


@dataclass
class Markers:
    """Every marker the sink honours: forgotten users and erased entries."""

    forgotten: Forgotten
    erased: Erased

    def drop(self, chunk: pa.Table, tenant: str, partition: int) -> pa.ChunkedArray | None:
        masks = [m for m in (self.forgotten.drop(chunk, tenant, partition), self.erased.drop(chunk, tenant, partition))
                 if m is not None]
        if not masks:
            return None
        return masks[0] if len(masks) == 1 else pc.or_(masks[0], masks[1])


def archive_markers(archive: Archive, cache: dict | None = None) -> Markers:
    """The forget markers (forget.forgotten_markers) and the erase markers, each read once per change."""
    return Markers(forgotten_markers(archive, cache), erased_markers(archive, cache))


def mark_erased(archive: Archive, scope: Scope, entry_id: str, incarnation: int, below: int) -> None:
    """Record that the entry's versions below ``below`` are erased, so sink writes leave them out; a marker
    already there keeps the later cut."""
    path = f"{archive.base}/{ERASED_DIR}/{marker_name(scope, entry_id)}"
    known = erased_markers(archive).cuts.get(marker_name(scope, entry_id))
    if known is not None and known.incarnation == incarnation:
        below = max(below, known.below)
    body = {"v": 1, "entry_id": entry_id, "incarnation": incarnation, "below": below}
    publish(archive, path, json.dumps(body).encode())


def erased_markers(archive: Archive, cache: dict | None = None) -> Erased:
    base = f"{archive.base}/{ERASED_DIR}"
    try:
        infos = archive.fs.get_file_info(pafs.FileSelector(base, recursive=False, allow_not_found=True))
    except OSError as exc:
        raise ArchiveError(f"cannot list erased entries under {base}: {exc}") from exc
    cuts: dict[str, Cut] = {}
    for info in infos:
        name = info.path.rsplit("/", 1)[-1]
        if info.type != pafs.FileType.File or name.startswith("."):
            continue
        stamp = (info.size, info.mtime_ns)
        held = (cache or {}).get(info.path)
        cuts[name] = held[1] if held and held[0] == stamp else _read_cut(archive, info.path)
        if cache is not None:
            cache[info.path] = (stamp, cuts[name])
    return Erased(cuts)


def _read_cut(archive: Archive, path: str) -> Cut:
    try:
        with archive.fs.open_input_stream(path) as stream:
            body = json.loads(stream.read())
        return Cut(str(body["entry_id"]), int(body["incarnation"]), int(body["below"]))
    except OSError as exc:
        raise ArchiveError(f"cannot read the erase marker {path}: {exc}") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise ArchiveError(f"the erase marker {path} is not a credence erase marker: {exc}") from exc


def erase_entry(root: str, scope: Scope, entry_id: str, incarnation: int, below: int,
                settings: ArchiveSettings | None = None) -> ErasureReport:
    """Remove the rows of the scope's entry below version ``below`` (of ``incarnation``) from the archive and
    evidence shards under ``root``, after marking it erased so no sink write brings them back."""
    settings = settings or ArchiveSettings(root=root)
    archive = open_archive(root, settings)
    mark_erased(archive, scope, entry_id, incarnation, below)
    erased = erased_markers(archive)
    removed = rewritten = deleted = 0
    for table in ARCHIVE_TABLES:
        for path in list_shards(archive, table, scope.tenant):
            if not pc.any(pc.equal(read_shard(archive, path, ["entry_id"]).column("entry_id"), entry_id)).as_py():
                continue  # most shards hold none of its rows: one column read
            shard = read_shard(archive, path)
            gone = erased.drop(shard, scope.tenant, shard.column("topic_partition")[0].as_py())
            if gone is None or not pc.any(gone).as_py():
                continue
            n, done = drop_rows(archive, path, shard, gone, settings)
            removed, deleted, rewritten = removed + n, deleted + (done == "deleted"), rewritten + (done == "rewritten")
    return ErasureReport(removed, rewritten, deleted)
