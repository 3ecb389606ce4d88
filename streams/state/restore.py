"""Restoring the tables of newly held partitions from their changelogs in bulk.

Once Faust has worked out where each changelog partition starts and ends, a consumer of our own reads the
span in large fetches and hands it to each table's store through `apply_changelog_batch` (Faust's own loop
hands records one by one, ~2,600/s). Nothing beyond Faust's highwater is applied, and a restore cut short
leaves Faust's loop to read the rest. With fencing the producers are held first and reads are
`read_committed`; a stale local store is discarded first (freshness.py). Why: docs/state.md.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition
from faust.tables.recovery import Recovery
from mode import Service

from credence.config import Settings
from credence.kafka import client_options
from credence.streams.state.freshness import Freshness
from credence.streams.state.rocks import DeferredOffsets

log = logging.getLogger(__name__)

APPLY_EVERY = 5_000  # records per apply_changelog_batch call (Faust's own loop applies 1,000 at a time)
# aiokafka's defaults (per request, per partition), as the bare consumer the benchmark compares with uses;
# 16 MiB, 4 MiB and 256 KiB per partition measured no faster.
FETCH_BYTES, PARTITION_FETCH_BYTES = 50 * 1024 * 1024, 1024 * 1024
# Loop turns given to the consumer's fetcher after each getmany, before the (blocking) store write: taking
# records wakes it, and it needs a few turns to send the next fetch requests. Without them the next fetch
# only left once the write was done, and every one of ~50 fetches waited its broker round trip (measured:
# the read 0.80 -> 0.65 s for 100,000 records).
FETCHER_TURNS = 4
# Of the broker request timeout Faust gives the offset-building step, counted from the step's start: the
# bulk read ends by BUDGET_SHARE, the close of its consumer by BUDGET_SHARE + CLOSE_SHARE; the rest is spare.
BUDGET_SHARE, CLOSE_SHARE = 0.6, 0.2
TAIL_WINDOW = 1_000  # offsets read back from a partition's end to find its last committed record, at first


class _Message:
    """What a store's `apply_changelog_batch` reads of a Faust message."""

    __slots__ = ("tp", "partition", "offset", "key", "value")

    def __init__(self, tp, offset: int, key: bytes | None, value: bytes | None):
        self.tp, self.partition, self.offset, self.key, self.value = tp, tp.partition, offset, key, value


class _Event:
    """A changelog record as a store's `apply_changelog_batch` reads it: the raw message, and the key and
    value decoded as Faust decodes them for the table (only the memory store asks for those)."""

    __slots__ = ("message", "_topic", "_app")

    def __init__(self, message: _Message, topic, app):
        self.message, self._topic, self._app = message, topic, app

    @property
    def key(self):
        return self._app.serializers.loads_key(self._topic.key_type, self.message.key,
                                               serializer=self._topic.key_serializer)

    @property
    def value(self):
        if self.message.value is None:
            return None
        return self._app.serializers.loads_value(self._topic.value_type, self.message.value,
                                                 serializer=self._topic.value_serializer)


def _rocksdb(store):
    """The store when it is Faust's RocksDB store on rocksdict (the default), else None."""
    from faust.stores.rocksdb import Store as RocksDBStore

    return store if isinstance(store, RocksDBStore) and store.use_rocksdict else None


def _write_rocksdb(store, tp, records) -> None:
    """What the RocksDB store's `apply_changelog_batch` does with a chunk of one partition, without its
    per-record event objects and bookkeeping (~40% of the restore's time): one write batch of the raw
    keys and values (None deletes) into the partition's database, then its persisted offset."""
    import rocksdict

    batch = rocksdict.WriteBatch(raw_mode=True)
    put, delete = batch.put, batch.delete
    for r in records:
        if r.value is None:
            delete(r.key)
        else:
            put(r.key, r.value)
    store._db_for_partition(tp.partition).write(batch)
    store.set_persisted_offset(tp, records[-1].offset)


def _holds_data(store, tp) -> bool:
    if hasattr(store, "on_disk") and not store.on_disk(tp.partition):
        return False  # nothing on disk: checking would create an empty database (rocks.py)
    return store.persisted_offset(tp) is not None or next(store._visible_keys(
        store._db_for_partition(tp.partition)), None) is not None


def _discard(store, partition: int) -> None:
    """Delete the partition's database (its persisted offset with it) and open it again, empty."""
    db = store._dbs.pop(partition, None)
    if db is not None:
        db.close()
    shutil.rmtree(store.partition_path(partition), ignore_errors=True)
    store._key_index.clear()  # keys -> partition: the discarded keys are gone
    store._db_for_partition(partition)


@dataclass
class RestoreStats:
    records: int = 0
    seconds: float = 0.0
    partitions: int = 0
    left: int = 0  # records past the budget or an error, read by Faust's own loop instead
    last: dict = field(default_factory=dict)  # the last restore: records, seconds, partitions, left


class BulkRecovery(DeferredOffsets, Recovery):
    """Faust's recovery service, with the active partitions' changelog spans read in bulk first."""

    def __init__(self, app, tables, *, settings: Settings, bootstrap: str, freshness: Freshness | None = None,
                 on_dead: Callable[[str], None] | None = None,
                 before_restore: Callable[[set[int]], Awaitable[None]] | None = None,
                 on_assignment: Callable[[set[int], int], None] | None = None,
                 on_ready: Callable[[], Awaitable[None]] | None = None, **kwargs):
        super().__init__(app, tables, **kwargs)
        self.on_ready = on_ready  # () -> rewind the inputs to their stored positions (after Faust's seek)
        self.settings, self.bootstrap, self.freshness = settings, bootstrap, freshness
        self.before_restore = before_restore  # (partitions) -> fence their earlier holders (fence.py)
        self.on_assignment = on_assignment  # (partitions, group generation), before any restore step
        self.on_dead = on_dead  # told why, when Faust's recovery loop ended while the worker runs
        self._checked: set[int] = set()  # partitions whose stores this recovery checked (or discarded)
        self._unread: dict = {}  # changelog partition -> the offsets its persisted offset is still due in
        self._cold: list = []  # changelog partitions whose stores are not opened yet
        self.restored = RestoreStats()
        self._applied = 0

    async def on_rebalance(self, assigned, revoked, newly_assigned, generation_id: int = 0) -> None:
        if self.on_assignment is not None and generation_id == self.app.consumer_generation_id:
            # The input partitions held. Faust's leader topic (one partition, given to one member at random)
            # is in the assignment too: a changelog writer started for its partition 0 fenced the member
            # holding input partition 0, which halted at its next write.
            leader = f"{self.app.conf.id}-__assignor-__leader"
            self.on_assignment({tp.partition for tp in assigned if tp.topic != leader}, generation_id)
        self._unread.clear()  # Faust adds every assigned changelog partition again (`_add`)
        self._cold.clear()
        await super().on_rebalance(assigned, revoked, newly_assigned, generation_id)
        self.read_in_background()

    @Service.task
    async def _restart_recovery(self) -> None:
        """Faust's recovery loop, which ends for good when one of its steps raises or outlives its wait."""
        try:
            await Recovery._restart_recovery.fun(self)
        except BaseException as exc:
            self._ended(f"{type(exc).__name__}: {exc}")
            raise
        self._ended("a step outlived Faust's wait for it")

    def _ended(self, reason: str) -> None:
        if not self.should_stop and self.on_dead is not None:
            self.on_dead(f"Faust's table recovery stopped ({reason}); no later assignment of this worker "
                         f"would be restored")

    async def _build_highwaters(self, consumer, tps, destination, title: str) -> None:
        if title == "active" and self.before_restore is not None:
            await self.before_restore({tp.partition for tp in tps})  # before the ends are measured
        await super()._build_highwaters(consumer, tps, destination, title)

    async def _build_offsets(self, consumer, tps, destination, title: str) -> None:
        wait, begun = float(self.app.conf.broker_request_timeout), time.monotonic()  # Faust's wait for the step
        if title == "active":
            await self.read_persisted()  # what the background reading has not done yet
            self._discard_untrusted(tps, destination)
        started = time.monotonic()  # the shares below are of what is left of Faust's wait
        wait = max(0.0, wait - (started - begun))
        await super()._build_offsets(consumer, tps, destination, title)
        if title != "active":
            return
        spans = {tp: (destination[tp], self.active_highwaters.get(tp)) for tp in tps}
        spans = {tp: (start, end) for tp, (start, end) in spans.items()
                 if end is not None and start is not None and end > start}
        # A table with an on_changelog_event callback wants each record through Faust's loop.
        bulk = {tp: span for tp, span in spans.items() if not self.tp_to_table[tp]._on_changelog_event}
        if bulk and self.settings.state.bulk_restore:
            await self._bulk(bulk, destination, started + BUDGET_SHARE * wait,
                             started + (BUDGET_SHARE + CLOSE_SHARE) * wait)
        left = {tp: span for tp, span in spans.items() if destination[tp] < span[1]}
        if left and self.before_restore is not None:  # within the spare share of Faust's wait
            await self._settle_tails(left, started + (BUDGET_SHARE + CLOSE_SHARE + 0.1) * wait,
                                     started + (BUDGET_SHARE + CLOSE_SHARE + 0.15) * wait)

    async def _settle_tails(self, spans: dict, deadline: float, closed_by: float) -> None:
        """Lower each partition's end to the offset of its last committed record, the one Faust's loop
        will see last (a transaction marker, or an aborted record, is never delivered)."""
        faust_tp = {TopicPartition(tp.topic, tp.partition): tp for tp in spans}
        reader = self._reader()
        try:
            await reader.start()
            reader.assign(list(faust_tp))
            async with asyncio.timeout(max(0.1, deadline - time.monotonic())):
                for ktp, tp in faust_tp.items():
                    self.active_highwaters[tp] = await _last_committed(reader, ktp, *spans[tp])
        except TimeoutError:
            log.warning("the last committed records of %s were not found in time; Faust's recovery may wait "
                        "for a transaction marker", sorted(spans))
        finally:
            await _close(reader, closed_by)

    def _reader(self) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(**client_options(
            self.bootstrap, self.settings.kafka, group_id=None, enable_auto_commit=False,
            auto_offset_reset="earliest", isolation_level="read_committed", fetch_max_bytes=FETCH_BYTES,
            max_partition_fetch_bytes=PARTITION_FETCH_BYTES))

    async def on_recovery_completed(self, generation_id: int = 0) -> None:
        await self.open_cold()  # Faust's wait for this step is unbounded
        await super().on_recovery_completed(generation_id)  # the tables' callbacks replay the redo records
        if self.freshness is not None:  # restored and whole: in step with their changelogs now
            self.freshness.touch(self._checked, force=True)
        # Faust has just sought every input partition to the group's committed offset, which may run ahead
        # of the state (positions.py): read from the stored positions instead, at every assignment. Not
        # when a newer rebalance cut this one short (Faust resumed nothing; the next recovery comes here).
        if self.on_ready is not None and self.app.consumer_generation_id == generation_id:
            try:
                await self.on_ready()
            except Exception as exc:  # noqa: BLE001 - never end Faust's recovery loop (that halts the worker)
                # a partition moved under the seek: the rebalance that took it rewinds again when it completes
                log.warning("the inputs could not be rewound to their stored positions: %s: %s",
                            type(exc).__name__, exc)

    def _discard_untrusted(self, tps, destination) -> None:
        """Discard each local store that may not be brought up to date from its persisted offset; its
        partition's restore then starts at the changelog's beginning (None: Faust takes the earliest)."""
        self._checked = {tp.partition for tp in tps}
        if self.freshness is None:
            return
        for tp in sorted(tps):
            store = _rocksdb(getattr(self.tp_to_table[tp], "data", None))
            if store is None or not _holds_data(store, tp):
                continue
            reason = self.freshness.distrust(tp.partition, store.persisted_offset(tp),
                                             self.active_highwaters.get(tp))
            if reason is not None:
                log.warning("discarding the local store of %s[%d], restored from the changelog instead: %s",
                            tp.topic, tp.partition, reason)
                _discard(store, tp.partition)
                destination[tp] = None

    async def _bulk(self, spans: dict, destination, deadline: float, closed_by: float) -> None:
        """Read `spans` until done or `deadline` (monotonic), the reader closed by `closed_by`."""
        started, self._applied = time.monotonic(), 0
        try:
            # Stores are written between awaits only, so a cut anywhere leaves whole chunks applied.
            async with asyncio.timeout(deadline - started):
                await self._read(spans, destination, deadline, closed_by)
        except asyncio.CancelledError:
            raise  # a new rebalance: what was applied is in `destination`, Faust starts over
        except TimeoutError:
            log.warning("bulk changelog restore ran out of its %.1f s budget; Faust's recovery reads the rest",
                        max(0.0, deadline - started))
        except Exception as exc:  # noqa: BLE001 - Faust's own loop reads what is left
            log.warning("bulk changelog restore stopped (%s: %s); Faust's recovery reads the rest",
                        type(exc).__name__, exc)
        self._report(spans, destination, self._applied, time.monotonic() - started)

    async def _read(self, spans: dict, destination, deadline: float, closed_by: float) -> None:
        faust_tp = {TopicPartition(tp.topic, tp.partition): tp for tp in spans}
        reader = self._reader()
        try:
            await reader.start()
            reader.assign(list(faust_tp))
            for ktp, tp in faust_tp.items():
                reader.seek(ktp, destination[tp] + 1)  # destination holds the last offset applied
            open_ = dict(faust_tp)
            while open_ and time.monotonic() < deadline:
                fetched = await reader.getmany(*open_, timeout_ms=500, max_records=APPLY_EVERY * 4)
                for _ in range(FETCHER_TURNS):  # its next fetch goes out now, and is served while we write
                    await asyncio.sleep(0)
                for ktp, records in fetched.items():
                    self._applied += self._apply(faust_tp[ktp], records, destination)
                for ktp, tp in list(open_.items()):
                    end = spans[tp][1]
                    if destination[tp] >= end or await reader.position(ktp) > end:
                        destination[tp] = max(destination[tp], end)  # compaction removed the last offsets
                        del open_[ktp]
        finally:
            await _close(reader, closed_by)

    def _apply(self, tp, records, destination) -> int:
        start, end = destination[tp], self.active_highwaters[tp]
        table = self.tp_to_table[tp]
        store = _rocksdb(getattr(table, "data", None))
        if store is not None:
            span = [r for r in records if start < r.offset <= end]
            for i in range(0, len(span), APPLY_EVERY):
                chunk = span[i:i + APPLY_EVERY]
                _write_rocksdb(store, tp, chunk)
                destination[tp] = chunk[-1].offset
            return len(span)
        topic = table.changelog_topic
        events = [_Event(_Message(tp, r.offset, r.key, r.value), topic, self.app)
                  for r in records if start < r.offset <= end]
        for i in range(0, len(events), APPLY_EVERY):
            chunk = events[i:i + APPLY_EVERY]
            table.apply_changelog_batch(chunk)
            destination[tp] = chunk[-1].message.offset
        return len(events)

    def _report(self, spans: dict, destination, applied: int, seconds: float) -> None:
        left = sum(max(0, end - destination[tp]) for tp, (_start, end) in spans.items())
        stats = self.restored
        stats.records += applied
        stats.seconds += seconds
        stats.partitions += len(spans)
        stats.left += left
        stats.last = {"records": applied, "seconds": round(seconds, 3), "partitions": len(spans), "left": left}
        rate = applied / seconds if seconds > 0 else 0.0
        log.info("restored %d changelog records of %d partitions in %.2f s (%.0f records/s)%s", applied,
                 len(spans), seconds, rate, f"; {left} offsets left to Faust's recovery" if left else "")


async def _close(reader: AIOKafkaConsumer, closed_by: float) -> None:
    """Stop the reader, or give up on it at `closed_by` (monotonic): an unanswered close must not outlive
    Faust's wait for the step."""
    try:
        await asyncio.wait_for(reader.stop(), max(0.0, closed_by - time.monotonic()))
    except TimeoutError:
        log.warning("the bulk restore's consumer did not close in time; left to the garbage collector")


async def _last_committed(reader: AIOKafkaConsumer, ktp, start: int, end: int) -> int:
    """The offset of the last record `reader` is given in (start, end]; `start` if there is none. Read back
    from the end in growing windows: aborted records and markers can fill the last ones."""
    window = TAIL_WINDOW
    while True:
        low = max(start + 1, end - window + 1)
        last = await _last_offset(reader, ktp, low, end)
        if last is not None or low == start + 1:
            return last if last is not None else start
        window *= 8


async def _last_offset(reader: AIOKafkaConsumer, ktp, low: int, end: int) -> int | None:
    """The offset of the last record `reader` is given in [low, end], None if there is none."""
    reader.seek(ktp, low)
    last = None
    while await reader.position(ktp) <= end:
        fetched = await reader.getmany(ktp, timeout_ms=500)
        last = max((r.offset for r in fetched.get(ktp, []) if r.offset <= end), default=last)
    return last


def install_bulk_recovery(app, settings: Settings, bootstrap: str, freshness: Freshness | None = None,
                          on_dead: Callable[[str], None] | None = None,
                          before_restore: Callable[[set[int]], Awaitable[None]] | None = None,
                          on_assignment: Callable[[set[int], int], None] | None = None,
                          on_ready: Callable[[], Awaitable[None]] | None = None) -> BulkRecovery:
    """Make the app's table manager use BulkRecovery (before anything asks it for its recovery)."""
    tables = app.tables
    recovery = BulkRecovery(app, tables, settings=settings, bootstrap=bootstrap, freshness=freshness,
                            on_dead=on_dead, before_restore=before_restore, on_assignment=on_assignment,
                            on_ready=on_ready,
                            beacon=tables.beacon, loop=tables.loop)
    tables._recovery = recovery
    return recovery
