"""Turns through the real broker into a real worker: exact counts per scope, every invalid record in the
dead-letter topic with its reason, duplicates dropped, and a SIGKILLed worker that recovers its tables
from the changelog with the same counts (and the same dedupe memory)."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import time
from pathlib import Path

import pytest

from credence.streams.ops.admin import ensure_topics
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.pipeline import discard
from tests.support.turns import (
    INVALID_KINDS,
    NULL_VALUE,
    Batch,
    generate,
    produce,
    read_topic,
    reason_matches,
    uncommitted,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DEADLINE_S = 120.0
# Faust reads these from the environment. A SIGKILLed member stays in its consumer group until its
# session times out (Faust's default: 60 s), and the restarted worker's rebalance waits for that.
FAST_GROUP_ENV = {"BROKER_SESSION_TIMEOUT": "6", "BROKER_HEARTBEAT_INTERVAL": "1"}


def scope_counts(worker: WorkerProcess) -> dict[str, int]:
    """Per-scope turn counts as the worker reports them: the one place that knows /scopes' shape."""
    return {scope: int(n) for scope, n in worker.get("/scopes")["turn_counts"].items()}


def processed(worker: WorkerProcess) -> dict:
    """The worker's /status stats, with `done` = records it has finished with (a re-keyed record is
    finished on its second pass, when its copy arrives on the scope's partition)."""
    stats = worker.get("/status")["stats"]
    return stats | {"done": stats["turns_accepted"] + stats["turns_rejected"] + stats["turns_duplicate"]}


def expected_counts(distinct: dict[str, set[str]]) -> dict[str, int]:
    return {scope: len(ids) for scope, ids in distinct.items()}


@pytest.fixture
def workers(kafka_bootstrap, tmp_path):
    """Start workers for a test; whatever is still running at the end is stopped."""
    started: list[WorkerProcess] = []

    def start(settings, **kw) -> WorkerProcess:
        worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "worker.log", extra_env=FAST_GROUP_ENV)
        started.append(worker)
        return worker.start(**kw)

    yield start
    for worker in started:
        discard(worker)


def send(bootstrap: str, settings, batch: Batch) -> list[tuple[int, int]]:
    asyncio.run(ensure_topics(bootstrap, settings))
    return asyncio.run(produce(bootstrap, settings.topic("turns"), batch.records))


def wait_done(worker: WorkerProcess, sent: int) -> dict:
    stats = wait_until(lambda: (s := processed(worker))["done"] >= sent and s, DEADLINE_S,
                       f"the worker to finish {sent} records (log: {worker.log_path})")
    assert stats["done"] == sent, f"more records finished than were sent: {stats}"
    return stats


def wait_committed(bootstrap: str, settings) -> None:
    """Every record of the turns topic (re-keyed copies included) processed and its offset committed."""
    def lag() -> int:
        return asyncio.run(uncommitted(bootstrap, settings.app_id, settings.topic("turns"), settings.topic_partitions))

    wait_until(lambda: lag() == 0, DEADLINE_S, "the worker to commit every turn")


def read_dlq(bootstrap: str, settings) -> list:
    return asyncio.run(read_topic(bootstrap, settings.topic("dlq"), settings.topic_partitions))


def test_the_batch_covers_what_the_ingest_tests_claim():
    batch = generate()
    assert len(batch.records) == 1000 and len(batch.invalid) == 50
    kinds = {r.kind for r in batch.invalid}
    assert kinds == set(INVALID_KINDS) | {NULL_VALUE}
    assert len({r.value for r in batch.invalid}) == 50  # each dead letter can be traced to its record
    distinct = batch.distinct_per_scope()
    valid = batch.valid
    assert sum(map(len, distinct.values())) < len(valid)  # exact duplicates within a scope
    scopes_per_id: dict[str, set[str]] = {}
    for r in valid:
        scopes_per_id.setdefault(r.turn_id, set()).add(r.scope)
    assert max(map(len, scopes_per_id.values())) > 1  # one turn id in several scopes (each counts)
    assert any(r.rekeyed and r.key is None for r in valid) and any(r.rekeyed and r.key for r in valid)
    assert generate().records == batch.records  # deterministic


def test_thousand_turns_counted_exactly_and_every_invalid_one_dead_lettered(
        settings_factory, kafka_bootstrap, workers):
    settings = settings_factory()
    batch = generate()
    positions = send(kafka_bootstrap, settings, batch)
    worker = workers(settings)

    stats = wait_done(worker, len(batch.records))
    distinct = batch.distinct_per_scope()
    accepted = sum(map(len, distinct.values()))
    assert stats["turns_rejected"] == 50
    assert stats["turns_accepted"] == accepted
    assert stats["turns_duplicate"] == len(batch.valid) - accepted
    assert stats["turns_rekeyed"] == sum(r.rekeyed for r in batch.valid)
    assert scope_counts(worker) == expected_counts(distinct)

    # The worker counts a rejection as it hands the dead letter to its producer; wait for delivery.
    letters = wait_until(lambda: len(m := read_dlq(kafka_bootstrap, settings)) >= 50 and m,
                         DEADLINE_S, "50 dead letters")
    envelopes = [json.loads(m.value) for m in letters]
    by_position = {(e["partition"], e["offset"]): e for e in envelopes}
    assert len(envelopes) == len(by_position) == 50
    for record, (partition, offset) in zip(batch.records, positions):
        if record.kind is None:
            assert (partition, offset) not in by_position
            continue
        envelope = by_position[(partition, offset)]
        assert envelope["v"] == 1 and envelope["topic"] == settings.topic("turns")
        assert reason_matches(record.kind, envelope["reason"]), (record.kind, envelope["reason"])
        assert base64.b64decode(envelope["original"]) == (record.value or b"")


@pytest.mark.parametrize("store, local_state", [
    ("rocksdb", "kept"),
    ("rocksdb", "deleted"),  # recovery comes purely from the changelog topics
    ("memory", "none"),
])
def test_sigkilled_worker_recovers_counts_and_dedupe_from_the_changelog(
        settings_factory, kafka_bootstrap, workers, store, local_state, record_property):
    settings = settings_factory(table_store=store)
    first = generate()
    send(kafka_bootstrap, settings, first)
    worker = workers(settings)
    wait_done(worker, len(first.records))
    wait_committed(kafka_bootstrap, settings)
    before = scope_counts(worker)
    assert before == expected_counts(first.distinct_per_scope())

    worker.kill()
    if local_state == "deleted":
        shutil.rmtree(Path(settings.data_dir) / "worker")
    started = time.monotonic()
    worker = workers(settings)
    restart_s = time.monotonic() - started
    record_property("restart_to_ready_s", round(restart_s, 2))
    print(f"\n[{store}/{local_state}] restart to ready after SIGKILL: {restart_s:.2f} s "
          f"({sum(map(len, first.distinct_per_scope().values()))} dedupe keys)")
    assert scope_counts(worker) == before

    # New turns, plus exact copies of pre-crash ones: only the new distinct turn ids may count.
    second = generate(total=300, invalid=10, seed=7, id_space=90)
    second.records.extend(first.valid[:100])
    send(kafka_bootstrap, settings, second)
    want = expected_counts(second.distinct_per_scope(already=first.distinct_per_scope()))
    assert sum(want.values()) - sum(before.values()) < len(second.valid)  # some were old turns
    wait_until(lambda: scope_counts(worker) == want, DEADLINE_S, "the counts to include the new turns")
    wait_committed(kafka_bootstrap, settings)
    assert scope_counts(worker) == want
    stats = processed(worker)
    assert stats["done"] == len(second.records)
    assert stats["turns_accepted"] == sum(want.values()) - sum(before.values())
