"""The main job on the embedded default: broker, worker, replay, wait, summarise, exit."""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
import uuid
from pathlib import Path

from credence.config import Settings
from credence.streams.broker import EmbeddedBroker, free_port
from credence.streams.process import WorkerProcess, wait_until
from credence.streams.replay import replay

log = logging.getLogger(__name__)

SAMPLE = Path(__file__).resolve().parent / "data" / "sample_turns.jsonl"


def default_input() -> Path:
    return SAMPLE


def _summary(scopes: dict) -> list[str]:
    counts = scopes.get("turn_counts", {})
    lines = [f"{'scope':<40} turns"]
    for scope in sorted(counts):
        lines.append(f"{scope:<40} {counts[scope]}")
    return lines


def run_demo(settings: Settings, input_path: Path, timeout_s: float = 600.0, out=print) -> int:
    started = time.monotonic()
    run_id = uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory(prefix="credence-demo-") as tmp:
        tmp_path = Path(tmp)
        broker = None
        if settings.kafka_bootstrap:
            bootstrap = settings.kafka_bootstrap
            prefix = f"{settings.topic_prefix}-demo-{run_id}"  # never mix with a real deployment's topics
        else:
            broker = EmbeddedBroker(tmp_path / "broker", settings.kafka_version, settings.broker_cache_dir)
            out(f"starting the embedded Kafka {settings.kafka_version} broker …")
            bootstrap = broker.start()
            prefix = settings.topic_prefix
        run = settings.model_copy(update={
            "topic_prefix": prefix, "app_id": f"credence-demo-{run_id}",
            "data_dir": tmp_path / "data", "web_port": free_port(),
        })
        worker = WorkerProcess(run, bootstrap, tmp_path / "worker.log")
        try:
            out(f"starting a worker (group {run.app_id}) on {bootstrap} …")
            worker.start()
            sent = asyncio.run(replay(input_path, bootstrap, run))
            stats = wait_until(
                lambda: _caught_up(worker, sent), timeout_s, f"the worker to process {sent} turns"
            )
            for line in _summary(worker.get("/scopes")):
                out(line)
        except BaseException:
            log_tail = (tmp_path / "worker.log").read_text(errors="replace")[-3000:] \
                if (tmp_path / "worker.log").exists() else ""
            if log_tail:
                out("--- worker log (tail) ---\n" + log_tail)
            raise
        finally:
            worker.stop()
            if broker is not None:
                broker.stop()
    elapsed = time.monotonic() - started
    out(f"duplicates dropped: {stats['turns_duplicate']}")
    out(f"processed {sent} turns ({stats['turns_rejected']} rejected) in {elapsed:.1f} s")
    return 0


def _caught_up(worker: WorkerProcess, sent: int):
    stats = worker.get("/status")["stats"]
    done = stats["turns_accepted"] + stats["turns_rejected"] + stats["turns_duplicate"]
    return stats if done >= sent else None
