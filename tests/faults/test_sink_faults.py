"""Sink faults: the archive root becomes unwritable (its folder replaced by a file — a fault even root
cannot write through) or full (the sink runs under a file-size limit, which binds root too: writes fail
with EFBIG like on a full disk). `credence sink --drain` then exits 2 with a clear message and no
traceback, commits no offset, and once the root is writable again one more drain lands every record
exactly once."""

from __future__ import annotations

import asyncio
import json
import resource
import shutil
import signal
import subprocess
import sys
from collections import Counter

import pyarrow.dataset as ds
import pytest
from aiokafka import AIOKafkaProducer

from credence.kafka import client_options
from credence.streams.ops.admin import ensure_topics
from credence.streams.ops.worker_process import settings_env
from tests.support.turns import uncommitted

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
TOTAL = 300


def record(i: int) -> bytes:
    tenant, at = f"t{i % 3}", f"2026-06-0{1 + i % 3}T12:00:00Z"
    entry = {"id": f"e{i}", "kind": "reflection", "tenant": tenant, "user": f"u{i % 7}", "character": "c",
             "text": "x" * (50 + i % 50), "status": "archived", "version": 3, "archived_at": at}
    return json.dumps({"v": 1, "tenant": tenant, "user": f"u{i % 7}", "character": "c", "entry_id": f"e{i}",
                       "entry_kind": "reflection", "archived_at": at, "reason": "sweep", "entry": entry}).encode()


async def produce(bootstrap: str, topic: str) -> None:
    producer = AIOKafkaProducer(**client_options(bootstrap, acks="all"))
    await producer.start()
    try:
        for i in range(TOTAL):
            await producer.send(topic, record(i), key=f"t{i % 3}/u{i % 7}/c".encode(), partition=i % 3)
        await producer.flush()
    finally:
        await producer.stop()


def sink_drain(settings, bootstrap, cwd, file_limit: int | None = None) -> subprocess.CompletedProcess:
    def limit():
        if file_limit is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failing write, not a killed process
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    return subprocess.run([sys.executable, "-m", "credence.streams.ops.cli", "sink", "--drain"], cwd=cwd,
                          env=settings_env(settings, bootstrap), capture_output=True, text=True, timeout=200,
                          preexec_fn=limit, stdin=subprocess.DEVNULL)


def refused(result) -> str:
    out = result.stdout + result.stderr
    assert "Traceback" not in out, out[-3000:]
    assert result.returncode == 2, (result.returncode, out[-2000:])
    assert "cannot publish shard" in result.stderr and "permissions and space" in result.stderr, result.stderr[-1500:]
    return result.stderr


@pytest.mark.parametrize("fault", ["root_is_a_file", "disk_full"])
def test_unwritable_or_full_archive_root_commits_nothing_and_recovers(fault, settings_factory, kafka_bootstrap,
                                                                      tmp_path):
    root = tmp_path / "archive"
    settings = settings_factory(topic_partitions=3)
    # Spans of 50 rows: 100 records per partition seal two spans each, so a healthy drain commits them all.
    settings = settings.model_copy(update={"archive": settings.archive.model_copy(
        update={"root": str(root), "max_rows_per_shard": 50})})
    asyncio.run(ensure_topics(kafka_bootstrap, settings))
    asyncio.run(produce(kafka_bootstrap, settings.topic("archive")))
    group = f"{settings.archive.group_id}.archive"

    if fault == "root_is_a_file":
        root.write_text("not a folder")  # where the sink wants a folder, something it cannot write into
        refused(sink_drain(settings, kafka_bootstrap, tmp_path))
        root.unlink()
    else:
        refused(sink_drain(settings, kafka_bootstrap, tmp_path, file_limit=4096))
    lost = asyncio.run(uncommitted(kafka_bootstrap, group, settings.topic("archive"), 3))
    assert lost == TOTAL, f"offsets were committed for records that never landed ({TOTAL - lost})"

    ok = sink_drain(settings, kafka_bootstrap, tmp_path)
    assert ok.returncode == 0, (ok.stdout + ok.stderr)[-2000:]
    ids = Counter(ds.dataset(str(root / "archive"), format="parquet", partitioning="hive")
                  .to_table(["entry_id"]).column("entry_id").to_pylist())
    assert ids == Counter({f"e{i}": 1 for i in range(TOTAL)})
    assert asyncio.run(uncommitted(kafka_bootstrap, group, settings.topic("archive"), 3)) == 0
    if root.exists():
        shutil.rmtree(root)
