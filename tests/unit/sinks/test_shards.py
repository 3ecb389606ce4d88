"""Shard writing: deterministic bytes and names, size bounds, atomic publication."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from credence.errors import ArchiveError
from credence.sinks.schema import ARCHIVE, FILE_OVERHEAD_BYTES, ROW_OVERHEAD_BYTES, to_row
from credence.sinks.shards import list_shards, open_archive, remove_stale_temp_files, write_shards


@pytest.fixture
def rows_factory(archive_record_factory):
    def rows(n, tenants=("acme", "globex"), start=0):
        return [
            to_row(ARCHIVE, archive_record_factory(tenant=tenants[i % len(tenants)], user=f"u{i % 3}", entry_id=f"e{i}",
                                                   archived_at=f"2026-01-{1 + (i // 2) % 2:02d}T10:00:00Z"), 0, start + i)
            for i in range(n)
        ]
    return rows


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_rows_give_byte_identical_files(archive_settings_factory, rows_factory, tmp_path):
    settings = archive_settings_factory()
    rows = rows_factory(40)
    first = write_shards(open_archive(str(tmp_path / "a")), ARCHIVE, 0, rows, settings)
    write_shards(open_archive(str(tmp_path / "b")), ARCHIVE, 0, list(reversed(rows)), settings)
    assert len(first) == 4  # 2 tenants x 2 days
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")


def _offsets_per_file(paths):
    return [pq.read_table(p, partitioning=None).column("offset").to_pylist() for p in paths]


def test_shards_respect_row_and_byte_bounds(archive_settings_factory, archive_record_factory):
    rows = [to_row(ARCHIVE, archive_record_factory(entry_id=f"e{i}", text="y" * (5000 + i)), 0, i) for i in range(50)]
    by_rows = archive_settings_factory(max_rows_per_shard=7)
    files = _offsets_per_file(write_shards(open_archive(by_rows.root), ARCHIVE, 0, rows, by_rows))
    assert all(len(f) <= 7 for f in files) and sorted(sum(files, [])) == list(range(50))

    size = {r.values["offset"]: 2 * len(r.values["snapshot_json"].encode()) + ROW_OVERHEAD_BYTES for r in rows}
    bound = FILE_OVERHEAD_BYTES + 3 * max(size.values())
    by_bytes = archive_settings_factory(max_bytes_per_shard=bound, root=by_rows.root + "-bytes")
    files = _offsets_per_file(write_shards(open_archive(by_bytes.root), ARCHIVE, 0, rows, by_bytes))
    assert all(sum(size[o] for o in f) <= bound - FILE_OVERHEAD_BYTES for f in files)
    assert max(len(f) for f in files) == 3 and sorted(sum(files, [])) == list(range(50))
    assert all(os.path.getsize(p) <= bound for p in list_shards(open_archive(by_bytes.root), ARCHIVE))


def test_a_longer_write_of_a_range_replaces_every_file_of_a_shorter_one(archive_settings_factory, rows_factory):
    settings = archive_settings_factory(max_rows_per_shard=4)
    archive = open_archive(settings.root)
    rows = rows_factory(30, tenants=("acme",))
    write_shards(archive, ARCHIVE, 3, rows[:13], settings, range_last=99)
    partial = set(list_shards(archive, ARCHIVE))
    write_shards(archive, ARCHIVE, 3, rows, settings, range_last=99)
    full = set(list_shards(archive, ARCHIVE))
    assert partial <= full
    offsets = [o for p in full for o in pq.read_table(p, partitioning=None).column("offset").to_pylist()]
    assert sorted(offsets) == list(range(30))  # every row exactly once
    assert all(os.path.basename(p).startswith("p003-") and p.endswith("-000000000099.parquet") for p in full)


def test_a_failed_publish_leaves_no_file_and_no_temp(archive_settings_factory, rows_factory, monkeypatch):
    settings = archive_settings_factory()
    archive = open_archive(settings.root)

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(ArchiveError, match="disk full"):
        write_shards(archive, ARCHIVE, 0, rows_factory(3), settings)
    assert [p for p in Path(settings.root).rglob("*") if p.is_file()] == []


def test_temp_names_never_match_the_read_glob(archive_settings_factory, rows_factory, monkeypatch):
    settings = archive_settings_factory()
    archive = open_archive(settings.root)
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append(os.path.basename(src))
        assert list_shards(archive, ARCHIVE) == []  # the temp file exists but is not a shard
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    write_shards(archive, ARCHIVE, 0, rows_factory(1), settings)
    assert seen and all(name.startswith(".") and not name.endswith(".parquet") for name in seen)
    assert len(list_shards(archive, ARCHIVE)) == 1


def test_range_last_before_the_rows_is_refused(archive_settings_factory, rows_factory):
    settings = archive_settings_factory()
    with pytest.raises(ArchiveError, match="range_last"):
        write_shards(open_archive(settings.root), ARCHIVE, 0, rows_factory(3, start=10), settings, range_last=5)


def test_only_stale_temp_files_are_removed(archive_settings_factory):
    settings = archive_settings_factory()
    archive = open_archive(settings.root)
    directory = Path(settings.root) / "archive" / "tenant=a" / "kind=persona" / "date=2026-01-01"
    directory.mkdir(parents=True)
    old, young = directory / ".p000-1-2.parquet.aa.tmp", directory / ".p000-3-4.parquet.bb.tmp"
    old.write_bytes(b"x")
    young.write_bytes(b"x")
    os.utime(old, (1, 1))
    assert remove_stale_temp_files(archive) == 1
    assert not old.exists() and young.exists()


def test_s3_settings_connect_without_the_aws_variables(monkeypatch):
    """Settings' S3 fields build the client themselves (no request is sent until a shard is read or written)."""
    import pyarrow.fs as pafs
    from pydantic import ValidationError

    from credence.config.archive import ArchiveSettings

    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    settings = ArchiveSettings(s3_endpoint_url="http://127.0.0.1:9", s3_access_key_id="k", s3_secret_access_key="s",
                               s3_region="eu-west-3")
    archive = open_archive("s3://bucket/some/prefix/", settings)
    assert isinstance(archive.fs, pafs.S3FileSystem) and archive.base == "bucket/some/prefix"
    assert archive.fs.region == "eu-west-3" and not archive.is_local
    with pytest.raises(ValidationError, match="together"):
        ArchiveSettings(s3_access_key_id="k")
    with pytest.raises(ArchiveError, match="names no bucket"):
        open_archive("s3://", settings)
