"""The Parquet sink (a base.Sink): credence.archive or credence.evidence as Parquet shards, on a local
folder or object storage (shards.open_archive: the same sink, another pyarrow filesystem).

A topic partition's offsets are cut into spans of max_rows_per_shard offsets; a span is published (and
its end committed) only once the consumer has passed it, so a replay or a crash restart rewrites the same
shard names. Rows are de-duplicated per partition ("first offset wins") and rows of forgotten users or
erased entries are left out, both only after the shards are planned.

Batch boundaries, de-duplication, its memory and the retention it needs: docs/design/archive.md.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from aiokafka import TopicPartition

from credence.config.archive import ArchiveSettings
from credence.errors import ArchiveError, RecordError
from credence.records.envelope import loads
from credence.sinks.base import Batch, Record, SinkStats, Written
from credence.sinks.erase import archive_markers
from credence.sinks.identities import IdentitySet, decide_duplicates, load_identities
from credence.sinks.schema import ARCHIVE_TABLES, Row, ShardKey, to_row
from credence.sinks.shards import Archive, open_archive, remove_stale_temp_files, write_shards

log = logging.getLogger(__name__)


@dataclass
class ParquetStats(SinkStats):
    rows: int = 0  # valid rows read (a re-read after a restart counts again)
    shards_published: int = 0
    spans_sealed: int = 0
    duplicates_dropped: int = 0  # rows left out as duplicates (a re-read after a restart counts again)


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


class ParquetSink:
    """One topic into one archive table (``table``: archive or evidence) under ``settings.root``."""

    def __init__(self, topic: str, table: str, settings: ArchiveSettings, *, group_id: str | None = None,
                 name: str | None = None) -> None:
        if table not in ARCHIVE_TABLES:
            raise ArchiveError(f"unknown archive table {table!r}; use one of {ARCHIVE_TABLES}")
        self.topic, self.table, self.settings = topic, table, settings
        self.name = name or table
        self.topics = (topic,)
        self.group_id = group_id or f"{settings.group_id}.{table}"
        self.flush_interval_seconds = settings.flush_interval_seconds
        self.max_batch = min(settings.max_rows_per_shard, 5000)
        self.archive: Archive = open_archive(settings.root, settings)
        self.stats = ParquetStats()
        self._spans: dict[int, _Span] = {}
        self._seen: dict[int, _Seen] = {}
        self._durable: dict[int, int] = {}
        self._rejected: list[tuple[Record, str]] = []
        self._markers: dict = {}  # forget markers read, by path and version (forget.forgotten_markers)
        self._clean_below: dict[int, int] = {}  # per partition: rows below this offset are already in shards

    def __repr__(self) -> str:
        return f"{self.topic} -> {self.settings.root}/{self.table}"

    async def open(self) -> None:
        # A new run resumes every partition at its committed span start: spans held from an earlier
        # run of this object would take the re-read rows twice.
        self._spans.clear()
        self._durable, self._rejected, self._clean_below = {}, [], {}
        await asyncio.to_thread(remove_stale_temp_files, self.archive)

    def resume_offset(self, tp: TopicPartition, committed: int) -> int:
        """The start of the span holding ``committed``: a span start when a span was sealed, inside the
        span after a drain's ``close`` (whose rows below it are in shards already: not written again),
        or anywhere when moved by hand (kafka-consumer-groups --reset-offsets)."""
        start = committed - committed % self.settings.max_rows_per_shard
        if tp.topic == self.topic and committed > start:
            self._clean_below[tp.partition] = committed
        return start

    async def write(self, batch: Batch) -> Written:
        for record in batch.records:
            await self._add(record)
        for partition, span in sorted(self._spans.items()):
            tp = TopicPartition(self.topic, partition)
            if tp in batch.assigned and await batch.position(tp) > span.last:
                await self._seal(partition)
        return self._written()

    async def flush(self) -> Written:
        for partition, span in sorted(self._spans.items()):
            await self._publish(partition, span)
        return self._written()

    async def close(self, positions: dict[TopicPartition, int]) -> Written:
        """Publish every open span and answer the consumer's position in it as durable (module docstring)."""
        for partition, span in sorted(self._spans.items()):
            await self._publish(partition, span)
            tp = TopicPartition(self.topic, partition)
            if tp in positions:
                self._durable[partition] = positions[tp]
                self._clean_below[partition] = positions[tp]
        return self._written()

    def revoke(self, partitions: list[TopicPartition]) -> None:
        """A revoked partition's open span is dropped: its committed offset is the span start, so
        the new owner re-reads the span and rewrites the same shard names."""
        for tp in partitions:
            if tp.topic == self.topic:
                self._spans.pop(tp.partition, None)
                self._seen.pop(tp.partition, None)  # memory only for owned partitions
                self._clean_below.pop(tp.partition, None)

    def _written(self) -> Written:
        durable = {TopicPartition(self.topic, p): o for p, o in self._durable.items()}
        written = Written(durable, self._rejected)
        self._durable, self._rejected = {}, []
        return written

    async def _add(self, record: Record) -> None:
        partition = record.partition
        start, last = span_of(record.offset, self.settings.max_rows_per_shard)
        span = self._spans.get(partition)
        if span is not None and span.start != start:
            await self._seal(partition)
            span = None
        if span is None:
            span = self._spans[partition] = _Span(start, last)
        try:
            row = to_row(self.table, loads(record.value), partition, record.offset)
        except (ArchiveError, RecordError) as exc:
            if record.offset >= self._clean_below.get(partition, 0):  # else dead-lettered before that commit
                self._rejected.append((record, str(exc)))
            return
        span.rows.append(row)
        if record.offset >= self._clean_below.get(partition, 0):
            span.dirty.add(row.key)
        self.stats.rows += 1

    async def _seal(self, partition: int) -> None:
        span = self._spans.pop(partition)
        await self._publish(partition, span)
        self.stats.spans_sealed += 1
        seen = await self._seen_before(partition, span.start)
        kept, _ = decide_duplicates(span.rows, self.table, seen.ids)
        seen.ids.update(sorted(kept))
        seen.upto = span.last + 1
        self._durable[partition] = span.last + 1

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

    async def _publish(self, partition: int, span: _Span) -> None:
        if not span.dirty:
            return
        # Decided over the whole span: a duplicate can fall in another shard key than its first
        # occurrence (a resync event at another time); rows of clean keys keep their decisions.
        seen = await self._seen_before(partition, span.start)
        _, duplicates = decide_duplicates(span.rows, self.table, seen.ids)
        rows = [r for r in span.rows if r.key in span.dirty]
        forgotten = await asyncio.to_thread(archive_markers, self.archive, self._markers)  # forgotten, erased
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


def _preview(offsets: list[int], limit: int = 10) -> str:
    shown = ", ".join(map(str, offsets[:limit]))
    return shown + (f", … {len(offsets) - limit} more" if len(offsets) > limit else "")
