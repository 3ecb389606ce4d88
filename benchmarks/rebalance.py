"""What a rebalance costs a worker at N input partitions (changelog transactions on).

Worker A holds every partition; worker B joins, then leaves: two rounds of Faust's eager rebalances,
measured inside A by a hook its interpreter loads at start (revoked_s, assigned_s, highwaters_s, pause_s,
open_stores), summed per round. Against the broker at CREDENCE_KAFKA_BOOTSTRAP or its own (`--own-broker`).

Each measure and why large runs need their own broker: docs/design/benchmarks.md ("What a rebalance costs").

Usage: python benchmarks/rebalance.py [--partitions 4 64 256] [--label main] [--own-broker]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aiokafka.admin import AIOKafkaAdminClient  # noqa: E402

from benchmarks.throughput import make_input  # noqa: E402
from credence.config import load_settings  # noqa: E402
from credence.errors import CredenceError  # noqa: E402
from credence.kafka import client_options  # noqa: E402
from credence.streams.ops.admin import ensure_topics  # noqa: E402
from credence.streams.ops.broker import EmbeddedBroker, free_port  # noqa: E402
from credence.streams.ops.worker_process import WorkerProcess, wait_until  # noqa: E402
from tests.support.pipeline import pipeline_settings  # noqa: E402
from tests.support.turns import Outgoing, produce  # noqa: E402

DEADLINE_S = 300.0
HOOK = '''
import json, os, time
_out = os.environ.get("REBALANCE_EVENTS")
if _out:
    import faust.app.base as _base
    import faust.tables.recovery as _recovery
    from credence.streams.state import restore as _restore

    def _log(event, start, **extra):
        with open(_out, "a") as f:
            f.write(json.dumps({"event": event, "start": start, "end": time.time()} | extra) + "\\n")

    def _timed(cls, name, event, when=lambda args: True):
        original = getattr(cls, name)

        async def timed(self, *args, **kwargs):
            start = time.time()
            try:
                return await original(self, *args, **kwargs)
            finally:
                if when(args):
                    _log(event, start)
        setattr(cls, name, timed)

    _timed(_base.App, "_on_partitions_revoked", "revoked")
    _timed(_base.App, "_on_partitions_assigned", "assigned")
    _timed(_restore.BulkRecovery, "_build_highwaters", "highwaters", lambda args: args[3] == "active")
    _timed(_restore.BulkRecovery, "on_recovery_completed", "ready")
    _timed(_recovery.Recovery, "_resume_streams", "ready")
'''


def events(path: Path, since: float, until: float) -> list[dict]:
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if since <= r["start"] <= until]


def summarize(rows: list[dict]) -> dict:
    def total(kind: str) -> float:
        return round(sum(r["end"] - r["start"] for r in rows if r["event"] == kind), 3)

    revoked = [r["start"] for r in rows if r["event"] == "revoked"]
    ready = [r["end"] for r in rows if r["event"] == "ready"]
    pause = round(max(ready) - min(revoked), 3) if revoked and ready else None
    return {"revoked_s": total("revoked"), "assigned_s": total("assigned"), "highwaters_s": total("highwaters"),
            "pause_s": pause, "rebalances": len(revoked)}


def open_stores(worker: WorkerProcess) -> int | None:
    """The RocksDB databases the worker holds open: each open one holds its LOCK file."""
    locks = 0
    try:
        for fd in Path(f"/proc/{worker.proc.pid}/fd").iterdir():
            try:
                locks += os.readlink(fd).endswith("/LOCK")
            except OSError:  # closed meanwhile
                pass
    except OSError:  # not Linux, or the worker is gone
        return None
    return locks


def steady_stores(worker: WorkerProcess, still_s: float = 5.0, within_s: float = 120.0) -> int | None:
    """The open stores once the count has not changed for `still_s` (the revoked ones set aside may be
    closing in the background, CREDENCE_STATE__REVOKED_STORE_KEEP_SECONDS after the rebalance)."""
    count, since, end = open_stores(worker), time.time(), time.time() + within_s
    while time.time() < end and time.time() - since < still_s:
        time.sleep(0.5)
        now = open_stores(worker)
        if now != count:
            count, since = now, time.time()
    return count


def held(worker: WorkerProcess) -> set[int]:
    try:
        return set(worker.get("/status")["state"]["held_partitions"])
    except Exception:  # noqa: BLE001 - not up (yet), or halted
        return set()


def alive(worker: WorkerProcess) -> bool:
    return worker.proc is not None and worker.proc.poll() is None


def settled_after(worker: WorkerProcess, path: Path, since: float, want: set[int]) -> bool:
    if not alive(worker):
        raise CredenceError(f"the worker stopped (exit {worker.proc.returncode}); log: {worker.log_path}")
    last = events(path, since, time.time() + 1)
    return held(worker) == want and any(r["event"] == "ready" for r in last) and \
        max(r["end"] for r in last) < time.time() - 2  # nothing for 2 s: the rounds are over


def run(bootstrap: str, partitions: int, work: Path) -> dict:
    prefix = f"rb{uuid.uuid4().hex[:8]}"
    root = work / prefix
    settings = pipeline_settings(bootstrap, root, prefix, topic_partitions=partitions)
    hook = root / "hook"
    hook.mkdir(parents=True)
    (hook / "sitecustomize.py").write_text(HOOK)
    turns = make_input(min(4 * partitions, 400), 4, timedelta(hours=1), 7)

    def member(name: str) -> tuple[WorkerProcess, Path]:
        ev = root / f"{name}.events"
        s = settings.model_copy(update={"data_dir": root / name, "web_port": free_port()})
        # the group's default session (CREDENCE_KAFKA_SESSION_TIMEOUT_S): B leaves by stopping, not by dying
        return WorkerProcess(s, bootstrap, root / f"{name}.log", extra_env={
            "PYTHONPATH": str(hook), "REBALANCE_EVENTS": str(ev)}), ev

    a, a_events = member("a")
    b, b_events = member("b")
    everything = set(range(partitions))
    out: dict = {"partitions": partitions}
    try:
        wait_until(lambda: asyncio.run(setup(bootstrap, settings, turns)), DEADLINE_S,
                   "the topics to be created and led, and the turns produced")
        start = time.time()
        a.start(ready_timeout_s=DEADLINE_S)
        wait_until(lambda: a.get("/status")["stats"]["turns_accepted"] >= len(turns), DEADLINE_S,
                   f"A to apply every turn (log: {a.log_path})")
        out["start"] = summarize(events(a_events, start, time.time())) | {"open_stores": open_stores(a)}
        joined = time.time()
        b.start(ready_timeout_s=DEADLINE_S)
        wait_until(lambda: held(b) and settled_after(a, a_events, joined, everything - held(b)), DEADLINE_S,
                   f"the group to settle with B (logs: {a.log_path}, {b.log_path})")
        out["join"] = summarize(events(a_events, joined, time.time())) | {"open_stores": steady_stores(a)}
        left = time.time()
        b.stop()
        wait_until(lambda: settled_after(a, a_events, left, everything), DEADLINE_S,
                   f"A to take every partition back (log: {a.log_path})")
        out["leave"] = summarize(events(a_events, left, time.time())) | {"open_stores": open_stores(a)}
    except Exception as exc:  # noqa: BLE001 - a halted worker is a result too
        out["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        b.stop()
        a.stop()
        asyncio.run(delete_topics(bootstrap, prefix))
    return out


async def setup(bootstrap: str, settings, turns) -> bool:
    """Create the topics and produce the turns (a broker creating thousands of partitions elects their
    leaders slowly: the first produces fail, and are asked again)."""
    await ensure_topics(bootstrap, settings, changelogs=True)
    await produce(bootstrap, settings.topic("turns"), [Outgoing(key=k, value=v) for k, v in turns])
    return True


async def delete_topics(bootstrap: str, prefix: str) -> None:
    admin = AIOKafkaAdminClient(**client_options(bootstrap))
    await admin.start()
    try:
        mine = [t for t in await admin.list_topics() if t.startswith(prefix)]
        if mine:
            await admin.delete_topics(mine)
    finally:
        await admin.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, nargs="+", default=[4, 64, 256])
    parser.add_argument("--label", default="", help="names the code measured, in the output file")
    parser.add_argument("--keep", type=Path, help="keep the workers' logs and events in this directory")
    parser.add_argument("--own-broker", action="store_true",
                        help="start a broker of its own (1 GiB heap): thousands of partitions made and deleted on a "
                             "shared broker slow it for everyone else")
    args = parser.parse_args()
    bootstrap = os.environ.get("CREDENCE_KAFKA_BOOTSTRAP", "")
    if not bootstrap and not args.own_broker:
        print("set CREDENCE_KAFKA_BOOTSTRAP, or pass --own-broker", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="credence-rebalance-") as tmp:
        broker = None
        if args.own_broker:
            settings = load_settings()
            broker = EmbeddedBroker(Path(tmp) / "broker", settings.kafka_version, settings.broker_cache_dir, heap="1g")
            bootstrap = broker.start()
        try:
            for n in args.partitions:
                rows.append(run(bootstrap, n, args.keep or Path(tmp)))
                print(json.dumps(rows[-1]), flush=True)
        finally:
            if broker is not None:
                broker.stop()
    stamp = f"{datetime.now(UTC):%Y%m%dT%H%M}"
    out = ROOT / "benchmarks" / "results" / f"rebalance-{args.label + '-' if args.label else ''}{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"at": stamp, "label": args.label, "rows": rows}, indent=2) + "\n")
    print(f"written to {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
