"""The consumer loop that drives any sink (base.Sink): poll, hand the batch to ``write``, dead-letter
what it rejected, commit the offsets it answered durable, and nothing else.

Commit rule: an offset is committed only after the sink's ``write`` (or ``flush``) returned it as
durable and the dead letters sent so far were acknowledged. A ``write`` that raises ends the loop
with nothing of its batch committed, so the sink re-reads from its last committed offset (through
``resume_offset``) after a restart. Each sink has its own consumer and group; ``run_sinks`` runs a
set of them together, and one failing ends them all.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition

from credence.config.archive import ArchiveSettings
from credence.config.kafka import KafkaSettings
from credence.errors import SinkError
from credence.kafka import client_options, start
from credence.records.dead_letter import dead_letter
from credence.sinks.base import Batch, Offsets, Record, Sink, SinkStats, Written
from credence.sinks.parquet import ParquetSink

log = logging.getLogger(__name__)

class SinkRunner:
    """Drives one sink. Use ``run()`` (until ``stop`` is set) or ``drain()`` (until caught up)."""

    def __init__(self, sink: Sink, bootstrap: str, *, dead_letter_topic: str | None = None,
                 kafka: KafkaSettings | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.sink, self.bootstrap, self.kafka = sink, bootstrap, kafka
        self.dead_letter_topic = dead_letter_topic
        self.clock = clock
        self._consumer: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None
        self._pending_dlq: list[asyncio.Future] = []

    @property
    def stats(self) -> SinkStats:
        return self.sink.stats

    async def run(self, stop: asyncio.Event) -> SinkStats:
        """Consume as a member of the group (partitions spread over sink processes) until ``stop``."""
        consumer = self._new_consumer()
        consumer.subscribe(list(self.sink.topics), listener=_Rebalance(self))
        await self._start(consumer)
        try:
            last_flush = self.clock()
            while not stop.is_set():
                await self._poll_once()
                if self.clock() - last_flush >= self.sink.flush_interval_seconds:
                    await self._settle(await self.sink.flush())
                    last_flush = self.clock()
            await self._settle(await self.sink.flush())
        finally:
            await self._stop()
        return self.stats

    async def drain(self, from_beginning: bool = False) -> SinkStats:
        """Consume every partition up to the end offset seen at start, flush, return.

        Partitions are assigned directly (no group membership), commits still go to the group.
        ``from_beginning`` replays from offset 0 regardless of the committed offsets.
        """
        consumer = self._new_consumer()
        await self._start(consumer)
        try:
            partitions = await self._partitions(consumer)
            consumer.assign(partitions)
            ends = await self._settled_ends(consumer, partitions)
            if from_beginning:
                await consumer.seek_to_beginning(*partitions)
            else:
                await self.resume(partitions, ends)
            while True:
                positions = {tp: await consumer.position(tp) for tp in partitions}
                if all(positions[tp] >= ends[tp] for tp in partitions):
                    break
                await self._poll_once()
            # Everything read is made durable and committed where the drain stopped: a drain that left it
            # held would read and write it again next time (on object storage, a paid PUT per shard).
            await self._settle(await self.sink.close(positions))
        finally:
            await self._stop()
        return self.stats

    async def _settled_ends(self, consumer: AIOKafkaConsumer, partitions, wait_s: float = 30.0) -> dict:
        """The ends a drain reads to: the last stable offsets once no transaction is open on the
        partitions (at most `wait_s`). A worker's transaction is acknowledged as committed before its
        commit markers reach the partitions; read at that moment, the last stable offset still stops
        before the transaction's records, and the drain would end without them."""
        everything = AIOKafkaConsumer(**client_options(self.bootstrap, self.kafka, enable_auto_commit=False))
        await start(everything, self.bootstrap, self.kafka)
        try:
            deadline = time.monotonic() + wait_s
            while True:
                stable, high = await consumer.end_offsets(partitions), await everything.end_offsets(partitions)
                if all(stable[tp] >= high[tp] for tp in partitions) or time.monotonic() > deadline:
                    return stable
                await asyncio.sleep(0.05)  # until the markers are written
        finally:
            await everything.stop()

    async def resume(self, partitions, ends: Offsets | None = None) -> None:
        """Start each partition where the sink says, given its committed offset; a drain leaves a partition
        committed up to its end (``ends``) where it is: there is nothing to read."""
        for tp in partitions:
            committed = await self._consumer.committed(tp)
            if committed is None:
                continue
            # Seek even to the committed offset itself: the consumer's own look-up of it is a second request,
            # and one that fails (a coordinator moving) falls back to the beginning (auto_offset_reset).
            caught_up = ends is not None and committed >= ends[tp]
            self._consumer.seek(tp, committed if caught_up else self.sink.resume_offset(tp, committed))

    def _new_consumer(self) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(**client_options(
            self.bootstrap, self.kafka,
            group_id=self.sink.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            # the worker's emits are in its batches' transactions: an aborted batch's are never archived
            isolation_level="read_committed",
            max_poll_records=self.sink.max_batch,
        ))

    async def _start(self, consumer: AIOKafkaConsumer) -> None:
        await self.sink.open()
        self._consumer = consumer
        await start(consumer, self.bootstrap, self.kafka)
        if self.dead_letter_topic:
            self._producer = AIOKafkaProducer(**client_options(self.bootstrap, self.kafka, acks="all"))
            await start(self._producer, self.bootstrap, self.kafka)

    async def _stop(self) -> None:
        for client in (self._consumer, self._producer):
            if client is not None:
                await _close(client)

    async def _partitions(self, consumer: AIOKafkaConsumer) -> list[TopicPartition]:
        # aiokafka has no public partition lookup for a topic the consumer has not subscribed to.
        metadata = await consumer._client.fetch_all_metadata()  # noqa: SLF001
        partitions = []
        for topic in self.sink.topics:
            ids = metadata.partitions_for_topic(topic)
            if not ids:
                raise SinkError(f"topic {topic!r} does not exist on {self.bootstrap}; create it first")
            partitions += [TopicPartition(topic, p) for p in sorted(ids)]
        return partitions

    async def _poll_once(self) -> None:
        consumer = self._consumer
        batches = await consumer.getmany(timeout_ms=200)
        records = [Record(m.topic, m.partition, m.offset, m.key, m.value)
                   for _, messages in sorted(batches.items()) for m in messages]
        self.stats.records += len(records)
        await self._settle(await self.sink.write(Batch(records, frozenset(consumer.assignment()), consumer.position)))

    async def _settle(self, written: Written) -> None:
        for record, reason in written.rejected:
            await self._dead_letter(record, reason)
        # Offsets are committed only once the dead letters sent so far are acknowledged too.
        pending, self._pending_dlq = self._pending_dlq, []
        if pending:
            await asyncio.gather(*pending)
        if written.durable:
            await self._commit(written.durable)

    async def _commit(self, offsets: Offsets) -> None:
        await self._consumer.commit(dict(offsets))
        self.stats.committed.update(offsets)

    async def _dead_letter(self, record: Record, reason: str) -> None:
        log.warning("%s sink: %s[%d]@%d skipped: %s", self.sink.name, record.topic, record.partition, record.offset,
                    reason)
        self.stats.dead_lettered += 1
        if self._producer is None:
            return
        envelope = dead_letter(topic=record.topic, partition=record.partition, offset=record.offset,
                               reason=reason, original=record.value, at=datetime.now(UTC))
        future = await self._producer.send(self.dead_letter_topic, envelope, key=record.key)
        self._pending_dlq.append(future)


class _Rebalance(ConsumerRebalanceListener):
    """What the sink held of a revoked partition is dropped (its new owner re-reads from the committed
    offset); an assigned partition starts where the sink says."""

    def __init__(self, runner: SinkRunner) -> None:
        self.runner = runner

    async def on_partitions_revoked(self, revoked) -> None:
        self.runner.sink.revoke(list(revoked))

    async def on_partitions_assigned(self, assigned) -> None:
        await self.runner.resume(assigned)


async def _close(client) -> None:
    """Stop a Kafka client; with the brokers away aiokafka's fetcher can end its own tasks with a
    CancelledError that is not ours, which must not keep the next client from closing."""
    try:
        await client.stop()
    except asyncio.CancelledError:
        if asyncio.current_task().cancelling():
            raise
        log.warning("sink: %s stopped with its fetch cancelled (Kafka unreachable?)", type(client).__name__)


async def run_sinks(sinks: list[Sink], bootstrap: str, stop: asyncio.Event, *, dead_letter_topic: str | None = None,
                    kafka: KafkaSettings | None = None) -> dict[str, SinkStats]:
    """Every sink of ``sinks``, each as its own group member, until ``stop``."""
    tasks = {sink.name: asyncio.create_task(SinkRunner(sink, bootstrap, dead_letter_topic=dead_letter_topic,
                                                       kafka=kafka).run(stop))
             for sink in sinks}
    # One failing sink ends them all, and the others' own errors (often the same bad credential) are
    # awaited here rather than left to surface as more tracebacks at interpreter shutdown.
    try:
        await asyncio.wait(tasks.values(), return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks.values():
            task.cancel()
        outcomes = await asyncio.gather(*tasks.values(), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome
    return {name: task.result() for name, task in tasks.items()}


async def drain(bootstrap: str, topic: str, table: str, settings: ArchiveSettings, *,
                group_id: str | None = None, dead_letter_topic: str | None = None,
                from_beginning: bool = False, kafka: KafkaSettings | None = None) -> SinkStats:
    """Sink ``topic`` into the Parquet ``table`` until every partition is caught up; for tests and the demo."""
    sink = ParquetSink(topic, table, settings, group_id=group_id)
    runner = SinkRunner(sink, bootstrap, dead_letter_topic=dead_letter_topic, kafka=kafka)
    return await runner.drain(from_beginning=from_beginning)
