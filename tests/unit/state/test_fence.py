"""With a fence, a batch's changelog records of one partition (its redo record, then its writes) are one
transaction on that partition's writer, the stores learn their offsets only once it is committed, and a
fenced writer's refusal reaches the caller (the agent halts on it). The broker side (a zombie refused
after another worker restored) is tests/faults/test_zombie_owner.py."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from aiokafka.errors import IllegalOperation
from aiokafka.structs import TopicPartition as TP

from credence.errors import FencedError
from credence.streams.runtime import app as app_module
from credence.streams.state import redo
from credence.streams.state.fence import Fence as TransactionalFence
from credence.streams.state.ownership import Ownership
from credence.streams.state.writes import TableWrites
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
    """Records each transaction: `sent` once its records are, `transactions` once committed (after
    `before_commit`); `fenced` partitions refuse theirs."""

    def __init__(self, fenced: set[int] = frozenset()) -> None:
        self.transactions: list[tuple[int, list]] = []
        self.sent: list[int] = []
        self.fenced = fenced

    async def send(self, partition: int, records: list, before_commit=None) -> list:
        if partition in self.fenced:
            raise FencedError(f"partition {partition} was taken over by another worker")
        self.sent.append(partition)
        if before_commit is not None:
            await before_commit
        self.transactions.append((partition, records))
        return [Meta((topic, partition), i) for i, (topic, _, _) in enumerate(records)]


def held(fence: Fence, partitions: tuple[int, ...]) -> tuple[TableWrites, dict[str, Table]]:
    tables = {n: Table(n) for n in NAMES}
    writes = TableWrites(tables, fence=fence)
    for p in partitions:
        for name, key, value in FIRST:
            writes.put(tables[name], f"{key}@{p}", value, p)
    return writes, tables


def flush(fence: Fence, partitions: tuple[int, ...]) -> dict[str, Table]:
    writes, tables = held(fence, partitions)
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


async def _until(condition) -> None:
    """Let the flush run until `condition` holds (nothing here waits on a clock)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the flush never got there")


def test_the_transactions_are_sent_while_the_emits_are_in_flight_and_committed_after() -> None:
    """The round trips a transaction needs before its commit overlap the emits' acknowledgements, and
    still nothing of the batch's state is committed or stored before every emit is acknowledged."""
    async def run() -> None:
        fence = Fence()
        writes, tables = held(fence, (0, 3))
        emitted = asyncio.get_running_loop().create_future()
        flushing = asyncio.ensure_future(writes.flush(emitted))
        await _until(lambda: sorted(fence.sent) == [0, 3])
        assert fence.transactions == [] and not any(t.data for t in tables.values())
        emitted.set_result(None)
        assert await flushing == 2 * len(FIRST)
        assert sorted(p for p, _ in fence.transactions) == [0, 3]
        assert tables["scopes"].data and tables["scopes"].data.persisted

    asyncio.run(run())


def test_an_emit_that_fails_leaves_every_transaction_uncommitted() -> None:
    async def run() -> None:
        fence = Fence()
        writes, tables = held(fence, (0, 3))
        emitted = asyncio.get_running_loop().create_future()
        flushing = asyncio.ensure_future(writes.flush(emitted))
        await _until(lambda: sorted(fence.sent) == [0, 3])
        emitted.set_exception(ConnectionError("the journal's leader is gone"))
        with pytest.raises(ConnectionError):
            await flushing
        assert fence.transactions == [] and not any(t.data for t in tables.values())

    asyncio.run(run())


def test_a_transaction_begun_while_the_last_one_s_markers_are_written_is_retried_within_a_few_ms() -> None:
    """Until the coordinator has written the previous transaction's markers it answers the next
    AddPartitionsToTxn with CONCURRENT_TRANSACTIONS; aiokafka asks again after 20 ms (so does Java's
    client), a stall on every batch that follows its predecessor closely. The fence's writers ask again
    after CONCURRENT_RETRY_S."""
    from types import SimpleNamespace

    from aiokafka.errors import ConcurrentTransactions
    from aiokafka.producer.sender import AddPartitionsToTxnHandler
    from aiokafka.structs import TopicPartition

    from credence.streams.state import fence as fencing

    fencing.Fence(SimpleNamespace(), "localhost:9092")
    sender = SimpleNamespace(_retry_backoff=0.1, _txn_manager=SimpleNamespace(txn_partitions=set()))
    handler = AddPartitionsToTxnHandler(sender, [TopicPartition("changelog", 0)])
    answer = SimpleNamespace(errors=[("changelog", [(0, ConcurrentTransactions.errno)])])
    assert handler.handle_response(answer) == fencing.CONCURRENT_RETRY_S <= 0.005


class Moving(Fence):
    """A new rebalance during the redo replay after a restore: while `partition`'s transaction is in
    flight, the worker loses `gone` (`regain`: and gets them back) and the next restore's `Fence.hold`
    closes their writers under it."""

    def __init__(self, ownership, partition: int, gone: set[int], regain: bool = False) -> None:
        super().__init__()
        self.ownership, self.partition, self.gone, self.regain = ownership, partition, gone, regain
        self.armed = False  # from the replay on

    async def send(self, partition: int, records: list, before_commit=None) -> list:
        if self.armed and partition == self.partition:
            self.armed = False
            held = set(self.ownership.held)
            self.ownership.revoked([TP("in.turns", p) for p in self.gone])
            if self.regain:
                self.ownership.assigned([TP("in.turns", p) for p in held])
            raise IllegalOperation("Can't send messages while not in transaction")  # aiokafka's, closed mid-way
        return await super().send(partition, records, before_commit)


class Halted(Exception):
    pass


class Scopes:
    def recovered(self) -> None:
        pass


def recover(fence: Moving, ownership: Ownership, halted: list[str], monkeypatch) -> None:
    """Flush one batch on each held partition, then run the tables' recovery callback (the redo replay)."""
    tables = {n: Table(n) for n in NAMES}
    writes = TableWrites(tables, fence=fence)
    for p in sorted(ownership.held):
        for name, key, value in FIRST:
            writes.put(tables[name], f"{key}@{p}", value, p)
    asyncio.run(writes.flush())
    fence.transactions.clear()
    fence.armed = True

    def halt(reason: str) -> None:  # the real one ends the process
        halted.append(reason)
        raise Halted(reason)

    monkeypatch.setattr(app_module, "halt", halt)
    with contextlib.suppress(Halted):
        asyncio.run(app_module._on_recovered(writes, Scopes(), ownership, lambda *_: None)())


def test_a_partition_moved_away_during_the_redo_replay_is_left_to_its_next_owner(monkeypatch) -> None:
    ownership = Ownership(4, "in.turns")
    ownership.assigned([TP("in.turns", p) for p in (0, 1, 3)])
    fence, halted = Moving(ownership, partition=0, gone={0, 1}), []
    recover(fence, ownership, halted, monkeypatch)
    assert halted == []  # its next owner's restore replays it; nothing of it is this worker's to write
    assert [p for p, _ in fence.transactions] == [3]  # 1 moved too: skipped; 3 still held: replayed


def test_a_replay_that_fails_on_a_partition_still_held_halts(monkeypatch) -> None:
    ownership = Ownership(4, "in.turns")
    ownership.assigned([TP("in.turns", p) for p in (0, 3)])
    fence, halted = Moving(ownership, partition=0, gone={3}), []
    recover(fence, ownership, halted, monkeypatch)
    assert len(halted) == 1 and "IllegalOperation" in halted[0]


def test_a_partition_lost_and_regained_during_the_redo_replay_is_left_to_the_new_restore(monkeypatch) -> None:
    ownership = Ownership(4, "in.turns")
    ownership.assigned([TP("in.turns", p) for p in (0, 3)])
    fence, halted = Moving(ownership, partition=0, gone={0}, regain=True), []
    recover(fence, ownership, halted, monkeypatch)
    assert halted == []  # the new restore replays it: what this replay read of it may be older than that
    assert [p for p, _ in fence.transactions] == [3]


class Writer:
    stopped = False

    async def stop(self) -> None:
        self.stopped = True


def test_the_writer_of_a_partition_that_moved_is_started_anew_by_the_next_hold() -> None:
    """Another worker that held the partition meanwhile fenced the writer: a kept one refuses every
    transaction (aiokafka: "Can't send messages while not in transaction"), and the worker halts."""
    fence, started = TransactionalFence(None, "bootstrap"), []

    async def start(partition: int) -> Writer:
        started.append(partition)
        return Writer()

    fence._start = start

    async def run() -> dict:
        await fence.hold({0, 1})
        first = dict(fence._producers)
        fence.moved({1})  # revoked, then assigned back
        await fence.hold({0, 1})
        return first

    first = asyncio.run(run())
    assert started == [0, 1, 1]
    assert first[1].stopped and fence._producers[1] is not first[1]
    assert not first[0].stopped and fence._producers[0] is first[0]
