"""Prompt route latency over HTTP at 100 / 1,000 / 10,000 entries per scope, against two baselines
measured in the same run.

    python benchmarks/api_prompt.py [--sizes 100,1000,10000] [--requests 300]

A worker on the embedded broker (or CREDENCE_KAFKA_BOOTSTRAP) recovers scopes of N entries from its
`scopes` changelog (written up front in the table's own format), then one keep-alive HTTP client times
  empty:   GET /v1/…/prompt of a scope with no state (the floor: HTTP, key check, owner lookup, store miss)
  prompt:  GET /v1/…/prompt with a tenant key (auth, store read, rendering, JSON)
  core:    the same scope rendered in-process by the handler's pure part (no HTTP, no store read)
and prints p50/p99 per size and the ratios prompt/empty and prompt/core at the median.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from dataclasses import astuple
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from credence.config import load_settings
from credence.kafka import client_options
from credence.streams.api import reads
from credence.streams.api.tenants import TenantSettings
from credence.streams.ops import tenant_admin
from credence.streams.ops.admin import changelog_topic, ensure_topics
from credence.streams.ops.broker import configured_or_embedded, free_port
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from credence.streams.scope.scope_state import ScopeState
from credence.streams.state import codec
from credence.tables.entries import Entry
from credence.tables.evidence import Evidence
from credence.tables.scope import Scope
from credence.tables.tokens import default_token_counter

NOW = datetime(2026, 6, 1, tzinfo=UTC)
WORDS = "tea coffee rust lisbon cat miso guitar running chess paris tokyo bread jazz garden rain".split()


def scope_state(scope: str, n: int) -> ScopeState:
    tenant, user, character = astuple(Scope.parse(scope))
    entries = {}
    for i in range(n):
        at = NOW - timedelta(hours=i % 500)
        text = f"The user likes {WORDS[i % len(WORDS)]} and {WORDS[(i * 7) % len(WORDS)]} ({i})."
        entries[f"r-{i:06d}"] = Entry(
            id=f"r-{i:06d}", kind="reflection" if i % 5 else "persona", tenant=tenant, user=user,
            character=character, text=text, created_at=at, status="pending" if i % 5 else "active",
            # reflections stay below the confirmed threshold (1.0): a read benchmark whose recall hits the
            # scope (usage records are applied) must not also start thousands of promotions
            evidence=Evidence(reinforcement=(i % 17) / 4 if i % 5 == 0 else (i % 4) / 4, disputation=(i % 5) / 3,
                              rein_last_signal_at=at,
                              disp_last_signal_at=at), updated_at=at)
    return ScopeState(scope=scope, clock=NOW, entries=entries)


async def seed(bootstrap: str, settings, states: list[ScopeState]) -> None:
    await ensure_topics(bootstrap, settings, changelogs=True)
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all",
                                                 max_request_size=50_000_000, compression_type="gzip"))
    await producer.start()
    parts = list(range(settings.topic_partitions))
    try:
        for state in states:  # the changelog partition is the scope's input partition (raw key hash)
            # The store's own layout (codec schema 2): one key per entry, then the scope's control value.
            partition = DefaultPartitioner()(state.scope.encode(), parts, parts)
            futures = [await producer.send(changelog_topic(settings, "entries"), codec.encode_entry(entry, 0),
                                           key=json.dumps(codec.entry_key(state.scope, eid)).encode(),
                                           partition=partition)
                       for eid, entry in state.entries.items()]
            futures.append(await producer.send(changelog_topic(settings, "scopes"), codec.encode_control(state),
                                               key=json.dumps(state.scope).encode(), partition=partition))
            for fut in futures:
                await fut
    finally:
        await producer.stop()


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--requests", type=int, default=300)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="credence-bench-") as tmp, \
            configured_or_embedded(load_settings(), Path(tmp) / "broker") as bootstrap:
        root = Path(tmp)
        settings = load_settings(kafka_bootstrap=bootstrap, topic_prefix="bench", app_id="bench-app",
                                 data_dir=root / "data", web_port=free_port(), topic_partitions=2,
                                 table_store="memory", core_config_path=root / "core.json")
        api_defaults = settings.api.model_copy(update={"requests_per_second": 1e6, "burst": 10**6})
        # No ticks: nothing rewrites the seeded scopes while they are read (a 1,000-entry scope is ~1 MB as
        # one value on the schema-1 layout, at the producer's size limit).
        settings = settings.model_copy(update={"api": api_defaults, "pipeline": settings.pipeline.model_copy(
            update={"tick_interval_seconds": 0.0, "recall_warm_up": False})})  # the prompt route needs no model
        states = [scope_state(f"bench/u{n}/c", n) for n in sizes]
        asyncio.run(seed(bootstrap, settings, states))
        key = asyncio.run(tenant_admin.add(bootstrap, settings, "bench", TenantSettings()))
        worker = WorkerProcess(settings, bootstrap, root / "worker.log")
        try:
            worker.start()
            wait_until(lambda: len(worker.get("/scopes")["scopes"]) == len(sizes), 120, "the scopes to recover")
            run(worker, key, states, settings, args.requests)
        except BaseException:
            print((root / "worker.log").read_text(errors="replace")[-3000:], file=sys.stderr)
            Path("/tmp/bench-worker.log").write_bytes((root / "worker.log").read_bytes())
            raise
        finally:
            worker.stop()
    return 0


def run(worker: WorkerProcess, key: str, states: list[ScopeState], settings, n: int) -> None:
    count = default_token_counter()
    print(f"{'entries':>8} {'empty p50/p99 ms':>18} {'prompt p50/p99 ms':>18} {'core p50/p99 ms':>16} "
          f"{'prompt/empty':>13} {'prompt/core':>11}")
    with httpx.Client(base_url=worker.url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        for state in states:
            scope = Scope.parse(state.scope)
            path = f"/v1/tenants/bench/users/{scope.user}/characters/{scope.character}/prompt"
            assert http.get(path).json()["entries"], "the prompt is empty: the scope did not recover"
            entries = list(state.entries.values())
            rounds = {"empty": [], "prompt": [], "core": []}
            empty = "/v1/tenants/bench/users/nobody/characters/c/prompt"
            for _ in range(3):  # interleaved, so drift hits every variant alike
                rounds["empty"] += timed(lambda: http.get(empty).raise_for_status(), n // 3)
                rounds["prompt"] += timed(lambda: http.get(path).raise_for_status(), n // 3)
                rounds["core"] += timed(lambda: reads.prompt(scope, entries, [], state.clock, settings.memory,
                                                             count).model_dump_json(), max(3, n // 30))
            s, p, c = (rounds[k] for k in ("empty", "prompt", "core"))
            print(f"{len(entries):>8} {pct(s, .5):>8.2f}/{pct(s, .99):<8.2f} {pct(p, .5):>8.2f}/{pct(p, .99):<8.2f}"
                  f" {pct(c, .5):>7.2f}/{pct(c, .99):<7.2f} {statistics.median(p) / statistics.median(s):>13.1f}"
                  f" {statistics.median(p) / statistics.median(c):>11.2f}")


if __name__ == "__main__":
    sys.exit(main())
