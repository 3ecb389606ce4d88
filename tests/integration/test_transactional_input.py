"""Turns written by a transactional producer (what Kafka Streams, Flink or any exactly-once writer
upstream does): each commit or abort leaves a marker that occupies an offset and is never delivered, and
an aborted transaction's records are never to be read. The worker applies every committed turn once,
never an aborted one, and its partitions go on past every marker (no rewind taken for one)."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiokafka import AIOKafkaProducer

from credence.config import Settings
from credence.kafka import client_options
from credence.streams.ops.admin import ensure_topics
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.pipeline import FAST_GROUP_ENV, discard
from tests.support.turns import uncommitted

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DEADLINE_S = 60.0
SCOPES = ["acme/alice/barista", "acme/bob/tutor", "globex/bob/tutor"]  # both partitions of two


def turn(scope: str, turn_id: str, i: int) -> bytes:
    tenant, user, character = scope.split("/")
    return json.dumps({"v": 1, "tenant": tenant, "user": user, "character": character, "turn_id": turn_id,
                       "role": "user" if i % 2 == 0 else "ai", "text": f"message {i} ({turn_id})",
                       "ts": f"2026-05-01T10:{i % 60:02d}:00Z"}).encode()


class Upstream:
    """Turns per scope, numbered across the whole test; what was committed and what was aborted."""

    def __init__(self) -> None:
        self.n = 0
        self.committed: dict[str, set[str]] = {s: set() for s in SCOPES}
        self.aborted: set[str] = set()

    def round(self, tag: str, per_scope: int) -> list[tuple[str, str, bytes]]:
        out = []
        for _ in range(per_scope):
            for scope in SCOPES:
                self.n += 1
                turn_id = f"{tag}-{self.n}"
                out.append((scope, turn_id, turn(scope, turn_id, self.n)))
        return out

    async def transactions(self, bootstrap: str, settings: Settings, plan: list[bool]) -> None:
        """One transaction per entry of `plan` (True = commit, False = abort), two turns per scope each."""
        producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka,
                                                     transactional_id=f"{settings.app_id}-upstream"))
        await producer.start()
        try:
            for commit in plan:
                records = self.round("committed" if commit else "aborted", 2)
                async with producer.transaction() if commit else _aborted(producer):
                    for scope, _turn_id, value in records:
                        await producer.send(settings.topic("turns"), value, key=scope.encode())
                for scope, turn_id, _value in records:
                    (self.committed[scope].add(turn_id) if commit else self.aborted.add(turn_id))
        finally:
            await producer.stop()

    async def plain(self, bootstrap: str, settings: Settings) -> None:
        producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all"))
        await producer.start()
        try:
            records = self.round("plain", 2)
            for fut in [await producer.send(settings.topic("turns"), value, key=scope.encode())
                        for scope, _turn_id, value in records]:
                await fut
            for scope, turn_id, _value in records:
                self.committed[scope].add(turn_id)
        finally:
            await producer.stop()

    def counts(self) -> dict[str, int]:
        return {scope: len(ids) for scope, ids in self.committed.items()}


class _aborted:
    """A transaction whose records are sent (and acknowledged) and then aborted."""

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self.producer = producer

    async def __aenter__(self) -> None:
        await self.producer.begin_transaction()

    async def __aexit__(self, *exc) -> None:
        await self.producer.flush()  # the records are in the log before the abort marker
        await self.producer.abort_transaction()


def turn_counts(worker: WorkerProcess) -> dict[str, int]:
    return {scope: int(n) for scope, n in worker.get("/scopes")["turn_counts"].items()}


def test_transaction_markers_and_aborted_turns_neither_stall_nor_count(settings_factory, kafka_bootstrap, tmp_path):
    settings = settings_factory(topic_partitions=2)
    asyncio.run(ensure_topics(kafka_bootstrap, settings))
    upstream = Upstream()
    asyncio.run(upstream.transactions(kafka_bootstrap, settings, [True, True, False, True]))
    worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "worker.log", extra_env=FAST_GROUP_ENV).start()
    try:
        # Read from the stored positions on start, then live: markers before the worker came and after.
        asyncio.run(upstream.transactions(kafka_bootstrap, settings, [True, False, True]))
        asyncio.run(upstream.plain(kafka_bootstrap, settings))
        want = upstream.counts()
        wait_until(lambda: turn_counts(worker) == want, DEADLINE_S,
                   f"every committed turn, and only those, to be applied (log: {worker.log_path})")

        def lag() -> int:
            return asyncio.run(uncommitted(kafka_bootstrap, settings.app_id, settings.topic("turns"),
                                           settings.topic_partitions, settings.kafka))

        wait_until(lambda: lag() == 0, DEADLINE_S, "the worker to commit past the last marker")
        stats = worker.get("/status")["stats"]
        assert turn_counts(worker) == want
        assert stats["turns_accepted"] == sum(want.values())  # each committed turn once
        assert stats["turns_duplicate"] == 0 and stats["turns_rejected"] == 0
        assert stats["rewinds"] == 0  # a marker is no hole: nothing was read again for it
        assert len(upstream.aborted) == 12
    finally:
        discard(worker)
