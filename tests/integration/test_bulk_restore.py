"""A worker whose local store is gone restores its tables by reading the changelogs in bulk
(streams/state/restore.py): every changelog record goes through that path, none is left to Faust's
record-by-record loop, and the scopes it then shows are exactly those it showed before — as with the bulk
path switched off (Faust's own recovery); on both stores."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from credence.kafka import client_options
from credence.streams.ops.admin import changelog_topic
from credence.streams.ops.worker_process import WorkerProcess
from credence.streams.runtime.topics import STATE_TABLES
from tests.support.pipeline import (
    FAST_GROUP_ENV,
    flush_and_wait_idle,
    pipeline_settings,
    produce_lines,
    sample_lines,
    scope_views,
    scopes_of,
    valid_turn_counts,
    wait_turns,
)

pytestmark = pytest.mark.integration
LINES = sample_lines()[:160]
SCOPES = scopes_of(LINES)


async def changelog_records(bootstrap: str, settings) -> int:
    """Committed records on the table changelogs (no segment is compacted within a test: they roll after
    10 min). Counted by reading them: transaction markers occupy offsets too."""
    consumer = AIOKafkaConsumer(**client_options(bootstrap, settings.kafka, enable_auto_commit=False,
                                                 isolation_level="read_committed"))
    await consumer.start()
    try:
        tps = [TopicPartition(changelog_topic(settings, t), p) for t in STATE_TABLES
               for p in range(settings.topic_partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end, count = await consumer.end_offsets(tps), 0
        while [tp for tp in tps if await consumer.position(tp) < end[tp]]:
            count += sum(len(records) for records in (await consumer.getmany(timeout_ms=1000)).values())
        return count
    finally:
        await consumer.stop()


def test_a_deleted_store_comes_back_whole_from_the_bulk_read(kafka_bootstrap, tmp_path, topic_prefix):
    def start(log: str, **overrides) -> WorkerProcess:
        settings = pipeline_settings(kafka_bootstrap, tmp_path, topic_prefix, **overrides)
        return WorkerProcess(settings, kafka_bootstrap, tmp_path / log, extra_env=FAST_GROUP_ENV).start()

    settings = pipeline_settings(kafka_bootstrap, tmp_path, topic_prefix)
    asyncio.run(produce_lines(kafka_bootstrap, settings, LINES))
    worker = start("first.log", table_store="rocksdb")
    try:
        wait_turns(worker, valid_turn_counts(LINES))
        flush_and_wait_idle(worker, kafka_bootstrap, settings, SCOPES)
        before = scope_views(worker, SCOPES)
    finally:
        worker.stop()
    assert sum(len(v["entries"]) for v in before.values()) > 10  # a state worth restoring
    for store, bulk in (("rocksdb", True), ("memory", True), ("memory", False)):
        shutil.rmtree(Path(settings.data_dir) / "worker")
        records = asyncio.run(changelog_records(kafka_bootstrap, settings))  # each restore's redo replay adds some
        worker = start(f"{store}-{bulk}.log", table_store=store, state={"bulk_restore": bulk})
        try:
            restored = worker.get("/status")["state"]["restored"]
            after = scope_views(worker, SCOPES)
        finally:
            worker.stop()
        assert after == before, f"{store} store, bulk restore {'on' if bulk else 'off'}"
        if bulk:
            # every record, through the bulk path
            assert restored["records"] == records and restored["left"] == 0, restored
        else:
            assert restored["records"] == 0, restored
    assert "changelog records of" in (tmp_path / "rocksdb-True.log").read_text()
    assert "changelog records of" not in (tmp_path / "memory-False.log").read_text()  # Faust's loop did it all
