"""Throughput of the pipeline against a bare Kafka loop, on one broker in one run.

Inputs (generated, ~300-byte turns, 4 partitions): `short` — 60 scopes of 50 turns; `long` — 10 scopes
of 600 turns (months of dialogue each). For each input, interleaved `--runs` times:
  raw   — aiokafka getmany -> JSON decode -> encode -> send (acks=all) -> commit, in this process;
  ours  — a `credence worker` (rules backend, RocksDB store) consuming the same turns pre-produced,
          until every turn is accepted and no LLM call is in flight.
Then, once: turn -> journal-event latency at half of our max rate (Stage-1 window of 1 turn, so the
latency is the pipeline's, not the window's); per-record cost (worker CPU per turn) on a scope that holds
10 / 1,000 / 10,000 entries; and recovery of a worker holding 100,000 entries with its local store
deleted, against a bare consumer process reading the same changelog topics.

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
from aiokafka.structs import TopicPartition

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from credence.config import load_settings  # noqa: E402
from credence.config.pipeline import PipelineSettings  # noqa: E402
from credence.kafka import client_options  # noqa: E402
from credence.streams.ops.admin import changelog_topic, ensure_topics  # noqa: E402
from credence.streams.ops.broker import EmbeddedBroker, free_port  # noqa: E402
from credence.streams.ops.process import WorkerProcess, wait_until  # noqa: E402
from credence.streams.runtime.topics import TABLES  # noqa: E402
from credence.tables.clock import format_instant, parse_instant  # noqa: E402

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
    tenant, user, character = scope.split("/")
    return orjson.dumps({"v": 1, "tenant": tenant, "user": user, "character": character,
                         "turn_id": f"{user}-{n:05d}", "role": role, "text": text, "ts": format_instant(at)})


def make_input(scopes: int, per_scope: int, step: timedelta, seed: int, tenant: str = "bench") -> list[tuple[bytes, bytes]]:
    """(key, value) turns, scopes interleaved round-robin; a user turn states a fact 1 time in 3."""
    rng = random.Random(seed)
    names = [f"{tenant}/u{i:03d}/c{i % 3}" for i in range(scopes)]
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
    asyncio.run(_create(bootstrap, [source, sink]))
    asyncio.run(produce(bootstrap, source, records))
    return asyncio.run(raw_loop(bootstrap, source, sink, len(records)))


async def _create(bootstrap: str, names: list[str]) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(**client_options(bootstrap))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names])
    finally:
        await admin.close()


# -- ours -------------------------------------------------------------------------------------------

def our_settings(bootstrap: str, work: Path, **pipeline):
    tag = uuid.uuid4().hex[:8]
    return load_settings(kafka_bootstrap=bootstrap, topic_prefix=f"bench{tag}", app_id=f"bench-{tag}",
                         data_dir=work / tag, web_port=free_port(), topic_partitions=PARTITIONS,
                         core_config_path=work / "core_config.json",
                         pipeline=PipelineSettings(ticks_advance_clock=False, tick_interval_seconds=2.0,
                                                   recall_warm_up=False, **pipeline))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def changelog_bytes(broker_dir: Path, settings) -> dict[str, int]:
    """Bytes in each table's changelog segments (nothing is compacted within a run: segments roll after
    10 minutes), i.e. what the worker wrote."""
    names = {changelog_topic(settings, t): t for t in TABLES}
    out = dict.fromkeys(TABLES, 0)
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


def run_ours(bootstrap: str, broker_dir: Path | None, records, work: Path, **pipeline) -> dict:
    settings = our_settings(bootstrap, work, **pipeline)
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
            "changelog_bytes": changelog_bytes(broker_dir, settings) if broker_dir else dict.fromkeys(TABLES, 0)}


# -- latency ----------------------------------------------------------------------------------------

async def read_all(bootstrap: str, topic: str) -> list:
    consumer = AIOKafkaConsumer(**client_options(bootstrap, enable_auto_commit=False))
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        out = []
        async def behind() -> bool:
            for tp in tps:
                if await consumer.position(tp) < end[tp]:
                    return True
            return False

        while await behind():
            for records in (await consumer.getmany(timeout_ms=500)).values():
                out += records
        return out
    finally:
        await consumer.stop()


def run_latency(bootstrap: str, records, rate: float, work: Path) -> dict:
    """Turns paced at `rate`; per turn, the time from its send to the first journal event of its scope at
    its event time (a step's journal events carry the scope's clock, and Stage-1 takes each turn alone
    here), as benchmarks/latency.py matches them."""
    settings = our_settings(bootstrap, work, stage1_max_batch=1)
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
    for r in asyncio.run(read_all(bootstrap, settings.topic("evidence"))):
        event = orjson.loads(r.value)
        turn_key = (f"{event['tenant']}/{event['user']}/{event['character']}", parse_instant(event["at"]))
        if turn_key in sent_at and r.timestamp / 1000 >= sent_at[turn_key]:
            first[turn_key] = min(first.get(turn_key, float("inf")), r.timestamp / 1000 - sent_at[turn_key])
    lat = sorted(first.values())
    if not lat:
        return {"turns_measured": 0}
    return {"rate": rate, "turns_measured": len(lat), "p50_ms": 1000 * lat[len(lat) // 2],
            "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))]}


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
        rows = {"raw": [], "ours": []}
        for _ in range(runs):  # interleaved: drift in the machine's speed hits both alike
            rows["raw"].append(run_raw(bootstrap, records, settings))
            rows["ours"].append(run_ours(bootstrap, broker_dir, records, work))
            print(name, rows["raw"][-1], rows["ours"][-1], flush=True)
        report["inputs"][name] = summarize(rows, len(records))
    ours_rate = report["inputs"]["long"]["ours_turns_s"]
    # the first 20 turns of each short scope: enough turns for percentiles, at a rate the run can keep
    report["latency"] = run_latency(bootstrap, inputs["short"][:60 * 20], ours_rate / 2, work)
    print("latency", report["latency"], flush=True)
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
    from benchmarks.report import Row

    broker_dir = work.parent / "broker"
    report = measure(bootstrap, broker_dir if broker_dir.is_dir() else None, work, 1 if quick else 2, quick)
    rows = []
    for name, m in report["inputs"].items():
        label = "bare aiokafka consume -> decode -> encode -> produce"
        rows.append(Row("throughput", f"{name} scopes: turns/s", m["ours_turns_s"], m["raw_turns_s"], unit="turns/s",
                        baseline_label=label, target="ratio >= 0.05" if name == "long" else "",
                        note=f"{m['turns']} turns, {report['runs']} interleaved runs (medians), rules backend"))
        if m["changelog_bytes_per_turn"]:
            rows.append(Row("throughput", f"{name} scopes: changelog bytes per turn", m["changelog_bytes_per_turn"],
                            unit="B", target="<= 2048"))
    lat = report["latency"]
    if lat.get("turns_measured"):
        for q in ("p50", "p99"):
            rows.append(Row("throughput", f"turn -> journal event {q} at half the long rate", lat[f"{q}_ms"],
                            unit="ms"))
    for r in report["per_record"]:
        rows.append(Row("per-record cost", f"CPU per turn at {r['entries']:,} entries", r["cpu_ms_per_turn"],
                        report["per_record"][0]["cpu_ms_per_turn"], unit="ms", baseline_label="at 10 entries",
                        target="ratio <= 1.25" if r["entries"] == 10_000 else "",
                        note="after the scope's first two records, which load it (next row)"))
    for r in report["per_record"]:
        rows.append(Row("per-record cost", f"CPU of the scope's first two records at {r['entries']:,} entries "
                        "(loading it: decoding every entry, building its indexes)", r["load_cpu_ms"],
                        report["per_record"][0]["load_cpu_ms"], unit="ms", baseline_label="at 10 entries"))
    rec = report["recovery"]
    rows.append(Row("recovery", f"{rec['entries']:,} entries, local store deleted: changelogs read and applied",
                    rec["ours_read_s"], rec["bare_read_s"], unit="s",
                    baseline_label="bare consumer reading the same changelogs", target="ratio <= 2",
                    note=f"{rec['changelog_records']:,} changelog records, medians of {len(rec['rounds'])} interleaved "
                         "rounds; ours: the worker's bulk restore, its consumer's start to the last record applied; "
                         "ratio <= 2 is >= 50% of the bare read's speed"))
    rows.append(Row("recovery", f"{rec['entries']:,} entries, local store deleted: process launch to ready",
                    rec["ours_s"], rec["bare_s"], unit="s", baseline_label="bare consumer process, launch to exit",
                    note="ours also starts Faust, joins the consumer group and replays the last batch's redo"))
    return rows


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
    print_report(report)
    print(f"written to {out.relative_to(ROOT)}")
    return 0


def summarize(rows: dict, turns: int) -> dict:
    pairs = list(zip(rows["raw"], rows["ours"]))
    return {
        "turns": turns,
        "raw_turns_s": statistics.median(r["turns"] / r["seconds"] for r in rows["raw"]),
        "ours_turns_s": statistics.median(o["turns"] / o["seconds"] for o in rows["ours"]),
        "ratio": statistics.median((o["turns"] / o["seconds"]) / (r["turns"] / r["seconds"]) for r, o in pairs),
        "changelog_bytes_per_turn": statistics.median(sum(o["changelog_bytes"].values()) / o["turns"]
                                                      for o in rows["ours"]),
        "changelog_bytes_per_turn_by_table": {t: statistics.median(o["changelog_bytes"][t] / o["turns"]
                                                                   for o in rows["ours"]) for t in TABLES},
        "ours_cpu_s_per_1k": statistics.median(1000 * o["cpu_s"] / o["turns"] for o in rows["ours"]),
        "raw_cpu_s_per_1k": statistics.median(1000 * r["cpu_s"] / r["turns"] for r in rows["raw"]),
        "journal_events": rows["ours"][-1]["journal_events"],
        "runs": {"raw": rows["raw"], "ours": rows["ours"]},
    }


def print_report(report: dict) -> None:
    print(f"\n{report['partitions']} partitions, ~{report['turn_bytes']:.0f}-byte turns, {report['runs']} "
          f"interleaved runs (medians)")
    print(f"{'input':<6} {'turns':>6} {'raw/s':>9} {'ours/s':>8} {'ours/raw':>9} {'changelog B/turn':>17} "
          f"{'CPU s/1k ours':>14} {'CPU s/1k raw':>13}")
    for name, m in report["inputs"].items():
        print(f"{name:<6} {m['turns']:>6} {m['raw_turns_s']:>9.0f} {m['ours_turns_s']:>8.0f} {m['ratio']:>9.1%} "
              f"{m['changelog_bytes_per_turn']:>17.0f} {m['ours_cpu_s_per_1k']:>14.2f} {m['raw_cpu_s_per_1k']:>13.2f}")
    lat = report["latency"]
    if lat.get("turns_measured"):
        print(f"turn -> journal event at {lat['rate']:.0f} turns/s: p50 {lat['p50_ms']:.0f} ms, "
              f"p99 {lat['p99_ms']:.0f} ms ({lat['turns_measured']} turns)")
    for row in report["per_record"]:
        print(f"per record at {row['entries']:>6} entries/scope: {row['cpu_ms_per_turn']:.2f} ms CPU/turn "
              f"({row['vs_10']:.2f}x of 10), {row['wall_ms_per_turn']:.2f} ms wall/turn; "
              f"loading the scope {row['load_cpu_ms']:.0f} ms CPU")
    rec = report["recovery"]
    print(f"recovery of {rec['entries']} entries ({rec['changelog_records']} changelog records), store deleted: "
          f"read {rec['ours_read_s']:.2f} s vs bare {rec['bare_read_s']:.2f} s -> {rec['read_share_of_bare']:.0%} "
          f"of bare; launch to ready {rec['ours_s']:.1f} s vs bare process {rec['bare_s']:.1f} s "
          f"(medians of {len(rec['rounds'])} rounds: reads " + ", ".join(
              f"{r['ours_read_s']:.2f}/{r['bare_read_s']:.2f}" for r in rec["rounds"]) + " s)")


if __name__ == "__main__":
    sys.exit(main())
