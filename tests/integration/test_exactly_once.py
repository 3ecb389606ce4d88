"""Exactly-once output: a worker killed between a batch's sends and its transaction's commit, restarted,
leaves a journal in which a read_committed reader finds each event once, with the content of the run that
committed, and whose fold equals the tables. Outside the transaction the killed run's journal events stay
published beside the re-run's (the same ids again; with another interleaving of the scope's topics, other
content under those ids, and readers keep the first copy). Rules backend, real broker, real worker; the
kill is injected at the first transaction commit after a journal record was sent (any producer)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import pytest

from credence.streams.ops.replay import send_control
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.pipeline import (
    DEADLINE_S,
    FAST_GROUP_ENV,
    collect,
    discard,
    flush_and_wait_idle,
    journal_mismatch,
    pipeline_settings,
    produce_lines,
    sample_lines,
    scopes_of,
    turn_counts,
    valid_turn_counts,
    wait_turns,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

# Imported by the killed worker's interpreter at start (PYTHONPATH): it exits, as a kill does, when a
# transaction is about to commit after a record reached the journal topic.
KILL_HOOK = '''
import os
import aiokafka

_journal = os.environ.get("KILL_AT_COMMIT_AFTER")
if _journal:
    _send, _commit = aiokafka.AIOKafkaProducer.send, aiokafka.AIOKafkaProducer.commit_transaction
    _seen = []

    async def send(self, topic, *args, **kwargs):
        if topic == _journal:
            _seen.append(topic)
        return await _send(self, topic, *args, **kwargs)

    async def commit_transaction(self):
        if _seen:
            os._exit(9)
        return await _commit(self)

    aiokafka.AIOKafkaProducer.send, aiokafka.AIOKafkaProducer.commit_transaction = send, commit_transaction
'''


def _dead(worker: WorkerProcess) -> bool:
    return worker.proc is not None and worker.proc.poll() is not None


def _counts_or_dead(worker: WorkerProcess, expected: dict[str, int]) -> bool:
    if _dead(worker):
        return True
    try:
        return turn_counts(worker) == expected
    except Exception:  # noqa: BLE001 - dying while asked
        return _dead(worker)


def test_a_batch_killed_before_its_commit_is_read_only_as_its_re_run(kafka_bootstrap, tmp_path):
    lines = sample_lines(scopes_of(sample_lines())[:2])  # two of the sample's scopes: CI's time is short
    scopes, expected = scopes_of(lines), valid_turn_counts(lines)
    settings = pipeline_settings(kafka_bootstrap, tmp_path, f"x{uuid.uuid4().hex[:10]}")
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILL_HOOK)
    killed = WorkerProcess(settings, kafka_bootstrap, tmp_path / "killed.log", extra_env=FAST_GROUP_ENV | {
        "PYTHONPATH": str(hook), "KILL_AT_COMMIT_AFTER": settings.topic("evidence")})
    killed.start()
    try:
        asyncio.run(produce_lines(kafka_bootstrap, settings, lines))
        wait_until(lambda: _counts_or_dead(killed, expected), DEADLINE_S, "the worker to take in every turn or die")
        if not _dead(killed):  # no journal event before the windows close: the flush's batch is the one
            asyncio.run(send_control(kafka_bootstrap, settings, scopes, "flush"))
        wait_until(lambda: _dead(killed), DEADLINE_S, f"the kill before a commit (log: {killed.log_path})")
        assert killed.proc.returncode == 9
    finally:
        killed.stop()

    worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "worker.log", extra_env=FAST_GROUP_ENV)
    worker.start()
    try:
        wait_turns(worker, expected)
        status = flush_and_wait_idle(worker, kafka_bootstrap, settings, scopes)
        run = collect(worker, kafka_bootstrap, settings, scopes, status)
    finally:
        discard(worker)
    assert run.journal, "the run journaled nothing"
    repeated = {i: n for i, n in Counter(e["event_id"] for e in run.journal).items() if n > 1}
    assert repeated == {}, f"{len(repeated)} events read twice (the killed batch's beside its re-run's)"
    assert journal_mismatch(run) == {}
