"""Faust's RocksDB store, with no database opened while a rebalance hands partitions out.

Faust opens every newly assigned partition's database inside `on_partitions_assigned`, where no heartbeat
is sent: with many partitions that outlasted the group session. Here the databases are opened in the
background after it, and a revoked one is kept open a while in case it comes back. Details: docs/state.md.
"""

from __future__ import annotations

import asyncio
import logging
import time

from faust.stores import STORES
from faust.stores.rocksdb import Store
from mode import Service

log = logging.getLogger(__name__)

SCHEME = "credence-rocksdb"
SWEEP_SECONDS = 1.0  # how often the set-aside databases are looked at (a look is a few dict scans)


class LazyStore(Store):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._parked: dict = {}  # partition -> its revoked database, kept open until assigned again or closed
        self._parked_at: dict[int, float] = {}  # partition -> when it was set aside (time.monotonic)
        # partition -> the persisted offset of a database closed here, unchanged on disk until opened again
        self._closed_offsets: dict[int, int | None] = {}

    async def assign_partitions(self, table, tps, generation_id: int = 0) -> None:
        self.rebalance_ack = True  # what Faust's does besides opening (a later revocation reads it)

    def revoke_partitions(self, table, tps) -> None:
        """Set the revoked partitions' databases aside, open, until assigned again (handed back as they are)
        or closed after `revoked_store_keep_seconds` outside any rebalance (`close_one_set_aside`). Faust's
        drops them inside `on_partitions_assigned` (a close flushes: 60-150 ms each, 160 of them took 10.7 s)
        and runs a full `gc.collect()` per table at every rebalance; closed at once, those assigned back soon
        (a member restarting) would be opened again, inside the restore's bounded step."""
        topics = table.changelog_topic.topics
        for tp in tps:
            if tp.topic in topics and tp.partition in self._dbs:
                self._parked[tp.partition] = self._dbs.pop(tp.partition)
                self._parked_at[tp.partition] = time.monotonic()

    def _db_for_partition(self, partition: int):
        if partition not in self._dbs and partition in self._parked:
            # assigned back: the same handle (reopening would cost the open, and find it locked)
            self._dbs[partition] = self._parked.pop(partition)
            del self._parked_at[partition]
        elif partition not in self._dbs:
            self._closed_offsets.pop(partition, None)  # opened (again): the database answers from now on
        return super()._db_for_partition(partition)

    def close_one_set_aside(self, before: float) -> bool:
        """Close the database set aside longest, if that was before `before` (time.monotonic); say whether
        one was. Never from a rebalance callback: a close flushes (60-150 ms, the loop and the GIL held)."""
        if not self._parked_at:
            return False
        partition = min(self._parked_at, key=self._parked_at.__getitem__)
        if self._parked_at[partition] > before:
            return False
        del self._parked_at[partition]
        db = self._parked.pop(partition)
        # Remembered: assigned back, its persisted offset is read inside Faust's bounded offset-building step,
        # where opening 640 databases again (~50 s at 256 partitions) outlived the wait and halted the worker.
        offset = db.get(self.offset_key)
        self._closed_offsets[partition] = None if offset is None else int(offset)
        db.close()
        return True

    async def stop(self) -> None:
        self._parked.clear()  # dropped: rocksdict closes each as it goes, like Faust's own stop
        self._parked_at.clear()
        await super().stop()

    def persisted_offset(self, tp):
        if tp.partition in self._closed_offsets and tp.partition not in self._dbs:
            return self._closed_offsets[tp.partition]  # closed here, unchanged since: no need to open it
        if not self.on_disk(tp.partition):
            return None  # never written on this worker: no offset (opening would only create it, empty)
        return super().persisted_offset(tp)

    def on_disk(self, partition: int) -> bool:
        """The partition's database is open or exists on disk (it may hold data)."""
        return partition in self._dbs or partition in self._parked or self.partition_path(partition).exists()


def store_url() -> str:
    """The app's `store` URL for LazyStore (registered with Faust's stores under its own scheme)."""
    STORES.aliases.setdefault(SCHEME, f"{__name__}:LazyStore")
    return f"{SCHEME}://"


class DeferredOffsets:
    """For Faust's recovery service: each assigned partition's persisted offset, which Faust reads inside
    `on_partitions_assigned` (`_add`; opening the partition's database), read after it instead: one
    database per loop turn in the background from the assignment on (`read_in_background`, which then opens
    the other assigned partitions' stores too, ahead of the first batch), and whatever is left before the
    restore's offsets are built (`read_persisted`) and before the streams resume (`open_cold`). Closes the
    revoked partitions' databases set aside too long (`close_set_aside`), in its own background task."""

    _unread: dict  # changelog partition -> the offsets its persisted offset is still due in
    _cold: list  # changelog partitions whose stores are not opened yet

    def _add(self, table, tp, offsets) -> None:
        self.tp_to_table[tp] = table
        offsets.setdefault(tp, None)
        self._unread[tp] = offsets
        self._cold.append(tp)

    def on_partitions_revoked(self, revoked) -> None:
        # before the stores give the partitions up: nothing of a revoked one is opened (or read) after it
        self._cold[:] = [tp for tp in self._cold if tp not in revoked]
        for tp in revoked:
            self._unread.pop(tp, None)
        super().on_partitions_revoked(revoked)

    def read_in_background(self) -> None:
        if self._unread:
            asyncio.ensure_future(self._read_and_open()).add_done_callback(_quiet)

    async def read_persisted(self) -> None:
        while self._unread:
            tp, offsets = self._unread.popitem()
            try:
                offset = self.tp_to_table[tp].persisted_offset(tp)
            except Exception:
                self._unread[tp] = offsets  # raised again where the restore reads it
                raise
            if offset is not None:
                offsets[tp] = offset
            await asyncio.sleep(0)

    async def _read_and_open(self) -> None:
        await self.read_persisted()
        await self.open_cold()

    async def open_cold(self) -> None:
        """Open the assigned partitions' stores not opened yet, one per loop turn (before the streams
        resume: a batch would otherwise open each store it touches first, all in one loop turn)."""
        while self._cold:
            tp = self._cold.pop()
            store = getattr(self.tp_to_table.get(tp), "data", None)
            if tp in self.active_tps and isinstance(store, LazyStore):  # still assigned (a rebalance clears it)
                store._db_for_partition(tp.partition)
                await asyncio.sleep(0)

    async def close_set_aside(self, now: float | None = None) -> int:
        """Close the revoked partitions' databases set aside longer than `revoked_store_keep_seconds`, one
        per loop turn, and none while a rebalance is under way (`app.rebalancing`: from the revocation until
        the streams resume, which covers Faust's callbacks and its bounded restore steps). Returns how many."""
        before = (time.monotonic() if now is None else now) - self.settings.state.revoked_store_keep_seconds
        closed = 0
        for store in [table.data for table in self.tables.values() if isinstance(table.data, LazyStore)]:
            while not self.app.rebalancing and store.close_one_set_aside(before):
                closed += 1
                await asyncio.sleep(0)
        return closed

    @Service.task
    async def _close_set_aside_stores(self) -> None:
        while not self.should_stop:
            await self.sleep(SWEEP_SECONDS)
            try:
                await self.close_set_aside()
            except Exception:  # noqa: BLE001 - a failed close has dropped the handle (rocksdict frees it)
                log.exception("closing a revoked partition's store failed")


def _quiet(future: asyncio.Future) -> None:
    """A background read's failure is raised again by the restore's own read: not reported twice."""
    if not future.cancelled():
        future.exception()
