"""Table writes of one batch: their changelog records sent together and awaited by `flush`, before the
batch's input offsets may be committed, and made all-or-nothing by the batch's redo record (redo.py).

Writes are held until `flush` and reach the local stores only once the redo record is acknowledged (fenced:
once each partition's transaction, which also carries its emits, is committed). Unfenced, the emits are
acknowledged first. Why Faust's own table write is bypassed, and why writes are held: docs/state.md.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from faust.streams import _current_event, current_event

from credence import tracing
from credence.kafka import send_now
from credence.streams.state import redo
from credence.streams.state.freshness import Freshness
from credence.streams.state.redo import Write

if TYPE_CHECKING:
    from credence.streams.state.fence import Fence

log = logging.getLogger(__name__)


def local(table):
    """The table's local store (a Faust table's `data`; a plain mapping is its own store)."""
    return getattr(table, "data", table)


def logged(table) -> bool:
    return getattr(table, "changelog_topic", None) is not None


async def enqueue(topic, key: bytes | None, value: bytes | None, partition: int | None = None,
                  headers: dict[str, bytes] | None = None):
    """Queue one record of bytes on a Faust topic; returns the future of its metadata. Through the app's
    producer directly: Faust's `Topic.send` adds a FutureMessage, a guarded producer lookup and callbacks
    per record (~6% of a worker's CPU on long scopes), for nothing a batch uses. A topic without an app
    (unit tests' stand-ins) takes the plain `send`. The record carries the current span's trace context
    (nothing when tracing is off or no span is current)."""
    headers = tracing.record_headers(headers)
    producer = getattr(getattr(topic, "app", None), "producer", None)
    if producer is None:
        extra = {k: v for k, v in (("partition", partition), ("headers", headers)) if v is not None}
        return await topic.send(key=key, value=value, **extra)
    return await producer.send(topic.get_topic_name(), key, value, partition, None, headers)


@dataclass(frozen=True)
class _Message:
    partition: int


@dataclass(frozen=True)
class _PartitionEvent:
    """Stands for a record of `partition` where none is at hand: a RocksDB store writes a key into the
    store of the current event's partition."""

    message: _Message


class TableWrites:
    def __init__(self, tables: Mapping[str, object] | None = None, redo_table: str = "seen",
                 freshness: Freshness | None = None, fence: Fence | None = None) -> None:
        self._tables = dict(tables or {})
        self._freshness = freshness  # told which partitions' stores a flush kept in step
        self._fence = fence  # None: through the app's producer, unfenced (unit tests, transactions off)
        self._names = {id(t): name for name, t in self._tables.items()}
        self._redo = self._tables.get(redo_table)
        self._held: dict[tuple[int, str], tuple[object, str, bytes | None, int]] = {}  # the batch's last write per key
        self._events: dict[int, object] = {}  # partition -> a record of it that was current at a write
        self._emits: dict[int, list[tuple]] = {}  # input partition -> its (topic, key, value, to, headers)
        self._forwards: list[tuple] = []  # (topic, key, value, to, headers): acknowledged before any commit
        self.replayed = 0  # writes applied again from redo records (after a restore)

    def put(self, table, key: str, value: bytes, partition: int) -> None:
        if not logged(table):
            local(table)[key] = value
            return
        self._hold(table, key, value, partition)

    def delete(self, table, key: str, partition: int) -> None:
        if not logged(table):
            local(table).pop(key, None)
            return
        held = self._held.get((id(table), key))
        if (held is None or held[2] is None) and key not in local(table):
            return  # nothing stored: nothing to tombstone
        self._hold(table, key, None, partition)

    def emit(self, partition: int, topic, key: bytes | None, value: bytes, to: int | None = None,
             headers: dict[str, bytes] | None = None) -> None:
        """A record the batch sends (on Faust topic `topic`; `to`: its partition, else the key's) for
        the records of input `partition`: readable once, and only if, the batch's state of that partition
        is. It carries the current span's trace context."""
        self._emits.setdefault(partition, []).append((topic, key, value, to, tracing.record_headers(headers)))

    def forward(self, topic, key: bytes, value: bytes, to: int, headers: dict[str, bytes] | None = None) -> None:
        """An input record sent on to its scope's partition `to` (forwards.py), acknowledged before the
        batch's state is readable, outside its transactions: a forward is the input record again, under
        a header naming the original, so a re-run of the batch sends the same record, and the scope's
        partition applies one copy (duplicate marks by origin). In the transaction, it would end its
        input partition with a commit marker that the group's committed offset never passes."""
        self._forwards.append((topic, key, value, to, tracing.record_headers(headers)))

    def _hold(self, table, key: str, value: bytes | None, partition: int) -> None:
        self._held[(id(table), key)] = (table, key, value, partition)
        if partition not in self._events:
            event = current_event()
            if event is not None and event.message.partition == partition:
                self._events[partition] = event

    async def flush(self, after: Awaitable | None = None) -> int:
        """Make the batch durable: its redo record per partition first (sent and acknowledged), then the
        redo record and every write into the local stores, then every write (sent, awaited). Fenced, each
        partition's redo record, writes and emits are one transaction; unfenced, the emits are sent and
        acknowledged before anything else. Nothing of the state is readable before `after` is done (fenced:
        each transaction is committed after it). Returns the count of writes sent."""
        held, self._held = list(self._held.values()), {}
        events, self._events = self._events, {}
        emits, self._emits = self._emits, {}
        forwards, self._forwards = self._forwards, []
        if self._fence is None and emits:
            after = _both(after, await _send_emits(emits))
        if forwards:
            after = _both(after, await _send_emits({-1: forwards}))
        after = asyncio.ensure_future(after) if after is not None else None  # each partition's commit awaits it
        if after is not None and (not held or self._fence is None):
            await after
        if not held and (self._fence is None or not emits):
            return 0
        by_partition: dict[int, list[tuple[object, str, bytes | None, int]]] = {}
        for item in held:
            by_partition.setdefault(item[3], []).append(item)
        logs: dict[int, list] = {}
        for p, items in by_partition.items():
            with _current(p, events.get(p)):
                logs[p] = self._redo_records(p, items) if self._redo is not None else []
        redo_records = [r for records in logs.values() for r in records]
        # with a fence, one transaction per partition (its redo record, writes and emits) committed first
        acked = await (self._send_fenced(redo_records + held, after, emits) if self._fence is not None
                       else self._send(redo_records))
        for p, items in by_partition.items():
            with _current(p, events.get(p)):
                _apply(logs[p] + items)
        _persisted(acked)  # only now: a store that says it has the redo record has it
        if self._fence is None:
            _persisted(await self._send(held))
        if self._freshness is not None:
            self._freshness.touch(by_partition)
        return len(held)

    async def replay(self, partitions: Iterable[int], holds: Callable[[int], bool] = lambda p: True) -> int:
        """After a restore: apply each partition's last whole redo record again, locally and to the
        changelogs, so no write of a batch is missing. Returns the count of writes replayed.

        A new rebalance can take partitions away while this runs (the next restore closes their writers
        under it): a partition `holds` no longer names is its next owner's to replay, so it is skipped,
        and its failed write is no error."""
        if self._redo is None:
            return 0
        store, count = local(self._redo), 0
        for p in sorted(partitions):
            if not holds(p):
                continue
            with _current(p):
                found = redo.complete(lambda part, p=p: store.get(redo.redo_key(p, part)))
                if found is None:
                    continue
                raws, writes = found
                records = [(self._redo, redo.redo_key(p, i), raw, p) for i, raw in enumerate(raws)]
                items = [(self._tables[w.table], w.key, w.value, p) for w in writes if w.table in self._tables]
                _apply(items)
            try:
                _persisted(await self._send(records + items))
            except Exception:
                if holds(p):
                    raise
                log.info("partition %d moved to another worker during its redo replay; its owner replays it", p)
                continue
            count += len(items)
        self.replayed += count
        return count

    def _redo_records(self, partition: int, items) -> list[tuple[object, str, bytes | None, int]]:
        writes = [Write(self._names[id(table)], key, value) for table, key, value, _ in items
                  if id(table) in self._names]
        parts = redo.encode(writes)
        records = [(self._redo, redo.redo_key(partition, i), raw, partition) for i, raw in enumerate(parts)]
        store, stale = local(self._redo), len(parts)
        while redo.redo_key(partition, stale) in store:  # parts of an older, longer batch: gone with it
            records.append((self._redo, redo.redo_key(partition, stale), None, partition))
            stale += 1
        return records

    async def _send(self, items) -> dict:
        """Send every record and wait for all acknowledgements; returns the newest offset per store and
        changelog partition, for `_persisted` (a plain mapping, without a changelog, sends nothing)."""
        if self._fence is not None:
            return await self._send_fenced(items)
        sent = []
        for table, key, value, partition in items:
            topic = getattr(table, "changelog_topic", None)
            if topic is None:
                continue  # a plain mapping (unit tests): no changelog
            # keys through the table's key serializer (Faust's json: compaction and tombstones match on
            # the bytes); values are bytes already (a "raw" serializer, app.raw_table)
            raw_key, _ = topic.prepare_key(key, table.key_serializer)
            sent.append((table, await enqueue(topic, raw_key, value, partition)))
        if sent:
            send_now(getattr(sent[0][0].changelog_topic, "app", None))
        newest: dict = {}
        for table, fut in sent:
            meta = await fut
            newest[(id(table), meta.topic_partition)] = (table, meta.topic_partition, meta.offset)
        return newest

    async def _send_fenced(self, items, before_commit: Awaitable | None = None,
                           emits: dict[int, list[tuple]] | None = None) -> dict:
        """`_send` through the fence: each partition's records (and `emits` of it) in one transaction, the
        partitions at once, each committed once `before_commit` is done."""
        by_partition: dict[int, list] = {p: [] for p in emits or {}}
        for table, key, value, partition in items:
            topic = getattr(table, "changelog_topic", None)
            if topic is not None:
                raw_key, _ = topic.prepare_key(key, table.key_serializer)
                by_partition.setdefault(partition, []).append((table, topic.get_topic_name(), raw_key, value))
        parts = sorted(by_partition)
        if not parts and before_commit is not None:
            await before_commit  # nothing of a changelog (plain mappings): still nothing before it
        out = {p: [(topic.get_topic_name(), key, value, to, headers)
                   for topic, key, value, to, headers in (emits or {}).get(p, ())] for p in parts}
        metas = await asyncio.gather(*(self._fence.send(p, [r[1:] for r in by_partition[p]], before_commit,
                                                        emits=out[p]) for p in parts))
        newest: dict = {}
        for p, partition_metas in zip(parts, metas):
            for (table, *_), meta in zip(by_partition[p], partition_metas):
                newest[(id(table), meta.topic_partition)] = (table, meta.topic_partition, meta.offset)
        return newest


async def _send_emits(emits: dict[int, list[tuple]]) -> Awaitable:
    """Queue every emit on the app's producer (unfenced); the awaitable of their acknowledgements."""
    records = [record for of_partition in emits.values() for record in of_partition]
    futures = [await enqueue(topic, key, value, to, headers) for topic, key, value, to, headers in records]
    send_now(getattr(records[0][0], "app", None))
    return asyncio.gather(*futures)


async def _both(first: Awaitable | None, second: Awaitable) -> None:
    if first is not None:
        await first
    await second


def _persisted(newest: dict) -> None:
    """Tell the local stores the changelog offsets they now hold (Faust resumes their restore there)."""
    for table, tp, offset in newest.values():
        local(table).set_persisted_offset(tp, offset)


@contextmanager
def _current(partition: int, event=None) -> Iterator[None]:
    """A record of `partition` is the current event inside (a RocksDB store reads and writes the store of
    the current event's partition)."""
    event = event or _PartitionEvent(_Message(partition))
    token = _current_event.set(weakref.ref(event))
    try:
        yield
    finally:
        _current_event.reset(token)


def _apply(items) -> None:
    """Write `items` into their local stores, in order."""
    for table, key, value, _ in items:
        store = local(table)
        if value is None:
            try:
                del store[key]
            except KeyError:
                pass
        else:
            store[key] = value
