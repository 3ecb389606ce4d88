"""Forgetting a user rewrites exactly the affected shards, atomically and idempotently."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from credence.sinks.forget import FORGOTTEN_DIR, ForgetReport, forget_user, forgotten_markers, marker_name
from credence.sinks.schema import ARCHIVE, EVIDENCE, to_row
from credence.sinks.shards import list_shards, open_archive, write_shards


def _users(archive, table):
    users = []
    for path in list_shards(archive, table):
        users += pq.read_table(path, partitioning=None).column("user").to_pylist()
    return sorted(users)


def test_forget_removes_exactly_the_users_rows(archive_settings_factory, archive_record_factory, evidence_record_factory):
    settings = archive_settings_factory()
    archive = open_archive(settings.root)
    # acme/alice: 3 archive rows on 2 days (one shard only hers), 2 evidence rows; bob and globex/alice stay.
    archive_rows = [
        to_row(ARCHIVE, archive_record_factory(user="alice", entry_id="a1", archived_at="2026-01-01T01:00:00Z"), 0, 0),
        to_row(ARCHIVE, archive_record_factory(user="bob", entry_id="b1", archived_at="2026-01-01T02:00:00Z"), 0, 1),
        to_row(ARCHIVE, archive_record_factory(user="alice", entry_id="a2", archived_at="2026-01-01T03:00:00Z"), 0, 2),
        to_row(ARCHIVE, archive_record_factory(user="alice", entry_id="a3", archived_at="2026-01-02T03:00:00Z"), 0, 3),
        to_row(ARCHIVE, archive_record_factory(tenant="globex", user="alice", entry_id="g1"), 0, 4),
    ]
    evidence_rows = [
        to_row(EVIDENCE, evidence_record_factory(user="alice", entry_id="a1", event="created"), 1, 0),
        to_row(EVIDENCE, evidence_record_factory(user="alice", entry_id="a1", event="archived", version=2), 1, 1),
        to_row(EVIDENCE, evidence_record_factory(user="bob", entry_id="b1", event="created"), 1, 2),
    ]
    write_shards(archive, ARCHIVE, 0, archive_rows, settings)
    write_shards(archive, EVIDENCE, 1, evidence_rows, settings)

    report = forget_user(settings.root, "acme", "alice", settings)

    assert report == ForgetReport(rows_removed=5, shards_rewritten=2, shards_deleted=1)
    assert _users(archive, ARCHIVE) == ["alice", "bob"]  # globex's alice is another person
    assert _users(archive, EVIDENCE) == ["bob"]
    assert forget_user(settings.root, "acme", "alice", settings) == ForgetReport(0, 0, 0)


def test_forget_on_an_empty_archive_reports_nothing(archive_settings_factory):
    settings = archive_settings_factory()
    assert forget_user(settings.root, "acme", "alice") == ForgetReport(0, 0, 0)


def test_a_later_write_of_the_span_keeps_the_names_and_leaves_the_user_out(
        archive_settings_factory, archive_record_factory):
    settings = archive_settings_factory()
    archive = open_archive(settings.root)
    rows = [to_row(ARCHIVE, archive_record_factory(user=u, entry_id=f"e{i}"), 0, i)
            for i, u in enumerate(["alice", "bob", "alice", "bob", "carol"])]
    write_shards(archive, ARCHIVE, 0, rows[:3], settings, range_last=99)  # an open span, published early
    forget_user(settings.root, "acme", "alice", settings)
    assert forgotten_markers(archive).knows("acme", "alice")
    # The sink's next write of the grown span: same name (first row is alice's offset 0), no alice.
    write_shards(archive, ARCHIVE, 0, rows, settings, range_last=99, forgotten=forgotten_markers(archive))
    [path] = list_shards(archive, ARCHIVE)
    assert path.endswith("p000-000000000000-000000000099.parquet")
    assert _users(archive, ARCHIVE) == ["bob", "bob", "carol"]


def test_odd_user_names_round_trip_through_the_markers(archive_settings_factory):
    settings = archive_settings_factory()
    users = (".hidden", "a/b", "ü ser", "..")
    for user in users:
        forget_user(settings.root, "acme", user, settings)
    markers = forgotten_markers(open_archive(settings.root))
    assert all(markers.knows("acme", u) for u in users) and len(markers.cutoffs) == len(users)
    assert not markers.knows("globex", "a/b")


def test_a_marker_names_no_one_and_replaces_a_marker_that_did(archive_settings_factory):
    settings = archive_settings_factory()
    legacy = Path(settings.root, FORGOTTEN_DIR, "acme", "alice%20smith")  # the older layout: the user's name
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(b"")
    assert forgotten_markers(open_archive(settings.root)).cutoff("acme", "alice smith") is None  # still honoured
    forget_user(settings.root, "acme", "alice smith", settings, {0: 5})
    names = [p.relative_to(Path(settings.root, FORGOTTEN_DIR)).as_posix()
             for p in Path(settings.root, FORGOTTEN_DIR).rglob("*") if p.is_file()]
    assert names == [marker_name("acme", "alice smith")]
    assert not any("alice" in n or "acme" in n for n in names)


def test_a_marker_forgets_only_the_rows_below_its_cut_off(archive_settings_factory, archive_record_factory):
    """A user forgotten and back again: the new incarnation's rows (at or past the partition's cut-off)
    are archived and kept by a later forget_user run; the forgotten life's rows never come back."""
    settings = archive_settings_factory()
    archive = open_archive(settings.root)

    def row(entry_id, offset, incarnation=0, user="alice"):
        record = archive_record_factory(user=user, entry_id=entry_id) | (
            {"incarnation": incarnation} if incarnation else {})
        return to_row(ARCHIVE, record, 0, offset)

    forgotten = [row("a1", 0), row("a2", 1, incarnation=3)]
    write_shards(archive, ARCHIVE, 0, forgotten + [row("b1", 2, user="bob")], settings, range_last=99)
    assert forget_user(settings.root, "acme", "alice", settings, {0: 8, 1: 4}).rows_removed == 2
    back = [row("a1", 3, incarnation=8), row("a3", 4, incarnation=9)]
    rows = forgotten + [row("b1", 2, user="bob")] + back
    write_shards(archive, ARCHIVE, 0, rows, settings, range_last=99, forgotten=forgotten_markers(archive))
    assert sorted(_entries(archive)) == ["a1", "a3", "b1"]
    # --archive-only forgets everything archived of her so far, this life too, and keeps any later one
    assert forget_user(settings.root, "acme", "alice", settings).rows_removed == 2
    assert sorted(_entries(archive)) == ["b1"]
    assert forgotten_markers(archive).cutoff("acme", "alice") == {0: 10, 1: 4}
    rows.append(row("a1", 5, incarnation=10))
    write_shards(archive, ARCHIVE, 0, rows, settings, range_last=99, forgotten=forgotten_markers(archive))
    assert sorted(_entries(archive)) == ["a1", "b1"]


def test_an_archive_only_forget_keeps_a_life_begun_by_a_later_forget(archive_settings_factory,
                                                                     archive_record_factory):
    settings = archive_settings_factory()
    archive = open_archive(settings.root)
    rows = [to_row(ARCHIVE, archive_record_factory(user="alice", entry_id="a1"), 2, 0)]
    write_shards(archive, ARCHIVE, 2, rows, settings, range_last=99)
    assert forget_user(settings.root, "acme", "alice", settings).rows_removed == 1
    assert forgotten_markers(archive).cutoff("acme", "alice") == {2: 1}
    def later(partition):  # her next life, after a forget through the workers
        return to_row(ARCHIVE, archive_record_factory(user="alice", entry_id="a1") | {"incarnation": 4}, partition, 1)

    write_shards(archive, ARCHIVE, 2, rows + [later(2)], settings, range_last=99, forgotten=forgotten_markers(archive))
    write_shards(archive, ARCHIVE, 3, [later(3)], settings, range_last=99, forgotten=forgotten_markers(archive))
    assert sorted(_entries(archive)) == ["a1", "a1"]  # her next life, on both partitions


def _entries(archive):
    return [e for path in list_shards(archive, ARCHIVE)
            for e in pq.read_table(path, partitioning=None).column("entry_id").to_pylist()]
