"""The archive sink against the real broker: every snapshot field lands in Parquet, dead letters
go to their topic, and replays or incremental runs leave a byte-identical file set."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from credence.config.archive import ArchiveSettings
from credence.kafka import client_options
from credence.sinks.consumer import SinkRunner, drain
from credence.sinks.forget import forget_user
from credence.sinks.parquet import ParquetSink
from credence.sinks.schema import ARCHIVE, IDENTITY_KEYS, SNAPSHOT_FIELDS, to_row

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
PARTITIONS = 3


def run_async(test):
    """Run an async test body on a fresh loop (the suite needs no asyncio plugin)."""
    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))
    return wrapper


def archive_record(i: int) -> dict:
    tenant, user, character = f"tenant-{i % 3}", f"user {i % 5}", f"char-{i % 2}"
    day = 1 + i % 4
    entry = {
        "id": f"e{i}", "kind": "persona" if i % 7 == 0 else "reflection", "tenant": tenant, "user": user,
        "character": character, "text": f"observation {i} ✓", "subject": None if i % 2 else "topic",
        "importance": 1 + i % 10, "source_fact_ids": [f"f{i}", f"f{i + 1}"], "protected": False,
        "status": "pending", "evidence": {
            "reinforcement": -0.2 * (i % 3), "disputation": 2.5, "rein_last_signal_at": f"2026-04-0{day}T01:02:03.000004Z",
            "disp_last_signal_at": None, "sub_zero_days": 14, "sub_zero_last_increment_date": f"2026-04-0{day}",
            "user_fact_reinforce_count": i % 4,
        },
        "created_at": "2026-03-01T00:00:00Z", "confirmed_at": None, "promoted_at": None,
        "merged_from_ids": [f"m{i}"] if i % 5 == 0 else [], "merged_into_id": None, "promote_attempts": i % 2,
        "last_promote_attempt_at": None, "recent_mentions": ["2026-03-02T00:00:00Z"], "suppressed_at": None,
        "version": i, "updated_at": f"2026-04-0{day}T10:00:00Z", "archived_at": f"2026-04-0{day}T10:00:00Z",
        "promotion_rejected_at": f"2026-04-0{day}T09:30:00Z" if i % 6 == 0 else None,
        "valid_from": "2026-03-01T00:00:00Z", "invalidated_at": None,
        "usage": {"strength": 0.15 * (i % 4) or None, "reinforce_count": i % 4,
                  "last_reinforced_at": f"2026-04-0{day}T09:00:00Z" if i % 4 else None,
                  "since": "2026-03-01T00:00:00Z", "reinforced_day": None, "reinforced_sources": [],
                  "soft_archived_from": None},
        "tags": ["work", f"t{i % 3}"] if i % 2 else [],
    }
    return {"v": 1, "tenant": tenant, "user": user, "character": character, "entry_id": entry["id"],
            "entry_kind": entry["kind"], "archived_at": f"2026-04-0{day}T10:00:00Z", "reason": "sweep", "entry": entry}


async def create_topics(bootstrap: str, *names: str) -> None:
    admin = AIOKafkaAdminClient(**client_options(bootstrap))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, num_partitions=PARTITIONS, replication_factor=1) for n in names])
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(**client_options(bootstrap, acks="all", enable_idempotence=True))
    await producer.start()
    try:
        for i, value in enumerate(values):
            await producer.send(topic, value, key=f"scope-{i % 11}".encode())
        await producer.flush()
    finally:
        await producer.stop()


async def consume_all(bootstrap: str, topic: str, expected: int) -> list[dict]:
    consumer = AIOKafkaConsumer(topic, **client_options(bootstrap, auto_offset_reset="earliest"))
    await consumer.start()
    out: list[dict] = []
    try:
        async with asyncio.timeout(30):
            while len(out) < expected:
                for messages in (await consumer.getmany(timeout_ms=500)).values():
                    out += [json.loads(m.value) for m in messages]
    finally:
        await consumer.stop()
    return out


def digest(root: str) -> dict[str, str]:
    base = Path(root)
    return {str(p.relative_to(base)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(base.rglob("*")) if p.is_file()}


def read_rows(root: str) -> list[dict]:
    dataset = ds.dataset(f"{root}/archive", format="parquet", partitioning="hive")
    return dataset.to_table().to_pylist()


@pytest.fixture
def sink_settings(tmp_path):
    return ArchiveSettings(root=str(tmp_path / "archive"), max_rows_per_shard=16)


@run_async
async def test_archived_entries_land_with_every_snapshot_field(kafka_bootstrap, topic_prefix, sink_settings):
    topic, dlq = f"{topic_prefix}.archive", f"{topic_prefix}.dlq"
    await create_topics(kafka_bootstrap, topic, dlq)
    records = [archive_record(i) for i in range(120)]
    await produce(kafka_bootstrap, topic, [json.dumps(r).encode() for r in records] + [b"not json", b'{"v": 1}'])

    stats = await drain(kafka_bootstrap, topic, ARCHIVE, sink_settings, dead_letter_topic=dlq)

    assert (stats.rows, stats.dead_lettered) == (120, 2)
    rows = {r["entry_id"]: r for r in read_rows(sink_settings.root)}
    assert len(rows) == 120
    for record in records:
        row = rows[record["entry_id"]]
        assert json.loads(row["snapshot_json"]) == record["entry"]
        expected = to_row(ARCHIVE, record, row["topic_partition"], row["offset"]).values
        assert {k: row[k] for k in expected} == expected
        assert (row["tenant"], row["kind"], str(row["date"])) == (record["tenant"], record["entry_kind"],
                                                                 record["archived_at"][:10])
    mapped = set(IDENTITY_KEYS) | {k.split(".")[0] for k, _, _ in SNAPSHOT_FIELDS}
    assert mapped == set(records[0]["entry"])  # every Entry key has its column
    dead = await consume_all(kafka_bootstrap, dlq, 2)
    assert sorted(d["reason"].split(":")[0] for d in dead) == ["'tenant' must be a non-empty string, got None",
                                                                "not valid JSON"]


@run_async
async def test_replay_from_the_start_leaves_the_file_set_byte_identical(kafka_bootstrap, topic_prefix, sink_settings):
    topic = f"{topic_prefix}.archive"
    await create_topics(kafka_bootstrap, topic)
    values = [json.dumps(archive_record(i)).encode() for i in range(200)]
    # Produced in two rounds with a drain in between: the first drain publishes open spans early.
    await produce(kafka_bootstrap, topic, values[:77])
    await drain(kafka_bootstrap, topic, ARCHIVE, sink_settings)
    await produce(kafka_bootstrap, topic, values[77:])
    await drain(kafka_bootstrap, topic, ARCHIVE, sink_settings)
    incremental = digest(sink_settings.root)

    stats = await drain(kafka_bootstrap, topic, ARCHIVE, sink_settings, from_beginning=True)
    assert stats.rows == 200
    assert digest(sink_settings.root) == incremental

    fresh = sink_settings.model_copy(update={"root": sink_settings.root + "-fresh"})
    await drain(kafka_bootstrap, topic, ARCHIVE, fresh, group_id=f"{topic_prefix}-fresh")
    assert digest(fresh.root) == incremental
    offsets = sorted((r["topic_partition"], r["offset"]) for r in read_rows(sink_settings.root))
    assert len(offsets) == len(set(offsets)) == 200


@run_async
async def test_group_member_publishes_after_the_flush_interval_and_stops(kafka_bootstrap, topic_prefix, sink_settings):
    topic = f"{topic_prefix}.archive"
    await create_topics(kafka_bootstrap, topic)
    settings = sink_settings.model_copy(update={"flush_interval_seconds": 0.1, "max_rows_per_shard": 1000})
    await produce(kafka_bootstrap, topic, [json.dumps(archive_record(i)).encode() for i in range(30)])
    sink = SinkRunner(ParquetSink(topic, ARCHIVE, settings, group_id=f"{topic_prefix}-live"), kafka_bootstrap)
    stop = asyncio.Event()
    task = asyncio.create_task(sink.run(stop))
    async with asyncio.timeout(60):
        while not (Path(settings.root).exists() and len(read_rows(settings.root)) == 30):
            await asyncio.sleep(0.05)  # polling the outcome, not waiting for time to pass
    stop.set()
    stats = await task
    assert stats.rows == 30 and stats.committed == {}  # spans still open: nothing committed past them


@run_async
async def test_a_commit_moved_into_a_span_restarts_at_the_span_start(kafka_bootstrap, topic_prefix, sink_settings):
    topic, group = f"{topic_prefix}.archive", f"{topic_prefix}-moved"
    await create_topics(kafka_bootstrap, topic)
    await produce(kafka_bootstrap, topic, [json.dumps(archive_record(i)).encode() for i in range(90)])
    await drain(kafka_bootstrap, topic, ARCHIVE, sink_settings, group_id=group)
    before = digest(sink_settings.root)
    consumer = AIOKafkaConsumer(**client_options(kafka_bootstrap, group_id=group, enable_auto_commit=False))
    await consumer.start()
    try:  # an operator resets the group to an offset inside a span
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        await consumer.commit({tp: 5 for tp in partitions})
    finally:
        await consumer.stop()
    await drain(kafka_bootstrap, topic, ARCHIVE, sink_settings, group_id=group)
    assert digest(sink_settings.root) == before


@run_async
async def test_a_forgotten_user_stays_out_of_later_writes_and_replays(kafka_bootstrap, topic_prefix, sink_settings):
    topic = f"{topic_prefix}.archive"
    await create_topics(kafka_bootstrap, topic)
    values = [json.dumps(archive_record(i)).encode() for i in range(100)]
    await produce(kafka_bootstrap, topic, values[:50])
    await drain(kafka_bootstrap, topic, ARCHIVE, sink_settings)
    report = forget_user(sink_settings.root, "tenant-0", "user 0", sink_settings)
    assert report.rows_removed > 0
    await produce(kafka_bootstrap, topic, values[50:])
    await drain(kafka_bootstrap, topic, ARCHIVE, sink_settings)
    await drain(kafka_bootstrap, topic, ARCHIVE, sink_settings, from_beginning=True)

    rows = read_rows(sink_settings.root)
    forgotten = {f"e{i}" for i in range(100) if i % 3 == 0 and i % 5 == 0}
    assert {r["entry_id"] for r in rows} == {f"e{i}" for i in range(100)} - forgotten
    assert len(rows) == 100 - len(forgotten)


@run_async
async def test_redelivered_records_land_exactly_once_and_replay_identically(kafka_bootstrap, topic_prefix,
                                                                            sink_settings):
    """At-least-once delivery: a crashed worker re-sends some archive records (same entry_id and
    version, same key, later offsets; some within a span, some spans later, some after a drain)."""
    topic = f"{topic_prefix}.archive"
    await create_topics(kafka_bootstrap, topic)

    def message(i: int) -> tuple[bytes, bytes]:
        return f"scope-{i % 11}".encode(), json.dumps(archive_record(i)).encode()

    first = [message(i) for i in range(120)] + [message(i) for i in (3, 4, 5, 60, 61, 118, 119)]
    second = [message(i) for i in range(120, 160)] + [message(i) for i in (0, 3, 130, 159)]
    redelivered = len(first) + len(second) - 160
    earliest: dict[str, tuple[int, int]] = {}  # entry_id -> (partition, offset) of its first delivery

    async def send(batch):
        futures = [await producer.send(topic, value, key=key) for key, value in batch]
        for (_, value), meta in zip(batch, await asyncio.gather(*futures)):
            earliest.setdefault(json.loads(value)["entry_id"], (meta.partition, meta.offset))

    producer = AIOKafkaProducer(**client_options(kafka_bootstrap, acks="all", enable_idempotence=True))
    await producer.start()
    try:
        await send(first)
        stats = await drain(kafka_bootstrap, topic, ARCHIVE, sink_settings)  # publishes open spans early
        await send(second)
    finally:
        await producer.stop()
    stats2 = await drain(kafka_bootstrap, topic, ARCHIVE, sink_settings)  # resumes at committed span starts

    rows = read_rows(sink_settings.root)
    assert sorted(r["entry_id"] for r in rows) == sorted(f"e{i}" for i in range(160))
    assert stats.duplicates_dropped == 7 and stats2.duplicates_dropped >= 4
    assert {r["entry_id"]: (r["topic_partition"], r["offset"]) for r in rows} == earliest  # first offset won
    incremental = digest(sink_settings.root)

    replay = await drain(kafka_bootstrap, topic, ARCHIVE, sink_settings, from_beginning=True)
    assert (replay.rows, replay.duplicates_dropped) == (160 + redelivered, redelivered)
    assert digest(sink_settings.root) == incremental

    fresh = sink_settings.model_copy(update={"root": sink_settings.root + "-fresh"})
    await drain(kafka_bootstrap, topic, ARCHIVE, fresh, group_id=f"{topic_prefix}-fresh")
    assert digest(fresh.root) == incremental
