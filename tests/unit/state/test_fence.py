"""With a fence, a batch's changelog records of one partition (its redo record, then its writes) are one
transaction on that partition's writer, the stores learn their offsets only once it is committed, and a
fenced writer's refusal reaches the caller (the agent halts on it). The broker side (a zombie refused
after another worker restored) is tests/faults/test_zombie_owner.py."""

from __future__ import annotations

import asyncio

import pytest

from credence.errors import FencedError
from credence.streams.runtime import redo
from credence.streams.runtime.writes import TableWrites
from tests.unit.state.test_redo import FIRST, NAMES, Meta


class Topic:
    def __init__(self, name: str) -> None:
        self.name = name

    def prepare_key(self, key, serializer):
        return key.encode(), None

    def get_topic_name(self) -> str:
        return self.name

    async def send(self, key, value, partition):
        raise AssertionError("a fenced worker's changelog record went around its transaction")


class Store(dict):
    persisted: dict

    def set_persisted_offset(self, tp, offset) -> None:
        self.persisted = getattr(self, "persisted", {}) | {tp: offset}


class Table:
    key_serializer = value_serializer = "raw"

    def __init__(self, name: str) -> None:
        self.data = Store()
        self.changelog_topic = Topic(name)


class Fence:
    """Records each transaction; `fenced` partitions refuse theirs."""

    def __init__(self, fenced: set[int] = frozenset()) -> None:
        self.transactions: list[tuple[int, list]] = []
        self.fenced = fenced

    async def send(self, partition: int, records: list) -> list:
        if partition in self.fenced:
            raise FencedError(f"partition {partition} was taken over by another worker")
        self.transactions.append((partition, records))
        return [Meta((topic, partition), i) for i, (topic, _, _) in enumerate(records)]


def flush(fence: Fence, partitions: tuple[int, ...]) -> dict[str, Table]:
    tables = {n: Table(n) for n in NAMES}
    writes = TableWrites(tables, fence=fence)
    for p in partitions:
        for name, key, value in FIRST:
            writes.put(tables[name], f"{key}@{p}", value, p)
    asyncio.run(writes.flush())
    return tables


def test_each_partition_s_redo_record_and_writes_are_one_transaction() -> None:
    fence = Fence()
    tables = flush(fence, (0, 3))
    assert sorted(p for p, _ in fence.transactions) == [0, 3]
    for p, records in fence.transactions:
        keys = [key.decode() for _, key, _ in records]
        assert redo.is_redo_key(keys[0]) and not any(redo.is_redo_key(k) for k in keys[1:])
        assert keys[1:] == [f"{key}@{p}" for _, key, _ in FIRST]
    assert tables["scopes"].data.persisted  # offsets learnt once committed


def test_a_fenced_partition_fails_the_flush() -> None:
    fence = Fence(fenced={3})
    with pytest.raises(FencedError):
        flush(fence, (3,))
    assert fence.transactions == []
