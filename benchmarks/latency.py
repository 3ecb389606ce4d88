"""Latency at half of max throughput, on one worker (rules backend, Stage-1 window of one turn), against
raw Kafka on the same broker in the same run: turn → evidence (a statement produced → the first journal
event of its entry) and retraction (a rendered reflection denied, explicitly and surfaced → out of the
scope's rendered memory block), each beside its produce → consume floor.

The method in full: docs/design/benchmarks.md ("Latency").

    python benchmarks/latency.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from dataclasses import astuple
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import Row, create_topics, kafka_and_folder, pct  # noqa: E402
from credence.kafka import client_options  # noqa: E402
from credence.tables.scope import Scope, scope_key  # noqa: E402

KAFKA = None  # the connection's security settings: set by measure() from the run's settings

T0 = datetime(2027, 1, 4, 8, 0, tzinfo=UTC)
THINGS = ("tea", "jazz", "chess", "sushi", "opera", "karate", "pottery", "sailing", "tango", "cricket")


def _iso(ts: datetime) -> str:
    return ts.isoformat().replace("+00:00", "Z")


def _turn(scope: tuple[str, str, str], n: int, ts: datetime, text: str, role: str = "user", **kw) -> bytes:
    t, u, c = scope
    return json.dumps({"v": 1, "tenant": t, "user": u, "character": c, "turn_id": f"lat-{n}", "role": role,
                       "text": text, "ts": _iso(ts), **kw}).encode()


class Load:
    """Statement turns over many scopes, each scope's clock strictly increasing."""

    def __init__(self, scopes: int, tag: str) -> None:
        self.scopes = [("load", f"{tag}-u{i:04d}", "barista") for i in range(scopes)]
        self.n = 0

    def next(self) -> tuple[tuple[str, str, str], datetime, bytes]:
        i = self.n
        self.n += 1
        scope = self.scopes[i % len(self.scopes)]
        ts = T0 + timedelta(minutes=i)
        text = f"I love {THINGS[i % len(THINGS)]} number {i}."
        return scope, ts, _turn(scope, i, ts, text)


async def paced(producer, topic: str, load: Load, rate: float, seconds: float, sent: dict | None = None) -> int:
    """Produce load turns at `rate`/s for `seconds`; record (scope key, ts) → send time in `sent`."""
    start = time.monotonic()
    count = 0
    while (elapsed := time.monotonic() - start) < seconds:
        due = int(elapsed * rate) + 1
        while count < due:
            scope, ts, value = load.next()
            key = scope_key(*scope)
            fut = await producer.send(topic, value, key=key.encode())
            if sent is not None:
                sent[(key, ts)] = time.monotonic()
            count += 1
            del fut
        await asyncio.sleep(0.005)  # pacing the producer, not waiting for Kafka
    await producer.flush()
    return count


async def arrivals(bootstrap: str, topic: str, parts: int, stop: asyncio.Event, seen: dict, key_of) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(**client_options(bootstrap, KAFKA, enable_auto_commit=False,
                                                 auto_offset_reset="latest"))
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(parts)]
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)
        for tp in tps:
            await consumer.position(tp)
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=100)
            now = time.monotonic()
            for records in batch.values():
                for r in records:
                    k = key_of(r)
                    if k is not None:
                        seen.setdefault(k, now)
    finally:
        await consumer.stop()


def _evidence_key(record):
    e = json.loads(record.value)
    at = datetime.fromisoformat(e["at"].replace("Z", "+00:00"))
    return (scope_key(e["tenant"], e["user"], e["character"]), at)


def _raw_key(record):
    d = json.loads(record.value)
    return (scope_key(d["tenant"], d["user"], d["character"]), datetime.fromisoformat(d["ts"].replace("Z", "+00:00")))


async def timed_flow(bootstrap: str, produce_topic: str, watch_topic: str, parts: int, key_of, load: Load,
                     rate: float, seconds: float, settle_s: float = 20.0) -> list[float]:
    from aiokafka import AIOKafkaProducer

    seen: dict = {}
    sent: dict = {}
    stop = asyncio.Event()
    watcher = asyncio.create_task(arrivals(bootstrap, watch_topic, parts, stop, seen, key_of))
    await asyncio.sleep(1.0)  # let the consumer take its end offsets before the first send
    producer = AIOKafkaProducer(**client_options(bootstrap, KAFKA, acks="all", linger_ms=5))
    await producer.start()
    try:
        await paced(producer, produce_topic, load, rate, seconds, sent)
    finally:
        await producer.stop()
    deadline = time.monotonic() + settle_s
    while time.monotonic() < deadline and not set(sent) <= set(seen):
        await asyncio.sleep(0.1)
    stop.set()
    await watcher
    return [seen[k] - t for k, t in sent.items() if k in seen]


def measure(bootstrap: str, work: Path, quick: bool) -> dict:
    from credence.config import load_settings
    from credence.config.pipeline import PipelineSettings
    from credence.streams.ops.admin import ensure_topics
    from credence.streams.ops.broker import free_port
    from credence.streams.ops.worker_process import WorkerProcess, wait_until
    from tests.faults.harness import taken_in
    from tests.support.pipeline import produce_lines

    global KAFKA
    tag = uuid.uuid4().hex[:8]
    settings = load_settings(
        kafka_bootstrap=bootstrap, topic_prefix=f"lat{tag}", app_id=f"lat-{tag}", data_dir=work / tag,
        web_port=free_port(), topic_partitions=4,
        pipeline=PipelineSettings(stage1_max_batch=1, ticks_advance_clock=False, tick_interval_seconds=2.0,
                                  recall_warm_up=False))
    KAFKA = settings.kafka
    asyncio.run(ensure_topics(bootstrap, settings))
    worker = WorkerProcess(settings, bootstrap, work / f"{tag}.log").start(ready_timeout_s=120)
    try:
        burst = 400 if quick else 3000
        load = Load(100 if quick else 300, "burst")
        lines = [load.next()[2] for _ in range(burst)]
        t0 = time.monotonic()
        asyncio.run(produce_lines(bootstrap, settings, lines))
        # Max throughput = turns fully processed per second: taken in AND their LLM work done (a rate
        # that only counts intake would leave the LLM queue growing without bound at "half" of it).
        wait_until(lambda: taken_in(worker) >= burst and _idle(worker), 900, "the burst to be processed",
                   poll_s=0.05)
        max_rate = burst / (time.monotonic() - t0)
        half = max_rate / 2
        seconds = 10.0 if quick else 45.0
        raw_topic = settings.topic("rawlatency")
        asyncio.run(create_topics(bootstrap, [raw_topic], settings.topic_partitions, KAFKA))
        raw = asyncio.run(timed_flow(bootstrap, raw_topic, raw_topic, settings.topic_partitions, _raw_key,
                                     Load(300, "raw"), half, seconds))
        ours = asyncio.run(timed_flow(bootstrap, settings.topic("turns"), settings.topic("evidence"),
                                      settings.topic_partitions, _evidence_key, Load(300, "ev"), half, seconds))
        retraction = asyncio.run(_retractions(worker, bootstrap, settings, half, 3 if quick else 20))
    finally:
        worker.stop()
    return {"max_rate": max_rate, "half": half, "raw": raw, "ours": ours, **retraction}


def _idle(worker) -> bool:
    status = worker.get("/status")
    return status["busy_scopes"] == 0 and status["llm"]["inflight"] == 0


PROMPT_KEY: dict[str, str] = {}  # tenant -> API key, when the HTTP API serves the prompt route


async def _view(client, worker, key: str) -> dict:
    """The scope view; its memory_block is the prompt route's rendering when the API is there."""
    response = await client.get(f"{worker.url}/scope/{key}", headers=worker.operator_headers, timeout=5.0)
    view = response.json() if response.status_code == 200 else {}
    tenant, user, character = astuple(Scope.parse(key))
    if tenant in PROMPT_KEY and view:
        prompt = await client.get(f"{worker.url}/v1/tenants/{tenant}/users/{user}/characters/{character}/prompt",
                                  headers={"Authorization": f"Bearer {PROMPT_KEY[tenant]}"}, timeout=5.0)
        view["memory_block"] = prompt.json().get("text", "") if prompt.status_code == 200 else view["memory_block"]
        view["via_prompt_route"] = prompt.status_code == 200
    return view


async def _until(client, worker, key: str, condition, limit_s: float = 60.0) -> float:
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        if condition(await _view(client, worker, key)):
            return time.monotonic() - start
        await asyncio.sleep(0.01)  # polling interval of the view
    raise TimeoutError(f"{key}: condition not met within {limit_s}s")


async def _retractions(worker, bootstrap: str, settings, rate: float, per_kind: int) -> dict:
    import httpx
    from aiokafka import AIOKafkaProducer

    scopes = [("retract", f"r{i:03d}", "barista") for i in range(2 * per_kind)]
    await _prompt_tenant(bootstrap, settings)
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all", linger_ms=0))
    await producer.start()
    out = {"explicit": [], "surfaced": [], "view_floor": [], "missed": {"explicit": [], "surfaced": []}}
    try:
        async with httpx.AsyncClient() as client:
            for scope in scopes:  # a rendered reflection per scope
                await producer.send_and_wait(settings.topic("turns"), _turn(scope, 0, T0, "I love green tea."),
                                             key=scope_key(*scope).encode())
            for scope in scopes:
                await _until(client, worker, scope_key(*scope), lambda v: "green tea" in v.get("memory_block", ""), 120)
            background = asyncio.create_task(_background(bootstrap, settings, rate))
            try:
                for i, scope in enumerate(scopes):
                    await _retract(client, producer, worker, settings, i, scope, out)
            finally:
                background.cancel()
    finally:
        await producer.stop()
    return out


async def _prompt_tenant(bootstrap: str, settings) -> None:
    """The prompt route's tenant, when the HTTP API is on this build: measure what a chat platform reads."""
    try:
        from credence.streams.ops import tenant_admin
    except ImportError:
        return
    PROMPT_KEY["retract"] = await tenant_admin.add(bootstrap, settings, "retract", tenant_admin.overrides(
        {"requests_per_second": 100_000.0, "burst": 100_000}))


async def _retract(client, producer, worker, settings, i: int, scope: tuple, out: dict) -> None:
    """One scope's floor (a plain turn until counted in the view), then its denial (explicit on even i,
    surfaced on odd) until the reflection is out of the rendered block."""
    from credence.streams.scope.requests import reflection_id

    key = scope_key(*scope)
    rid = reflection_id(key, "The user loves green tea.")
    ts = T0 + timedelta(hours=1)
    turns_before = (await _view(client, worker, key))["turns"]
    t = time.monotonic()
    await producer.send_and_wait(settings.topic("turns"), _turn(scope, 1, ts, "ok", role="ai"), key=key.encode())
    await _until(client, worker, key, lambda v, n=turns_before: v.get("turns", 0) > n)
    out["view_floor"].append(time.monotonic() - t)
    ts += timedelta(minutes=5)
    if i % 2 == 0:
        body = {"v": 1, "tenant": scope[0], "user": scope[1], "character": scope[2],
                "feedback_id": f"fb-{i}", "entry_id": rid, "decision": "deny", "ts": _iso(ts)}
        t = time.monotonic()
        await producer.send_and_wait(settings.topic("feedback"), json.dumps(body).encode(), key=key.encode())
        kind = "explicit"
    else:
        await producer.send_and_wait(settings.topic("turns"), _turn(
            scope, 2, ts, "Green tea as usual?", role="ai", surfaced_ids=[rid]), key=key.encode())
        t = time.monotonic()
        await producer.send_and_wait(settings.topic("turns"), _turn(
            scope, 3, ts + timedelta(minutes=1), "no, that's wrong"), key=key.encode())
        kind = "surfaced"
    try:
        await _until(client, worker, key, lambda v: "green tea" not in v.get("memory_block", "x green tea"), 20.0)
    except TimeoutError:
        view = await _view(client, worker, key)
        entry = next((e for e in view.get("entries", []) if e["id"] == rid), {})
        out["missed"][kind].append({"scope": key, "status": entry.get("status"), "score": entry.get("score")})
        print(f"latency: {kind} denial of {key} still rendered after 20 s: {entry}", flush=True)
        return
    out[kind].append(time.monotonic() - t)


async def _background(bootstrap: str, settings, rate: float) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all", linger_ms=5))
    await producer.start()
    try:
        await paced(producer, settings.topic("turns"), Load(300, "bg"), rate, 10_000.0)
    except asyncio.CancelledError:
        pass
    finally:
        await producer.stop()


def rows_from(m: dict) -> list[Row]:
    ms = lambda xs, q: 1000 * pct(xs, q)  # noqa: E731
    load = f"at {m['half']:.0f} turns/s = half of the measured max {m['max_rate']:.0f} turns/s"
    out = []
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        out.append(Row("latency", f"turn → evidence event {label}", ms(m["ours"], q), ms(m["raw"], q), unit="ms",
                       baseline_label="raw Kafka produce → consume", target="<= 1000" if q == 0.5 else "<= 5000",
                       note=f"{len(m['ours'])} turns matched, {load}" if q == 0.5 else ""))
    for kind in ("explicit", "surfaced"):
        for q, label in ((0.5, "p50"), (0.99, "p99")):
            out.append(Row("retraction", f"{kind} denial → out of the rendered block {label}", ms(m[kind], q),
                           ms(m["view_floor"], q), unit="ms", baseline_label="plain turn → counted in the view",
                           target="<= 1000" if q == 0.5 else "<= 5000",
                           note=(f"{len(m[kind])} denials left the block, {len(m['missed'][kind])} were still "
                                 f"rendered after 20 s {m['missed'][kind][:3]}; {load}; measured on "
                                 f"{'the HTTP prompt route' if PROMPT_KEY else 'the scope view'}") if q == 0.5 else ""))
    return out


def report_rows(quick: bool, bootstrap: str, work: Path) -> list[Row]:
    return rows_from(measure(bootstrap, work, quick))


def main() -> int:
    from credence.config import load_settings

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    settings = load_settings()
    with kafka_and_folder(settings) as (bootstrap, work):
        for row in report_rows(args.quick, bootstrap, work):
            print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
