"""The bulk restore's one rule for what it applies (streams/state/restore.py): a changelog record is
applied when it lies after the partition's last applied offset and not past the highwater Faust measured,
in offset order, and the partition's offset never runs ahead of what reached the table — so a restore cut
short anywhere leaves Faust's loop to start exactly where it stopped."""

from __future__ import annotations

from types import SimpleNamespace

from faust.types import TP as FaustTP
from hypothesis import given
from hypothesis import strategies as st

from credence.streams.state import restore
from credence.streams.state.restore import BulkRecovery

TP = FaustTP("t-entries-changelog", 1)


class Table:
    changelog_topic = None

    def __init__(self, destination: dict):
        self.destination, self.applied, self.chunks = destination, [], []

    def apply_changelog_batch(self, chunk) -> None:
        assert all(e.message.offset > self.destination[TP] for e in chunk), "offset ran ahead of the table"
        self.chunks.append(len(chunk))
        self.applied += [(e.message.offset, e.message.key, e.message.value) for e in chunk]


def record(offset: int):
    return SimpleNamespace(offset=offset, key=b"k%d" % offset, value=None if offset % 5 == 0 else b"v")


def apply(offsets: list[int], start: int, end: int) -> tuple[Table, dict]:
    destination = {TP: start}
    table = Table(destination)
    recovery = SimpleNamespace(active_highwaters={TP: end}, tp_to_table={TP: table}, app=None)
    BulkRecovery._apply(recovery, TP, [record(o) for o in offsets], destination)
    return table, destination


def test_only_records_after_the_last_applied_and_up_to_the_highwater():
    table, destination = apply([3, 4, 6, 9, 10, 12], start=4, end=10)
    assert [o for o, _, _ in table.applied] == [6, 9, 10]
    assert destination[TP] == 10
    assert table.applied[-1] == (10, b"k10", None)  # a deletion goes to the store as one


def test_nothing_in_the_span_leaves_the_offset_alone():
    table, destination = apply([1, 2, 11], start=2, end=10)
    assert table.applied == [] and destination[TP] == 2


@given(st.lists(st.integers(0, 200), unique=True).map(sorted), st.integers(-1, 200), st.integers(-1, 200),
       st.integers(1, 7))
def test_applied_in_order_in_chunks_never_ahead(offsets, start, end, every):
    saved = restore.APPLY_EVERY
    restore.APPLY_EVERY = every
    try:
        table, destination = apply(offsets, start, end)
    finally:
        restore.APPLY_EVERY = saved
    want = [o for o in offsets if start < o <= end]
    assert [o for o, _, _ in table.applied] == want
    assert destination[TP] == (want[-1] if want else start)
    assert all(n <= every for n in table.chunks)


def test_the_report_counts_what_is_left_to_fausts_loop():
    stats = restore.RestoreStats()
    recovery = SimpleNamespace(restored=stats)
    other = FaustTP("t-scopes-changelog", 0)
    BulkRecovery._report(recovery, {TP: (-1, 99), other: (-1, 9)}, {TP: 49, other: 9}, 60, 0.5)
    assert stats.records == 60 and stats.left == 50 and stats.partitions == 2
    assert stats.last == {"records": 60, "seconds": 0.5, "partitions": 2, "left": 50}


def test_a_rocksdb_chunk_is_written_raw_with_its_deletions_and_offset(tmp_path):
    """The RocksDB fast path writes what Faust's apply_changelog_batch would: raw keys and values, a None
    value deleting its key, then the chunk's last offset as the partition's persisted offset."""
    import rocksdict

    db = rocksdict.Rdict(str(tmp_path / "db"), options=rocksdict.Options(raw_mode=True))
    db[b"old"] = b"gone soon"
    offsets: list = []
    store = SimpleNamespace(_db_for_partition=lambda p: db if p == TP.partition else None,
                            set_persisted_offset=lambda tp, offset: offsets.append((tp, offset)))
    chunk = [SimpleNamespace(offset=7, key=b"a", value=b"1"), SimpleNamespace(offset=8, key=b"old", value=None),
             SimpleNamespace(offset=9, key=b"a", value=b"2")]
    restore._write_rocksdb(store, TP, chunk)
    assert db[b"a"] == b"2" and b"old" not in db
    assert offsets == [(TP, 9)]
    db.close()


def test_only_faust_rocksdb_stores_take_the_fast_path():
    from faust.stores.memory import Store as MemoryStore

    assert restore._rocksdb(MemoryStore.__new__(MemoryStore)) is None
    assert restore._rocksdb(None) is None and restore._rocksdb({}) is None
