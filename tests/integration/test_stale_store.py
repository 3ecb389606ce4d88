"""A worker's RocksDB store is never trusted past what its changelogs can still bring up to date
(streams/state/freshness.py): one that was out of step longer than the tombstone horizon, or holds
offsets past its changelog's end, is discarded and restored from the changelog's beginning — so a user
forgotten elsewhere meanwhile, whose tombstones compaction has since removed, does not come back, and keys
only that store holds are gone."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
import rocksdict
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from credence.kafka import client_options
from credence.streams.ops.admin import changelog_configs, changelog_topic, ensure_topics
from credence.streams.ops.replay import send_forget
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from credence.streams.runtime.topics import STATE_TABLES
from tests.support.pipeline import discard, flush_and_wait_idle, produce_lines, turn_counts

from .test_forget import read_changelog

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

GONE, KEPT = "acme/gone/barista", "acme/kept/barista"
T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
TOMBSTONE_S = 4.0  # the test changelogs' delete.retention.ms, and the worker's tombstone horizon setting


def lines(scope: str, n: int = 3) -> list[bytes]:
    tenant, user, character = scope.split("/")
    return [json.dumps({"v": 1, "tenant": tenant, "user": user, "character": character, "turn_id": f"{user}-{i}",
                        "role": "user", "text": f"I like tea number {i}.",
                        "ts": (T0 + timedelta(minutes=i)).isoformat()}).encode() for i in range(n)]


async def create_compacting_changelogs(bootstrap: str, settings) -> None:
    """The table changelogs, made to compact within seconds: segments roll every 100 ms and a log is
    cleaned at 1% dirty (the broker's cleaner looks every second)."""
    await ensure_topics(bootstrap, settings)
    admin = AIOKafkaAdminClient(**client_options(bootstrap, settings.kafka))
    await admin.start()
    try:
        configs = changelog_configs(settings) | {"segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
                                                 "delete.retention.ms": str(round(TOMBSTONE_S * 1000))}
        await admin.create_topics([NewTopic(changelog_topic(settings, t), settings.topic_partitions,
                                            settings.topic_replicas, topic_configs=configs) for t in STATE_TABLES])
    finally:
        await admin.close()


async def append_nothing(bootstrap: str, topic: str, n: int) -> None:
    """A tombstone of a key no table ever held: rolls the changelog's segment and makes it dirty, so the
    cleaner comes back to it, and restores as nothing."""
    producer = AIOKafkaProducer(**client_options(bootstrap, acks="all"))
    await producer.start()
    try:
        await producer.send_and_wait(topic, None, key=json.dumps(f"nothing-{n}").encode(), partition=0)
    finally:
        await producer.stop()


def compacted_away(bootstrap: str, topic: str, key: str, attempt: list[int]) -> bool:
    attempt[0] += 1
    asyncio.run(append_nothing(bootstrap, topic, attempt[0]))
    return key not in asyncio.run(read_changelog(bootstrap, topic))


def test_a_store_older_than_the_tombstone_horizon_is_restored_without_what_was_deleted_since(
        settings_factory, kafka_bootstrap, tmp_path):
    state = {"changelog_tombstone_seconds": TOMBSTONE_S}
    first = settings_factory(topic_partitions=1, table_store="rocksdb", data_dir=tmp_path / "first", state=state)
    asyncio.run(create_compacting_changelogs(kafka_bootstrap, first))
    asyncio.run(produce_lines(kafka_bootstrap, first, lines(GONE) + lines(KEPT)))
    worker = WorkerProcess(first, kafka_bootstrap, tmp_path / "first.log").start()
    try:
        wait_until(lambda: turn_counts(worker) == {GONE: 3, KEPT: 3}, 60, "the first worker to take the turns")
        flush_and_wait_idle(worker, kafka_bootstrap, first, [GONE, KEPT])
    finally:
        worker.stop()

    # The partition moves to a worker with a store of its own, which forgets the user: tombstones.
    second = settings_factory(topic_partitions=1, table_store="rocksdb", data_dir=tmp_path / "second", state=state)
    worker = WorkerProcess(second, kafka_bootstrap, tmp_path / "second.log").start()
    try:
        asyncio.run(send_forget(kafka_bootstrap, second, "acme", "gone"))
        wait_until(lambda: set(turn_counts(worker)) == {KEPT}, 60, "the second worker to forget the user")
    finally:
        worker.stop()
    scopes = changelog_topic(first, "scopes")
    attempt = [0]
    wait_until(lambda: compacted_away(kafka_bootstrap, scopes, GONE, attempt), 90,
               "compaction to remove the forgotten scope's tombstone from its changelog")

    # Back to the first worker's store, last in step long before the tombstone horizon.
    worker = WorkerProcess(first, kafka_bootstrap, tmp_path / "first-again.log").start()
    try:
        assert turn_counts(worker) == {KEPT: 3}
    finally:
        discard(worker)
    assert "discarding the local store" in (tmp_path / "first-again.log").read_text()


def test_a_store_ahead_of_its_changelog_is_discarded(settings_factory, kafka_bootstrap, tmp_path):
    settings = settings_factory(topic_partitions=1, table_store="rocksdb")
    asyncio.run(ensure_topics(kafka_bootstrap, settings, changelogs=True))
    asyncio.run(produce_lines(kafka_bootstrap, settings, lines(KEPT)))
    worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "first.log").start()
    try:
        wait_until(lambda: turn_counts(worker) == {KEPT: 3}, 60, "the worker to take the turns")
        flush_and_wait_idle(worker, kafka_bootstrap, settings, [KEPT])
    finally:
        worker.stop()

    # The store claims changelog offsets the changelog never had, and holds a scope only it has.
    (path,) = settings.data_dir.glob("worker/*/tables/scopes-0.db")  # Faust's table directory
    db = rocksdict.Rdict(str(path), options=rocksdict.Options(raw_mode=True))
    try:
        db[json.dumps("acme/phantom/barista").encode()] = db[json.dumps(KEPT).encode()]
        db[b"__faust\0offset__"] = b"1000000"
    finally:
        db.close()

    worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "again.log").start(ready_timeout_s=45)
    try:
        assert turn_counts(worker) == {KEPT: 3}
    finally:
        discard(worker)
    assert "past the changelog's end" in (tmp_path / "again.log").read_text()
