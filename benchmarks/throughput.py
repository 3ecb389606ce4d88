"""Throughput of the pipeline against a bare Kafka loop, on one broker in one run.

Inputs `short` (60 scopes × 50 turns) and `long` (10 × 600), interleaved `--runs` times: raw (an aiokafka
loop), ours (a `credence worker`, rules backend) and unfenced (changelog transactions off). Then, once:
turn -> journal-event latency, per-record cost at 10 / 1,000 / 10,000 entries, and recovery of 100,000
entries. The method in full: docs/design/benchmarks.md ("Throughput").

Writes benchmarks/results/throughput-<UTC time>.json and prints the summary.
Usage: python benchmarks/throughput.py [--runs N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import throughput_report  # noqa: E402
from benchmarks.report import create_topics, pct  # noqa: E402
from credence.config import load_settings  # noqa: E402
from credence.config.pipeline import PipelineSettings  # noqa: E402
from credence.kafka import client_options  # noqa: E402
from credence.streams.ops.admin import changelog_topic, ensure_topics  # noqa: E402
from credence.streams.ops.broker import EmbeddedBroker, free_port  # noqa: E402
from credence.streams.ops.worker_process import WorkerProcess, wait_until  # noqa: E402
from credence.streams.runtime.topics import STATE_TABLES  # noqa: E402
from credence.tables.clock import format_instant, parse_instant  # noqa: E402
from credence.tables.scope import Scope, scope_key  # noqa: E402
from tests.support.turns import read_topic  # noqa: E402

PARTITIONS = 4
T0 = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)
FACTS = ["I love green tea.", "I am learning Rust.", "I live in Lisbon.", "I have a cat named Miso.",
         "I work as a nurse.", "I like running in the rain.", "I am training for a marathon.",
         "I don't like coffee.", "I prefer hiking on weekends.", "I am learning French for work."]
CHAT = ["That sounds lovely, tell me more about how your week went and what you plan for the weekend.",
        "Interesting! Why is that? I remember you mentioned something similar a while ago, didn't you?",
        "haha yes, that is exactly what I was thinking about earlier today while walking to the station.",
        "Noted, thanks for sharing. How did the conversation with your friend go in the end, by the way?"]
DEADLINE_S = 900.0


# -- inputs -----------------------------------------------------------------------------------------

def turn(scope: str, n: int, role: str, text: str, at: datetime) -> bytes:
    parsed = Scope.parse(scope)
    return orjson.dumps({"v": 1, **parsed.fields(), "turn_id": f"{parsed.user}-{n:05d}", "role": role, "text": text,
                         "ts": format_instant(at)})


def make_input(scopes: int, per_scope: int, step: timedelta, seed: int, tenant: str = "bench") -> list[tuple[bytes, bytes]]:
    """(key, value) turns, scopes interleaved round-robin; a user turn states a fact 1 time in 3."""
    rng = random.Random(seed)
    names = [scope_key(tenant, f"u{i:03d}", f"c{i % 3}") for i in range(scopes)]
    out = []
    for n in range(per_scope):
        for s, scope in enumerate(names):
            role = "user" if n % 2 == 0 else "ai"
            text = rng.choice(CHAT)
            if role == "user" and rng.random() < 1 / 3:
                text = f"{rng.choice(FACTS)} {text}"
            out.append((scope.encode(), turn(scope, n, role, text, T0 + n * step + timedelta(seconds=s))))
    return out


async def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]], rate: float = 0.0) -> list[float]:
    """Produce in order (acks=all); with `rate`, paced to that many records/s. Returns the send times."""
    producer = AIOKafkaProducer(**client_options(bootstrap, acks="all", linger_ms=5))
    await producer.start()
    sent, futures = [], []
    try:
        start = time.time()
        for i, (key, value) in enumerate(records):
            if rate:
                delay = start + i / rate - time.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            sent.append(time.time())
            futures.append(await producer.send(topic, value, key=key))
        for fut in futures:
            await fut
    finally:
        await producer.stop()
    return sent


# -- the bare loop ----------------------------------------------------------------------------------

async def raw_loop(bootstrap: str, source: str, sink: str, total: int) -> dict:
    consumer = AIOKafkaConsumer(source, **client_options(bootstrap, group_id=f"raw-{uuid.uuid4().hex[:8]}",
                                auto_offset_reset="earliest", enable_auto_commit=False, max_poll_records=2000))
    producer = AIOKafkaProducer(**client_options(bootstrap, acks="all", linger_ms=5))
    await consumer.start()
    await producer.start()
    done, started, cpu = 0, None, 0.0
    try:
        while done < total:
            batches = await consumer.getmany(timeout_ms=200)
            if started is None and batches:
                started, cpu = time.monotonic(), time.process_time()
            futures = []
            for records in batches.values():
                for r in records:
                    futures.append(await producer.send(sink, orjson.dumps(json.loads(r.value)), key=r.key))
            for fut in futures:
                await fut
            if batches:
                await consumer.commit()
            done += sum(len(v) for v in batches.values())
        return {"seconds": time.monotonic() - started, "cpu_s": time.process_time() - cpu, "turns": done}
    finally:
        await consumer.stop()
        await producer.stop()


def run_raw(bootstrap: str, records: list[tuple[bytes, bytes]], settings) -> dict:
    tag = uuid.uuid4().hex[:8]
    source, sink = f"raw{tag}.in", f"raw{tag}.out"
    s = load_settings(kafka_bootstrap=bootstrap, topic_prefix=f"raw{tag}", topic_partitions=PARTITIONS)
    asyncio.run(ensure_topics(bootstrap, s))  # same partition count and configs as ours
    asyncio.run(create_topics(bootstrap, [source, sink], PARTITIONS))
    asyncio.run(produce(bootstrap, source, records))
    return asyncio.run(raw_loop(bootstrap, source, sink, len(records)))


# -- ours -------------------------------------------------------------------------------------------

def our_settings(bootstrap: str, work: Path, transactions: bool = True, **pipeline):
    tag = uuid.uuid4().hex[:8]
    settings = load_settings(kafka_bootstrap=bootstrap, topic_prefix=f"bench{tag}", app_id=f"bench-{tag}",
                             data_dir=work / tag, web_port=free_port(), topic_partitions=PARTITIONS,
                             core_config_path=work / "core_config.json",
                             pipeline=PipelineSettings(ticks_advance_clock=False, tick_interval_seconds=2.0,
                                                       recall_warm_up=False, **pipeline))
    return settings.model_copy(update={"state": settings.state.model_copy(update={"transactions": transactions})})


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def changelog_bytes(broker_dir: Path, settings) -> dict[str, int]:
    """Bytes in each table's changelog segments (nothing is compacted within a run: segments roll after
    10 minutes), i.e. what the worker wrote."""
    names = {changelog_topic(settings, t): t for t in STATE_TABLES}
    out = dict.fromkeys(STATE_TABLES, 0)
    for part in (broker_dir / "kraft-logs").iterdir():
        table = names.get(part.name.rsplit("-", 1)[0])
        if table:
            out[table] += sum(f.stat().st_size for f in part.glob("*.log"))
    return out


def settled(worker: WorkerProcess, total: int) -> bool:
    """Every turn applied: accepted, none queued behind an LLM request, no request open (a Stage-1
    window may still hold turns: extracting them waits for more turns or the window's time)."""
    status = worker.get("/status")
    if status["stats"]["turns_accepted"] < total or status["llm"]["inflight"]:
        return False
    return all(not s["queued"] and not s["requests"] for s in worker.get("/scopes")["scopes"].values())


def run_ours(bootstrap: str, broker_dir: Path | None, records, work: Path, transactions: bool = True,
             **pipeline) -> dict:
    settings = our_settings(bootstrap, work, transactions, **pipeline)
    asyncio.run(ensure_topics(bootstrap, settings, changelogs=True))
    asyncio.run(produce(bootstrap, settings.topic("turns"), records))
    worker = WorkerProcess(settings, bootstrap, work / f"{settings.app_id}.log")
    try:
        # The clock runs from the worker's first input batch (the raw loop's from its first fetch): a worker
        # started on a full topic works while it is still becoming ready, which no clock outside it sees.
        # CPU is counted from ready, over the turns applied after it.
        worker.start()
        cpu, before = cpu_seconds(worker.proc.pid), worker.get("/status")["stats"]["turns_accepted"]
        wait_until(lambda: settled(worker, len(records)), DEADLINE_S, "the worker to take every turn", 0.1)
        ended, cpu = time.time(), cpu_seconds(worker.proc.pid) - cpu
        status = worker.get("/status")
        seconds = ended - status["stats"]["first_input_at"]
    finally:
        worker.stop()
    cpu *= len(records) / max(1, len(records) - before)  # as if every turn had been applied after ready
    return {"seconds": seconds, "cpu_s": cpu, "turns": len(records), "journal_events": status["stats"]["journal_events"],
            "changelog_bytes": changelog_bytes(broker_dir, settings) if broker_dir else dict.fromkeys(STATE_TABLES, 0)}


# -- latency ----------------------------------------------------------------------------------------

def run_latency(bootstrap: str, records, rate: float, work: Path, transactions: bool = True) -> dict:
    """Turns paced at `rate`; per turn, the time from its send to the first journal event of its scope at
    its event time (a step's journal events carry the scope's clock, and Stage-1 takes each turn alone
    here), as benchmarks/latency.py matches them."""
    settings = our_settings(bootstrap, work, transactions, stage1_max_batch=1)
    asyncio.run(ensure_topics(bootstrap, settings, changelogs=True))
    worker = WorkerProcess(settings, bootstrap, work / f"{settings.app_id}.log")
    try:
        worker.start()
        sent = asyncio.run(produce(bootstrap, settings.topic("turns"), records, rate))
        wait_until(lambda: settled(worker, len(records)), DEADLINE_S, "the latency run to settle", 0.1)
    finally:
        worker.stop()
    sent_at = {}
    for (key, value), t in zip(records, sent):
        sent_at.setdefault((key.decode(), parse_instant(orjson.loads(value)["ts"])), t)
    first: dict = {}
    for r in asyncio.run(read_topic(bootstrap, settings.topic("evidence"), PARTITIONS)):
        event = orjson.loads(r.value)
        turn_key = (scope_key(event["tenant"], event["user"], event["character"]), parse_instant(event["at"]))
        if turn_key in sent_at and r.timestamp / 1000 >= sent_at[turn_key]:
            first[turn_key] = min(first.get(turn_key, float("inf")), r.timestamp / 1000 - sent_at[turn_key])
    lat = sorted(first.values())
    if not lat:
        return {"turns_measured": 0}
    return {"rate": rate, "turns_measured": len(lat), "p50_ms": 1000 * pct(lat, 0.5), "p99_ms": 1000 * pct(lat, 0.99)}


# -- the run ----------------------------------------------------------------------------------------

def measure(bootstrap: str, broker_dir: Path | None, work: Path, runs: int, quick: bool) -> dict:
    """Every measurement of this benchmark on the broker at `bootstrap` (its data directory, when known,
    gives the changelog bytes); returns the report."""
    from benchmarks.state_costs import run_per_record, run_recovery

    scale = 0.2 if quick else 1.0
    inputs = {"short": make_input(60, int(50 * scale), timedelta(hours=2), 1),
              "long": make_input(10, int(600 * scale), timedelta(hours=6), 2)}
    settings = load_settings()
    report: dict = {"at": format_instant(datetime.now(UTC)), "partitions": PARTITIONS, "runs": runs,
                    "turn_bytes": statistics.mean(len(v) for _, v in inputs["long"]), "inputs": {}}
    for name, records in inputs.items():
        rows = {"raw": [], "ours": [], "unfenced": []}
        for i in range(runs):  # interleaved: drift in the machine's speed hits them alike
            rows["raw"].append(run_raw(bootstrap, records, settings))
            fenced = i % 2 == 0  # which of the two worker runs goes first alternates
            rows["ours" if fenced else "unfenced"].append(run_ours(bootstrap, broker_dir, records, work, fenced))
            rows["unfenced" if fenced else "ours"].append(run_ours(bootstrap, broker_dir, records, work, not fenced))
            print(name, rows["raw"][-1], rows["ours"][-1], rows["unfenced"][-1], flush=True)
        report["inputs"][name] = throughput_report.summarize(rows, len(records))
    ours_rate = report["inputs"]["long"]["ours_turns_s"]
    # the first 20 turns of each short scope: enough turns for percentiles, at a rate the run can keep
    report["latency"] = run_latency(bootstrap, inputs["short"][:60 * 20], ours_rate / 2, work)
    report["latency_unfenced"] = run_latency(bootstrap, inputs["short"][:60 * 20], ours_rate / 2, work, False)
    print("latency", report["latency"], "transactions off", report["latency_unfenced"], flush=True)
    report["per_record"] = [run_per_record(bootstrap, n, int(2000 * scale) or 200, work) for n in (10, 1000, 10000)]
    print("per record", report["per_record"], flush=True)
    report["recovery"] = run_recovery(bootstrap, 10, int(10_000 * scale), work)
    print("recovery", report["recovery"], flush=True)
    base = report["per_record"][0]["cpu_ms_per_turn"]
    for row in report["per_record"]:
        row["vs_10"] = row["cpu_ms_per_turn"] / base
    return report


def report_rows(quick: bool, bootstrap: str, work: Path) -> list:
    """For `python -m benchmarks` (its broker's data directory is `work/../broker`)."""
    broker_dir = work.parent / "broker"
    report = measure(bootstrap, broker_dir if broker_dir.is_dir() else None, work, 1 if quick else 2, quick)
    return throughput_report.rows(report)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="smaller inputs (a smoke run, not a measurement)")
    args = parser.parse_args()
    settings = load_settings()
    with tempfile.TemporaryDirectory(prefix="credence-throughput-") as tmp:
        work = Path(tmp)
        broker = EmbeddedBroker(work / "broker", settings.kafka_version, settings.broker_cache_dir)
        bootstrap = broker.start()
        try:
            report = measure(bootstrap, work / "broker", work, args.runs, args.quick)
        finally:
            broker.stop()
    out = ROOT / "benchmarks" / "results" / f"throughput-{datetime.now(UTC):%Y%m%dT%H%M}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    throughput_report.print_report(report)
    print(f"written to {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
