"""Duplicate marks: a repeat inside the horizon is dropped, the table holds a horizon's worth."""

from datetime import timedelta
from itertools import islice

from hypothesis import given, settings
from hypothesis import strategies as st

from credence.streams.state.mark_index import MIN_WIDTH_S
from credence.streams.state.marks import Marks, is_mark_key, mark_key
from credence.streams.state.ownership import Ownership
from credence.streams.state.writes import TableWrites

from .conftest import SCOPE, T0

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
BUCKET = timedelta(seconds=MIN_WIDTH_S)  # a mark is pruned with its whole bucket of the prune index


def marks_in(table: dict) -> set[str]:
    """The duplicate marks of the table (beside them: the prune index)."""
    return {k for k in table if is_mark_key(k)}


def marks_over(table: dict, horizon_days: float = 7.0) -> tuple[Marks, int]:
    ownership = Ownership(4, "credence.turns")
    return Marks(table, horizon_days, ownership.partition_of, TableWrites()), ownership.partition_of(SCOPE)


def test_a_duplicate_inside_the_horizon_is_dropped_and_the_record_itself_is_not():
    table: dict = {}
    marks, part = marks_over(table)
    assert marks.first_time("turns", SCOPE, "t1", "turns:0:5", T0)
    marks.write(part)
    later = T0 + 6 * DAY
    assert marks.first_time("turns", SCOPE, "t2", "turns:0:9", later)
    marks.write(part)
    assert not marks.first_time("turns", SCOPE, "t1", "turns:0:12", later)  # a repeat: dropped
    assert marks.first_time("turns", SCOPE, "t1", "turns:0:5", later)  # its own redelivery: applied


def test_a_duplicate_within_one_batch_is_dropped():
    marks, _ = marks_over({})
    assert marks.first_time("turns", SCOPE, "t1", "turns:0:1", T0)
    assert not marks.first_time("turns", SCOPE, "t1", "turns:0:2", T0)


def test_marks_older_than_the_horizon_are_deleted():
    table: dict = {}
    marks, part = marks_over(table, horizon_days=2)
    marks.first_time("turns", SCOPE, "old", "turns:0:1", T0)
    marks.write(part)
    marks.first_time("turns", SCOPE, "new", "turns:0:2", T0 + 3 * DAY)
    marks.write(part)
    assert mark_key("turns", SCOPE, "old") not in table and mark_key("turns", SCOPE, "new") in table
    assert marks.first_time("turns", SCOPE, "old", "turns:0:3", T0 + 3 * DAY)  # beyond the horizon


def test_marks_of_the_previous_layout_are_read_then_pruned():
    table = {mark_key("turns", SCOPE, "t1"): b'"turns:0:1"'}
    marks, part = marks_over(table)
    assert not marks.first_time("turns", SCOPE, "t1", "turns:0:7", T0)
    marks.first_time("turns", SCOPE, "t2", "turns:0:8", T0)
    marks.write(part)
    assert marks_in(table) == {mark_key("turns", SCOPE, "t2")}


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=60 * 24), min_size=1, max_size=80),
       st.integers(min_value=1, max_value=10))
def test_the_table_holds_only_marks_within_the_horizon_of_the_newest(hours, batch):
    """Turns at arbitrary event times (out of order too): after every batch, every mark kept is within
    the horizon of the newest event time seen, and every mark within it is kept."""
    table: dict = {}
    marks, part = marks_over(table, horizon_days=3)
    times = {}
    for i, h in enumerate(hours):
        at = T0 + timedelta(hours=h)
        marks.first_time("turns", SCOPE, f"t{i}", f"turns:0:{i}", at)
        times[mark_key("turns", SCOPE, f"t{i}")] = at
        if i % batch == batch - 1 or i == len(hours) - 1:
            marks.write(part)
            newest = max(times[k] for k in times if int(k.rsplit("t", 1)[1]) <= i)
            kept = marks_in(table)
            assert all(newest - times[k] <= 3 * DAY + BUCKET for k in kept)
            assert {k for k, at in times.items() if newest - at <= 3 * DAY
                    and int(k.rsplit("t", 1)[1]) <= i} <= kept
    assert marks.count() == len(marks_in(table))
    assert marks_over(table)[0].count() is None  # not read until a batch needs the marks


def scopes_beside(scope: str, count: int) -> list[str]:
    """`scope` and `count` scopes of other tenants on its partition."""
    partition_of = Ownership(4, "credence.turns").partition_of
    found = (s for s in (f"tenant{i}/u1/aria" for i in range(10_000)) if partition_of(s) == partition_of(scope))
    return [scope, *islice(found, count)]


def test_one_tenants_far_future_clock_does_not_prune_the_others_marks():
    table: dict = {}
    marks, part = marks_over(table)
    buggy = scopes_beside(SCOPE, 1)[1]
    assert marks.first_time("turns", SCOPE, "t1", "turns:0:1", T0, T0)
    marks.write(part)
    assert marks.first_time("turns", buggy, "t1", "turns:0:2", T0.replace(year=2090), T0 + HOUR)
    marks.write(part)
    assert not marks.first_time("turns", SCOPE, "t1", "turns:0:3", T0, T0 + 2 * HOUR)  # still a repeat
    assert not marks.first_time("turns", buggy, "t1", "turns:0:4", T0.replace(year=2090), T0 + 3 * HOUR)


TENANTS = scopes_beside(SCOPE, 3)
# An event time against its Kafka timestamp: an honest client dates a turn up to 2 h before it is produced
# (or a minute after, a clock slightly ahead); a buggy one decades away either side.
HONEST = st.integers(min_value=-120, max_value=1).map(lambda m: timedelta(minutes=m))
OUTLIER = st.integers(min_value=-30 * 365, max_value=60 * 365).map(lambda d: timedelta(days=d))
RECORD = st.tuples(st.integers(min_value=0, max_value=3), st.integers(min_value=0, max_value=5),
                   st.integers(min_value=0, max_value=12), st.one_of(HONEST, HONEST, OUTLIER))


@settings(max_examples=200, deadline=None)
@given(st.lists(RECORD, min_size=1, max_size=60), st.integers(min_value=1, max_value=6))
def test_a_repeat_within_the_horizon_of_the_broker_time_is_caught_whatever_other_clocks_say(records, batch):
    """Records of four tenants' scopes on one partition, each received `step` hours after the one before
    (its Kafka timestamp) and dated by its client (near that time, or decades away). A repeat whose first
    occurrence's time (event time, capped at its Kafka timestamp) is within the horizon of the newest Kafka
    timestamp is always dropped; the table holds only marks received within a horizon (and the bucket it
    ends in) of the newest honest record's time."""
    horizon = 3 * DAY
    table: dict = {}
    marks, part = marks_over(table, horizon_days=3)
    received, creators, honest = T0, {}, []  # creators: mark key -> (capped time, Kafka time) of its record
    for i, (s, ident, step, skew) in enumerate(records):
        received += step * HOUR
        scope, at = TENANTS[s], received + skew
        key, capped = mark_key("turns", scope, f"t{ident}"), min(at, received)
        first = marks.first_time("turns", scope, f"t{ident}", f"turns:0:{i}", at, received)
        if key in creators and creators[key][0] >= received - horizon:
            assert not first, f"a repeat of {key} within the horizon was applied again"
        if first:
            creators[key] = (capped, received)
            honest += [capped] if abs(at - received) <= 2 * HOUR else []
        if i % batch == batch - 1 or i == len(records) - 1:
            marks.write(part)
            if honest:
                assert all(creators[k][1] >= max(honest) - horizon - BUCKET for k in marks_in(table))
    assert marks.count() == len(marks_in(table))


def test_a_backdated_record_keeps_its_mark_for_a_horizon_from_when_it_was_received():
    """A tenant importing history: its turns are dated months back but reach Kafka now, beside live turns.
    Their marks are kept by ingestion, so the import's retry is still a repeat."""
    table: dict = {}
    marks, part = marks_over(table)
    assert marks.first_time("turns", SCOPE, "live", "turns:0:1", T0, T0)
    marks.write(part)
    assert marks.first_time("turns", SCOPE, "old", "turns:0:2", T0 - 90 * DAY, T0 + HOUR)
    marks.write(part)
    assert not marks.first_time("turns", SCOPE, "old", "turns:0:3", T0 - 90 * DAY, T0 + 2 * HOUR)


class Unscannable(dict):
    """A table whose keys may be read one by one only: a scan of it fails the test."""

    scannable = True

    def items(self):
        assert self.scannable, "the table was scanned"
        return super().items()

    def keys(self):
        assert self.scannable, "the table was scanned"
        return super().keys()


def test_after_partitions_move_no_mark_is_held_in_memory_and_nothing_is_rebuilt_from_a_scan():
    """5,000 marks on a partition; the partition moves (a new owner over the restored table): its first
    batch reads the partition's head alone, and the marks are pruned from the index in the table when the
    horizon passes them, with nothing of them held in the worker meanwhile."""
    table = Unscannable()
    marks, part = marks_over(table, horizon_days=2)
    for i in range(5_000):
        marks.first_time("turns", SCOPE, f"t{i}", f"turns:0:{i}", None, T0 + timedelta(seconds=i))
    marks.write(part)
    table.scannable = False
    owner, _ = marks_over(table, horizon_days=2)
    assert owner.count() is None
    assert not owner.first_time("turns", SCOPE, "t7", "turns:0:9000", None, T0 + DAY)  # still a repeat
    assert owner.first_time("turns", SCOPE, "new", "turns:0:9001", None, T0 + DAY)
    owner.write(part)
    table.scannable = True  # the test's own look
    assert owner.count() == 5_001 and len(marks_in(table)) == 5_001
    assert sum(len(v) for k, v in table.items() if not is_mark_key(k)) < 5_001 * 60  # the index: keys, no more
    assert owner.first_time("turns", SCOPE, "later", "turns:0:9002", None, T0 + 3 * DAY)
    table.scannable = False
    owner.write(part)
    table.scannable = True
    assert marks_in(table) == {mark_key("turns", SCOPE, "new"), mark_key("turns", SCOPE, "later")}
    assert owner.count() == 2


def test_marks_written_before_the_index_are_indexed_once_then_pruned_with_it():
    table = {mark_key("turns", SCOPE, "old"): b'{"v":2,"position":"turns:0:1","at":"2026-03-02T12:00:00Z"}',
             mark_key("turns", SCOPE, "older"): b'"turns:0:0"'}  # two layouts back: no time at all
    marks, part = marks_over(table, horizon_days=2)
    assert not marks.first_time("turns", SCOPE, "old", "turns:0:5", None, T0 + HOUR)
    marks.write(part)
    assert marks_in(table) == {mark_key("turns", SCOPE, "old")}
    restarted, _ = marks_over(table, horizon_days=2)
    restarted.first_time("turns", SCOPE, "new", "turns:0:6", None, T0 + 3 * DAY)
    restarted.write(part)
    assert marks_in(table) == {mark_key("turns", SCOPE, "new")}
