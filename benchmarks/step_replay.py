"""The scope step alone on the production path's dialogue: every scope's turns through `step()` in order,
the `rules` backend answering each request in process as the worker's inline answers do, the control value
encoded after every step (the worker's size check), a flush at the end. No broker, no worker: what the
step costs, apart from Kafka, the store and the loop, so two trees compare on the CPU the step takes.

Prints, per input, turns per CPU-second (the best of `--repeat` runs in this process; the text caches
are warm after the first) and a digest of every emitted record and the final states: two trees with the
same digest gave the same output.

    python benchmarks/step_replay.py [--quick] [--repeat N] [--profile FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import hashlib
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.production_path import dialogue_lines  # noqa: E402
from credence.config.memory import MemorySettings  # noqa: E402
from credence.config.pipeline import PipelineSettings  # noqa: E402
from credence.records.inputs import Application
from credence.records.kind import Kind
from credence.streams.llm.rules.backend import RulesBackend  # noqa: E402
from credence.streams.llm.runner import execute  # noqa: E402
from credence.streams.scope.context import StepContext  # noqa: E402
from credence.streams.scope.scope_state import ScopeState  # noqa: E402
from credence.streams.scope.step import event_now, step  # noqa: E402
from credence.streams.state import codec  # noqa: E402
from credence.tables.clock import parse_instant  # noqa: E402
from tests.support.pipeline import line_scope  # noqa: E402


def run_scope(key: str, turns: list[dict], loop: asyncio.AbstractEventLoop, backend: RulesBackend,
              digest) -> int:
    """One scope's turns and a flush; each request answered right after the step that asked for it."""
    state, memory, pipeline = ScopeState(scope=key), MemorySettings(), PipelineSettings()
    emitted = 0

    def apply(kind: str, record: dict, at=None) -> None:
        nonlocal emitted
        ctx = StepContext(now=event_now(state, at) or parse_instant(turns[0]["ts"]), powerful=True, boot="b",
                          memory=memory, pipeline=pipeline)
        step(state, Application(Kind(kind), record), ctx)
        codec.encode_control(state)
        for emit in ctx.emits:
            digest.update(emit.topic.name.encode() + orjson.dumps(emit.record, option=orjson.OPT_SORT_KEYS))
        emitted += len(ctx.emits)
        for req in ctx.requests:
            if req.id in state.requests:  # not answered yet by an earlier answer's own requests
                output = loop.run_until_complete(execute(backend, req.task, req.payload))
                apply("result", {"request_id": req.id, "task": req.task, "output": output})

    for turn in turns:
        state.turns += 1
        apply("turn", turn, parse_instant(turn["ts"]))
    apply("flush", {"type": "flush"})
    digest.update(orjson.dumps(state.to_dict(), option=orjson.OPT_SORT_KEYS))
    return emitted


def inputs(quick: bool) -> dict[str, list[bytes]]:
    """production_path's inputs (spelled out here so that this file also runs in a tree from before them)."""
    return {"replay": dialogue_lines(60 if quick else 240, 2, 7, "replay"),
            "long": dialogue_lines(10, 4 if quick else 24, 8, "long")}


def replay(lines: list[bytes]) -> tuple[str, int]:
    scopes: dict[str, list[dict]] = defaultdict(list)
    for line in lines:
        scopes[line_scope(line)].append(json.loads(line))
    loop, backend, digest = asyncio.new_event_loop(), RulesBackend(), hashlib.sha256()
    try:
        emitted = sum(run_scope(key, turns, loop, backend, digest) for key, turns in scopes.items())
    finally:
        loop.close()
    return digest.hexdigest()[:16], emitted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the production path's --quick inputs")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--profile", help="write a cProfile of one run of every input to this file")
    args = parser.parse_args()
    data = inputs(args.quick)
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(lambda: [replay(lines) for lines in data.values()])
        profiler.dump_stats(args.profile)
        return 0
    for name, lines in data.items():
        best = None
        for _ in range(args.repeat):
            start = time.process_time()
            digest, emitted = replay(lines)
            seconds = time.process_time() - start
            best = seconds if best is None else min(best, seconds)
        print(json.dumps({"input": name, "turns": len(lines), "cpu_s": round(best, 3),
                          "turns_per_cpu_s": round(len(lines) / best, 1), "emits": emitted, "digest": digest}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
