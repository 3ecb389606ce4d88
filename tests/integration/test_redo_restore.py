"""A worker killed between a batch's redo record and its table writes: the next worker to restore the
partition applies the redo record again, locally and to the changelogs, before it reads any input; a redo
record whose parts did not all arrive is not applied (its batch never sent a write).

The broker is left as such a kill leaves it: the redo records are written straight to the `seen`
changelog, and none of their writes to the other changelogs."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from aiokafka import AIOKafkaProducer

from credence.kafka import client_options
from credence.streams.ops.admin import changelog_topic, ensure_topics
from credence.streams.ops.worker_process import WorkerProcess
from credence.streams.scope.scope_state import ScopeState
from credence.streams.state import codec, redo
from credence.streams.state.ownership import Ownership
from credence.streams.state.redo import Write
from credence.tables.entries import new_reflection
from credence.tables.scope import Scope

from .test_forget import read_changelog

pytestmark = pytest.mark.integration
T0 = datetime(2026, 5, 1, 10, 0, tzinfo=UTC)


def scope_on(partition: int, ownership: Ownership, name: str) -> str:
    return next(s for i in range(200) if ownership.partition_of(s := f"acme/{name}{i}/aria") == partition)


def batch_of(scope: str) -> list[Write]:
    entry = new_reflection("r-1", Scope.parse(scope), "The user grows tomatoes on a balcony", T0)
    state = ScopeState(scope=scope, clock=T0, last_sweep_at=T0)
    state.entries_version = 1
    return [Write("entries", codec.entry_key(scope, entry.id), codec.encode_entry(entry, 0)),
            Write("scopes", scope, codec.encode_control(state))]


async def write_redo(bootstrap: str, settings, records: list[tuple[int, int, bytes]]) -> None:
    producer = AIOKafkaProducer(**client_options(bootstrap, acks="all"))
    await producer.start()
    try:
        for partition, part, raw in records:
            await producer.send_and_wait(changelog_topic(settings, "seen"), raw, partition=partition,
                                         key=json.dumps(redo.redo_key(partition, part)).encode())
    finally:
        await producer.stop()


@pytest.mark.parametrize("store", ["memory", "rocksdb"])
def test_a_restored_partition_gets_its_last_whole_batch_again(settings_factory, kafka_bootstrap, tmp_path,
                                                              monkeypatch, store):
    settings = settings_factory(topic_partitions=2, table_store=store)
    asyncio.run(ensure_topics(kafka_bootstrap, settings, changelogs=True))
    ownership = Ownership(2, settings.topic("turns"))
    whole, torn = scope_on(0, ownership, "whole"), scope_on(1, ownership, "torn")
    monkeypatch.setattr(redo, "PART_BYTES", 64)  # the torn batch in two parts, of which only the first came
    torn_parts = redo.encode(batch_of(torn))
    monkeypatch.undo()
    assert len(torn_parts) == 2
    asyncio.run(write_redo(kafka_bootstrap, settings,
                           [(0, 0, raw) for raw in redo.encode(batch_of(whole))] + [(1, 0, torn_parts[0])]))

    worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "worker.log").start()
    try:
        assert set(worker.get("/scopes")["scopes"]) == {whole}
        scopes = asyncio.run(read_changelog(kafka_bootstrap, changelog_topic(settings, "scopes")))
        entries = asyncio.run(read_changelog(kafka_bootstrap, changelog_topic(settings, "entries")))
        assert set(scopes) == {whole} and scopes[whole] == batch_of(whole)[1].value
        assert set(entries) == {codec.entry_key(whole, "r-1")}
    finally:
        worker.stop()
    log = (tmp_path / "worker.log").read_text()
    assert "applied the last batch of partitions" in log
