"""SIGKILL the sink at random points while records keep arriving; after a restart every record
is in the Parquet files exactly once (the sink half of the crash-safe hand-off)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from credence.kafka import client_options
from credence.config.archive import ArchiveSettings
from credence.sinks.consumer import drain
from credence.sinks.schema import ARCHIVE

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
KILLS = 12
PER_ROUND = 250

# The sink process drains in a loop, as a restarted sink catching up would.
SINK_SCRIPT = """
import asyncio, sys
from credence.config.archive import ArchiveSettings
from credence.sinks.consumer import drain
bootstrap, topic, root, group = sys.argv[1:5]
print("up", flush=True)
settings = ArchiveSettings(root=root, max_rows_per_shard=64, max_bytes_per_shard=64 * 1024)
async def main():
    while True:
        await drain(bootstrap, topic, "archive", settings, group_id=group)
        print("drained", flush=True)
asyncio.run(main())
"""


def record(i: int) -> bytes:
    tenant, day = f"t{i % 4}", 1 + i % 3
    at = f"2026-06-0{day}T12:00:00Z"
    entry = {"id": f"e{i}", "kind": "reflection", "tenant": tenant, "user": f"u{i % 9}", "character": "c",
             "text": "x" * (i % 50), "status": "pending", "version": 1, "archived_at": at}
    return json.dumps({"v": 1, "tenant": tenant, "user": f"u{i % 9}", "character": "c", "entry_id": f"e{i}",
                       "entry_kind": "reflection", "archived_at": at, "reason": "sweep", "entry": entry}).encode()


async def create_topic(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(**client_options(bootstrap))
    await admin.start()
    await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    await admin.close()


async def produce(bootstrap: str, topic: str, ids: range) -> None:
    producer = AIOKafkaProducer(**client_options(bootstrap, acks="all", enable_idempotence=True))
    await producer.start()
    try:
        for i in ids:
            await producer.send(topic, record(i), key=f"scope-{i % 13}".encode())
        await producer.flush()
    finally:
        await producer.stop()


def test_sink_killed_at_random_points_keeps_every_record_exactly_once(kafka_bootstrap, topic_prefix, tmp_path):
    topic, group = f"{topic_prefix}.archive", f"{topic_prefix}-sink"
    root = str(tmp_path / "archive")
    rng = random.Random(int(os.environ.get("CREDENCE_KILL_SEED", "7")))
    asyncio.run(create_topic(kafka_bootstrap, topic))
    produced = 0
    for _ in range(KILLS):
        sink = subprocess.Popen([sys.executable, "-c", SINK_SCRIPT, kafka_bootstrap, topic, root, group],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert sink.stdout.readline().strip() == "up"
            asyncio.run(produce(kafka_bootstrap, topic, range(produced, produced + PER_ROUND)))
            produced += PER_ROUND
            time.sleep(rng.uniform(0.0, 1.0))  # the kill lands at a random point of the sink's work
        finally:
            sink.send_signal(signal.SIGKILL)
            sink.communicate()

    stats = asyncio.run(drain(kafka_bootstrap, topic, ARCHIVE, ArchiveSettings(
        root=root, max_rows_per_shard=64, max_bytes_per_shard=64 * 1024), group_id=group))
    assert stats.records < produced  # the restart resumed from committed spans, not from zero

    table = ds.dataset(f"{root}/archive", format="parquet", partitioning="hive").to_table(["entry_id"])
    seen = Counter(table.column("entry_id").to_pylist())
    assert len(seen) == produced and set(seen.values()) == {1}
    leftovers = [p for p in Path(root).rglob("*.tmp")]  # killed mid-write: invisible to readers
    assert all(p.name.startswith(".") for p in leftovers)
