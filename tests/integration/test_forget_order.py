"""`credence forget` is ordered against every input of the user: turns queued for the user before the
forget was sent never bring the user back, whatever order the worker reads the topics in; a turn produced
after it is new data and is applied as usual."""

from __future__ import annotations

import asyncio
import json

import pytest

from credence.streams.ops.admin import changelog_topic, ensure_topics
from credence.streams.ops.replay import forget_record, send_forget
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.pipeline import discard
from tests.support.turns import Outgoing, produce, read_topic, turn, uncommitted

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 2
DEADLINE_S = 120.0


def turns_for(user: str, characters: tuple[str, ...], count: int, prefix: str = "t") -> list[Outgoing]:
    return [Outgoing(key=f"acme/{user}/{c}".encode(),
                     value=json.dumps(turn("acme", user, c, f"{prefix}-{i}", i)).encode(),
                     scope=f"acme/{user}/{c}", turn_id=f"{prefix}-{i}")
            for i in range(count) for c in characters]


def committed(bootstrap: str, settings, partitions: int = PARTITIONS) -> bool:
    return all(asyncio.run(uncommitted(bootstrap, settings.app_id, settings.topic(name), partitions)) == 0
               for name in ("turns", "control"))


def changelog(bootstrap: str, settings, table: str, partitions: int = PARTITIONS) -> dict[str, bytes]:
    """A table's changelog as compaction keeps it: each key's latest value (tombstoned keys left out)."""
    latest: dict[str, bytes | None] = {}
    for m in asyncio.run(read_topic(bootstrap, changelog_topic(settings, table), partitions)):
        latest[json.loads(m.key)] = m.value
    return {k: v for k, v in latest.items() if v is not None}


def live_keys(bootstrap: str, settings, table: str, needle: str) -> set[str]:
    """Keys of a table's changelog holding `needle` whose latest record is a value, not a tombstone."""
    return {k for k in changelog(bootstrap, settings, table) if needle in k}


def test_turns_queued_before_a_forget_never_bring_the_user_back(settings_factory, kafka_bootstrap, tmp_path):
    settings = settings_factory(topic_partitions=PARTITIONS)
    asyncio.run(ensure_topics(kafka_bootstrap, settings))
    # Queued while no worker runs: the forget is read alongside a backlog of the user's turns.
    asyncio.run(produce(kafka_bootstrap, settings.topic("turns"),
                        turns_for("ann", ("barista", "tutor", "sage"), 40) + turns_for("ben", ("barista",), 10)))
    assert asyncio.run(send_forget(kafka_bootstrap, settings, "acme", "ann")) == PARTITIONS
    worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "worker.log").start()
    try:
        wait_until(lambda: committed(kafka_bootstrap, settings), DEADLINE_S,
                   f"every turn and the forget to be applied (log: {worker.log_path})")
        assert worker.get("/scopes")["turn_counts"] == {"acme/ben/barista": 10}
        assert worker.get("/status")["stats"]["records_forgotten"] > 0  # read after the forget, dropped
        for table in ("scopes", "entries", "lists", "history", "seen"):  # marks live in `seen`
            assert live_keys(kafka_bootstrap, settings, table, "/ann/") == set(), table
        assert live_keys(kafka_bootstrap, settings, "seen", "/ben/")  # ben's marks are kept

        # Produced after the forget: new data, applied as usual (its turn id was one of the forgotten ones).
        asyncio.run(produce(kafka_bootstrap, settings.topic("turns"), turns_for("ann", ("barista",), 1)))
        wait_until(lambda: worker.get("/scopes")["turn_counts"].get("acme/ann/barista") == 1, DEADLINE_S,
                   "the new turn to be applied")
        assert worker.get("/scopes")["turn_counts"] == {"acme/ben/barista": 10, "acme/ann/barista": 1}
    finally:
        discard(worker)


def test_hundreds_of_forgets_held_while_the_partition_lags_never_stop_it(settings_factory, kafka_bootstrap, tmp_path):
    """A GDPR job forgets 600 users while the worker is stopped, and the inputs lag far behind every forget
    (their ends, on each of a 64-partition deployment's partitions, are still ahead): every filter is held
    at once. Kept in one value they passed the producer's record limit at ~400 users and the worker halted
    on every start; one key each, every forget is applied and the partition goes on."""
    settings = settings_factory(topic_partitions=1)
    asyncio.run(ensure_topics(kafka_bootstrap, settings))
    users = [f"u{i}" for i in range(600)]
    asyncio.run(produce(kafka_bootstrap, settings.topic("turns"),
                        [t for u in users for t in turns_for(u, ("barista",), 1)] + turns_for("keep", ("barista",), 5)))
    ahead = {name: [1_000_000] * 64 for name in ("turns", "feedback", "usage", "facts", "control")}
    asyncio.run(produce(kafka_bootstrap, settings.topic("control"), [
        Outgoing(key=f"acme/{u}/".encode(), value=forget_record("acme", u, ahead), partition=0) for u in users]))
    worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "worker.log").start()
    try:
        wait_until(lambda: worker.get("/status") and committed(kafka_bootstrap, settings, partitions=1), DEADLINE_S,
                   f"every turn and forget to be applied (log: {worker.log_path})")
        assert worker.get("/scopes")["turn_counts"] == {"acme/keep/barista": 5}
        filters = {k: v for k, v in changelog(kafka_bootstrap, settings, "seen", 1).items()
                   if k.startswith("forget\x1f0\x1f")}
        assert len(filters) == len(users) and max(len(v) for v in filters.values()) < 10_000
    finally:
        discard(worker)
