"""Erasing one entry rewrites exactly its rows below the erased version, idempotently, and a later sink write
of the same span leaves them out too."""

from __future__ import annotations

import pyarrow.parquet as pq

from credence.sinks.erase import ERASED_DIR, ErasureReport, archive_markers, erase_entry, erased_markers
from credence.sinks.schema import ARCHIVE, EVIDENCE, to_row
from credence.sinks.shards import list_shards, open_archive, write_shards
from credence.tables.scope import Scope

S = Scope("acme", "u1", "c1")


def _rows(archive, table):
    rows = []
    for path in list_shards(archive, table):
        rows += pq.read_table(path, partitioning=None).select(["user", "entry_id", "version"]).to_pylist()
    return sorted((r["user"], r["entry_id"], r["version"]) for r in rows)


def _evidence(factory):
    return [to_row(EVIDENCE, factory(entry_id="e1", event="created", version=1), 0, 0),
            to_row(EVIDENCE, factory(entry_id="e1", event="signal", version=2), 0, 1),
            to_row(EVIDENCE, factory(entry_id="e1", event="erased", version=3), 0, 2),
            to_row(EVIDENCE, factory(entry_id="e1", event="created", version=4), 0, 3),  # said again later
            to_row(EVIDENCE, factory(entry_id="e2", event="created", version=1), 0, 4),
            to_row(EVIDENCE, factory(user="u2", entry_id="e1", event="created", version=1), 0, 5)]


def test_erase_removes_the_entrys_versions_below_the_erased_event(archive_settings_factory,
                                                                  evidence_record_factory, archive_record_factory):
    settings = archive_settings_factory()
    archive = open_archive(settings.root)
    write_shards(archive, EVIDENCE, 0, _evidence(evidence_record_factory), settings)
    write_shards(archive, ARCHIVE, 1, [to_row(ARCHIVE, archive_record_factory(entry_id="e1", version=2), 1, 0)],
                 settings)

    report = erase_entry(settings.root, S, "e1", 0, 3, settings)

    assert report == ErasureReport(rows_removed=3, shards_rewritten=1, shards_deleted=1)
    # the erased event (no text) and the later life stay; another user's e1 and the scope's e2 are untouched
    assert _rows(archive, EVIDENCE) == [("u1", "e1", 3), ("u1", "e1", 4), ("u1", "e2", 1), ("u2", "e1", 1)]
    assert _rows(archive, ARCHIVE) == []
    assert erase_entry(settings.root, S, "e1", 0, 3, settings) == ErasureReport(0, 0, 0)
    # the marker names no one
    [marker] = list(erased_markers(archive).cuts)
    assert "u1" not in marker and (archive_path := f"{archive.base}/{ERASED_DIR}/{marker}")
    assert archive.fs.get_file_info(archive_path).size > 0


def test_a_later_sink_write_of_the_span_leaves_the_erased_rows_out(archive_settings_factory, evidence_record_factory):
    settings = archive_settings_factory()
    archive = open_archive(settings.root)
    rows = _evidence(evidence_record_factory)
    write_shards(archive, EVIDENCE, 0, rows[:2], settings, range_last=99)  # an open span, published early
    erase_entry(settings.root, S, "e1", 0, 3, settings)
    write_shards(archive, EVIDENCE, 0, rows, settings, range_last=99, forgotten=archive_markers(archive, {}))
    assert ("u1", "e1", 1) not in _rows(archive, EVIDENCE) and ("u1", "e1", 2) not in _rows(archive, EVIDENCE)
    assert len(_rows(archive, EVIDENCE)) == 4


def test_another_incarnation_is_not_erased(archive_settings_factory, evidence_record_factory):
    settings = archive_settings_factory()
    archive = open_archive(settings.root)
    write_shards(archive, EVIDENCE, 0, _evidence(evidence_record_factory), settings)
    assert erase_entry(settings.root, S, "e1", 7, 3, settings).rows_removed == 0
