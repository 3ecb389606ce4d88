"""The turn-walk tool's reduction (benchmarks/turn_walk.py): recorded calls to the walk and its counts. The
run itself needs a worker and a broker: `python benchmarks/turn_walk.py`, not the suite."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "benchmarks" / "turn_walk.py"


@pytest.fixture(scope="module")
def tw():
    spec = importlib.util.spec_from_file_location("turn_walk", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass resolves annotations through it
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def steps(tw, *files):
    return [tw.Call((1, 1), f, "f", 0) for f in files]


def test_counts_crossings_and_immediate_bounces(tw):
    walk = steps(tw, "streams/api/a.py", "streams/api/b.py", "streams/runtime/c.py", "streams/api/d.py",
                 "streams/runtime/e.py", "streams/state/f.py", "streams/runtime/g.py")
    # folders: api, runtime, api, runtime, state, runtime: 5 crossings; api-runtime-api, runtime-api-runtime
    # and runtime-state-runtime bounce, api-runtime-state does not. Two of them go down a layer and back
    # (docs/architecture.md's order), runtime-api-runtime goes up.
    assert tw.counts(walk) == {"steps": 7, "files": 7, "crossings": 5, "bounces": 3, "down": 2}
    # state → tables → state is a call down and back; state → runtime → state, the agent's ping-pong, is not
    pong = steps(tw, "streams/state/positions.py", "tables/scope.py", "streams/state/positions.py",
                 "streams/runtime/forwards.py", "streams/state/forgets.py")
    assert tw.counts(pong) == {"steps": 5, "files": 4, "crossings": 4, "bounces": 2, "down": 1}


def test_walk_collapses_a_file_reads_a_function_once_and_skips_helpers(tw):
    calls = [tw.Call((1, 1), "streams/api/a.py", "post", 0), tw.Call((1, 1), "streams/api/a.py", "check", 1),
             tw.Call((1, 1), "tables/clock.py", "format_instant", 2),  # a helper: not a step
             tw.Call((1, 1), "streams/api/b.py", "send", 1), tw.Call((1, 1), "streams/api/a.py", "check", 1),
             tw.Call((1, 1), "streams/state/c.py", "deep", 9)]  # below the depth a reader follows
    assert [(s.file, s.function) for s in tw.walk(calls, depth=8)] == \
        [("streams/api/a.py", "post"), ("streams/api/b.py", "send")]
    assert [s.file for s in tw.walk(calls, depth=8, every=True)] == \
        ["streams/api/a.py", "streams/api/b.py", "streams/api/a.py"]
    assert tw.walk(calls, depth=9)[-1].file == "streams/state/c.py"


def test_the_turns_tasks_request_first_spawned_tasks_in_background_tasks_out(tw):
    t = iter(range(100))
    request, consumer, spawned, idle = (7, 1), (7, 2), (7, 3), (7, 4)

    def ev(task, event, file, function=""):
        return [next(t), task[0], task[1], event, file, function]

    events = [ev(idle, "call", "streams/scope/quiet.py", "tick"),  # a scope stepped before the request: not it
              ev(request, "call", "streams/api/server.py", "handle"),
              ev(request, "call", "streams/api/handlers.py", "post_turns"),
              ev(consumer, "call", "streams/runtime/agent.py", "batch"),
              ev(request, "return", "streams/api/handlers.py"),
              ev(consumer, "call", "streams/scope/step.py", "step"), ev(consumer, "return", "streams/scope/step.py"),
              ev(consumer, "spawn", spawned[1]), ev(spawned, "call", "streams/state/fence.py", "send"),
              ev(request, "call", "streams/api/http.py", "json_response"),
              ev(idle, "call", "streams/state/rocks.py", "close_set_aside")]
    walk = tw.turn_calls(events)
    assert [(c.file, c.depth) for c in walk] == [
        ("streams/api/server.py", 0), ("streams/api/handlers.py", 1), ("streams/api/http.py", 1),  # the request
        ("streams/runtime/agent.py", 0), ("streams/scope/step.py", 1),  # then the task that steps the scope,
        ("streams/state/fence.py", 1)]  # with what it spawned, at the depth it spawned it
    with pytest.raises(SystemExit, match="post_turns"):
        tw.turn_calls([e for e in events if e[5] != "post_turns"])


def test_the_recorder_counts_a_coroutine_once_however_often_it_awaits(tw):
    here = str(Path(__file__).resolve())

    async def step():
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        await asyncio.gather(child())

    async def child():
        return 1

    recorder = tw.Recorder()
    recorder._files[here] = "streams/scope/here.py"  # this file stands for a product module
    recorder.install(on=True)
    try:
        asyncio.run(step())
    finally:
        recorder.uninstall()
    kept = [(e[3], e[5]) for e in recorder.events if e[3] == "spawn" or e[4] == "streams/scope/here.py"]
    # asyncio.run spawns the task that runs `step` (and, after it, its shutdown's); gather spawns `child`'s
    assert kept[:6] == [("spawn", ""), ("call", "step"), ("spawn", ""), ("call", "child"), ("return", "child"),
                    ("return", "step")]
    calls, parents = tw.calls_of(recorder.events)
    child_call = next(c for c in calls if c.function == "child")
    assert child_call.task in parents and child_call.depth == 1
