"""SIGKILL the sink at random points while records keep arriving, or halfway through a shard's upload to
object storage; after a restart every record is in the Parquet files exactly once (the sink half of the
crash-safe hand-off)."""

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
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from credence.kafka import client_options
from credence.config.archive import ArchiveSettings
from credence.sinks.consumer import drain
from credence.sinks.schema import ARCHIVE
from credence.sinks.shards import list_shards, open_archive
from tests.support.relay import StallingRelay

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


def shard_bytes(root: str) -> dict[str, bytes]:
    """Every visible archive shard under an s3:// root: its key -> its bytes, read straight from the server."""
    archive = open_archive(root)
    out = {}
    for path in list_shards(archive, ARCHIVE):
        with archive.fs.open_input_stream(path) as stream:
            out[path] = stream.read()
    return out


def test_sink_killed_mid_upload_to_s3_leaves_whole_shards_and_every_record_once(kafka_bootstrap, topic_prefix,
                                                                                 s3_root, object_store):
    """The sink reaches the S3 server through a relay that freezes its next shard upload halfway through the
    body; the sink is SIGKILLed there. Readers still see the previous whole shard (or none), and a restarted
    sink lands every record exactly once, resuming from the spans committed before the kill."""
    topic, group = f"{topic_prefix}.archive", f"{topic_prefix}-sink"
    settings = ArchiveSettings(root=s3_root, max_rows_per_shard=64, max_bytes_per_shard=64 * 1024)
    asyncio.run(create_topic(kafka_bootstrap, topic))
    asyncio.run(produce(kafka_bootstrap, topic, range(0, 300)))  # ~100 per partition: a span sealed in each
    relay = StallingRelay(object_store.port, r"/archive/archive/.*\.parquet")
    env = os.environ | {"AWS_ENDPOINT_URL": relay.endpoint}
    sink = subprocess.Popen([sys.executable, "-c", SINK_SCRIPT, kafka_bootstrap, topic, s3_root, group],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert sink.stdout.readline().strip() == "up"
        assert sink.stdout.readline().strip() == "drained"
        before = shard_bytes(s3_root)
        assert before, "the first drain published nothing through the relay"
        relay.armed.set()
        asyncio.run(produce(kafka_bootstrap, topic, range(300, 450)))
        assert relay.stalled.wait(60), "the sink never uploaded another shard"
    finally:
        sink.send_signal(signal.SIGKILL)
        sink.communicate()
    assert shard_bytes(s3_root) == before  # mid-upload: the shard being replaced is still the old, whole one
    relay.close()  # the server now sees the upload's connection end halfway through the body
    assert shard_bytes(s3_root) == before

    stats = asyncio.run(drain(kafka_bootstrap, topic, ARCHIVE, settings, group_id=group))
    assert 0 < stats.records < 450  # resumed from the committed spans, not from zero
    after = shard_bytes(s3_root)
    key = unquote(relay.stalled_path.split("?")[0].lstrip("/"))
    assert key in after and after[key] != before.get(key)  # the frozen upload's shard, now rewritten whole
    entry_ids = Counter()
    for data in after.values():
        entry_ids.update(pq.read_table(pa.BufferReader(data), columns=["entry_id"]).column("entry_id").to_pylist())
    assert len(entry_ids) == 450 and set(entry_ids.values()) == {1}
