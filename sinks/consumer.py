"""The sink: consume credence.archive or credence.evidence and publish Parquet shards.

Batch boundaries (the rule that makes replays and crash restarts rewrite the same files):
- Offsets of a topic partition are cut into *spans* of S = max_rows_per_shard offsets:
  span k holds offsets [k*S, (k+1)*S - 1]. A span depends on offsets only, never on timing.
- A span's rows are grouped by (tenant, kind, date) and cut greedily in offset order into shards
  bounded by rows and bytes; a shard is named ``p{partition}-{first row offset}-{span last offset}``.
- When the consumer's position passes a span's last offset the span is *sealed*: its shards are
  published (temp + rename) and only then the span's end is committed. The committed offset is
  therefore always a span start.
- An open span is published early after flush_interval_seconds (and at the end of a drain) so rows
  become visible, but its offset is not committed. Because greedy cutting is prefix-stable, the
  later, fuller write of the same span produces the same names and atomically replaces them.
- After a crash the sink resumes at the committed span start, re-reads the span and rewrites the
  same names; a replay from offset 0 does the same for every span. So no row is ever in two files
  and the file set after a replay equals the one before it.
De-duplication ("first offset wins", per topic partition). The worker delivers both topics at least
once, so one identity (schema.IDENTITY: archive entry_id, evidence event_id; a scope, hence an
entry, lives on one partition) can sit at several offsets. When a span is written, a row is dropped
if its identity appears at a lower offset of the same partition: earlier in the span, or in a shard
of an earlier span. The identities of earlier spans are a per-partition set in the sink, filled
once from the identity column of the partition's shards whose range ends before the span, then
kept up to date as spans are sealed; a replay from 0 starts from an empty set and refills it span by
span, so every decision is the one an incremental run made. A row's decision depends only on lower
offsets, so a later, fuller write of an open span repeats the decisions of the earlier one.
Dropped rows are left out *after* the shards are planned (like forgotten users' rows), so shard
names never depend on a decision. That matters for forget: forget_user removes a user's first
occurrences from the shards, so a set rebuilt from the files no longer holds them and a later
duplicate is then not recognised; but it is the same user's row (one entry, one scope), which the
forgotten filter drops anyway, and the names are unchanged, so the file set is the same either way.
Memory: 16 bytes per identity of every partition the sink currently holds (a 128-bit digest,
dedup.IdentitySet; dropped when a partition is revoked), i.e. 16 MB per million evidence events,
plus the identities of the open spans as strings.
Dead letters are sent when a record is read, so a re-read after a restart may send one twice.
Limit: an open span's first offset must still be in the topic when the sink restarts, and a quiet
partition can keep a span open for long; give the archive and evidence topics unlimited retention
(retention.ms=-1) or one longer than a span takes to fill plus the longest sink outage.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition

from credence.config.archive import ArchiveSettings
from credence.config.kafka import KafkaSettings
from credence.deadletter import dead_letter
from credence.errors import ArchiveError
from credence.kafka import client_options, start
from credence.sinks.forget import forgotten_users
from credence.sinks.schema import ARCHIVE, EVIDENCE, IDENTITY, TABLES, Row, ShardKey, to_row
from credence.sinks.dedup import IdentitySet, decide_duplicates, load_identities
from credence.sinks.shards import Archive, open_archive, remove_stale_temp_files, write_shards

log = logging.getLogger(__name__)


@dataclass
class SinkStats:
    records: int = 0
    rows: int = 0  # valid rows read (a re-read after a restart counts again)
    dead_lettered: int = 0
    shards_published: int = 0
    spans_sealed: int = 0
    duplicates_dropped: int = 0  # rows left out as duplicates (a re-read after a restart counts again)
    committed: dict[int, int] = field(default_factory=dict)


@dataclass
class _Span:
    start: int
    last: int
    rows: list[Row] = field(default_factory=list)
    dirty: set[ShardKey] = field(default_factory=set)
    dropped: set[int] = field(default_factory=set)  # duplicate offsets already counted and logged


@dataclass
class _Seen:
    """Identities of the rows of one partition at offsets below ``upto`` (a span start)."""

    upto: int
    ids: IdentitySet


def span_of(offset: int, span_size: int) -> tuple[int, int]:
    """The [start, last] offsets of the span holding ``offset``."""
    start = offset - offset % span_size
    return start, start + span_size - 1


class ArchiveSink:
    """One table's sink. Use ``run()`` (until ``stop`` is set) or ``drain()`` (until caught up)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        table: str,
        settings: ArchiveSettings,
        *,
        group_id: str | None = None,
        dead_letter_topic: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        kafka: KafkaSettings | None = None,
    ) -> None:
        if table not in TABLES:
            raise ArchiveError(f"unknown archive table {table!r}; use one of {TABLES}")
        self.bootstrap, self.topic, self.table, self.settings = bootstrap, topic, table, settings
        self.group_id = group_id or f"{settings.group_id}.{table}"
        self.dead_letter_topic = dead_letter_topic
        self.clock = clock
        self.kafka = kafka
        self.archive: Archive = open_archive(settings.root, settings)
        self.stats = SinkStats()
        self._spans: dict[int, _Span] = {}
        self._seen: dict[int, _Seen] = {}
        self._to_commit: dict[int, int] = {}
        self._consumer: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None
        self._pending_dlq: list[asyncio.Future] = []

    async def run(self, stop: asyncio.Event) -> SinkStats:
        """Consume as a member of the group (partitions spread over sink processes) until ``stop``."""
        consumer = self._new_consumer()
        consumer.subscribe([self.topic], listener=_Rebalance(self))
        await self._start(consumer)
        try:
            last_flush = self.clock()
            while not stop.is_set():
                await self._poll_once()
                if self.clock() - last_flush >= self.settings.flush_interval_seconds:
                    await self._publish_open_spans()
                    last_flush = self.clock()
            await self._publish_open_spans()
        finally:
            await self._stop()
        return self.stats

    async def drain(self, from_beginning: bool = False) -> SinkStats:
        """Consume every partition up to the end offset seen at start, publish everything, return.

        Partitions are assigned directly (no group membership), commits still go to the group.
        ``from_beginning`` replays from offset 0 regardless of the committed offsets.
        """
        consumer = self._new_consumer()
        await self._start(consumer)
        try:
            partitions = await self._partitions(consumer)
            consumer.assign(partitions)
            if from_beginning:
                await consumer.seek_to_beginning(*partitions)
            else:
                await self.align_to_spans(partitions)
            ends = await consumer.end_offsets(partitions)
            while True:
                positions = {tp: await consumer.position(tp) for tp in partitions}
                if all(positions[tp] >= ends[tp] for tp in partitions):
                    break
                await self._poll_once()
            await self._publish_open_spans()
        finally:
            await self._stop()
        return self.stats

    async def align_to_spans(self, partitions) -> None:
        """Start each partition at the span holding its committed offset. Our own commits are span
        starts already; this covers offsets moved by hand (kafka-consumer-groups --reset-offsets)."""
        for tp in partitions:
            committed = await self._consumer.committed(tp)
            if committed is not None and committed % self.settings.max_rows_per_shard:
                self._consumer.seek(tp, committed - committed % self.settings.max_rows_per_shard)

    def _new_consumer(self) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(**client_options(
            self.bootstrap, self.kafka,
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=min(self.settings.max_rows_per_shard, 5000),
        ))

    async def _start(self, consumer: AIOKafkaConsumer) -> None:
        await asyncio.to_thread(remove_stale_temp_files, self.archive)
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
        ids = metadata.partitions_for_topic(self.topic)
        if not ids:
            raise ArchiveError(f"topic {self.topic!r} does not exist on {self.bootstrap}; create it first")
        return [TopicPartition(self.topic, p) for p in sorted(ids)]

    async def _poll_once(self) -> None:
        consumer = self._consumer
        batches = await consumer.getmany(timeout_ms=200)
        for tp, messages in sorted(batches.items()):
            for message in messages:
                await self._add(tp.partition, message)
        for tp in consumer.assignment():
            span = self._spans.get(tp.partition)
            if span is not None and await consumer.position(tp) > span.last:
                await self._seal(tp.partition)
        await self._commit()

    async def _add(self, partition: int, message) -> None:
        start, last = span_of(message.offset, self.settings.max_rows_per_shard)
        span = self._spans.get(partition)
        if span is not None and span.start != start:
            await self._seal(partition)
            span = None
        if span is None:
            span = self._spans[partition] = _Span(start, last)
        self.stats.records += 1
        try:
            try:
                record = json.loads(message.value)
            except (TypeError, ValueError) as exc:
                raise ArchiveError(f"value is not JSON: {exc}") from exc
            row = to_row(self.table, record, partition, message.offset)
        except ArchiveError as exc:
            await self._dead_letter(message, str(exc))
            return
        span.rows.append(row)
        span.dirty.add(row.key)
        self.stats.rows += 1

    async def _seal(self, partition: int) -> None:
        span = self._spans.pop(partition)
        await self._publish(partition, span)
        await self._flush_dead_letters()
        self.stats.spans_sealed += 1
        seen = await self._seen_before(partition, span.start)
        kept, _ = decide_duplicates(span.rows, IDENTITY[self.table], seen.ids)
        seen.ids.update(sorted(kept))
        seen.upto = span.last + 1
        self._to_commit[partition] = span.last + 1

    async def _seen_before(self, partition: int, start: int) -> _Seen:
        """The identities of ``partition`` below offset ``start`` (a span start): the cached set,
        topped up from the shards of spans this sink did not seal itself (a gap, or a partition
        another group member wrote meanwhile), or rebuilt when the sink went back (replay, reset)."""
        seen = self._seen.get(partition)
        if seen is not None and seen.upto == start:
            return seen
        if seen is None or seen.upto > start:
            ids = await asyncio.to_thread(load_identities, self.archive, self.table, partition, start)
            seen = self._seen[partition] = _Seen(start, ids)
            log.info("archive sink: %s[%d] de-duplication set loaded below offset %d: %d identities, %d bytes",
                     self.topic, partition, start, len(ids), ids.nbytes)
        else:
            await asyncio.to_thread(load_identities, self.archive, self.table, partition, start, seen.upto, seen.ids)
            seen.upto = start
        return seen

    async def _publish_open_spans(self) -> None:
        for partition, span in sorted(self._spans.items()):
            await self._publish(partition, span)
        await self._flush_dead_letters()
        await self._commit()

    async def _publish(self, partition: int, span: _Span) -> None:
        if not span.dirty:
            return
        # Decided over the whole span: a duplicate can fall in another shard key than its first
        # occurrence (a resync event at another time); rows of clean keys keep their decisions.
        seen = await self._seen_before(partition, span.start)
        _, duplicates = decide_duplicates(span.rows, IDENTITY[self.table], seen.ids)
        rows = [r for r in span.rows if r.key in span.dirty]
        forgotten = await asyncio.to_thread(forgotten_users, self.archive)
        paths = await asyncio.to_thread(
            write_shards, self.archive, self.table, partition, rows, self.settings, span.last, forgotten,
            frozenset(duplicates),
        )
        self.stats.shards_published += len(paths)
        span.dirty.clear()
        new = duplicates - span.dropped
        if new:
            span.dropped |= new
            self.stats.duplicates_dropped += len(new)
            log.info("archive sink: %s[%d] span %d-%d: dropped %d duplicate row(s), first offset wins (offsets %s)",
                     self.topic, partition, span.start, span.last, len(new), _preview(sorted(new)))

    async def _commit(self) -> None:
        if not self._to_commit:
            return
        offsets = {TopicPartition(self.topic, p): o for p, o in self._to_commit.items()}
        await self._consumer.commit(offsets)
        self.stats.committed.update(self._to_commit)
        self._to_commit.clear()

    async def _dead_letter(self, message, reason: str) -> None:
        log.warning("archive sink: %s[%d]@%d skipped: %s", message.topic, message.partition, message.offset, reason)
        self.stats.dead_lettered += 1
        if self._producer is None:
            return
        envelope = dead_letter(topic=message.topic, partition=message.partition, offset=message.offset,
                               reason=reason, original=message.value, at=datetime.now(timezone.utc))
        future = await self._producer.send(self.dead_letter_topic, envelope, key=message.key)
        self._pending_dlq.append(future)

    async def _flush_dead_letters(self) -> None:
        # A span's offsets are committed only once its dead letters are acknowledged too.
        pending, self._pending_dlq = self._pending_dlq, []
        if pending:
            await asyncio.gather(*pending)


def _preview(offsets: list[int], limit: int = 10) -> str:
    shown = ", ".join(map(str, offsets[:limit]))
    return shown + (f", … {len(offsets) - limit} more" if len(offsets) > limit else "")


class _Rebalance(ConsumerRebalanceListener):
    """A revoked partition's open span is dropped: its committed offset is the span start, so the
    new owner re-reads the span and rewrites the same shard names."""

    def __init__(self, sink: ArchiveSink) -> None:
        self.sink = sink

    async def on_partitions_revoked(self, revoked) -> None:
        for tp in revoked:
            self.sink._spans.pop(tp.partition, None)  # noqa: SLF001 - the listener is part of the sink
            self.sink._seen.pop(tp.partition, None)  # noqa: SLF001 - memory only for owned partitions

    async def on_partitions_assigned(self, assigned) -> None:
        await self.sink.align_to_spans(assigned)


async def _close(client) -> None:
    """Stop a Kafka client; with the brokers away aiokafka's fetcher can end its own tasks with a
    CancelledError that is not ours, which must not keep the next client from closing."""
    try:
        await client.stop()
    except asyncio.CancelledError:
        if asyncio.current_task().cancelling():
            raise
        log.warning("archive sink: %s stopped with its fetch cancelled (Kafka unreachable?)", type(client).__name__)


async def drain(bootstrap: str, topic: str, table: str, settings: ArchiveSettings, *,
                group_id: str | None = None, dead_letter_topic: str | None = None,
                from_beginning: bool = False, kafka: KafkaSettings | None = None) -> SinkStats:
    """Sink ``topic`` into ``table`` until every partition is caught up; for tests and the demo."""
    sink = ArchiveSink(bootstrap, topic, table, settings, group_id=group_id, dead_letter_topic=dead_letter_topic,
                       kafka=kafka)
    return await sink.drain(from_beginning=from_beginning)


async def run_sink(bootstrap: str, topic: str, table: str, settings: ArchiveSettings, stop: asyncio.Event, *,
                   group_id: str | None = None, dead_letter_topic: str | None = None,
                   kafka: KafkaSettings | None = None) -> SinkStats:
    """Sink ``topic`` into ``table`` as a group member until ``stop`` is set."""
    sink = ArchiveSink(bootstrap, topic, table, settings, group_id=group_id, dead_letter_topic=dead_letter_topic,
                       kafka=kafka)
    return await sink.run(stop)


async def run_sinks(bootstrap: str, archive_topic: str, evidence_topic: str, settings: ArchiveSettings,
                    stop: asyncio.Event, *, dead_letter_topic: str | None = None,
                    kafka: KafkaSettings | None = None) -> dict[str, SinkStats]:
    """Both sinks (credence.archive -> archive, credence.evidence -> evidence) until ``stop``."""
    tasks = {table: asyncio.create_task(run_sink(bootstrap, topic, table, settings, stop,
                                                 dead_letter_topic=dead_letter_topic, kafka=kafka))
             for table, topic in ((ARCHIVE, archive_topic), (EVIDENCE, evidence_topic))}
    # One failing sink ends both, and the other's own error (often the same bad credential) is
    # awaited here rather than left to surface as a second traceback at interpreter shutdown.
    try:
        await asyncio.wait(tasks.values(), return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks.values():
            task.cancel()
        outcomes = await asyncio.gather(*tasks.values(), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome
    return {table: task.result() for table, task in tasks.items()}
