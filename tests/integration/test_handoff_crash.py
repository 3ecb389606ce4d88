"""The archive hand-off under SIGKILL: while the hourly sweep archives thousands of entries, the worker
and the sink are killed at random points and restarted; in the end the union of the active tables and
the Parquet archive holds every entry exactly once (never in neither place, never twice)."""

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
from datetime import UTC, datetime, timedelta

import pyarrow.dataset as ds
import pytest
from aiokafka import AIOKafkaProducer

from credence.config.archive import ArchiveSettings
from credence.config.pipeline import PipelineSettings
from credence.kafka import client_options
from credence.sinks.consumer import drain
from credence.sinks.schema import ARCHIVE
from credence.streams.ops.admin import ensure_topics
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.pipeline import FAST_GROUP_ENV, discard

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SCOPES = 120
LIKES = ("tea", "coffee", "jazz", "chess", "sushi", "hiking", "cycling", "painting", "poetry", "baking",
         "opera", "karate", "skiing", "gardening", "knitting", "surfing", "origami", "pottery")
KILLS = 10
T0 = datetime(2026, 4, 1, 8, 0, tzinfo=UTC)

SINK = """
import asyncio, sys
from credence.config.archive import ArchiveSettings
from credence.sinks.consumer import drain
bootstrap, topic, root, group = sys.argv[1:5]
settings = ArchiveSettings(root=root, max_rows_per_shard=100)
async def main():
    while True:
        await drain(bootstrap, topic, "archive", settings, group_id=group)
asyncio.run(main())
"""


def turns(day: float, texts_for) -> list[tuple[bytes, bytes]]:
    out = []
    for s in range(SCOPES):
        scope = ("acme", f"user{s:03d}", "barista")
        ts = T0 + timedelta(days=day, minutes=s)
        for i, text in enumerate(texts_for(s)):
            rec = {"v": 1, "tenant": scope[0], "user": scope[1], "character": scope[2],
                   "turn_id": f"d{day}-{s}-{i}", "role": "user", "text": text,
                   "ts": (ts + timedelta(seconds=i)).isoformat().replace("+00:00", "Z")}
            out.append(("/".join(scope).encode(), json.dumps(rec).encode()))
    return out


async def produce(bootstrap: str, topic: str, batch) -> None:
    producer = AIOKafkaProducer(**client_options(bootstrap, acks="all", linger_ms=5))
    await producer.start()
    try:
        for key, value in batch:
            await producer.send(topic, value, key=key)
        await producer.flush()
    finally:
        await producer.stop()


def idle(worker: WorkerProcess, accepted: int):
    s = worker.get("/status")
    return s if s["stats"]["turns_accepted"] >= accepted and s["busy_scopes"] == 0 \
        and s["llm"]["inflight"] == 0 else None


def all_entries(worker: WorkerProcess) -> dict[str, str]:
    out = {}
    for scope in worker.get("/scopes")["scopes"]:
        for e in worker.get(f"/scope/{scope}")["entries"]:
            out[e["id"]] = e["status"]
    return out


def test_worker_and_sink_killed_during_archiving_lose_and_duplicate_nothing(settings_factory, kafka_bootstrap,
                                                                            tmp_path):
    rng = random.Random(int(os.environ.get("CREDENCE_KILL_SEED", "11")))
    per_scope = len(LIKES)
    settings = settings_factory(
        topic_partitions=2,
        pipeline=PipelineSettings(stage1_max_batch=per_scope, ticks_advance_clock=False, tick_interval_seconds=1.0),
    )
    bootstrap, topic = kafka_bootstrap, settings.topic("turns")
    asyncio.run(ensure_topics(bootstrap, settings))
    log = tmp_path / "worker.log"
    # A SIGKILLed worker stays in the group until its session times out: the restart waits that out, so
    # the shortest session the broker allows (6 s, not 10 s) keeps the kill loop's dead time down.
    worker = WorkerProcess(settings, bootstrap, log, extra_env=FAST_GROUP_ENV).start(ready_timeout_s=120)

    # Day 0: each scope states its likes -> one reflection each. Day 1: it takes them all back -> every
    # reflection is below zero from then on. Day 20: a last turn moves event time past 14 sub-zero days.
    asyncio.run(produce(bootstrap, topic, turns(0, lambda s: [f"I like {x}." for x in LIKES])))
    wait_until(lambda: idle(worker, SCOPES * per_scope), 300, "the likes to become reflections")
    created = all_entries(worker)
    assert len(created) == SCOPES * per_scope and set(created.values()) == {"pending"}
    asyncio.run(produce(bootstrap, topic, turns(1, lambda s: [f"I don't like {x}." for x in LIKES])))
    wait_until(lambda: idle(worker, 2 * SCOPES * per_scope), 300, "the rebuttals to be applied")

    archive_root = str(tmp_path / "archive")
    group = f"{settings.app_id}-sink"
    sink_cmd = [sys.executable, "-c", SINK, bootstrap, settings.topic("archive"), archive_root, group]
    sink = subprocess.Popen(sink_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    asyncio.run(produce(bootstrap, topic, turns(20, lambda s: ["ok"])))
    total = 2 * SCOPES * per_scope + SCOPES
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.2, 2.0))  # choose where the kill lands, not a wait for Kafka
            if rng.random() < 0.5:
                worker.kill()
                worker = WorkerProcess(settings, bootstrap, log, extra_env=FAST_GROUP_ENV).start(ready_timeout_s=120)
            else:
                sink.send_signal(signal.SIGKILL)
                sink.wait()
                sink = subprocess.Popen(sink_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: _all_swept(worker, total), 300, "the sweep to finish")
        except Exception:
            scopes = worker.get("/scopes")["scopes"]
            print("turns", sum(v["turns"] for v in scopes.values()), "of", total, "entries left",
                  sum(v["entries"] for v in scopes.values()), "busy", [k for k, v in scopes.items() if not v["idle"]][:5],
                  worker.get("/status"))
            raise
    finally:
        sink.send_signal(signal.SIGKILL)
        sink.wait()
    # The sweep's last archive records are committed with its batch's transaction, which may still be open
    # when the tables already show the entries gone: drain (read_committed) until each is somewhere.
    def accounted() -> bool:
        asyncio.run(drain(bootstrap, settings.topic("archive"), ARCHIVE, ArchiveSettings(root=archive_root,
                          max_rows_per_shard=100), group_id=group))
        shards = ds.dataset(f"{archive_root}/archive", format="parquet", partitioning="hive")
        return set(shards.to_table(["entry_id"]).column("entry_id").to_pylist()) | set(all_entries(worker)) \
            >= set(created)

    wait_until(accounted, 120, "every swept entry to reach the archive")
    active = all_entries(worker)
    discard(worker)

    parquet = ds.dataset(f"{archive_root}/archive", format="parquet", partitioning="hive").to_table(
        ["entry_id", "status", "sub_zero_days"])
    archived = Counter(parquet.column("entry_id").to_pylist())
    assert set(archived.values()) == {1}, "an entry reached the archive twice"
    assert not set(archived) & set(active), "an entry is both active and archived"
    assert set(archived) | set(active) == set(created), "an entry is in neither place"
    assert len(archived) == len(created)  # all were below zero for 14 days
    assert set(parquet.column("status").to_pylist()) == {"archived"}
    assert set(parquet.column("sub_zero_days").to_pylist()) == {14}


def _all_swept(worker: WorkerProcess, total_turns: int) -> bool:
    """Every scope has taken its last turn and no active entry is left to archive."""
    scopes = worker.get("/scopes")["scopes"]
    return sum(s["turns"] for s in scopes.values()) >= total_turns and all(
        s["entries"] == 0 for s in scopes.values())
