"""Corrections on the production path, in wall time: how long after the correction turn is produced does
the memory block the worker serves show it?

The dialogues of benchmarks/corrections.py, the `openai` backend against the test server answering a seeded
0.2–0.4 s late, one worker: the sessions before the correction replayed, then each correction session sent
live and its block polled until it shows the change. Reported per kind: p50 / p99 seconds and how many
never showed it within `--deadline`. The steps and the windows: docs/design/benchmarks.md.

    python benchmarks/corrections_wall.py [--delay 0.2,0.4] [--every 1] [--gap 2] [--only KIND,…]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import corrections as bench  # noqa: E402
from benchmarks.report import Row, kafka_and_folder, pct  # noqa: E402
from credence.tables.clock import format_instant  # noqa: E402
from credence.tables.scope import Scope  # noqa: E402

DEFAULT_DELAY = (0.2, 0.4)
LIVE_WINDOW = dict(stage1_quiet_seconds=10.0, stage1_max_wait_seconds=30.0)  # production_path.LIVE_WINDOW


def _records(d: dict, sessions: list[list[str]], start: datetime) -> list[dict]:
    """Turn records of `sessions` (the dialogue's earlier ones) dated back from `start`, SESSION_GAP apart."""
    n = len(d["sessions"]) - 1
    shifted = dict(d, sessions=sessions)
    turns, _ = bench.turns_of(shifted, greet=False)  # phase 1 ends with a flush instead
    offset = (start - n * bench.SESSION_GAP) - bench.T0
    return [t | {"ts": format_instant(datetime.fromisoformat(t["ts"].replace("Z", "+00:00")) + offset)}
            for t in turns]


def live_session(d: dict) -> list[tuple[str, str]]:
    """The correction session as (role, text), with the character's neutral reply after a user turn the
    dialogue does not answer itself (as benchmarks.corrections.turns_of)."""
    session, out = d["sessions"][-1], []
    for j, said in enumerate(session):
        role, text = ("ai", said[4:]) if said.startswith("AI: ") else ("user", said)
        out.append((role, text))
        if role == "user" and not (j + 1 < len(session) and session[j + 1].startswith("AI: ")):
            out.append(("ai", bench.REPLY))
    return out


def changed(d: dict, block: str) -> bool:
    current, _ = bench.split_block(block)
    return d["old"] not in current and (not d.get("new") or d["new"] in current)


async def _live(bootstrap: str, settings, worker, dialogues: list[dict], every: float, gap: float,
                deadline: float) -> dict[str, float | None]:
    """Send each dialogue's correction session live; seconds from its first turn's produce to the block
    that shows the change (None: not within the deadline) for every correction."""
    from aiokafka import AIOKafkaProducer

    from credence.kafka import client_options, start

    plan = sorted((i * every + k * gap, d["id"], k, role, text) for i, d in enumerate(dialogues)
                  for k, (role, text) in enumerate(live_session(d)))
    by_id = {d["id"]: d for d in dialogues}
    pending = {d["id"] for d in dialogues if not d["control"]}
    sent_at: dict[str, float] = {}
    out: dict[str, float | None] = {}
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all", linger_ms=2))
    await start(producer, bootstrap, settings.kafka)
    t0, i = time.time(), 0
    try:
        while (pending or i < len(plan)) and time.time() - t0 < deadline:
            while i < len(plan) and plan[i][0] <= time.time() - t0:
                _, did, k, role, text = plan[i]
                scope = Scope.parse(bench.scope_of(by_id[did]))
                now = time.time()
                record = {"v": 1, **scope.fields(), "turn_id": f"{did}-live-{k}", "role": role, "text": text,
                          "ts": format_instant(datetime.fromtimestamp(now, UTC))}
                await (await producer.send(settings.topic("turns"), json.dumps(record).encode(), key=scope.key.encode()))
                if role == "user":  # the correction turn: the session's first user turn
                    sent_at.setdefault(did, now)
                i += 1
            due = [did for did in pending if did in sent_at]
            blocks = await asyncio.to_thread(
                lambda: {did: worker.get(f"/scope/{bench.scope_of(by_id[did])}")["memory_block"] for did in due})
            seen = time.time()
            for did, block in blocks.items():
                if changed(by_id[did], block):
                    out[did] = seen - sent_at[did]
                    pending.discard(did)
            await asyncio.sleep(0.1)
    finally:
        await producer.stop()
    return out | {did: None for did in pending}


def run(dialogues: list[dict], bootstrap: str, work: Path, delay: tuple[float, float], every: float = 1.0,
        gap: float = 2.0, deadline: float = 900.0) -> dict:
    """Phase 1 (the earlier sessions, replayed) and phase 2 (the corrections, live); per dialogue the
    block before the correction and the seconds to the change."""
    from credence.config.llm import LLMSettings
    from credence.config.pipeline import PipelineSettings
    from credence.streams.ops.admin import ensure_topics
    from credence.streams.ops.worker_process import WorkerProcess, wait_until
    from tests.support.openai_server import OpenAICompatibleServer
    from tests.support.pipeline import (
        REPLAY_PIPELINE,
        flush_and_wait_idle,
        pipeline_settings,
        produce_lines,
        wait_turns,
    )

    start = datetime.now(UTC).replace(microsecond=0)
    lines, expected = [], {}
    for d in dialogues:
        turns = _records(d, d["sessions"][:-1], start)
        lines += [json.dumps(t).encode() for t in turns]
        expected[bench.scope_of(d)] = len(turns)
    scopes = list(expected)
    prefix = f"corrw{uuid.uuid4().hex[:8]}"
    with OpenAICompatibleServer(model="bench-model", delay_s=delay) as server:
        llm = LLMSettings(backend="openai", base_url=server.base_url, model="bench-model", timeout_s=30.0)
        replay = pipeline_settings(bootstrap, work, prefix, llm=llm,
                                   pipeline=REPLAY_PIPELINE.model_copy(update=LIVE_WINDOW))
        wait_until(lambda: bench._topics_ready(bootstrap, replay, ensure_topics), 120.0, "the benchmark's topics")
        worker = WorkerProcess(replay, bootstrap, work / "replay.log")
        try:
            worker.start(ready_timeout_s=600)
            asyncio.run(produce_lines(bootstrap, replay, lines))
            wait_turns(worker, expected, 900.0)
            flush_and_wait_idle(worker, bootstrap, replay, scopes, 900.0)
            before = {d["id"]: worker.get(f"/scope/{bench.scope_of(d)}")["memory_block"] for d in dialogues}
        finally:
            worker.stop()
        live = replay.model_copy(update={"pipeline": PipelineSettings(
            recall_warm_up=False, ticks_advance_clock=True, tick_interval_seconds=1.0, **LIVE_WINDOW)})
        worker = WorkerProcess(live, bootstrap, work / "live.log")
        try:
            worker.start(ready_timeout_s=600)
            seconds = asyncio.run(_live(bootstrap, live, worker, dialogues, every, gap, deadline))
        finally:
            worker.stop()
    return {"before": before, "seconds": seconds}


def tally(dialogues: list[dict], got: dict) -> dict[str, dict]:
    """Per kind (and over all corrections): the seconds of the established corrections that changed, and
    how many did not within the deadline."""
    stats: dict[str, dict] = defaultdict(lambda: {"seconds": [], "missed": 0, "established": 0})
    for d in dialogues:
        if d["control"] or d["old"] not in bench.split_block(got["before"][d["id"]])[0]:
            continue
        for kind in (d["kind"], "all corrections"):
            s = stats[kind]
            s["established"] += 1
            secs = got["seconds"].get(d["id"])
            if secs is None:
                s["missed"] += 1
            else:
                s["seconds"].append(secs)
    return dict(stats)


def table(stats: dict[str, dict], label: str) -> str:
    rows = [label, f"{'kind':24} {'estab':>5} {'changed':>8} {'wall p50 s':>10} {'wall p99 s':>10}"]
    for kind in sorted(stats, key=lambda k: (k.startswith("all"), k)):
        s = stats[kind]
        p50, p99 = (f"{pct(s['seconds'], q):.1f}" if s["seconds"] else "-" for q in (0.5, 0.99))
        rows.append(f"{kind:24} {s['established']:>5} {len(s['seconds']):>8} {p50:>10} {p99:>10}")
    return "\n".join(rows)


def rows(stats: dict[str, dict], delay: tuple[float, float]) -> list[Row]:
    late = "–".join(f"{x:g}" for x in delay)
    out = []
    for kind, s in sorted(stats.items()):
        if not s["seconds"]:
            continue
        note = (f"{len(s['seconds'])} of {s['established']} changed within the deadline; openai backend, test "
                f"server answering {late} s late; Stage-1 windows close after 10 s of quiet (default 600 s)")
        for q in (0.5, 0.99):
            out.append(Row("corrections", f"openai (test server, {late} s): {kind}: correction turn -> changed "
                           f"block p{int(q * 100)} (wall time)", pct(s["seconds"], q), unit="s",
                           note=note if q == 0.5 and kind == "all corrections" else ""))
    return out


def report_rows(quick: bool, bootstrap: str, work: Path) -> list[Row]:
    dialogues = bench.load()
    got = run(dialogues, bootstrap, work, DEFAULT_DELAY)
    return rows(tally(dialogues, got), DEFAULT_DELAY)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delay", default=",".join(map(str, DEFAULT_DELAY)), help="answer delay range, s")
    parser.add_argument("--every", type=float, default=1.0, help="seconds between two dialogues' corrections")
    parser.add_argument("--gap", type=float, default=2.0, help="seconds between a session's turns")
    parser.add_argument("--deadline", type=float, default=900.0, help="seconds the live phase may take")
    parser.add_argument("--only", help="comma-separated dialogue ids or kinds")
    args = parser.parse_args(argv)
    dialogues = bench.load()
    if args.only:
        wanted = set(args.only.split(","))
        dialogues = [d for d in dialogues if d["id"] in wanted or d["kind"] in wanted]
    delay = tuple(float(x) for x in args.delay.split(","))
    from credence.config import load_settings

    with kafka_and_folder(load_settings(), prefix="credence-corrections-wall-") as (bootstrap, work):
        got = run(dialogues, bootstrap, work, delay, args.every, args.gap, args.deadline)
    stats = tally(dialogues, got)
    print(table(stats, f"openai backend (test server, {args.delay} s answers), corrections live, wall time"))
    for d in dialogues:
        before = got["before"][d["id"]]
        if not d["control"] and d["old"] not in bench.split_block(before)[0]:
            print(f"  NOT ESTABLISHED {d['id']}: before: {' | '.join(before.splitlines())}")
        elif not d["control"] and got["seconds"].get(d["id"]) is None:
            print(f"  NOT CHANGED within the deadline {d['id']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
