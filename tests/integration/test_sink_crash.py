"""SIGKILL a sink at random points while records keep arriving (every sink the registry knows, through the
same runner and interface `credence sink` uses), or halfway through a shard's upload to object storage;
after a restart every record is in the sink's files exactly once (the sink half of the crash-safe hand-off)."""

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

from credence.config import load_settings
from credence.kafka import client_options
from credence.sinks.consumer import SinkRunner
from credence.sinks.registry import SINKS, build_sinks
from credence.sinks.schema import ARCHIVE
from credence.sinks.shards import list_shards, open_archive
from tests.support.relay import StallingRelay

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
KILLS = 12
PER_ROUND = 250

# The sink process drains in a loop, as a restarted sink catching up would: one registered sink, built
# from settings like `credence sink` builds it.
SINK_SCRIPT = """
import asyncio, json, sys
from credence.config import load_settings
from credence.sinks.consumer import SinkRunner
from credence.sinks.registry import build_sinks
bootstrap, name, overrides = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
settings = load_settings(**overrides)
print("up", flush=True)
async def main():
    while True:
        (sink,) = build_sinks(settings, (name,))
        await SinkRunner(sink, bootstrap).drain()
        print("drained", flush=True)
asyncio.run(main())
"""


def sink_overrides(topic_prefix: str, root: str) -> dict:
    """Settings of the killed sinks and of the final drain: small spans, so kills land between seals."""
    return {"topic_prefix": topic_prefix, "archive": {
        "root": root, "max_rows_per_shard": 64, "max_bytes_per_shard": 64 * 1024, "group_id": f"{topic_prefix}-sink"}}


def start_sink(bootstrap: str, name: str, overrides: dict, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SINK_SCRIPT, bootstrap, name, json.dumps(overrides)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)


def drain_once(bootstrap: str, name: str, overrides: dict):
    (sink,) = build_sinks(load_settings(**overrides), (name,))
    return asyncio.run(SinkRunner(sink, bootstrap).drain())


def record(i: int) -> bytes:
    tenant, day = f"t{i % 4}", 1 + i % 3
    at = f"2026-06-0{day}T12:00:00Z"
    entry = {"id": f"e{i}", "kind": "reflection", "tenant": tenant, "user": f"u{i % 9}", "character": "c",
             "text": "x" * (i % 50), "status": "pending", "version": 1, "archived_at": at}
    return json.dumps({"v": 1, "tenant": tenant, "user": f"u{i % 9}", "character": "c", "entry_id": f"e{i}",
                       "entry_kind": "reflection", "archived_at": at, "reason": "sweep", "entry": entry}).encode()


def evidence_record(i: int) -> bytes:
    tenant, at = f"t{i % 4}", f"2026-06-0{1 + i % 3}T12:00:00Z"
    entry = {"id": f"e{i}", "kind": "reflection", "tenant": tenant, "user": f"u{i % 9}", "character": "c",
             "text": "x" * (i % 50), "status": "pending", "version": 1, "updated_at": at}
    return json.dumps({"v": 1, "event_id": f"e{i}@1", "tenant": tenant, "user": f"u{i % 9}", "character": "c",
                       "entry_id": f"e{i}", "entry_kind": "reflection", "event": "created", "cause": None,
                       "from_status": None, "to_status": "pending", "at": at, "score": 0.5, "tier": "pending",
                       "entry": entry}).encode()


def landed(column: str):
    """Every value of ``column`` the sink's table holds, read back from the Parquet files under the root."""
    def read(root: str, table: str) -> list:
        return ds.dataset(f"{root}/{table}", format="parquet", partitioning="hive").to_table([column]) \
            .column(column).to_pylist()
    return read


# Per registered sink: the record of its topic numbered i, and how to read back the identities it landed.
# A sink added to the registry without an entry here fails test_every_registered_sink_is_crash_tested.
CRASH_FEEDS = {
    "archive": (record, landed("entry_id")),
    "evidence": (evidence_record, landed("event_id")),
}


def test_every_registered_sink_is_crash_tested():
    assert set(CRASH_FEEDS) == set(SINKS)


async def create_topic(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(**client_options(bootstrap))
    await admin.start()
    await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    await admin.close()


async def produce(bootstrap: str, topic: str, ids: range, make=record) -> None:
    producer = AIOKafkaProducer(**client_options(bootstrap, acks="all", enable_idempotence=True))
    await producer.start()
    try:
        for i in ids:
            await producer.send(topic, make(i), key=f"scope-{i % 13}".encode())
        await producer.flush()
    finally:
        await producer.stop()


@pytest.mark.parametrize("name", sorted(CRASH_FEEDS))
def test_sink_killed_at_random_points_keeps_every_record_exactly_once(name, kafka_bootstrap, topic_prefix,
                                                                      tmp_path):
    make, read_back = CRASH_FEEDS[name]
    topic, root = f"{topic_prefix}.{name}", str(tmp_path / "archive")
    overrides = sink_overrides(topic_prefix, root)
    rng = random.Random(int(os.environ.get("CREDENCE_KILL_SEED", "7")))
    asyncio.run(create_topic(kafka_bootstrap, topic))
    produced = 0
    for _ in range(KILLS):
        sink = start_sink(kafka_bootstrap, name, overrides)
        try:
            assert sink.stdout.readline().strip() == "up"
            asyncio.run(produce(kafka_bootstrap, topic, range(produced, produced + PER_ROUND), make))
            produced += PER_ROUND
            time.sleep(rng.uniform(0.0, 1.0))  # the kill lands at a random point of the sink's work
        finally:
            sink.send_signal(signal.SIGKILL)
            sink.communicate()

    stats = drain_once(kafka_bootstrap, name, overrides)
    assert stats.records < produced  # the restart resumed from committed offsets, not from zero

    seen = Counter(read_back(root, name))
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
    topic, overrides = f"{topic_prefix}.archive", sink_overrides(topic_prefix, s3_root)
    asyncio.run(create_topic(kafka_bootstrap, topic))
    asyncio.run(produce(kafka_bootstrap, topic, range(0, 300)))  # ~100 per partition: a span sealed in each
    relay = StallingRelay(object_store.port, r"/archive/archive/.*\.parquet")
    env = os.environ | {"AWS_ENDPOINT_URL": relay.endpoint}
    sink = start_sink(kafka_bootstrap, ARCHIVE, overrides, env)
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

    stats = drain_once(kafka_bootstrap, ARCHIVE, overrides)
    assert 0 < stats.records < 450  # resumed from the committed spans, not from zero
    after = shard_bytes(s3_root)
    key = unquote(relay.stalled_path.split("?")[0].lstrip("/"))
    assert key in after and after[key] != before.get(key)  # the frozen upload's shard, now rewritten whole
    entry_ids = Counter()
    for data in after.values():
        entry_ids.update(pq.read_table(pa.BufferReader(data), columns=["entry_id"]).column("entry_id").to_pylist())
    assert len(entry_ids) == 450 and set(entry_ids.values()) == {1}
