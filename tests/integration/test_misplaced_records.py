"""A record on the wrong partition: platforms that produce turns with a librdkafka client partition by
CRC32 of the key unless told otherwise, while every scope's state lives on the partition murmur2 of its key
names (the Java client's and aiokafka's default). Such a record must reach its scope's state through the
scope's own partition, never be applied where it arrived (read from that partition's store, written into
another's changelog: a second writer)."""

from __future__ import annotations

import asyncio
import json
import zlib
from datetime import UTC, datetime, timedelta

import pytest

from credence.streams.ops.admin import changelog_topic, ensure_topics
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from credence.streams.runtime.forwards import FORWARDED_FROM
from credence.streams.runtime.topics import STATE_TABLES
from credence.streams.state import codec
from credence.streams.state.ownership import Ownership
from tests.support.turns import Outgoing, produce, read_topic, turn, uncommitted

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 4
DEADLINE_S = 120.0
FAST_GROUP_ENV = {"BROKER_SESSION_TIMEOUT": "6", "BROKER_HEARTBEAT_INTERVAL": "1"}


def crc32_partition(key: bytes, partitions: int) -> int:
    """librdkafka's `consistent` partitioner (its default for keyed records, with `consistent_random`)."""
    return zlib.crc32(key) % partitions


def misplaced_scope() -> tuple[str, int, int]:
    """A scope whose CRC32 partition differs from its murmur2 one: (scope, murmur2, crc32)."""
    ownership = Ownership(PARTITIONS, "turns")
    for i in range(100):
        scope = f"acme/user{i}/barista"
        right, wrong = ownership.partition_of(scope), crc32_partition(scope.encode(), PARTITIONS)
        if right != wrong:
            return scope, right, wrong
    raise AssertionError("no scope whose partitioners disagree")


def turns_of(scope: str, numbers, partition: int) -> list[Outgoing]:
    tenant, user, character = scope.split("/")
    return [Outgoing(key=scope.encode(), value=json.dumps(turn(tenant, user, character, f"turn-{i}", i)).encode(),
                     scope=scope, turn_id=f"turn-{i}", partition=partition) for i in numbers]


def run_until_committed(settings, bootstrap: str, log_path, records: list[Outgoing]) -> dict:
    """Produce `records`, run a worker until every turn (forwarded copies included) is applied and
    committed, stop it; returns its last /status stats and /scopes turn counts."""
    asyncio.run(produce(bootstrap, settings.topic("turns"), records))
    worker = WorkerProcess(settings, bootstrap, log_path, extra_env=FAST_GROUP_ENV).start()
    try:
        def lag() -> int:
            return asyncio.run(uncommitted(bootstrap, settings.app_id, settings.topic("turns"), PARTITIONS))

        wait_until(lambda: lag() == 0, DEADLINE_S, f"the worker to commit every turn (log: {log_path})")
        return worker.get("/status")["stats"] | {"counts": worker.get("/scopes")["turn_counts"]}
    finally:
        worker.stop()


def test_a_turn_on_the_wrong_partition_is_applied_once_through_its_scopes_partition(
        settings_factory, kafka_bootstrap, tmp_path):
    settings = settings_factory(topic_partitions=PARTITIONS, table_store="rocksdb")
    scope, right, wrong = misplaced_scope()
    asyncio.run(ensure_topics(kafka_bootstrap, settings))

    first = run_until_committed(settings, kafka_bootstrap, tmp_path / "worker.log", turns_of(scope, range(5), right))
    assert first["counts"] == {scope: 5}

    # The same worker's store, restarted (nothing of the scope cached): five new turns and a repeat of
    # turn-0, all produced to the partition a CRC32 partitioner picks.
    second = run_until_committed(settings, kafka_bootstrap, tmp_path / "worker.log",
                                 turns_of(scope, [*range(5, 10), 0], wrong))
    assert second["counts"] == {scope: 10}
    assert second["records_forwarded"] == 6
    assert second["turns_accepted"] == 5 and second["turns_duplicate"] == 1

    # Every key of the scope is on its own changelog partition, and its state counts only positions of
    # that partition: nothing was applied where the records arrived.
    stored = {}
    for table in STATE_TABLES:
        for m in asyncio.run(read_topic(kafka_bootstrap, changelog_topic(settings, table), PARTITIONS)):
            key = json.loads(m.key)
            if scope in key:
                assert m.partition == right, (table, key, m.partition)
                stored[(table, key)] = m.value
    control = codec.decode_control(stored[("scopes", scope)]).state
    assert control.turns == 10
    assert all(position.endswith(f":{right}") for position in control.applied), control.applied

    # Each copy names the record it was made from, which is how a forward made again is known.
    copies = [m for m in asyncio.run(read_topic(kafka_bootstrap, settings.topic("turns"), PARTITIONS)) if m.headers]
    assert sorted(dict(m.headers)[FORWARDED_FROM].decode() for m in copies) == [
        f"turns:{wrong}:{offset}" for offset in range(6)]
    assert {m.partition for m in copies} == {right}



def test_a_misplaced_record_near_the_brokers_limit_is_dead_lettered_and_the_partition_goes_on(
        settings_factory, kafka_bootstrap, tmp_path):
    """Two records the broker took, just over credence's record limit, on the wrong partition: a turn
    padded with a field credence does not know, and an LLM answer. Forwarded, either one was refused by the
    producer and the worker halted on every start; each is dead-lettered with its reason instead, and the
    scope's turns after them are applied (a backdated turn's retry among them dropped as a repeat)."""
    settings = settings_factory(topic_partitions=PARTITIONS)
    scope, right, wrong = misplaced_scope()
    tenant, user, character = scope.split("/")
    asyncio.run(ensure_topics(kafka_bootstrap, settings))
    size = settings.kafka.max_record_bytes + 2_000  # the broker's limit (1 MiB and framing) takes it
    padded = turn(tenant, user, character, "turn-big", 0)
    padded["x-platform-blob"] = "a" * (size - len(json.dumps(padded)) - 25)
    answer = {"v": 1, "type": "result", "tenant": tenant, "user": user, "character": character,
              "request_id": "r1"}  # an LLM answer: only the record limit bounds it
    answer["output"] = {"facts": ["a" * (size - len(json.dumps(answer)) - 40)]}
    asyncio.run(produce(kafka_bootstrap, settings.topic("control"), [
        Outgoing(key=scope.encode(), value=json.dumps(answer).encode(), partition=wrong)]))
    # Beside them, cheaply: a live turn, then one its client dated a month back (an offline sync) and the
    # client's retry of it seconds later, which must be dropped as a repeat (its mark is kept by when it
    # reached Kafka; kept by its date, it was pruned in the batch that wrote it and the retry counted twice).
    now = datetime.now(UTC)
    live = turn(tenant, user, character, "turn-live", 5, ts=now.isoformat())
    synced = turn(tenant, user, character, "turn-synced", 6, ts=(now - timedelta(days=30)).isoformat())
    records = [Outgoing(key=scope.encode(), value=json.dumps(padded).encode(), partition=wrong),
               *turns_of(scope, range(1, 3), wrong), *turns_of(scope, range(3, 5), right),
               *(Outgoing(key=scope.encode(), value=json.dumps(r).encode(), partition=right)
                 for r in (live, synced, synced))]
    asyncio.run(produce(kafka_bootstrap, settings.topic("turns"), records))
    worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "worker.log", extra_env=FAST_GROUP_ENV).start()
    try:
        def applied() -> bool:  # asking the worker first: one that halted is an answer at once
            return worker.get("/status") is not None and all(
                asyncio.run(uncommitted(kafka_bootstrap, settings.app_id, settings.topic(name), PARTITIONS)) == 0
                for name in ("turns", "control"))

        wait_until(applied, DEADLINE_S, f"the worker to commit every record (log: {worker.log_path})")
        assert worker.get("/scopes")["turn_counts"] == {scope: 6}
        stats = worker.get("/status")["stats"]
        assert stats["records_rejected"] == 2 and stats["turns_duplicate"] == 1
    finally:
        worker.stop()
    reasons = sorted(json.loads(m.value)["reason"]
                     for m in asyncio.run(read_topic(kafka_bootstrap, settings.topic("dlq"), PARTITIONS)))
    assert len(reasons) == 2 and "over the 524288-byte input limit" in reasons[0], reasons
    assert "over the record limit" in reasons[1] and "not forwarded" in reasons[1], reasons
