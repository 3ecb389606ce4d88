"""The state-size half of benchmarks/throughput.py: per-record cost on a scope that already holds 10 /
1,000 / 10,000 entries, and recovery of a worker whose local store is gone against a bare consumer reading
the same changelogs. State is written straight into the table changelogs, as a worker would have."""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from benchmarks.throughput import (
    CHAT,
    DEADLINE_S,
    FACTS,
    PARTITIONS,
    T0,
    cpu_seconds,
    our_settings,
    produce,
    settled,
    turn,
)
from credence.kafka import client_options
from credence.streams.ops.admin import changelog_topic, ensure_topics
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from credence.streams.runtime.topics import STATE_TABLES
from credence.streams.scope.scope_state import ScopeState
from credence.streams.state import codec
from credence.tables.entries import new_reflection
from credence.tables.scope import Scope


async def seed_state(bootstrap: str, settings, scopes: list[str], entries: int) -> None:
    """Write scopes holding `entries` entries each straight into the table changelogs, as a worker
    would have (same key encoding, the scope's partition)."""
    parts = list(range(PARTITIONS))
    partition = DefaultPartitioner()
    producer = AIOKafkaProducer(**client_options(bootstrap, acks="all", linger_ms=20, max_batch_size=1 << 20))
    await producer.start()
    try:
        futures = []
        for scope in scopes:
            p = partition(scope.encode(), parts, parts)
            for i in range(entries):
                entry = new_reflection(f"r-{i:06d}", Scope.parse(scope), f"The user mentioned topic number {i} "
                                       f"while talking about {FACTS[i % len(FACTS)].lower()}", T0 - timedelta(days=1))
                futures.append(await producer.send(changelog_topic(settings, "entries"), codec.encode_entry(entry, 0),
                                                   key=json.dumps(codec.entry_key(scope, entry.id)).encode(), partition=p))
            state = ScopeState(scope=scope, clock=T0 - timedelta(days=1), last_sweep_at=T0 - timedelta(days=1))
            futures.append(await producer.send(changelog_topic(settings, "scopes"), codec.encode_control(state),
                                               key=json.dumps(scope).encode(), partition=p))
        for fut in futures:
            await fut
    finally:
        await producer.stop()


WARM_TURNS = 2  # a user turn and an AI turn: every path a turn takes has met the scope once


def run_per_record(bootstrap: str, entries: int, turns: int, work: Path) -> dict:
    settings = our_settings(bootstrap, work)
    asyncio.run(ensure_topics(bootstrap, settings, changelogs=True))
    scope = "cost/u000/c0"
    asyncio.run(seed_state(bootstrap, settings, [scope], entries))
    worker = WorkerProcess(settings, bootstrap, work / f"{settings.app_id}.log")
    records = [(scope.encode(), turn(scope, n, "user" if n % 2 == 0 else "ai", CHAT[n % len(CHAT)],
                                     T0 + timedelta(seconds=10 * n))) for n in range(WARM_TURNS + turns)]
    try:
        worker.start()
        # The scope's first records load it (decode every entry, build its indexes): a cost per load of
        # the scope, not per record, reported apart.
        cpu = cpu_seconds(worker.proc.pid)
        asyncio.run(produce(bootstrap, settings.topic("turns"), records[:WARM_TURNS]))
        wait_until(lambda: settled(worker, WARM_TURNS), DEADLINE_S, "the scope's first records", 0.05)
        load_cpu = cpu_seconds(worker.proc.pid) - cpu
        started, cpu = time.monotonic(), cpu_seconds(worker.proc.pid)
        asyncio.run(produce(bootstrap, settings.topic("turns"), records[WARM_TURNS:]))
        wait_until(lambda: settled(worker, WARM_TURNS + turns), DEADLINE_S, "the per-record run", 0.05)
        seconds, cpu = time.monotonic() - started, cpu_seconds(worker.proc.pid) - cpu
        held = worker.get("/scopes")["scopes"][scope]["entries"]
    finally:
        worker.stop()
    assert held == entries, f"the scope should hold {entries} entries, holds {held}"
    return {"entries": entries, "turns": turns, "cpu_ms_per_turn": 1000 * cpu / turns,
            "wall_ms_per_turn": 1000 * seconds / turns, "load_cpu_ms": 1000 * load_cpu}


BARE_READER = """
import asyncio, sys, time
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition
from credence.kafka import client_options
async def main(bootstrap, topics, parts):
    started = time.monotonic()
    c = AIOKafkaConsumer(**client_options(bootstrap, enable_auto_commit=False, max_poll_records=10000))
    await c.start()
    tps = [TopicPartition(t, p) for t in topics for p in range(parts)]
    c.assign(tps)
    await c.seek_to_beginning(*tps)
    end = await c.end_offsets(tps)
    n = 0
    left = {tp for tp in tps if end[tp] > 0}
    while left:
        for tp, records in (await c.getmany(timeout_ms=500)).items():
            n += len(records)
            if records and records[-1].offset + 1 >= end[tp]:
                left.discard(tp)
    await c.stop()
    print(n, time.monotonic() - started)
asyncio.run(main(sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])))
"""


def run_recovery(bootstrap: str, scopes: int, entries: int, work: Path, rounds: int = 3) -> dict:
    """A worker whose partitions hold scopes * entries entries starts with no local store (all from the
    changelogs), against a bare consumer process reading the same changelog topics, `rounds` times
    interleaved (medians reported; each round's figures kept). Two comparisons: the read itself (ours: the
    bulk restore the worker reports, its consumer's start to the last record applied; the bare one: its
    consumer's start to the last record read), and process launch to ready."""
    settings = our_settings(bootstrap, work)
    asyncio.run(ensure_topics(bootstrap, settings, changelogs=True))
    names = [f"rec/u{i:03d}/c0" for i in range(scopes)]
    asyncio.run(seed_state(bootstrap, settings, names, entries))
    topics = ",".join(changelog_topic(settings, t) for t in STATE_TABLES)
    each = []
    for _ in range(rounds):
        shutil.rmtree(settings.data_dir, ignore_errors=True)  # the local store deleted: all from the changelogs
        started = time.monotonic()
        out = subprocess.run([sys.executable, "-c", BARE_READER, bootstrap, topics, str(PARTITIONS)],
                             check=True, capture_output=True, text=True)
        bare = time.monotonic() - started
        records, bare_read = out.stdout.split()
        worker = WorkerProcess(settings, bootstrap, work / f"{settings.app_id}.log")
        started = time.monotonic()
        try:
            worker.start(ready_timeout_s=DEADLINE_S)
            ours = time.monotonic() - started
            restored = worker.get("/status")["state"]["restored"]
            held = sum(s["entries"] for s in worker.get("/scopes")["scopes"].values())
        finally:
            worker.stop()
        assert held == scopes * entries, f"recovered {held} entries of {scopes * entries}"
        last = restored["last"]
        assert last["records"] == int(records) and not last["left"], f"not all read in bulk: {restored}"
        each.append({"ours_s": ours, "bare_s": bare, "ours_read_s": last["seconds"], "bare_read_s": float(bare_read)})
    median = {k: statistics.median(r[k] for r in each) for k in each[0]}
    return {"entries": scopes * entries, "changelog_records": int(records), "rounds": each, **median,
            "share_of_bare": median["bare_s"] / median["ours_s"],
            "read_share_of_bare": median["bare_read_s"] / median["ours_read_s"]}
