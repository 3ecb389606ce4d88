"""The journal and the tables agree: folding credence.evidence with `apply_snapshot` (newer version wins)
gives exactly the worker's active entries plus the archived ones — after a clean run, after a SIGKILL
in the middle of a replay and a restart, and when every input record is delivered twice. The crashed
and the duplicated runs end with the same entries as one clean delivery (at-least-once delivery +
idempotent application: no evidence counted twice). Rules backend, real broker, real worker."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.pipeline import (
    DEADLINE_S,
    FAST_GROUP_ENV,
    PARTITIONS,
    REPLAY_PIPELINE,
    RunResult,
    collect,
    discard,
    entry_diff,
    flush_and_wait_idle,
    invalid_lines,
    journal_mismatch,
    pipeline_settings,
    produce_lines,
    run_pipeline,
    sample_lines,
    scopes_of,
    valid_turn_counts,
    wait_turns,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

LINES = sample_lines()
SCOPES = scopes_of(LINES)
EXPECTED_TURNS = valid_turn_counts(LINES)  # ~290 valid turns in 6 scopes
INVALID = invalid_lines(LINES)  # the sample's deliberately invalid lines, dead-lettered
DISTINCT = sum(EXPECTED_TURNS.values())
REPEATS = len(LINES) - INVALID - DISTINCT  # valid lines repeating a turn id already seen (none expected)


@pytest.fixture(scope="module")
def clean_run(kafka_bootstrap, tmp_path_factory) -> RunResult:
    """One uninterrupted, single-delivery run of the sample: the reference the other runs must match."""
    root = tmp_path_factory.mktemp("clean")
    settings = pipeline_settings(kafka_bootstrap, root, f"c{uuid.uuid4().hex[:10]}")
    return run_pipeline(settings, kafka_bootstrap, LINES, root / "worker.log", expected_turns=EXPECTED_TURNS,
                        then_discard=True)


def test_clean_run_journal_fold_equals_tables(clean_run):
    stats = clean_run.status["stats"]
    assert stats["turns_accepted"] == DISTINCT and stats["turns_rejected"] == INVALID > 0
    assert stats["turns_duplicate"] == REPEATS and stats["redelivered"] == 0
    assert len(clean_run.journal) == stats["journal_events"]  # every event the worker counted is on the topic
    assert clean_run.entries and clean_run.archive, "the sample should both keep and archive entries"
    assert {e["event"] for e in clean_run.journal} >= {"created", "signal", "archived"}
    assert journal_mismatch(clean_run) == {}


def test_sigkill_mid_replay_then_restart_gives_the_clean_state(clean_run, settings_factory, kafka_bootstrap,
                                                               tmp_path):
    settings = settings_factory(topic_partitions=PARTITIONS, pipeline=REPLAY_PIPELINE)
    half = len(LINES) // 2
    log = tmp_path / "worker.log"
    worker = WorkerProcess(settings, kafka_bootstrap, log, extra_env=FAST_GROUP_ENV)
    try:
        worker.start()
        asyncio.run(produce_lines(kafka_bootstrap, settings, LINES[:half]))

        def mid_way():
            status = worker.get("/status")
            return status["stats"]["journal_events"] >= 5 and status["busy_scopes"] > 0 and status
        before = wait_until(mid_way, DEADLINE_S, "the worker to be in the middle of its work")
        worker.kill()  # SIGKILL: no final commit, LLM calls and queued inputs lost with the process
        assert before["stats"]["turns_accepted"] < DISTINCT

        asyncio.run(produce_lines(kafka_bootstrap, settings, LINES[half:]))  # input keeps arriving while down
        worker = WorkerProcess(settings, kafka_bootstrap, log, extra_env=FAST_GROUP_ENV).start()
        wait_turns(worker, EXPECTED_TURNS)  # counts survive the crash, none counted twice
        status = flush_and_wait_idle(worker, kafka_bootstrap, settings, SCOPES)
        run = collect(worker, kafka_bootstrap, settings, SCOPES, status)
    finally:
        discard(worker)

    assert journal_mismatch(run) == {}
    assert entry_diff(run.entries, clean_run.entries) == {}
    assert {k: v.version for k, v in run.entries.items()} == {k: v.version for k, v in clean_run.entries.items()}


def test_every_record_delivered_twice_gives_the_clean_state(clean_run, settings_factory, kafka_bootstrap, tmp_path):
    settings = settings_factory(topic_partitions=PARTITIONS, pipeline=REPLAY_PIPELINE)
    doubled = [line for line in LINES for _ in range(2)]
    run = run_pipeline(settings, kafka_bootstrap, doubled, tmp_path / "worker.log", expected_turns=EXPECTED_TURNS,
                       then_discard=True)

    stats = run.status["stats"]
    assert stats["turns_accepted"] == DISTINCT
    assert stats["turns_duplicate"] == DISTINCT + 2 * REPEATS and stats["turns_rejected"] == 2 * INVALID
    assert journal_mismatch(run) == {}
    assert entry_diff(run.entries, clean_run.entries) == {}
    assert sorted((e["event_id"], e["event"], e["cause"]) for e in run.journal) == \
        sorted((e["event_id"], e["event"], e["cause"]) for e in clean_run.journal)
