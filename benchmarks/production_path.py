"""The production path: the `openai` backend against the OpenAI-compatible test server, each answer held
back a seeded 0.2–0.4 s (`--delay LOW,HIGH` or CREDENCE_BENCH_LLM_DELAY), on real-style dialogue: replay,
long and live runs, the first two against `rules` in the same run. Reported: turns/s and the ratio to
`rules`, LLM calls and tokens per turn, the server's max concurrency, and (live) turn → journal-event latency.

The runs and the measures in full: docs/design/benchmarks.md ("The production path").

    python benchmarks/production_path.py [--quick] [--delay 0.2,0.4] [--rules-only]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support: the test server and the pipeline helpers

from benchmarks.report import Row, kafka_and_folder, pct  # noqa: E402
from credence.config import load_settings  # noqa: E402
from credence.config.llm import LLMSettings  # noqa: E402
from credence.config.pipeline import PipelineSettings  # noqa: E402
from credence.streams.ops.admin import ensure_topics  # noqa: E402
from credence.streams.ops.broker import free_port  # noqa: E402
from credence.streams.ops.data import generate_dialogue as dialogue  # noqa: E402
from credence.streams.ops.replay import send_control  # noqa: E402
from credence.streams.ops.worker_process import WorkerProcess, wait_until  # noqa: E402
from credence.tables.scope import Scope  # noqa: E402
from tests.support.openai_server import OpenAICompatibleServer  # noqa: E402
from tests.support.pipeline import idle_status, line_scope, scopes_of, topic_values  # noqa: E402

PARTITIONS = 4
MODEL = "bench-model"
DEADLINE_S = 1800.0
DEFAULT_DELAY = (0.2, 0.4)


# -- inputs -------------------------------------------------------------------------------------

def dialogue_lines(scopes: int, sessions: int, seed: int, tenant: str) -> list[bytes]:
    """`scopes` real-style conversations of `sessions` sessions each (4–8 exchanges a session, user turns
    1–6 minutes apart, sessions days apart), interleaved in event-time order."""
    rng = random.Random(seed)
    turns = []
    for i in range(scopes):
        for t in dialogue._scope_turns(f"u{i:04d}", dialogue.CHARACTERS[i % 2], rng, sessions):
            turns.append(t | {"tenant": tenant})
    turns.sort(key=lambda t: (t["ts"], t["turn_id"]))
    return [json.dumps(t).encode() for t in turns]


def user_turns(lines: list[bytes]) -> int:
    return sum(1 for line in lines if json.loads(line)["role"] == "user")


# -- one worker run -----------------------------------------------------------------------------

def bench_settings(bootstrap: str, work: Path, llm: LLMSettings, live: bool = False, **pipeline):
    tag = uuid.uuid4().hex[:8]
    timing = dict(ticks_advance_clock=True, tick_interval_seconds=2.0) if live else \
        dict(ticks_advance_clock=False, tick_interval_seconds=1.0)
    return load_settings(kafka_bootstrap=bootstrap, topic_prefix=f"prod{tag}", app_id=f"prod-{tag}",
                         data_dir=work / tag, web_port=free_port(), topic_partitions=PARTITIONS, llm=llm,
                         core_config_path=work / "core_config.json",
                         pipeline=PipelineSettings(recall_warm_up=False, **timing, **pipeline))


def create_topics(bootstrap: str, settings) -> None:
    """The run's topics; asked again while a busy broker's metadata does not show new partitions yet."""
    from credence.errors import BrokerError

    for attempt in range(20):
        try:
            asyncio.run(ensure_topics(bootstrap, settings, changelogs=True))
            return
        except BrokerError:
            if attempt == 19:
                raise
            time.sleep(1.0)  # the broker's metadata catching up, not a Kafka record


def openai_llm(server: OpenAICompatibleServer, **kw) -> LLMSettings:
    return LLMSettings(backend="openai", base_url=server.base_url, model=MODEL, timeout_s=30.0, **kw)


def _taken(worker: WorkerProcess, total: int) -> bool:
    return worker.get("/status")["stats"]["turns_accepted"] >= total


def run_replay(bootstrap: str, work: Path, lines: list[bytes], llm: LLMSettings,
               server: OpenAICompatibleServer | None = None, **pipeline) -> dict:
    """Pre-produce `lines`, start a worker, wait for every turn, flush the windows still open, wait until
    nothing is left to do. Seconds: the worker's first input batch to idle after the flush."""
    settings = bench_settings(bootstrap, work, llm, **pipeline)
    create_topics(bootstrap, settings)
    asyncio.run(produce(bootstrap, settings, lines))
    scopes = scopes_of(lines)
    before = len(server.records) if server else 0
    worker = WorkerProcess(settings, bootstrap, work / f"{settings.app_id}.log")
    try:
        worker.start(ready_timeout_s=600)
        wait_until(lambda: _taken(worker, len(lines)), DEADLINE_S, "the replay's turns", 0.1)
        asyncio.run(send_control(bootstrap, settings, scopes, "flush"))
        status = wait_until(lambda: idle_status(worker, scopes), DEADLINE_S, "the replay to idle", 0.1)
        seconds = time.time() - status["stats"]["first_input_at"]
    finally:
        worker.stop()
    out = {"turns": len(lines), "user_turns": user_turns(lines), "seconds": seconds,
           "llm": status["llm"]["stats"], "settings": settings}
    if server is not None:
        records = server.records[before:]
        out["by_task"] = dict(server.first_attempts)  # calls; a retry is one more request, not a call
        out["attempts"] = len(records)
        out["max_in_flight"] = max((r.in_flight for r in records), default=0)
        out["violations"] = list(server.violations)
    return out


async def produce(bootstrap: str, settings, lines: list[bytes]) -> None:
    """Every line to the turns topic keyed by its scope, acknowledged (the topics exist already)."""
    from aiokafka import AIOKafkaProducer

    from credence.kafka import client_options

    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all", linger_ms=5))
    await producer.start()
    try:
        futures = [await producer.send(settings.topic("turns"), line, key=line_scope(line).encode())
                   for line in lines]
        for fut in futures:
            await fut
    finally:
        await producer.stop()


def _first_event_per_turn(bootstrap: str, settings, when) -> dict:
    """turn id -> `when(event, record)` of the first journal event whose entry cites a fact of the turn."""
    from tests.support.turns import read_topic

    sources: dict[str, list[str]] = {}
    for rec in topic_values(bootstrap, settings, "facts"):
        if rec.get("type") == "result" and rec.get("task") == "stage1":
            for fact in rec["output"]["facts"]:
                sources[fact["id"]] = fact.get("source_turn_ids", [])
    first: dict = {}
    records = asyncio.run(read_topic(bootstrap, settings.topic("evidence"), settings.topic_partitions,
                                     settings.kafka))
    for record in records:
        event = json.loads(record.value)
        for fact_id in (event.get("entry") or {}).get("source_fact_ids", []):
            for tid in sources.get(fact_id, []):
                at = when(event, record)
                if tid not in first or at < first[tid]:
                    first[tid] = at
    return first


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# -- live traffic -------------------------------------------------------------------------------

class Conversations:
    """Scopes that each send a user turn every `pace` s and the character's answer 2 s later; stepping
    the load up adds scopes (a turn's event time is the wall clock when it is sent)."""

    def __init__(self, pace: float, seed: int) -> None:
        self.pace, self.rng, self.scopes, self.sent = pace, random.Random(seed), [], {}

    def resize(self, rate: float, now: float) -> None:
        want = max(1, round(rate * self.pace / 2))  # two turns (user, ai) per scope per pace
        while len(self.scopes) < want:
            i = len(self.scopes)
            self.scopes.append({"key": f"live/u{i:05d}/{dialogue.CHARACTERS[i % 2]}", "n": 0,
                                "story": dialogue._statements(dialogue._persona(self.rng)),
                                "next": now + self.rng.uniform(0, self.pace), "ai_at": None})
        self.active = want

    def due(self, now: float) -> list[tuple[str, bytes]]:
        out = []
        for s in self.scopes[: self.active]:
            if s["ai_at"] is not None and s["ai_at"] <= now:
                out.append(self._turn(s, "ai", self.rng.choice(dialogue.AI_LINES), now))
                s["ai_at"] = None
            if s["next"] <= now:
                text = self.rng.choice(s["story"]) if self.rng.random() < 0.6 else self.rng.choice(dialogue.SMALL_TALK)
                out.append(self._turn(s, "user", text, now))
                s["next"], s["ai_at"] = now + self.pace * self.rng.uniform(0.7, 1.3), now + 2.0
        return out

    def _turn(self, s: dict, role: str, text: str, now: float) -> tuple[str, bytes]:
        scope = Scope.parse(s["key"])
        user, character = scope.user, scope.character
        turn_id = f"{user}-{character}-{s['n']:05d}"
        s["n"] += 1
        self.sent[turn_id] = now
        ts = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return s["key"], json.dumps({"v": 1, **scope.fields(),
                                     "turn_id": turn_id, "role": role, "text": text, "ts": ts}).encode()


def backlog(worker: WorkerProcess, sent: int) -> int:
    """Turns sent but not yet applied: not taken in, or queued behind a scope's LLM request."""
    taken = worker.get("/status")["stats"]["turns_accepted"]
    queued = sum(s["queued"] for s in worker.get("/scopes")["scopes"].values())
    return sent - taken + queued


async def _live(bootstrap: str, settings, worker: WorkerProcess, rates: list[float], step_s: float,
                pace: float) -> tuple[list[dict], Conversations]:
    from aiokafka import AIOKafkaProducer

    from credence.kafka import client_options

    convo, steps, sent = Conversations(pace, 11), [], 0
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all", linger_ms=5))
    await producer.start()
    try:
        for rate in rates:
            start = time.time()
            convo.resize(rate, start)
            marks = {}
            while (elapsed := time.time() - start) < step_s:
                for key, value in convo.due(time.time()):
                    await producer.send(settings.topic("turns"), value, key=key.encode())
                    sent += 1
                if elapsed >= step_s / 2 and "mid" not in marks:
                    await producer.flush()
                    marks["mid"] = await asyncio.to_thread(backlog, worker, sent)
                await asyncio.sleep(0.05)
            await producer.flush()
            end = await asyncio.to_thread(backlog, worker, sent)
            # Saturated: the backlog grew by more than 2 s of the offered load over the step's second half.
            steps.append({"rate": rate, "scopes": convo.active, "started": start, "ended": time.time(),
                          "backlog_mid": marks.get("mid", 0), "backlog_end": end,
                          "sustained": end - marks.get("mid", 0) <= 2 * rate})
            print(f"live step {rate:.0f} turns/s over {convo.active} scopes: backlog {marks.get('mid')} -> {end}",
                  flush=True)
            if not steps[-1]["sustained"]:
                break
    finally:
        await producer.stop()
    return steps, convo


# Live steps last seconds, not the ten minutes of quiet that close a default window: the live run closes
# windows after 10 s of quiet or at 30 s of age (about one per exchange, the most calls per turn), so each
# step carries its own LLM work. With the defaults, a step shorter than a conversation measures intake.
LIVE_WINDOW = dict(stage1_quiet_seconds=10.0, stage1_max_wait_seconds=30.0)


def run_live(bootstrap: str, work: Path, server: OpenAICompatibleServer, quick: bool) -> dict:
    settings = bench_settings(bootstrap, work, openai_llm(server), live=True, **LIVE_WINDOW)
    create_topics(bootstrap, settings)
    worker = WorkerProcess(settings, bootstrap, work / f"{settings.app_id}.log")
    rates = [10.0, 40.0, 120.0] if quick else [10.0, 20.0, 40.0, 80.0, 160.0, 320.0]
    try:
        worker.start(ready_timeout_s=600)
        steps, convo = asyncio.run(_live(bootstrap, settings, worker, rates, 20.0 if quick else 45.0,
                                         pace=20.0))
    finally:
        worker.stop()
    first = _first_event_per_turn(bootstrap, settings, lambda _e, r: r.timestamp / 1000)
    ok = [s for s in steps if s["sustained"]]
    top = ok[-1] if ok else steps[0]
    lat = [first[tid] - convo.sent[tid] for tid in first
           if tid in convo.sent and top["started"] <= convo.sent[tid] < top["ended"]]
    return {"steps": steps, "capacity": top["rate"] if ok else 0.0, "latency_s": sorted(lat),
            "at_rate": top["rate"]}


# -- the run ------------------------------------------------------------------------------------

def delay_from_env() -> tuple[float, float]:
    raw = os.environ.get("CREDENCE_BENCH_LLM_DELAY", "")
    return tuple(float(x) for x in raw.split(",")) if raw else DEFAULT_DELAY  # type: ignore[return-value]


def pair(bootstrap: str, work: Path, lines: list[bytes], delay: tuple[float, float]) -> dict:
    """The same input on `rules` and on `openai` against a fresh slow server, back to back."""
    rules = run_replay(bootstrap, work, lines, LLMSettings())
    with OpenAICompatibleServer(model=MODEL, delay_s=delay) as server:
        ours = run_replay(bootstrap, work, lines, openai_llm(server), server)
    return {"rules": rules, "openai": ours}


def inputs(quick: bool) -> dict[str, list[bytes]]:
    return {"replay": dialogue_lines(60 if quick else 240, 2, 7, "replay"),
            "long": dialogue_lines(10, 4 if quick else 24, 8, "long")}


def measure(bootstrap: str, work: Path, quick: bool, delay: tuple[float, float]) -> dict:
    report = {"delay_s": delay, "inputs": {}}
    for name, lines in inputs(quick).items():
        report["inputs"][name] = pair(bootstrap, work, lines, delay)
        r = report["inputs"][name]
        print(name, {k: (v["turns"] / v["seconds"], v["llm"], v.get("by_task")) for k, v in r.items()}, flush=True)
    with OpenAICompatibleServer(model=MODEL, delay_s=delay) as server:
        report["live"] = run_live(bootstrap, work, server, quick)
        report["live"]["max_in_flight"] = server.max_in_flight
    return report


def rows_from(report: dict) -> list[Row]:
    out = []
    delay = "–".join(f"{d:g}" for d in report["delay_s"])
    for name, r in report["inputs"].items():
        ours, rules = r["openai"], r["rules"]
        rate = ours["turns"] / ours["seconds"]
        out.append(Row("production path", f"{name}: turns/s, openai backend, {delay} s answers", rate,
                       rules["turns"] / rules["seconds"], unit="turns/s", baseline_label="rules backend, same input",
                       target=(">= 300" if name == "replay" else ">= 100"),
                       note=f"{ours['turns']} turns ({ours['user_turns']} user), server max in flight "
                            f"{ours.get('max_in_flight')}; the floor is also >= 15% of rules"))
        per100 = 100 / ours["turns"]
        total = sum(ours["by_task"].values())
        out.append(Row("production path", f"{name}: LLM calls per 100 turns", total * per100, unit="calls",
                       target="<= 20" if name == "replay" else "",
                       note=", ".join(f"{t} {n * per100:.1f}" for t, n in sorted(ours["by_task"].items()))
                       + f"; {ours['attempts']} HTTP requests, {ours['llm']['retries']} retries, "
                         f"{ours['llm']['failures']} calls failed for good"))
        for task, n in sorted(ours["by_task"].items()):
            out.append(Row("production path", f"{name}: {task} calls per 100 turns", n * per100, unit="calls"))
        for kind in ("prompt", "completion"):
            out.append(Row("production path", f"{name}: {kind} tokens per user turn",
                           ours["llm"][f"{kind}_tokens"] / max(1, ours["user_turns"]), unit="tokens"))
    live = report["live"]
    out.append(Row("production path", "live: capacity (highest sustained offered load)", live["capacity"],
                   unit="turns/s", note="windows closed after 10 s of quiet or 30 s of age (about one per "
                   "exchange) so that each step carries its LLM work; " + "; ".join(f"{s['rate']:g}/s over {s['scopes']} scopes: backlog "
                                                  f"{s['backlog_mid']}→{s['backlog_end']}" for s in live["steps"])))
    out.append(Row("production path", "live: server max concurrent requests", live["max_in_flight"], unit="requests"))
    for q in (0.5, 0.99):
        out.append(Row("production path", f"live: turn → journal event p{int(q * 100)} at {live['at_rate']:g} turns/s",
                       1000 * pct(live["latency_s"], q), unit="ms",
                       note=f"{len(live['latency_s'])} turns with a remembered fact" if q == 0.5 else ""))
    return out


def report_rows(quick: bool, bootstrap: str, work: Path) -> list[Row]:
    return rows_from(measure(bootstrap, work, quick, delay_from_env()))


def main() -> int:

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--delay", default=",".join(map(str, DEFAULT_DELAY)), help="answer delay range, s")
    parser.add_argument("--rules-only", action="store_true",
                        help="only the in-process `rules` replays (turns/s per input), e.g. to pair two trees")
    args = parser.parse_args()
    settings = load_settings()
    with kafka_and_folder(settings, prefix="credence-prod-") as (bootstrap, work):
        if args.rules_only:
            for name, lines in inputs(args.quick).items():
                rules = run_replay(bootstrap, work, lines, LLMSettings())
                print(json.dumps({"input": name, "turns": rules["turns"], "rules_turns_per_s":
                                  round(rules["turns"] / rules["seconds"], 1)}), flush=True)
            return 0
        delay = tuple(float(x) for x in args.delay.split(","))
        for row in rows_from(measure(bootstrap, work, args.quick, delay)):
            print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
