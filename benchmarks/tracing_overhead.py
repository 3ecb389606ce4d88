"""What tracing costs the worker's step when it is off: the agent's batch (turns of many scopes, the
rules backend answering inside the batch, records "sent" to in-memory topics) timed three ways in one run,
interleaved, best of several repetitions:

  off:       the code as shipped, no tracer provider installed (the API's no-op proxy)
  removed:   the same code with every tracing hook replaced by a constant (`active` False, headers passed
             through, spans and contexts a shared null context): the step as if it had no tracing code
  on:        an SDK tracer provider with an in-memory exporter (every step, LLM answer and emit a span)

    python benchmarks/tracing_overhead.py [--turns 400] [--scopes 40] [--runs 7]

Rows: off vs. removed (target: ratio <= 1.03, i.e. nothing measurable) and, for information, on vs. off.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, run as a script

from credence import tracing  # noqa: E402
from credence.config import load_settings  # noqa: E402
from credence.config.pipeline import PipelineSettings  # noqa: E402
from credence.config.state import StateSettings  # noqa: E402
from credence.streams.llm.factory import make_backend  # noqa: E402
from credence.streams.llm.runner import Runner  # noqa: E402
from credence.streams.runtime.agent import ScopeAgent  # noqa: E402
from credence.streams.runtime.app import Stats  # noqa: E402
from credence.streams.state.ownership import Ownership  # noqa: E402
from credence.streams.state.store import StateTables  # noqa: E402
from credence.streams.state.transaction import WorkerState  # noqa: E402
from credence.streams.state.writes import TableWrites  # noqa: E402

SETTINGS = load_settings(topic_prefix="bench", pipeline=PipelineSettings(stage1_max_batch=2))
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
TALK = ["I love green tea.", "I live in Berlin.", "My name is Sam.", "I hate mornings.", "I walk my dog daily."]
PARTITIONS = 4


class _Message:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self.topic, self.partition, self.offset = topic, partition, offset


class _Event:
    def __init__(self, topic: str, partition: int, offset: int, key: bytes, value: bytes) -> None:
        self.message, self.key, self.value, self.headers = _Message(topic, partition, offset), key, value, {}


class _Channel:
    async def send(self, key, value, headers=None):
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


class _Topics:
    def __getattr__(self, name):
        return _Channel()


class _Switch:
    def enabled(self, tenant):
        return True


_BACKEND = []  # one rules backend for every run (it says which it is when made)


def _agent() -> ScopeAgent:
    tables, writes = StateTables(scopes={}, entries={}, lists={}, history={}, seen={}), TableWrites()
    ownership = Ownership(PARTITIONS, SETTINGS.topic("turns"))
    ownership.held = set(range(PARTITIONS))
    state = WorkerState.over(tables, StateSettings(), ownership, writes, SETTINGS.topic)
    agent = ScopeAgent(SETTINGS, _Topics(), state, _Switch(), Stats())
    if not _BACKEND:
        _BACKEND.append(make_backend(SETTINGS.llm, memory=SETTINGS.memory))
    agent.runner = Runner(_BACKEND[0], None, 4, inline=True)
    return agent


def _events(agent: ScopeAgent, turns: int, scopes: int) -> list[_Event]:
    out, offsets = [], {}
    for n in range(turns):
        scope = f"acme/u{n % scopes}/aria"
        p = agent.state.ownership.partition_of(scope)
        offsets[p] = offsets.get(p, -1) + 1
        record = {"v": 1, "tenant": "acme", "user": f"u{n % scopes}", "character": "aria", "turn_id": f"t{n}",
                  "role": "user", "text": TALK[n % len(TALK)], "ts": (T0 + timedelta(minutes=n)).isoformat()}
        out.append(_Event(SETTINGS.topic("turns"), p, offsets[p], scope.encode(), json.dumps(record).encode()))
    return out


def _time_once(turns: int, scopes: int, batch: int = 100) -> float:
    agent = _agent()
    events = _events(agent, turns, scopes)

    async def run() -> float:
        started = time.perf_counter()
        for i in range(0, len(events), batch):
            await agent.batch(events[i:i + batch])
        return time.perf_counter() - started

    return asyncio.run(run())


@contextmanager
def _removed():
    """Every tracing hook the step calls replaced by a constant: the step as if it had no tracing code."""
    null = nullcontext()
    saved = {name: getattr(tracing, name) for name in ("active", "record_headers", "span", "attached", "current")}
    tracing.active = lambda: False
    tracing.record_headers = lambda headers=None: headers
    tracing.span = lambda *args, **kwargs: null
    tracing.attached = lambda ctx: null
    tracing.current = lambda: None
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(tracing, name, value)


@contextmanager
def _on():
    from tests.support.tracing import in_memory_spans

    with in_memory_spans() as exporter:
        yield
        exporter.clear()


def measure(turns: int, scopes: int, runs: int) -> dict[str, float]:
    """Seconds per turn of each variant, best of `runs` interleaved repetitions (after one warm-up)."""
    variants = [("off", nullcontext), ("removed", _removed), ("on", _on)]
    best = {name: float("inf") for name, _ in variants}
    _time_once(turns, scopes)
    for i in range(runs):
        for name, make in variants[i % 3:] + variants[:i % 3]:  # each variant first, second and last in turn
            with make():
                gc.collect()  # the previous run's garbage is not this one's cost
                best[name] = min(best[name], _time_once(turns, scopes) / turns)
    return best


def report_rows(quick: bool, bootstrap: str, work: Path):
    from benchmarks.report import Row

    turns, runs = (200, 5) if quick else (1000, 9)
    best = measure(turns, 20, runs)
    us = {k: v * 1e6 for k, v in best.items()}
    return [
        Row("tracing", f"agent step, tracing off (µs/turn, {turns} turns, rules inline)", us["off"], us["removed"],
            unit="µs/turn", baseline_label="same step, tracing hooks replaced by constants", target="ratio <= 1.03"),
        Row("tracing", "agent step, tracing on, in-memory exporter (µs/turn)", us["on"], us["off"], unit="µs/turn",
            baseline_label="tracing off", note="every step, in-process LLM answer and emit is a span"),
    ]


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--scopes", type=int, default=40)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    best = measure(args.turns, args.scopes, args.runs)
    for name, seconds in best.items():
        print(f"{name:8s} {seconds * 1e6:9.1f} µs/turn")
    print(f"off/removed {best['off'] / best['removed']:.3f}   on/off {best['on'] / best['off']:.3f}")
    return best


if __name__ == "__main__":
    main()
