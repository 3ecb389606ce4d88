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
        self.emitted: dict[int, list] = {}  # partition -> the emits committed with its transaction
        self.sent: list[int] = []
        self.fenced = fenced

    async def send(self, partition: int, records: list, before_commit=None, emits=()) -> list:
        if partition in self.fenced:
            raise FencedError(f"partition {partition} was taken over by another worker")
        self.sent.append(partition)
        if before_commit is not None:
            await before_commit
        self.transactions.append((partition, records))
        self.emitted.setdefault(partition, []).extend(emits)
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


def test_a_batch_s_emits_are_in_the_transaction_of_the_partition_whose_records_made_them() -> None:
    """Journal, archive and dead letters commit with the state of the input partition they came from (an
    aborted batch's are never read); none goes around the transactions (Topic.send raises)."""
    fence = Fence()
    writes, _ = held(fence, (0, 3))
    writes.emit(0, Topic("evidence"), b"t/u/c", b"created")
    writes.emit(3, Topic("dlq"), b"t/u/x", b"dead", headers={"traceparent": b"00-ab"})
    writes.emit(3, Topic("archive"), b"t/u/y", b"archived", to=1)
    writes.emit(2, Topic("evidence"), b"t/u/z", b"alone")  # a partition that wrote no key this batch
    asyncio.run(writes.flush())
    assert sorted(p for p, _ in fence.transactions) == [0, 2, 3]
    assert fence.emitted == {0: [("evidence", b"t/u/c", b"created", None, None)],
                             2: [("evidence", b"t/u/z", b"alone", None, None)],
                             3: [("dlq", b"t/u/x", b"dead", None, {"traceparent": b"00-ab"}),
                                 ("archive", b"t/u/y", b"archived", 1, None)]}
    asyncio.run(writes.flush())
    assert sorted(p for p, _ in fence.transactions) == [0, 2, 3]  # held once: a flush takes them all


class Channel(Topic):
    """A topic of the app's producer: its sends wait for `acked`."""

    def __init__(self, name: str, acked: asyncio.Future, sent: list) -> None:
        super().__init__(name)
        self.acked, self.sent = acked, sent

    async def send(self, key, value, partition=None, headers=None):
        self.sent.append((self.name, key, value, partition))
        return self.acked


def test_forwards_are_acknowledged_outside_the_transactions_before_any_commit() -> None:
    """A forward re-sent by a re-run is the same record (deduplicated by its origin at its scope's
    partition); in a transaction its commit marker would end the input partition past every offset the
    group commits."""
    async def run() -> None:
        fence, sent = Fence(), []
        writes, tables = held(fence, (0,))
        acked = asyncio.get_running_loop().create_future()
        writes.forward(Channel("turns", acked, sent), b"t/u/c", b"turn", 1, {"x-forwarded-from": b"turns:0:7"})
        flushing = asyncio.ensure_future(writes.flush())
        await _until(lambda: fence.sent == [0])
        assert sent == [("turns", b"t/u/c", b"turn", 1)] and fence.transactions == []
        acked.set_result(None)
        await flushing
        assert [p for p, _ in fence.transactions] == [0] and fence.emitted == {0: []}

    asyncio.run(run())


def test_a_fenced_partition_s_emits_are_never_committed() -> None:
    fence = Fence(fenced={3})
    writes, _ = held(fence, (3,))
    writes.emit(3, Topic("evidence"), b"t/u/c", b"created")
    with pytest.raises(FencedError):
        asyncio.run(writes.flush())
    assert fence.emitted == {}


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

    async def send(self, partition: int, records: list, before_commit=None, emits=()) -> list:
        if self.armed and partition == self.partition:
            self.armed = False
            held = set(self.ownership.held)
            self.ownership.revoked([TP("in.turns", p) for p in self.gone])
            if self.regain:
                self.ownership.assigned([TP("in.turns", p) for p in held])
            raise IllegalOperation("Can't send messages while not in transaction")  # aiokafka's, closed mid-way
        return await super().send(partition, records, before_commit, emits)


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
    def __init__(self, gate: asyncio.Event | None = None, stopping: list | None = None) -> None:
        self.stopped, self.gate, self.stopping = False, gate, stopping

    async def stop(self) -> None:
        if self.stopping is not None:
            self.stopping.append(self)
        if self.gate is not None:
            await self.gate.wait()
        self.stopped = True


def writers(gate: asyncio.Event | None = None, stopping: list | None = None) -> tuple[TransactionalFence, list]:
    fence, started = TransactionalFence(None, "bootstrap"), []

    async def start(partition: int) -> Writer:
        started.append(partition)
        return Writer(gate, stopping)

    fence._start = start
    return fence, started


def test_writers_of_partitions_kept_from_one_generation_to_the_next_are_kept() -> None:
    """An eager rebalance revokes every partition and assigns most of them back: within one generation
    nobody else held them, so their writers go on; only the newly assigned one is started (and fences)."""
    async def run() -> tuple[list, dict, dict]:
        fence, started = writers()
        fence.assigned({0, 1}, generation=5)
        await fence.hold({0, 1})
        first = dict(fence._producers)
        fence.assigned({0, 1, 2}, generation=6)
        await fence.hold({0, 1, 2})
        return started, first, dict(fence._producers)

    started, first, now = asyncio.run(run())
    assert started == [0, 1, 2]
    assert now[0] is first[0] and now[1] is first[1] and not first[0].stopped and not first[1].stopped


def test_a_partition_assigned_again_after_a_generation_without_this_worker_gets_a_new_writer() -> None:
    """Dropped from the group for a generation (a stall), the worker may have had its partitions taken over
    and their writers fenced meanwhile: a kept one would refuse every transaction (aiokafka: "Can't send
    messages while not in transaction") and the worker halt."""
    async def run() -> tuple[list, dict, dict]:
        fence, started = writers()
        fence.assigned({0, 1}, generation=5)
        await fence.hold({0, 1})
        first = dict(fence._producers)
        fence.assigned({0, 1}, generation=7)
        await fence.hold({0, 1})
        await fence.stop()
        return started, first, fence

    started, first, _ = asyncio.run(run())
    assert started == [0, 1, 0, 1] and first[0].stopped and first[1].stopped


def test_writers_start_when_the_assignment_arrives_and_those_of_partitions_gone_close_together() -> None:
    """Starting (InitProducerId, one round trip each) happens outside Faust's bounded restore step, which
    only waits for it; the writers of partitions gone close at once, none waiting for another."""
    async def run() -> None:
        gate, stopping = asyncio.Event(), []
        fence, started = writers(gate, stopping)
        fence.assigned({0, 1, 2}, generation=1)
        for _ in range(10):
            await asyncio.sleep(0)
        assert started == [0, 1, 2]  # before any hold
        await fence.hold({0, 1, 2})
        fence.assigned({3}, generation=2)
        for _ in range(10):
            await asyncio.sleep(0)
        assert len(stopping) == 3 and not any(w.stopped for w in stopping)  # all three closing at once
        await fence.hold({3})
        assert sorted(fence._producers) == [3] and started == [0, 1, 2, 3]
        gate.set()
        await fence.stop()
        assert all(w.stopped for w in stopping) and fence._producers == {}

    asyncio.run(run())


def test_without_an_assignment_hold_starts_the_writers_itself() -> None:
    async def run() -> list:
        fence, started = writers()
        await fence.hold({0, 1})
        await fence.hold({1})
        return started

    assert asyncio.run(run()) == [0, 1]


def test_a_transaction_s_longest_wait_fits_in_its_timeout_and_the_broker_s_cap(monkeypatch) -> None:
    """The coordinator aborts (and so fences) a transaction open longer than transaction.timeout.ms; inside
    one a batch waits for its records' delivery (the producer's request_timeout_ms) and then the commit. A
    60 s timeout (aiokafka's default) against a 20 min delivery wait made every outage over a minute a
    halt. The timeout must also stay within Kafka's default transaction.max.timeout.ms, or no producer
    starts; the embedded broker keeps that default."""
    from credence.config import load_settings
    from credence.streams.ops.broker import EmbeddedBroker
    from credence.streams.state import fence as fencing

    built = []

    class Producer:
        def __init__(self, **options) -> None:
            built.append(options)

    async def start(client, bootstrap, kafka) -> None:
        pass

    monkeypatch.setattr(fencing, "AIOKafkaProducer", Producer)
    monkeypatch.setattr(fencing, "start", start)
    for timeout_s in (None, 1800.0):
        settings = load_settings(**({"state": {"transaction_timeout_s": timeout_s}} if timeout_s else {}))
        asyncio.run(fencing.Fence(settings, "localhost:9092")._start(0))
        options = built[-1]
        txn_ms = options.get("transaction_timeout_ms", 60_000)  # aiokafka's default
        assert options["request_timeout_ms"] + 60_000 <= txn_ms  # a minute left for the commit
        assert txn_ms == int(settings.state.transaction_timeout_s * 1000)
        assert options["max_request_size"] >= settings.kafka.max_record_bytes
    assert int(load_settings().state.transaction_timeout_s * 1000) <= 900_000  # Kafka's default cap
    broker = EmbeddedBroker.__new__(EmbeddedBroker)
    broker.port, broker.controller_port, broker.secure = 9092, 9093, None
    cap = int(broker.properties().get("transaction.max.timeout.ms", 900_000))
    assert cap >= load_settings().state.transaction_timeout_s * 1000


def test_a_writer_still_starting_when_a_generation_was_missed_is_started_anew() -> None:
    async def run() -> list:
        gate = asyncio.Event()
        fence, started = TransactionalFence(None, "bootstrap"), []

        async def start(partition: int) -> Writer:
            started.append(partition)
            await gate.wait()
            return Writer()

        fence._start = start
        fence.assigned({0}, generation=3)
        await asyncio.sleep(0)
        fence.assigned({0}, generation=5)  # generation 4 went by without this worker
        await asyncio.sleep(0)
        gate.set()
        await fence.hold({0})
        await fence.stop()
        return started

    assert asyncio.run(run()) == [0, 0]
