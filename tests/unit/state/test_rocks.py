"""A rebalance never holds the event loop on RocksDB (streams/state/rocks.py): aiokafka sends no heartbeat
while `on_partitions_assigned` runs, and Faust's store opened every assigned partition's database there
(and its recovery opened each again for the persisted offset), ~25-50 ms each with the loop and the GIL
held: 640 opens outlived the group session and the member was dropped. Here the whole assignment chain
of 5 tables x 64 partitions opens nothing and runs no full garbage collection; the persisted offsets are
read and the stores opened afterwards, revoked stores stay open aside (closed after a bound, outside any
rebalance), and what a store held is found again."""

from __future__ import annotations

import asyncio
import gc
import time

import faust
import pytest
import rocksdict
from faust.types import TP

from credence.config import load_settings
from credence.kafka import faust_options
from credence.streams.runtime.app import store_url
from credence.streams.state import restore

PARTITIONS = 64
TABLES = ("scopes", "entries", "lists", "history", "seen")
KEEP = 300.0  # revoked_store_keep_seconds


def worker_app(tmp_path, partitions: int = PARTITIONS):
    settings = load_settings(kafka_bootstrap="127.0.0.1:1", data_dir=tmp_path / "data", table_store="rocksdb",
                             state={"revoked_store_keep_seconds": KEEP})
    app = faust.App("rocks-test", **faust_options("127.0.0.1:1", settings.kafka), store=store_url(settings),
                    autodiscover=False, datadir=str(tmp_path / "worker"))
    recovery = restore.install_bulk_recovery(app, settings, "127.0.0.1:1")
    tables = [app.Table(name, partitions=partitions) for name in TABLES]
    return app, recovery, tables


def changelog_tps(tables, partitions) -> set[TP]:
    return {TP(t.changelog_topic.get_topic_name(), p) for t in tables for p in partitions}


async def assign(app, recovery, tables, tps: set[TP], revoked: set[TP], generation: int) -> None:
    """What Faust's `on_partitions_assigned` does with the tables: each store, then the recovery."""
    app.consumer_generation_id = generation
    app.assignor.assigned_actives = lambda: tps
    app.assignor.assigned_standbys = lambda: set()
    for table in tables:
        await table.on_rebalance(tps, revoked, tps - revoked, generation)
    await recovery.on_rebalance(tps, revoked, tps, generation)


def databases(tmp_path) -> list:
    return sorted(tmp_path.glob("worker/**/*.db"))


def test_an_assignment_of_every_partition_opens_no_database_and_collects_no_garbage(tmp_path, monkeypatch):
    app, recovery, tables = worker_app(tmp_path)
    collections: list[int] = []
    monkeypatch.setattr(gc, "collect", lambda *a: collections.append(1) or 0)
    tps = changelog_tps(tables, range(PARTITIONS))

    async def run() -> None:
        await assign(app, recovery, tables, tps, set(), 1)
        assert databases(tmp_path) == [], "a database was opened inside on_partitions_assigned"
        assert all(not t.data._dbs for t in tables)
        assert collections == [], "a full garbage collection ran inside on_partitions_assigned"
        await recovery.read_persisted()  # before the restore's offsets are built
        assert all(recovery.active_offsets[tp] is None for tp in tps)  # nothing on disk: no offset
        # after the callback the assigned stores are opened in the background, ahead of the first batch
        await asyncio.wait_for(_until(lambda: any(t.data._dbs for t in tables)), 60)

    asyncio.run(run())


def test_the_persisted_offsets_are_read_after_the_assignment_and_a_store_is_found_again(tmp_path):
    app, recovery, tables = worker_app(tmp_path)
    entries = tables[1]
    kept = TP(entries.changelog_topic.get_topic_name(), 3)
    every = changelog_tps(tables, range(PARTITIONS))

    async def run() -> None:
        await assign(app, recovery, tables, every, set(), 1)
        entries.data.set_persisted_offset(kept, 41)  # a restore or a batch wrote partition 3
        handle = entries.data._dbs[3]
        # it moves away (eager: revoked, then assigned again) and comes back before its close: same handle
        await assign(app, recovery, tables, every - {kept}, {kept}, 2)
        assert 3 not in entries.data._dbs and entries.data._parked == {3: handle}  # not closed in the callback
        assert entries.data._db_for_partition(3) is handle and not entries.data._parked
        # moved away again for longer: still open, unlocked, and handed back when it comes back
        await assign(app, recovery, tables, every - {kept}, {kept}, 3)
        for _ in range(50):  # the background reads and opens of the others go on meanwhile
            await asyncio.sleep(0)
        assert entries.data._parked == {3: handle}
        await assign(app, recovery, tables, every, set(), 4)
        assert recovery.active_offsets[kept] is None  # not read inside the callback
        await asyncio.wait_for(_until(lambda: recovery.active_offsets[kept] == 41), 60)  # read in the background
        assert entries.data._dbs[3] is handle and not entries.data._parked

    asyncio.run(run())


def test_nothing_of_a_revoked_partition_is_opened_in_the_background_after_its_revocation(tmp_path):
    app, recovery, tables = worker_app(tmp_path)
    tps = changelog_tps(tables, range(PARTITIONS))

    async def run() -> None:
        await assign(app, recovery, tables, tps, set(), 1)
        recovery.on_partitions_revoked(tps)  # the next rebalance starts before the background opens
        await recovery.read_persisted()  # the background task then goes on to open the stores
        for _ in range(50):
            await asyncio.sleep(0)
        assert databases(tmp_path) == [] and all(not t.data._dbs for t in tables)

    asyncio.run(run())


def test_every_assigned_store_is_open_before_the_streams_resume(tmp_path):
    """Opened after the callback, before the first batch (which would open every store it touches first in
    one loop turn): the recovery's completion, whose wait Faust does not bound, opens what is left."""
    app, recovery, tables = worker_app(tmp_path, partitions=2)

    async def run() -> None:
        await assign(app, recovery, tables, changelog_tps(tables, range(2)), set(), 1)
        await recovery.open_cold()  # what BulkRecovery.on_recovery_completed awaits first
        assert all(sorted(t.data._dbs) == [0, 1] for t in tables)

    asyncio.run(run())


def test_a_revoked_store_is_closed_after_its_bound_outside_any_rebalance_unless_assigned_back(tmp_path):
    """Kept open until the worker stopped, a worker's revoked stores added up to one per table for every
    partition it ever held (1,280 at 256 partitions x 5 tables). One not assigned back within
    `revoked_store_keep_seconds` is closed in the background, one per loop turn, never while a rebalance is
    under way (its callbacks and Faust's bounded restore steps); one assigned back before is handed back open."""
    app, recovery, tables = worker_app(tmp_path, partitions=4)
    entries = tables[1]
    every, gone = changelog_tps(tables, range(4)), changelog_tps(tables, [2, 3])
    third = TP(entries.changelog_topic.get_topic_name(), 3)

    async def run() -> None:
        app.rebalancing = True  # as Faust: from the revocation until the streams resume
        await assign(app, recovery, tables, every, set(), 1)
        await recovery.open_cold()
        entries.data.set_persisted_offset(third, 41)
        second, handle = entries.data._dbs[2], entries.data._dbs[3]
        revoked_from = time.monotonic()
        await assign(app, recovery, tables, every - gone, gone, 2)
        revoked_by = time.monotonic()
        assert all(sorted(t.data._parked) == [2, 3] for t in tables)
        # even long past the bound, nothing is closed while the rebalance is under way
        assert await recovery.close_set_aside(now=revoked_by + KEEP + 60) == 0
        app.rebalancing = False
        assert await recovery.close_set_aside(now=revoked_from + KEEP - 1) == 0  # within the bound: kept
        handle.get(b"k")  # still open
        # partition 2 comes back within the bound: handed back as it is, and never closed afterwards
        app.rebalancing = True
        await assign(app, recovery, tables, every - changelog_tps(tables, [3]), set(), 3)
        await recovery.open_cold()
        app.rebalancing = False
        assert entries.data._dbs[2] is second and all(sorted(t.data._parked) == [3] for t in tables)
        # past the bound: partition 3's stores are closed, one per loop turn
        closing = asyncio.ensure_future(recovery.close_set_aside(now=revoked_by + KEEP + 1))
        await asyncio.sleep(0)
        assert sum(len(t.data._parked) for t in tables) == len(TABLES) - 1
        assert await closing == len(TABLES) and all(not t.data._parked for t in tables)
        with pytest.raises(rocksdict.DbClosedError):
            handle.get(b"k")  # closed (its lock released), not merely dropped
        second.get(b"k")
        # its persisted offset is remembered at the close: assigned back, Faust's bounded offset-building step
        # reads it without opening the database (640 opens there outlived the step's wait at 256 partitions)
        opened: list[int] = []
        open_db = entries.data._open_for_partition
        entries.data._open_for_partition = lambda partition: opened.append(partition) or open_db(partition)
        assert entries.data.persisted_offset(third) == 41 and opened == []
        # assigned back after its close: opened again (after the bounded step), and what it held is found again
        await assign(app, recovery, tables, every, set(), 4)
        await asyncio.wait_for(_until(lambda: recovery.active_offsets[third] == 41), 60)
        await recovery.open_cold()
        assert entries.data._dbs[3] is not handle and opened == [3]
        assert entries.data.persisted_offset(third) == 41  # read from the database opened again

    asyncio.run(run())


async def _until(condition) -> None:
    while not condition():
        await asyncio.sleep(0.01)
