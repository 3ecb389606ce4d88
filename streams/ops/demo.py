"""The main job on the embedded default: broker, worker, replay, wait, summarise, exit."""

from __future__ import annotations

import asyncio
import logging
import signal
import tempfile
import threading
import time
import uuid
from pathlib import Path

from credence.config import Settings
from credence.streams.api.tenants import TenantSettings
from credence.streams.ops.broker import configured_or_embedded, free_port
from credence.streams.ops.replay import replay, scopes_in, send_control
from credence.streams.ops.worker_process import WorkerProcess, wait_until

log = logging.getLogger(__name__)

SAMPLE = Path(__file__).resolve().parent / "data" / "sample_turns.jsonl"


def default_input() -> Path:
    return SAMPLE


def _summary(worker: WorkerProcess) -> list[str]:
    lines = []
    for scope in sorted(worker.get("/scopes")["scopes"]):
        view = worker.get(f"/scope/{scope}")
        lines.append(f"\n== {scope}: {view['turns']} turns, {len(view['entries'])} entries "
                     f"(clock {view['clock']})")
        for e in view["entries"]:
            score = "inf" if e["score"] is None else f"{e['score']:+.3f}"
            lines.append(f"  {e['kind']:<10} {e['status']:<15} {e['tier']:<17} {score:>8}  {e['text']}")
        block = view["memory_block"].strip()
        lines.append("  memory block:" + ("\n    " + block.replace("\n", "\n    ") if block else " (empty)"))
    return lines


def run_demo(settings: Settings, input_path: Path, timeout_s: float = 600.0, out=print, serve: bool = False,
             port: int = 0) -> int:
    """With `serve`, broker and worker keep running after the summary (on `port`, default the settings'
    web port) with the sample's tenants created, until Ctrl-C or SIGTERM."""
    started = time.monotonic()
    run_id = uuid.uuid4().hex[:8]
    prefix = settings.topic_prefix
    if settings.kafka_bootstrap:
        prefix = f"{settings.topic_prefix}-demo-{run_id}"  # never mix with a real deployment's topics
    else:
        out(f"starting the embedded Kafka {settings.kafka_version} broker …")
    with tempfile.TemporaryDirectory(prefix="credence-demo-") as tmp, \
            configured_or_embedded(settings, Path(tmp) / "broker") as bootstrap:
        tmp_path = Path(tmp)
        run = _demo_settings(settings, prefix, run_id, tmp_path, port, serve)
        worker = WorkerProcess(run, bootstrap, tmp_path / "worker.log")
        try:
            out(f"starting a worker (group {run.app_id}) on {bootstrap} …")
            worker.start()
            _replay_and_report(bootstrap, run, worker, input_path, tmp_path, timeout_s, started, out)
            if serve:
                _serve(bootstrap, run, worker, input_path, out)
        except BaseException:
            log_tail = (tmp_path / "worker.log").read_text(errors="replace")[-3000:] \
                if (tmp_path / "worker.log").exists() else ""
            if log_tail:
                out("--- worker log (tail) ---\n" + log_tail)
            raise
        finally:
            worker.stop()
    return 0


def _demo_settings(settings: Settings, prefix: str, run_id: str, tmp_path: Path, port: int,
                   serve: bool) -> Settings:
    return settings.model_copy(update={
        "topic_prefix": prefix, "app_id": f"credence-demo-{run_id}",
        "data_dir": tmp_path / "data", "web_port": (port or settings.web_port) if serve else free_port(),
        # Historical replay: event time comes from the turns; ticks only re-issue lost requests.
        # Only a served demo answers recalls afterwards: otherwise loading their model is wasted.
        "pipeline": settings.pipeline.model_copy(update={
            "ticks_advance_clock": False, "tick_interval_seconds": 5.0,
            "recall_warm_up": serve and settings.pipeline.recall_warm_up}),
    })


def _replay_and_report(bootstrap: str, run: Settings, worker: WorkerProcess, input_path: Path, tmp_path: Path,
                       timeout_s: float, started: float, out) -> None:
    replay_started = time.monotonic()
    sent = asyncio.run(replay(input_path, bootstrap, run))
    wait_until(lambda: _caught_up(worker, sent), timeout_s, f"the worker to take in {sent} turns")
    # End of input: extract what the Stage-1 windows still hold, then wait for the pipeline to idle.
    asyncio.run(send_control(bootstrap, run, scopes_in(input_path), "flush"))
    status = wait_until(lambda: _idle(worker), timeout_s, "the pipeline to finish its LLM work")
    pipeline_s = time.monotonic() - replay_started
    stats = status["stats"]
    for line in _summary(worker):
        out(line)
    for line in _analytics(bootstrap, run, tmp_path / "archive"):
        out(line)
    llm = status["llm"]
    out(f"\npipeline: {sent} turns replayed and fully processed in {pipeline_s:.1f} s "
        f"({sent / pipeline_s:.0f} turns/s)")
    out(f"LLM backend: {llm['backend']}")
    out(f"LLM calls: {llm['stats']['calls']} (retries {llm['stats']['retries']}, failures "
        f"{llm['stats']['failures']}, prompt tokens {llm['stats']['prompt_tokens']}); "
        f"journal events: {stats['journal_events']}")
    out(f"duplicates dropped: {stats['turns_duplicate']}")
    out(f"processed {sent} turns ({stats['turns_rejected']} rejected) in {time.monotonic() - started:.1f} s")


def _serve(bootstrap: str, run: Settings, worker: WorkerProcess, input_path: Path, out) -> None:
    """Create a tenant (with a key) for every tenant of the input, print one tenant's key and a curl line
    for its prompt route, then keep serving until Ctrl-C or SIGTERM."""
    from credence.client import Client
    from credence.errors import ApiError
    from credence.streams.ops.tenant_admin import add, current

    scopes = scopes_in(input_path)
    tenants = sorted({s.tenant for s in scopes})
    known = asyncio.run(current(bootstrap, run)).tenants
    keys = {t: asyncio.run(add(bootstrap, run, t, TenantSettings())) for t in tenants if t not in known}
    served = [[s.tenant, s.user, s.character] for s in sorted(scopes, key=lambda s: s.key) if s.tenant in keys]

    def prompt(tenant: str, user: str, character: str) -> str:
        with Client(worker.url, keys[tenant], tenant) as api:
            return api.prompt(user, character).text

    def prompts():
        try:
            return {tuple(s): prompt(*s) for s in served}
        except ApiError:
            return None  # the worker has not read the new tenants yet

    texts = wait_until(prompts, 30, "the worker to read the new tenants")
    # The curl line shows a scope whose prompt has something in it, when one has.
    tenant, user, character = next((s for s in served if texts[tuple(s)]), served[0])
    key = keys[tenant]
    out(f"\nserving the HTTP API on {worker.url} (Kafka {bootstrap}, topic prefix {run.topic_prefix}); "
        f"Ctrl-C stops broker and worker")
    for name in sorted(keys):
        out(f"tenant {name} key: {keys[name]}")
    out(f"export CREDENCE_URL={worker.url} CREDENCE_KEY={key}")
    out(f'curl -s -H "Authorization: Bearer $CREDENCE_KEY" '
        f"$CREDENCE_URL/v1/tenants/{tenant}/users/{user}/characters/{character}/prompt")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5) and worker.proc.poll() is None:
            pass
    except KeyboardInterrupt:
        pass


def _analytics(bootstrap: str, run: Settings, root: Path) -> list[str]:
    """Sink the journal and the archive to Parquet and show the lifecycle funnel DuckDB computes."""
    from credence.sinks.analytics import STAGES, connect, funnel, render
    from credence.sinks.consumer import drain
    from credence.sinks.schema import ARCHIVE, EVIDENCE

    archive = run.archive.model_copy(update={"root": str(root)})
    for topic, table in (("archive", ARCHIVE), ("evidence", EVIDENCE)):
        asyncio.run(drain(bootstrap, run.topic(topic), table, archive, group_id=f"{run.app_id}-sink-{table}",
                          kafka=run.kafka))
    conn = connect(str(root))
    try:
        rows = funnel(conn)
    finally:
        conn.close()
    totals: dict[str, list[int]] = {}
    for row in rows:  # the per-day funnel, summed per tenant for a short summary
        acc = totals.setdefault(row.tenant, [0] * len(STAGES))
        for i, stage in enumerate(STAGES):
            acc[i] += getattr(row, stage)
    table = render(["tenant", *STAGES], [(t, *v) for t, v in sorted(totals.items())], "table")
    return ["\nlifecycle funnel from the Parquet journal (DuckDB, `credence archive report` per day):", table]


def _idle(worker: WorkerProcess):
    status = worker.get("/status")
    return status if status["busy_scopes"] == 0 and status["llm"]["inflight"] == 0 else None


def _caught_up(worker: WorkerProcess, sent: int):
    stats = worker.get("/status")["stats"]
    done = stats["turns_accepted"] + stats["turns_rejected"] + stats["turns_duplicate"]
    return stats if done >= sent else None
