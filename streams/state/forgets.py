"""Forgets ordered against every input of the user.

A forget record names the input topics' end offsets when it was sent (`after`); it is applied as soon as
it is read and stays as a filter (keys `forget␟partition␟n` in the `seen` table, a head per partition)
until the partition's positions pass those offsets on every input topic. Meanwhile a record of the user
queued before it is dropped, never applied. Why this design, and what it does not cover: docs/state.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import orjson

from credence.streams.state import codec
from credence.streams.state.writes import TableWrites
from credence.tables.scope import user_prefix_of

KIND: Final = "forget"  # a `seen` key's first part: kind␟partition
Expected = Callable[[str, int], int | None]  # (topic, partition) -> the next offset to apply (Positions)


def forget_key(partition: int) -> str:
    """The partition's head: the range of its filters' numbers (or, in the older layout, every filter)."""
    return f"{KIND}{codec.SEP}{partition}"


def filter_key(partition: int, number: int) -> str:
    return f"{KIND}{codec.SEP}{partition}{codec.SEP}{number}"


def is_forget_key(key: str) -> bool:
    return key.startswith(KIND + codec.SEP)


Held = dict[str, tuple[int, dict[str, list[int]]]]  # user prefix -> (filter number, after)


class Forgets:
    def __init__(self, table, writes: TableWrites, topic: Callable[[str], str]) -> None:
        self._table, self._writes, self._topic = table, writes, topic  # topic: logical name -> topic name
        self._held: dict[int, Held] = {}  # partition -> its filters
        self._next: dict[int, int] = {}  # partition -> the number of its next filter
        self._dirty: set[int] = set()  # partitions whose head changed
        self._unwritten: dict[int, set[int]] = {}  # partition -> filters read from an older head, to write

    def _of(self, partition: int) -> Held:
        """The partition's filters, read from the table on first use (a record of it is the current event)."""
        held = self._held.get(partition)
        if held is not None:
            return held
        held, raw = {}, self._table.get(forget_key(partition))
        head = orjson.loads(raw) if raw is not None else {"first": 0, "next": 0}
        if "users" in head:  # the older layout: every filter in the head, each to a key of its own
            held = {prefix: (n, after) for n, (prefix, after) in enumerate(head["users"].items())}
            self._next[partition] = len(held)
            self._unwritten[partition] = set(range(len(held)))
            self._dirty.add(partition)
        else:
            for number in range(head["first"], head["next"]):
                found = self._table.get(filter_key(partition, number))
                if found is not None:
                    value = orjson.loads(found)
                    held[value["user"]] = (number, value["after"])
            self._next[partition] = head["next"]
        self._held[partition] = held
        return held

    def hold(self, prefix: str, partition: int, after: dict[str, list[int]]) -> None:
        """The forget of `prefix` was applied on `partition`: drop what was queued before it from now on. A
        later forget of the same user names later offsets, so it replaces the earlier one."""
        held = self._of(partition)
        if prefix in held:
            self._drop(partition, held.pop(prefix)[0])
        number = self._next[partition]
        self._next[partition] = number + 1
        held[prefix] = (number, after)
        self._put(partition, prefix, number, after)
        self._dirty.add(partition)

    def queued_before(self, scope: str, partition: int, origin: tuple[str, int, int]) -> bool:
        """Whether a record of `scope` read on `partition` was queued before a forget of its user held
        there. `origin`: (logical topic, partition, offset) of the record, or of the one a forwarded copy
        was made from."""
        held = self._of(partition)
        if not held:
            return False
        found = held.get(user_prefix_of(scope))
        if found is None:
            return False
        topic, at_partition, offset = origin
        ends = found[1].get(topic, ())
        return at_partition < len(ends) and offset < ends[at_partition]

    def write(self, partition: int, expected: Expected) -> None:
        """Delete the partition's filters whose offsets its positions have passed on every input topic, and
        write its head if it changed (a record of the partition is the current event)."""
        held = self._of(partition)
        for prefix, (number, after) in list(held.items()):
            if self._passed(after, partition, expected):
                del held[prefix]
                self._unwritten.get(partition, set()).discard(number)
                self._drop(partition, number)
                self._dirty.add(partition)
        unwritten = self._unwritten.pop(partition, set())
        for prefix, (number, after) in held.items():
            if number in unwritten:
                self._put(partition, prefix, number, after)
        if partition not in self._dirty:
            return
        self._dirty.discard(partition)
        if held:
            head = {"v": 2, "first": min(n for n, _ in held.values()), "next": self._next[partition]}
            self._writes.put(self._table, forget_key(partition), orjson.dumps(head), partition)
        else:
            self._writes.delete(self._table, forget_key(partition), partition)

    def _put(self, partition: int, prefix: str, number: int, after: dict[str, list[int]]) -> None:
        value = orjson.dumps({"v": 2, "user": prefix, "after": after})
        self._writes.put(self._table, filter_key(partition, number), value, partition)

    def _drop(self, partition: int, number: int) -> None:
        self._writes.delete(self._table, filter_key(partition, number), partition)

    def _passed(self, after: dict[str, list[int]], partition: int, expected: Expected) -> bool:
        for name, ends in after.items():
            end = ends[partition] if partition < len(ends) else 0
            position = expected(self._topic(name), partition)
            if end > 0 and (position is None or position < end):
                return False
        return True

    def reset(self) -> None:
        """Partitions moved: read the filters from the table again when next needed."""
        self._held.clear()
        self._next.clear()
        self._dirty.clear()
        self._unwritten.clear()
