"""The turn's walk: one turn from `POST /v1/…/turns` to its journal event (and, with --to parquet, its
Parquet row), recorded by tracing a real worker, reduced to call order at file granularity.

    python benchmarks/turn_walk.py [--to journal|parquet] [--depth N] [--save PATH | --load PATH]

Uses CREDENCE_KAFKA_BOOTSTRAP, else an embedded broker. Prints the files in order, then the counts:
distinct files, folder crossings (a step into another folder than the previous step's), immediate bounces
(folder A → B → A). What is counted and why: docs/architecture.md, "The turn's walk".
"""

from __future__ import annotations

import argparse
import asyncio
import dis
import functools
import importlib
import json
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support: the worker process and topic readers

PRODUCT = ("credence", "streams", "tables", "sinks", "config")  # the repository's product folders
CALL, RETURN, SPAWN = "call", "return", "spawn"
_CREATE_TASK = asyncio.BaseEventLoop.create_task.__code__
_FRESH, _YIELD = dis.opmap["RESUME"], dis.opmap["YIELD_VALUE"]
_RESUMABLE = 0x20 | 0x80 | 0x100 | 0x200  # generator, coroutine, iterable coroutine, async generator


# -- the recorder: product calls of every thread and task of one process --------------------------

class Recorder:
    """A profile hook that, while on, keeps each call and return of a product function: (time, thread,
    asyncio task, event, file, function). A coroutine resumed after an await (or suspended) is neither."""

    def __init__(self) -> None:
        self.on = False
        self.events: list[tuple] = []
        self._files: dict[str, str | None] = {}
        self._first: dict[object, int] = {}

    def install(self, on: bool = False) -> None:
        self.on = on
        sys.setprofile(self.hook)
        threading.setprofile(self.hook)

    def uninstall(self) -> None:
        sys.setprofile(None)
        threading.setprofile(None)

    def _file(self, filename: str) -> str | None:
        if filename not in self._files:
            path, root = Path(filename).resolve(), _product_root()
            rel = path.relative_to(root) if path.is_relative_to(root) else None
            self._files[filename] = str(rel) if rel and rel.parts[0] in PRODUCT and rel.suffix == ".py" else None
        return self._files[filename]

    def _midway(self, frame, event: str) -> bool:
        """A coroutine or generator resumed (a call event) or suspended (a return event), not begun or ended."""
        code = frame.f_code
        if not code.co_flags & _RESUMABLE:
            return False
        if event == RETURN:
            return code.co_code[frame.f_lasti] == _YIELD
        if code not in self._first:
            raw = code.co_code
            self._first[code] = next((i for i in range(0, len(raw), 2) if raw[i] == _FRESH), -1)
        return frame.f_lasti != self._first[code]

    def hook(self, frame, event, arg) -> None:
        if not self.on or (event != CALL and event != RETURN):
            return
        if event == RETURN and frame.f_code is _CREATE_TASK:  # a task spawned here is part of this one's walk
            self.events.append((time.time(), threading.get_ident(), _task(), SPAWN, id(arg), ""))
            return
        file = self._file(frame.f_code.co_filename)
        if file is None or self._midway(frame, event):
            return
        self.events.append((time.time(), threading.get_ident(), _task(), event, file, frame.f_code.co_name))


@functools.cache
def _product_root() -> Path:
    """The checkout the running `credence` comes from (an editable install: this repository's root)."""
    import credence

    return Path(credence.__file__).resolve().parent.parent


def _task() -> int:
    loop = asyncio._get_running_loop()
    return id(asyncio.current_task(loop)) if loop is not None else 0


def child(trace_dir: Path) -> int:
    """A worker (`credence worker`) with the recorder on between the files `start` and `stop` appearing in
    `trace_dir` (it answers `start` with `recording`); at `stop` it writes `events.json` there."""
    from credence.streams.ops.cli import main as cli

    recorder = Recorder()

    def watch() -> None:
        while not (trace_dir / "start").exists():
            time.sleep(0.02)
        recorder.on = True
        (trace_dir / "recording").touch()
        while not (trace_dir / "stop").exists():
            time.sleep(0.02)
        recorder.on = False
        (trace_dir / "events.tmp").write_text(json.dumps(recorder.events))
        (trace_dir / "events.tmp").rename(trace_dir / "events.json")

    recorder.install()
    threading.Thread(target=watch, daemon=True, name="turn-walk").start()
    return cli(["worker"])


# -- the walk: the turn's tasks, reduced to call order at file granularity ---------------------------

HANDLER = "post_turns"  # the route's handler (streams/api/routes.py): the task that runs it is the request's
# Not the turn's data: the clock's formatting, trace spans and counters are called from everywhere.
HELPERS = frozenset({"tables/clock.py", "credence/tracing.py", "streams/serving/metrics.py"})
DEPTH = 8  # calls a reader follows below each task's entry (the calibration: docs/architecture.md)


@dataclass(frozen=True)
class Call:
    task: tuple
    file: str
    function: str
    depth: int  # frames under it on its task's stack since the recording began (a spawned task: its parent's)

    @property
    def folder(self) -> str:
        return str(Path(self.file).parent)


def calls_of(events: list) -> tuple[list[Call], dict[tuple, tuple]]:
    """Every recorded call with its depth, and which task spawned which."""
    depths: dict[tuple, int] = {}
    parents: dict[tuple, tuple] = {}
    out = []
    for _, thread, task, event, file, function in events:
        key = (thread, task)
        depth = depths.setdefault(key, 0)
        if event == SPAWN:
            parents[(thread, file)] = key
            depths[(thread, file)] = depth
        elif event == CALL:
            out.append(Call(key, file, function, depth))
            depths[key] = depth + 1
        elif depth:  # a frame begun before the recording returns to nothing recorded
            depths[key] = depth - 1
    return out, parents


def turn_calls(events: list) -> list[Call]:
    """The calls of the request's task, of the task that steps the turn's scope, and of the tasks they spawn.
    Other tasks (housekeeping loops, the web server's idle work) are not the turn's."""
    calls, parents = calls_of(events)
    request = next((c.task for c in calls if c.function == HANDLER), None)
    if request is None:
        raise SystemExit(f"no call of {HANDLER} recorded: is it still the handler of POST …/turns?")
    first = next(i for i, c in enumerate(calls) if c.task == request)
    roots = [c.task for c in calls[first:] if c.task != request and c.task not in parents
             and c.folder == "streams/scope"]
    if not roots:
        raise SystemExit("no task stepped a scope after the request: the turn never reached its scope")
    # The request's task first, then the consumer's: they meet only through the topic, whatever the timing.
    return [c for c in calls[first:] if c.task in family(request, parents)] + \
        [c for c in calls[first:] if c.task in family(roots[0], parents)]


def family(task: tuple, parents: dict[tuple, tuple]) -> set[tuple]:
    """The task and every task it spawned, and they spawned."""
    tasks = {task}
    while grown := {t for t, p in parents.items() if p in tasks} - tasks:
        tasks |= grown
    return tasks


def walk(calls: list[Call], depth: int = DEPTH, every: bool = False) -> list[Call]:
    """The steps: calls at most `depth` frames down, helpers left out, each function's first call only
    (a reader reads a function once) unless `every`; consecutive calls in one file are one step."""
    seen: set[tuple[str, str]] = set()
    steps: list[Call] = []
    for c in calls:
        if c.depth > depth or c.file in HELPERS or (not every and (c.file, c.function) in seen):
            continue
        seen.add((c.file, c.function))
        if not steps or steps[-1].file != c.file:
            steps.append(c)
    return steps


def counts(steps: list[Call]) -> dict[str, int]:
    """Distinct files; folder crossings (a step in another folder than the previous); immediate bounces
    (A → B → A over the folders crossed), and how many of them go down to a lower layer and back."""
    heads = [s for i, s in enumerate(steps) if i == 0 or steps[i - 1].folder != s.folder]
    back = [i for i in range(1, len(heads) - 1) if heads[i - 1].folder == heads[i + 1].folder]
    layer = _layers()
    return {"steps": len(steps), "files": len({s.file for s in steps}), "crossings": len(heads) - 1,
            "bounces": len(back), "down": sum(layer(heads[i].file) > layer(heads[i - 1].file) for i in back)}


@functools.cache
def _layers() -> Callable[[str], int]:
    """A product file's layer in docs/architecture.md's order (0 the top; unlisted: the bottom)."""
    page = _product_root() / "docs" / "architecture.md"
    text = page.read_text() if page.exists() else ""
    lines = text.split("<!-- layer order", 1)[-1].split("```text", 1)[-1].split("```", 1)[0].strip().splitlines()
    prefixes = [(p, i) for i, line in enumerate(lines) for part in line.split("|") for p in part.split()[1:]]

    def layer(file: str) -> int:
        module = ".".join(Path(file).with_suffix("").parts)
        module = module if module.split(".")[0] == "credence" else f"credence.{module}"
        hits = [(len(p), i) for p, i in prefixes if module == p or module.startswith(p + ".")]
        return max(hits)[1] if hits else len(lines)
    return layer


# -- the run: one turn through a worker (and the Parquet sink) -----------------------------------

def worker_class():
    for home in ("tests.support.process", "credence.streams.ops.worker_process", "credence.streams.ops.process"):
        try:  # the worker rig's homes, newest first (it moved)
            rig = importlib.import_module(home)
            break
        except ImportError:
            continue
    WorkerProcess, wait_until = rig.WorkerProcess, rig.wait_until

    class TracedWorker(WorkerProcess):
        def __init__(self, *args, trace_dir: Path, **kwargs):
            super().__init__(*args, **kwargs)
            self.trace_dir = trace_dir

        def launch(self):
            import subprocess

            from credence.streams.ops.broker import die_with_parent
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self.proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--child", str(self.trace_dir)],
                env=self.env, stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent)
            return self

    return TracedWorker, wait_until


TURN = {"user": "ada", "character": "barista", "turn_id": "walk-1", "role": "user",
        "text": "I love green tea and I walk my dog Biscuit every morning.", "ts": "2026-05-01T10:00:00Z"}


def run(bootstrap: str, work: Path, to_parquet: bool) -> tuple[list, list]:
    """The worker's events between the POST and the journal event's arrival; the sink's, when asked."""
    import httpx

    from credence.config import load_settings
    from credence.config.pipeline import PipelineSettings
    from credence.streams.ops import tenant_admin
    from credence.streams.ops.broker import free_port
    from tests.support.turns import read_topic

    prefix = f"walk-{uuid.uuid4().hex[:8]}"
    # One partition, Stage 1 asked at the first turn, no ticks: the turn's own path, nothing batched behind it.
    settings = load_settings(kafka_bootstrap=bootstrap, topic_prefix=prefix, app_id=f"{prefix}-app",
                             data_dir=work / "data", web_port=free_port(), topic_partitions=1,
                             core_config_path=work / "core_config.json",
                             pipeline=PipelineSettings(stage1_max_batch=1, ticks_advance_clock=False,
                                                       tick_interval_seconds=0))
    key = asyncio.run(tenant_admin.add(bootstrap, settings, "walk", tenant_admin.overrides({})))
    traced, wait_until = worker_class()
    (trace_dir := work / "trace").mkdir()
    worker = traced(settings, bootstrap, work / "worker.log", trace_dir=trace_dir).start(ready_timeout_s=180)
    journal = lambda: asyncio.run(read_topic(bootstrap, settings.topic("evidence"), 1, settings.kafka))  # noqa: E731
    try:
        (trace_dir / "start").touch()
        wait_until(lambda: (trace_dir / "recording").exists(), 60, "the worker's recorder")
        httpx.post(f"{worker.url}/v1/tenants/walk/turns", json={"turns": [TURN]},
                   headers={"Authorization": f"Bearer {key}"}, timeout=60).raise_for_status()
        wait_until(journal, 120, "the turn's journal event")
        (trace_dir / "stop").touch()
        wait_until(lambda: (trace_dir / "events.json").exists(), 60, "the worker's trace")
        events = json.loads((trace_dir / "events.json").read_text())
    finally:
        worker.kill()
    return events, (sink_events(bootstrap, settings) if to_parquet else [])


def sink_events(bootstrap: str, settings) -> list:
    """The evidence sink draining the journal in this process, recorded."""
    from credence.sinks.consumer import SinkRunner
    from credence.sinks.registry import build_sinks

    sink = build_sinks(settings, ("evidence",))[0]
    recorder = Recorder()
    recorder.install(on=True)
    try:
        asyncio.run(SinkRunner(sink, bootstrap, dead_letter_topic=settings.topic("dlq"), kafka=settings.kafka).drain())
    finally:
        recorder.uninstall()
    return recorder.events


def report(steps: list[Call], full: list[Call], to: str, depth: int, markdown: bool = False) -> dict[str, int]:
    """Print the walk (a crossing marked >, a bounce back <>; as markdown, one line per folder stretch), the
    crossings by hand-off, and the counts last; returns the counts."""
    crossed: list[str] = [steps[0].folder] if steps else []
    pairs: Counter[str] = Counter()
    stretches: list[list[Call]] = []
    for n, step in enumerate(steps, 1):
        mark = " "
        if n > 1 and step.folder != steps[n - 2].folder:
            mark = "<>" if len(crossed) > 1 and crossed[-2] == step.folder else ">"
            crossed.append(step.folder)
            pairs[f"{steps[n - 2].folder} > {step.folder}"] += 1
        if n == 1 or mark != " ":
            stretches.append([])
        stretches[-1].append(step)
        if not markdown:
            print(f"{n:4d} {mark:>2} {step.file:42s} {step.function}")
    for n, stretch in enumerate(stretches if markdown else [], 1):
        print(f"{n}. `{stretch[0].folder}/`: " + " → ".join(Path(s.file).stem for s in stretch))
    print("\ncrossings by hand-off: " + ", ".join(f"{pair} {k}" for pair, k in pairs.most_common()))
    c, every = counts(steps), counts(full)
    end = "Parquet row" if to == "parquet" else "journal event"
    for label, k in (("\nevery depth", every), (f"POST …/turns → {end} (depth {depth})", c)):
        print(f"{label}: {k['files']} files, {k['crossings']} folder crossings, {k['bounces']} immediate bounces "
              f"({k['down']} down to a lower layer and back; {k['steps']} steps)")
    return c


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--to", choices=("journal", "parquet"), default="journal",
                        help="where the walk ends: the journal event (default) or the evidence sink's Parquet row")
    parser.add_argument("--depth", type=int, default=DEPTH, help=f"frames followed below each task's entry "
                        f"(default {DEPTH}: the reviewer's count on main 9dd9974)")
    parser.add_argument("--every", action="store_true", help="count every call of a function, not only its first")
    parser.add_argument("--markdown", action="store_true", help="the walk as docs/architecture.md lists it")
    parser.add_argument("--save", type=Path, help="write the recorded events to this JSON file")
    parser.add_argument("--load", type=Path, help="walk the events a --save wrote instead of running a turn")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child)
    if args.load:
        recorded = json.loads(args.load.read_text())
    else:
        recorded = record(args.to == "parquet")
        if args.save:
            args.save.write_text(json.dumps(recorded))
    calls = turn_calls(recorded["worker"])
    if args.to == "parquet":
        calls += calls_of(recorded["sink"])[0]
    report(walk(calls, args.depth, args.every), walk(calls, 10**6, args.every), args.to, args.depth, args.markdown)
    return 0


def record(to_parquet: bool) -> dict[str, list]:
    """One turn through a fresh worker (its own topics) on CREDENCE_KAFKA_BOOTSTRAP or an embedded broker."""
    import tempfile

    from credence.config import load_settings
    from credence.streams.ops.broker import configured_or_embedded

    with tempfile.TemporaryDirectory(prefix="turn-walk-") as tmp, \
            configured_or_embedded(load_settings(), Path(tmp) / "broker") as bootstrap:
        worker, sink = run(bootstrap, Path(tmp), to_parquet)
    return {"worker": worker, "sink": sink}


def report_rows(quick: bool, bootstrap: str, work: Path) -> list:
    """`python -m benchmarks`: the walk to the journal event, against the targets in docs/architecture.md."""
    from benchmarks.report import Row

    worker, _ = run(bootstrap, work, to_parquet=False)  # work: the runner's folder for this benchmark
    c = counts(walk(turn_calls(worker)))
    note = f"depth {DEPTH}, {c['steps']} steps; python benchmarks/turn_walk.py prints the walk"
    return [Row("turn walk", "folder crossings, POST …/turns → journal event", c["crossings"], target="<= 25",
                note=note),
            Row("turn walk", "immediate bounces (A → B → A)", c["bounces"], target="<= 5",
                note=f"{c['down']} of them down to a lower layer and back"),
            Row("turn walk", "files", c["files"])]


if __name__ == "__main__":
    sys.exit(main())
