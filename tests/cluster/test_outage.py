"""Calm during a broker outage. A worker and a sink run while their only broker is stopped: they log at
most one warning per component per 10 s (the issue's bound: <= 100 lines over 60 s), /status says
"broker unreachable since …", processing resumes by itself when the broker returns and ends in the state
of an undisturbed run. Told to stop while the broker is away, both exit within 15 s; a worker restarted
afterwards on the same data dir ends in that same state (nothing applied was lost, nothing unapplied was
committed)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from credence.config import load_settings
from credence.kafka import client_options
from credence.streams.ops.broker import EmbeddedBroker
from credence.streams.ops.process import WorkerProcess, settings_env, wait_until
from tests.support.pipeline import (
    CLUSTER_LINES, collect, entry_digest, flush_and_wait_idle, pipeline_settings, produce_lines, scopes_of,
    valid_turn_counts, wait_turns,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.timeout(600)]

LINES = CLUSTER_LINES
SCOPES = scopes_of(LINES)
OUTAGE_S = 20.0
LINES_PER_MINUTE = 100  # the bound for one process over a 60 s outage
STOP_WITHIN_S = 15.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    settings = load_settings()
    node = EmbeddedBroker(tmp_path_factory.mktemp("outage") / "broker", settings.kafka_version,
                          settings.broker_cache_dir, heap="384m")
    node.start()
    try:
        yield node
    finally:
        node.stop()


def lines_of(path: Path) -> int:
    return len(path.read_text(errors="replace").splitlines()) if path.exists() else 0


def outage(broker: EmbeddedBroker, logs: list[Path], seconds: float) -> dict[Path, int]:
    """Stop the broker for `seconds` (a wait on purpose: the outage itself is what is measured); return
    the log lines each process wrote meanwhile. The broker stays down."""
    before = {p: lines_of(p) for p in logs}
    broker.stop()
    time.sleep(seconds)  # the outage's length is the test's input, not a wait for a condition
    return {p: lines_of(p) - before[p] for p in logs}


async def group_state(bootstrap: str, group: str) -> str:
    admin = AIOKafkaAdminClient(**client_options(bootstrap))
    await admin.start()
    try:
        response = (await admin.describe_consumer_groups([group]))[0]
        return response.groups[0][2]  # (error_code, group_id, state, ...)
    finally:
        await admin.close()


def start_sink(settings, bootstrap: str, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "credence.streams.ops.cli", "sink"],
                            env=settings_env(settings, bootstrap), stdout=open(log, "ab"), stderr=subprocess.STDOUT)


def test_outage_is_calm_resumes_by_itself_and_stops_promptly(broker, reference, tmp_path):
    settings = pipeline_settings(broker.bootstrap, tmp_path, f"o{uuid.uuid4().hex[:8]}",
                                 archive={"root": str(tmp_path / "archive")})
    worker_log, sink_log = tmp_path / "worker.log", tmp_path / "sink.log"
    half = len(LINES) // 2
    worker = WorkerProcess(settings, broker.bootstrap, worker_log).start(ready_timeout_s=120)
    sink = start_sink(settings, broker.bootstrap, sink_log)
    try:
        asyncio.run(produce_lines(broker.bootstrap, settings, LINES[:half]))
        wait_turns(worker, valid_turn_counts(LINES[:half]))
        for table in ("archive", "evidence"):
            group = f"{settings.archive.group_id}.{table}"
            wait_until(lambda: asyncio.run(group_state(broker.bootstrap, group)) == "Stable", 60,
                       f"the sink to join {group}")

        written = outage(broker, [worker_log, sink_log], OUTAGE_S)
        status = worker.get("/status")
        assert status["broker"].startswith("broker unreachable since "), status["broker"]
        assert status["stats"]["broker_unreachable_since"] > 0
        bound = LINES_PER_MINUTE * OUTAGE_S / 60
        assert all(n <= bound for n in written.values()), (written, bound)

        broker.start()  # same data dir, same port: nobody is told where it went
        asyncio.run(produce_lines(broker.bootstrap, settings, LINES[half:]))
        wait_turns(worker, valid_turn_counts(LINES), 120)
        status = flush_and_wait_idle(worker, broker.bootstrap, settings, SCOPES, 120)
        wait_until(lambda: worker.get("/status")["broker"] == "reachable", 30, "the worker to see the broker")
        resumed = collect(worker, broker.bootstrap, settings, SCOPES, status, read_topics=False)
        assert entry_digest(resumed.entries) == entry_digest(reference.entries)

        outage(broker, [], 3.0)  # the worker and the sink now lose the broker, then are told to stop
        for proc in (worker.proc, sink):
            proc.send_signal(signal.SIGTERM)
        for proc in (worker.proc, sink):
            proc.wait(STOP_WITHIN_S)  # raises TimeoutExpired if either hangs
    finally:
        worker.kill()
        sink.kill()
    broker.start()
    again = WorkerProcess(settings, broker.bootstrap, worker_log).start(ready_timeout_s=120)
    try:
        wait_turns(again, valid_turn_counts(LINES), 120)
        status = flush_and_wait_idle(again, broker.bootstrap, settings, SCOPES, 120)
        restarted = collect(again, broker.bootstrap, settings, SCOPES, status, read_topics=False)
    finally:
        again.stop()
    assert entry_digest(restarted.entries) == entry_digest(reference.entries)
