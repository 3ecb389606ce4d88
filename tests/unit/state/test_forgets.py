"""Forget filters in the `seen` table: one key per filter, so a partition holding many (a GDPR job run
while the partition lags) never writes a value that grows with them, and the older layout (every filter
of a partition in one value) is still read."""

from __future__ import annotations

import orjson

from credence.streams.state.forgets import Forgets, filter_key, forget_key
from credence.streams.state.writes import TableWrites

INPUTS = ("turns", "feedback", "usage", "facts", "control")
PARTITIONS = 64  # the forget names every input topic's end offset on each of them
RECORD_LIMIT = 1_000_000  # the producer's max_request_size


def lagging(ends: int) -> dict[str, list[int]]:
    return {name: [ends] * PARTITIONS for name in INPUTS}


def forgets_over(table: dict) -> Forgets:
    return Forgets(table, TableWrites(), lambda name: f"credence.{name}")


def nothing_applied(topic: str, partition: int) -> int | None:
    return None


def test_six_hundred_forgets_held_on_a_lagging_partition_write_no_value_near_the_record_limit():
    table: dict = {}
    forgets = forgets_over(table)
    for i in range(600):
        forgets.hold(f"acme/u{i}/", 3, lagging(1_000_000 + i))
        forgets.write(3, nothing_applied)
    assert max(len(v) for v in table.values()) < RECORD_LIMIT // 100
    assert sum(len(v) for v in table.values()) > RECORD_LIMIT  # all of them in one value would not fit
    restarted = forgets_over(table)  # every filter is read back
    assert all(restarted.queued_before(f"acme/u{i}/aria", 3, ("turns", 5, 999_999)) for i in range(600))
    assert not restarted.queued_before("acme/u0/aria", 3, ("turns", 5, 1_000_000))  # sent after the forget


def test_a_filter_passed_by_the_positions_is_deleted_and_the_last_one_takes_the_head():
    table: dict = {}
    forgets = forgets_over(table)
    forgets.hold("acme/u1/", 3, lagging(10))
    forgets.hold("acme/u2/", 3, lagging(20))
    forgets.hold("acme/u1/", 3, lagging(30))  # forgotten again: replaces the first filter
    forgets.write(3, nothing_applied)
    assert sorted(table) == [forget_key(3), filter_key(3, 1), filter_key(3, 2)]
    forgets.write(3, lambda topic, partition: 25)
    assert sorted(table) == [forget_key(3), filter_key(3, 2)]
    forgets.write(3, lambda topic, partition: 30)
    assert table == {}


def test_filters_of_the_older_layout_are_read_then_split_into_a_key_each():
    table = {forget_key(3): orjson.dumps({"v": 1, "users": {"acme/u1/": lagging(10), "acme/u2/": lagging(20)}})}
    forgets = forgets_over(table)
    assert forgets.queued_before("acme/u2/aria", 3, ("usage", 0, 19))
    forgets.write(3, lambda topic, partition: 15)  # u1's filter is passed, u2's is kept in a key of its own
    assert sorted(table) == [forget_key(3), filter_key(3, 1)]
    assert orjson.loads(table[forget_key(3)]) == {"v": 2, "first": 1, "next": 2}
    restarted = forgets_over(table)
    assert restarted.queued_before("acme/u2/aria", 3, ("usage", 0, 19))
    assert not restarted.queued_before("acme/u1/aria", 3, ("usage", 0, 5))
