"""Right to be forgotten: `credence forget TENANT USER` removes the user from the worker's tables (their
changelogs get tombstones) and from every Parquet shard, and leaves everyone else as they were."""

from __future__ import annotations

import asyncio
import json

import pyarrow.dataset as ds
import pytest

from credence.config.pipeline import PipelineSettings
from credence.sinks.consumer import drain
from credence.sinks.schema import ARCHIVE, EVIDENCE
from credence.streams.ops.admin import changelog_topic, ensure_topics
from credence.streams.ops.cli import main as cli
from credence.streams.ops.process import WorkerProcess, wait_until
from credence.streams.ops.replay import replay, send_control
from credence.streams.state import redo

pytestmark = pytest.mark.integration


def turns() -> list[dict]:
    out = []
    for user in ("ann", "ben"):
        for character in ("barista", "tutor"):
            for i, text in enumerate(["I love green tea.", "I am learning Rust.", "I love green tea."]):
                out.append({"v": 1, "tenant": "acme", "user": user, "character": character,
                            "turn_id": f"{user}-{character}-{i}", "role": "user", "text": text,
                            "ts": f"2026-05-0{i + 1}T10:00:00Z"})
    return out


async def read_changelog(bootstrap: str, topic: str) -> dict[str, bytes | None]:
    from aiokafka import AIOKafkaConsumer

    from credence.kafka import client_options

    consumer = AIOKafkaConsumer(topic, **client_options(bootstrap, auto_offset_reset="earliest",
                                                        enable_auto_commit=False, isolation_level="read_committed"))
    await consumer.start()
    latest: dict[str, bytes | None] = {}
    try:
        while batch := await consumer.getmany(timeout_ms=1500):
            for msgs in batch.values():
                for m in msgs:
                    latest[json.loads(m.key) if m.key.startswith(b'"') else m.key.decode()] = m.value
    finally:
        await consumer.stop()
    return latest


def test_forget_removes_the_user_everywhere_and_only_them(settings_factory, kafka_bootstrap, tmp_path, monkeypatch):
    root = tmp_path / "archive"
    settings = settings_factory(topic_partitions=2, archive={"root": str(root)},
                                pipeline=PipelineSettings(stage1_max_batch=1, ticks_advance_clock=False,
                                                          tick_interval_seconds=1.0))
    path = tmp_path / "turns.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in turns()))
    asyncio.run(ensure_topics(kafka_bootstrap, settings))
    worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "worker.log").start()
    try:
        asyncio.run(replay(path, kafka_bootstrap, settings, progress=False))
        asyncio.run(send_control(kafka_bootstrap, settings, [f"acme/{u}/{c}" for u in ("ann", "ben")
                                                             for c in ("barista", "tutor")], "flush"))
        wait_until(lambda: (s := worker.get("/status"))["stats"]["turns_accepted"] == 12
                   and s["busy_scopes"] == 0 and s["llm"]["inflight"] == 0, 60, "the turns to settle")
        asyncio.run(drain(kafka_bootstrap, settings.topic("evidence"), EVIDENCE, settings.archive))
        asyncio.run(drain(kafka_bootstrap, settings.topic("archive"), ARCHIVE, settings.archive))
        before = ds.dataset(root / "evidence", format="parquet", partitioning="hive").to_table(["user"])
        assert set(before.column("user").to_pylist()) == {"ann", "ben"}

        for key, value in settings_env_items(settings).items():
            monkeypatch.setenv(key, value)
        assert cli(["forget", "acme", "ann"]) == 0

        wait_until(lambda: set(worker.get("/scopes")["scopes"]) == {"acme/ben/barista", "acme/ben/tutor"}, 60,
                   "the worker to drop ann's scopes")
        after = ds.dataset(root / "evidence", format="parquet", partitioning="hive").to_table(["user"])
        assert set(after.column("user").to_pylist()) == {"ben"}
        assert after.num_rows == before.num_rows - before.column("user").to_pylist().count("ann")
        # the compacted changelogs hold tombstones for every key of ann's (the value is gone after compaction)
        scopes = asyncio.run(read_changelog(kafka_bootstrap, changelog_topic(settings, "scopes")))
        assert {k for k, v in scopes.items() if "/ann/" in k} and all(
            v is None for k, v in scopes.items() if "/ann/" in k)
        assert all(v is not None for k, v in scopes.items() if "/ben/" in k)
        seen = asyncio.run(read_changelog(kafka_bootstrap, changelog_topic(settings, "seen")))
        assert all(v is None for k, v in seen.items() if "/ann/" in k)
        # each partition's last redo record holds ann's keys only as deletions, and no older, longer batch's
        # part with her data is left beside it
        by_partition: dict[str, list] = {}
        for k, v in seen.items():
            if redo.is_redo_key(k) and v is not None:
                by_partition.setdefault(k.split("\x1f")[1], []).append(redo.decode_part(v))
        assert by_partition and all(len({p.batch for p in parts}) == 1 for parts in by_partition.values())
        assert all(w.value is None for parts in by_partition.values() for w in redo.decode_writes(parts)
                   if "/ann/" in w.key)
        for table in ("entries", "history"):  # each entry and its signal history live under their own keys
            kept = asyncio.run(read_changelog(kafka_bootstrap, changelog_topic(settings, table)))
            assert {k for k in kept if "/ann/" in k} and all(v is None for k, v in kept.items() if "/ann/" in k)
            assert any(v is not None for k, v in kept.items() if "/ben/" in k)
        assert cli(["forget", "acme", "ann", "--archive-only"]) == 0  # idempotent
    finally:
        worker.stop()


def settings_env_items(settings) -> dict[str, str]:
    from credence.streams.ops.process import settings_env

    env = settings_env(settings, settings.kafka_bootstrap)
    return {k: v for k, v in env.items() if k.startswith("CREDENCE_")}
