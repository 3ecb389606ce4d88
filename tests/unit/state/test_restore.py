"""The bulk restore's one rule for what it applies (streams/runtime/restore.py): a changelog record is
applied when it lies after the partition's last applied offset and not past the highwater Faust measured,
in offset order, and the partition's offset never runs ahead of what reached the table — so a restore cut
short anywhere leaves Faust's loop to start exactly where it stopped."""

from __future__ import annotations

from types import SimpleNamespace

from faust.types import TP as FaustTP

from hypothesis import given
from hypothesis import strategies as st

from credence.streams.runtime import restore
from credence.streams.runtime.restore import BulkRecovery

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
