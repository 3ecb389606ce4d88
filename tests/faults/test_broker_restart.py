"""The broker process is stopped (controlled shutdown) and started again on its data directory in the
middle of a replay, while the worker runs: the worker reconnects by itself and the end state equals an
uninterrupted run's on an undisturbed broker. The input comes in three pieces (conftest.restart_cuts), the
restart lands in the second, the third is produced once the broker is back."""

from __future__ import annotations

import asyncio
import os

import pytest

from credence.config import load_settings
from credence.streams.ops.broker import EmbeddedBroker
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.faults.harness import (
    deadline_for,
    end_state_differences,
    fresh_settings,
    settle,
    taken_in,
    version_order_violations,
    wait_turns_or_explain,
)
from tests.support.pipeline import (
    FAST_GROUP_ENV,
    collect,
    discard,
    flush_and_wait_idle,
    produce_lines,
    scopes_of,
    valid_turn_counts,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


@pytest.fixture
def own_broker(tmp_path):
    if os.environ.get("CREDENCE_KAFKA_BOOTSTRAP"):
        pytest.skip("restarts a broker process of its own; an external cluster is not ours to restart")
    settings = load_settings()
    broker = EmbeddedBroker(tmp_path / "broker", settings.kafka_version, settings.broker_cache_dir)
    broker.start()
    yield broker
    broker.stop()


def test_broker_restart_mid_replay_ends_in_the_uninterrupted_state(own_broker, restart_lines, restart_cuts,
                                                                   restart_reference, faults_size, tmp_path):
    lines, ref = restart_lines, restart_reference
    deadline = deadline_for(len(lines))
    bootstrap = own_broker.bootstrap
    settings = fresh_settings(bootstrap, tmp_path / "run")
    expected = valid_turn_counts(lines)
    log = tmp_path / "run" / "worker.log"
    first, second = restart_cuts
    worker = WorkerProcess(settings, bootstrap, log, extra_env=FAST_GROUP_ENV)
    try:
        worker.start(ready_timeout_s=300)
        asyncio.run(produce_lines(bootstrap, settings, lines[:first]))
        settle([worker], lines[:first], deadline)
        asyncio.run(produce_lines(bootstrap, settings, lines[first:second]))
        wait_until(lambda: taken_in(worker) >= (first + second) // 2, deadline, "the worker to be mid-replay")
        own_broker.stop()  # the process ends; its data directory stays
        own_broker.start()  # same data dir, same port
        # Input keeps arriving once the broker is back (the last piece, held back until now, so the stop
        # lands mid-replay whatever the machine's speed); the worker must find its way back on its own.
        settle([worker], lines[:second], deadline)
        asyncio.run(produce_lines(bootstrap, settings, lines[second:]))
        wait_turns_or_explain(worker, expected, deadline)
        status = flush_and_wait_idle(worker, bootstrap, settings, scopes_of(lines), deadline)
        run = collect(worker, bootstrap, settings, scopes_of(lines), status)
    except BaseException:
        print(f"--- worker log tail ({log}) ---\n{log.read_text(errors='replace')[-4000:] if log.exists() else ''}")
        raise
    finally:
        discard(worker)

    assert end_state_differences(run, ref) == {}
    assert version_order_violations(run.journal) == {}
