"""De-duplication in the sink: first offset wins per partition, across spans, restarts, replays,
re-publishes of an open span and forgetting, without a broker (messages are fed to the sink)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from datetime import date
from pathlib import Path

import pyarrow.dataset as ds

from credence.sinks.analytics import FunnelRow, connect, funnel
from credence.sinks.base import Batch, Record
from credence.sinks.forget import forget_user
from credence.sinks.identities import IdentitySet, decide_duplicates
from credence.sinks.parquet import ParquetSink
from credence.sinks.schema import ARCHIVE, EVIDENCE, to_row


def _sink(settings, table=ARCHIVE) -> ParquetSink:
    sink = ParquetSink("topic", table, settings)
    sink.commits = []  # the offsets it answered durable, as the runner would commit them
    return sink


async def _no_position(tp):
    raise AssertionError("no partition is assigned here: spans seal as the next span's records arrive")


def _feed(sink: ParquetSink, stream: list[tuple[int, int, dict]], publish_open: bool = True):
    """Feed (partition, offset, record) in order, as polls would, then publish the open spans."""
    def commit(written):
        if written.durable:
            sink.commits.append({tp.partition: o for tp, o in written.durable.items()})

    async def go():
        for partition, offset, record in stream:
            message = Record("topic", partition, offset, b"k", json.dumps(record).encode())
            commit(await sink.write(Batch([message], frozenset(), _no_position)))
        if publish_open:
            commit(await sink.flush())
        return sink.stats
    return asyncio.run(go())


def _digest(root: str) -> dict[str, str]:
    base = Path(root)
    return {str(p.relative_to(base)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(base.rglob("*.parquet"))}


def _rows(root: str, table=ARCHIVE) -> list[dict]:
    return ds.dataset(f"{root}/{table}", format="parquet", partitioning="hive").to_table().to_pylist()


def _stream(make, spec):
    """spec: (partition, offset, entry_id, extra) -> (partition, offset, record)."""
    return [(p, o, make(entry_id=e, **extra)) for p, o, e, extra in spec]


def test_an_in_span_duplicate_is_dropped_and_the_first_offset_wins(
        archive_settings_factory, archive_record_factory, caplog):
    settings = archive_settings_factory(max_rows_per_shard=10)
    stream = _stream(archive_record_factory, [
        (0, 0, "e0", {}), (0, 1, "e1", {}), (0, 2, "e2", {}), (0, 3, "e3", {}), (0, 4, "e4", {}),
        (0, 5, "e2", {"text": "redelivered"}), (0, 6, "e0", {"text": "redelivered"}), (0, 7, "e5", {}),
    ])
    with caplog.at_level(logging.INFO, logger="credence.sinks.parquet"):
        stats = _feed(_sink(settings), stream)
    rows = _rows(settings.root)
    assert sorted(r["entry_id"] for r in rows) == ["e0", "e1", "e2", "e3", "e4", "e5"]
    assert {r["entry_id"]: r["offset"] for r in rows}["e2"] == 2
    assert all(r["text"] != "redelivered" for r in rows)
    assert (stats.rows, stats.duplicates_dropped) == (8, 2)
    assert "dropped 2 duplicate row(s)" in caplog.text and "offsets 5, 6" in caplog.text
    # The shard name still comes from the planned rows (offsets only), not from the decisions.
    assert [Path(p).name for p in _digest(settings.root)] == ["p000-000000000000-000000000009.parquet"]


def test_a_duplicate_across_spans_is_dropped_also_after_a_restart(archive_settings_factory, archive_record_factory):
    settings = archive_settings_factory(max_rows_per_shard=4)
    stream = _stream(archive_record_factory, [
        (0, 0, "e0", {}), (0, 1, "e1", {}), (0, 2, "e2", {}), (0, 3, "e3", {}),
        (0, 4, "e4", {}), (0, 5, "e1", {"text": "redelivered"}), (0, 6, "e5", {}),
        (0, 8, "e3", {}), (0, 9, "e6", {}),  # offset 7 is gone (e.g. a transaction marker)
    ])
    stats = _feed(_sink(settings), stream)
    assert stats.duplicates_dropped == 2
    assert sorted(r["entry_id"] for r in _rows(settings.root)) == [f"e{i}" for i in range(7)]
    before = _digest(settings.root)

    # A restarted sink resumes at the committed span start 4: the set comes from the files of span 0.
    restarted = _feed(_sink(settings), stream[4:])
    assert restarted.duplicates_dropped == 2
    assert _digest(settings.root) == before


def test_duplicates_are_per_partition(archive_settings_factory, archive_record_factory):
    settings = archive_settings_factory(max_rows_per_shard=4)
    stream = _stream(archive_record_factory, [(0, 0, "e0", {}), (1, 0, "e0", {}), (1, 5, "e0", {})])
    assert _feed(_sink(settings), stream).duplicates_dropped == 1
    assert sorted((r["topic_partition"], r["offset"]) for r in _rows(settings.root)) == [(0, 0), (1, 0)]


def _messy_stream(make):
    """Three partitions, spans of 8, two tenants over two days, ~1 in 4 records a redelivery of an
    earlier one of the same partition (within a span and across spans)."""
    stream, ids, offsets = [], {0: [], 1: [], 2: []}, {0: 0, 1: 0, 2: 0}
    for i in range(150):
        p = i % 3
        if i % 4 == 3 and ids[p]:
            entry_id = ids[p][(i * 7) % len(ids[p])]
            n = int(entry_id[1:])
        else:
            entry_id, n = f"e{i}", i
            ids[p].append(entry_id)
        record = make(tenant=f"t{n % 2}", user=f"u{n % 3}", entry_id=entry_id,
                      archived_at=f"2026-01-0{1 + n % 2}T10:00:00Z")
        stream.append((p, offsets[p], record))
        offsets[p] += 1
    return stream, sum(len(v) for v in ids.values())


def test_replay_from_zero_after_duplicates_rewrites_byte_identical_files(
        archive_settings_factory, archive_record_factory):
    settings = archive_settings_factory(max_rows_per_shard=8)
    stream, unique = _messy_stream(archive_record_factory)
    # Incremental: several sink lifetimes, each publishing its open spans early and resuming at
    # the committed span start of every partition.
    resume = {0: 0, 1: 0, 2: 0}
    for cut in (20, 61, 62, 110, len(stream)):
        part = [(p, o, r) for n, (p, o, r) in enumerate(stream) if n < cut and o >= resume[p]]
        sink = _sink(settings)
        _feed(sink, part)
        for commit in sink.commits:
            resume.update(commit)
    incremental = _digest(settings.root)
    rows = _rows(settings.root)
    assert len(rows) == unique == len({(r["topic_partition"], r["entry_id"]) for r in rows})

    replay = _feed(_sink(settings), stream)
    assert replay.duplicates_dropped == len(stream) - unique
    assert _digest(settings.root) == incremental

    fresh = settings.model_copy(update={"root": settings.root + "-fresh"})
    _feed(_sink(fresh), stream)
    assert _digest(fresh.root) == incremental


def test_an_open_span_rewritten_with_more_rows_keeps_its_decisions(
        archive_settings_factory, archive_record_factory):
    settings = archive_settings_factory(max_rows_per_shard=100, max_bytes_per_shard=64 * 1024)
    stream = _stream(archive_record_factory, [
        (0, 0, "e0", {}), (0, 1, "e1", {"archived_at": "2026-01-22T10:00:00Z"}), (0, 2, "e0", {}),
        (0, 3, "e2", {}), (0, 4, "e1", {"archived_at": "2026-01-22T10:00:00Z"}),
        # after the early publish: duplicates of the prefix, one in a key not touched since
        (0, 5, "e3", {}), (0, 6, "e1", {"archived_at": "2026-01-22T10:00:00Z"}), (0, 7, "e2", {}),
        (0, 8, "e4", {"text": "y" * 9000}), (0, 9, "e0", {}), (0, 10, "e5", {}),
    ])
    sink = _sink(settings)
    first = _feed(sink, stream[:5])
    assert first.duplicates_dropped == 2
    early = _digest(settings.root)
    assert _feed(sink, stream[5:]).duplicates_dropped == 5  # counted once per row, not per publish
    grown = _digest(settings.root)
    assert set(early) <= set(grown)  # the same names, replaced in place

    fresh = settings.model_copy(update={"root": settings.root + "-fresh"})
    _feed(_sink(fresh), stream)
    assert _digest(fresh.root) == grown
    assert sorted(r["entry_id"] for r in _rows(settings.root)) == ["e0", "e1", "e2", "e3", "e4", "e5"]


def test_a_resync_on_another_day_is_not_counted_twice(archive_settings_factory, evidence_record_factory):
    settings = archive_settings_factory(max_rows_per_shard=50)
    created = evidence_record_factory(event="created", at="2026-03-01T10:00:00Z", to_status="pending")
    confirmed = evidence_record_factory(event="transition", at="2026-03-01T11:00:00Z", to_status="confirmed",
                                        version=2)
    resync = dict(created, event="resync", at="2026-03-02T09:00:00Z")  # same event_id e1@1, next day
    stream = [(0, 0, created), (0, 1, confirmed), (0, 2, dict(confirmed)), (0, 3, resync), (0, 4, created)]
    sink = _sink(settings, EVIDENCE)
    for record in stream:  # published after every record: the resync's write touches only day 2
        stats = _feed(sink, [record])
    assert stats.duplicates_dropped == 3
    fresh = settings.model_copy(update={"root": settings.root + "-fresh"})
    _feed(_sink(fresh, EVIDENCE), stream)
    assert _digest(fresh.root) == _digest(settings.root)
    rows = _rows(settings.root, EVIDENCE)
    assert sorted(r["event_id"] for r in rows) == ["e1@1", "e1@2"]
    assert funnel(connect(settings.root)) == [FunnelRow("acme", date(2026, 3, 1), 1, 1, 0, 0, 0, 0)]
    assert not any("date=2026-03-02" in p for p in _digest(settings.root))  # a shard of only duplicates


def test_a_duplicate_of_a_forgotten_first_occurrence_stays_out_and_replays_identically(
        archive_settings_factory, archive_record_factory):
    settings = archive_settings_factory(max_rows_per_shard=4)
    stream = _stream(archive_record_factory, [
        (0, 0, "a0", {"user": "alice"}), (0, 1, "b0", {"user": "bob"}), (0, 2, "a1", {"user": "alice"}),
        (0, 3, "b1", {"user": "bob"}),
        (0, 4, "a0", {"user": "alice"}), (0, 5, "b2", {"user": "bob"}), (0, 6, "b0", {"user": "bob"}),
    ])
    _feed(_sink(settings), stream[:5])  # span 0 sealed and committed, offset 4 published early
    forget_user(settings.root, "acme", "alice", settings)
    # The restart reads span 0's files, which no longer hold a0: the redelivered a0 is then not seen
    # as a duplicate, but it is alice's row and stays out all the same, under the same names.
    _feed(_sink(settings), stream[4:])
    incremental = _digest(settings.root)
    assert sorted(r["entry_id"] for r in _rows(settings.root)) == ["b0", "b1", "b2"]

    _feed(_sink(settings), stream)  # a replay from 0 remembers a0 from span 0 and drops it as a duplicate
    assert _digest(settings.root) == incremental


def test_decisions_of_a_prefix_are_those_of_the_whole(archive_record_factory):
    rows = [to_row(ARCHIVE, archive_record_factory(entry_id=f"e{i % 5}"), 0, i) for i in range(12)]
    version = rows[0].values["version"]
    seen = [f"e4@{version}"]
    kept, dropped = decide_duplicates(rows, ARCHIVE, IdentitySet(seen))
    assert kept == {f"e{i}@{version}" for i in range(4)} and dropped == set(range(4, 12))  # e4 seen before
    for n in range(len(rows)):
        _, prefix = decide_duplicates(rows[:n], ARCHIVE, IdentitySet(seen))
        assert prefix == {o for o in dropped if o < n}


def test_identity_set_membership_merges_and_shared_high_halves():
    import numpy as np

    ids = IdentitySet(f"e{i}@{i % 3}" for i in range(1000))
    assert len(ids) == 1000 and ids.nbytes == 16_000
    assert "e5@2" in ids and "e5@1" not in ids
    ids.update(["e5@1", "e5@2", "e5@1"])  # already held ones are not added twice
    assert len(ids) == 1001 and "e5@1" in ids
    assert ids.contains(["e0@0", "nope", "e999@0"]).tolist() == [True, False, True]
    # Digests whose high halves collide are told apart by the low half.
    pairs = IdentitySet()
    pairs.add_digests(np.array([7, 7, 7, 3], dtype=np.uint64), np.array([1, 2, 2, 9], dtype=np.uint64))
    assert len(pairs) == 3
    found = pairs.contains_digests(np.array([7, 7, 7, 3, 4], dtype=np.uint64),
                                   np.array([1, 2, 3, 9, 9], dtype=np.uint64))
    assert found.tolist() == [True, True, False, True, False]


def test_a_second_archival_of_an_entry_is_kept(archive_settings_factory, archive_record_factory):
    """A second life of an entry in the archive: the archive's identity is (entry_id, version). An entry
    that came back under its deterministic id and was archived again (a higher version) is a new archival;
    only a redelivered copy (same id and version) is dropped, within a span, across spans and after a
    restart."""
    settings = archive_settings_factory(max_rows_per_shard=4)
    stream = _stream(archive_record_factory, [
        (0, 0, "e0", {"version": 3}), (0, 1, "e1", {"version": 2}), (0, 2, "e0", {"version": 3}),  # redelivered
        (0, 4, "e0", {"version": 7}),  # back and archived again
        (0, 5, "e1", {"version": 2}),  # redelivered, a span later
    ])
    stats = _feed(_sink(settings), stream)
    assert sorted((r["entry_id"], r["version"]) for r in _rows(settings.root)) == [("e0", 3), ("e0", 7), ("e1", 2)]
    assert stats.duplicates_dropped == 2
    _feed(_sink(settings), stream)  # a restarted sink rebuilds the set from the shards and decides alike
    assert sorted((r["entry_id"], r["version"]) for r in _rows(settings.root)) == [("e0", 3), ("e0", 7), ("e1", 2)]


def test_an_archival_in_a_new_life_of_the_scope_is_kept(archive_settings_factory, archive_record_factory):
    """A forgotten user's entry archived again after they came back: the same id and version, a later
    incarnation (records.journal.INCARNATION) — a new archival, not a copy of the forgotten one."""
    settings = archive_settings_factory(max_rows_per_shard=4)
    stream = [(0, 0, archive_record_factory(entry_id="e1", version=2)),
              (0, 5, archive_record_factory(entry_id="e1", version=2) | {"incarnation": 12}),
              (0, 6, archive_record_factory(entry_id="e1", version=2) | {"incarnation": 12})]  # redelivered
    assert _feed(_sink(settings), stream).duplicates_dropped == 1
    assert sorted(r["incarnation"] or 0 for r in _rows(settings.root)) == [0, 12]


def test_identities_of_a_shard_written_before_the_incarnation_column(archive_settings_factory,
                                                                    archive_record_factory):
    import pyarrow.parquet as pq

    from credence.sinks.identities import load_identities
    from credence.sinks.shards import list_shards, open_archive, write_shards

    settings = archive_settings_factory()
    archive = open_archive(settings.root)
    write_shards(archive, ARCHIVE, 0, [to_row(ARCHIVE, archive_record_factory(entry_id="e0"), 0, 0)], settings,
                 range_last=9)
    [path] = list_shards(archive, ARCHIVE)
    old = pq.read_table(path, partitioning=None)
    pq.write_table(old.drop_columns(["incarnation"]), path)  # as a sink before the column wrote it
    assert f"e0@{old.column('version')[0].as_py()}" in load_identities(archive, ARCHIVE, 0, 10)
