"""A real worker whose batch raises outside any step (here: a scope's stored value cannot be read) exits
with code 70 instead of letting Faust restart its agent in the same process; Faust would otherwise ack the
batch's records and go on without them. Started again, it reads the batch again."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiokafka import AIOKafkaProducer

from credence.config.pipeline import PipelineSettings
from credence.kafka import client_options
from credence.streams.ops.admin import changelog_topic, ensure_topics
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from credence.streams.state.ownership import Ownership
from tests.support.pipeline import discard
from tests.support.turns import Outgoing, produce, turn

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SCOPE = "acme/alice/barista"
DEADLINE_S = 60.0


async def write_scope_value(bootstrap: str, settings, value: bytes | None) -> None:
    """The scope's value on the `scopes` changelog, as a worker's restore will read it."""
    partition = Ownership(settings.topic_partitions, settings.topic("turns")).partition_of(SCOPE)
    producer = AIOKafkaProducer(**client_options(bootstrap, acks="all"))
    await producer.start()
    try:
        await producer.send_and_wait(changelog_topic(settings, "scopes"), value, partition=partition,
                                     key=json.dumps(SCOPE).encode())
    finally:
        await producer.stop()


def test_a_batch_that_raises_outside_a_step_stops_the_worker_and_is_read_again(settings_factory, kafka_bootstrap,
                                                                                 tmp_path):
    # No ticks: the timer's scan would read the broken value too, outside the agent.
    settings = settings_factory(table_store="memory", pipeline=PipelineSettings(tick_interval_seconds=0))
    asyncio.run(ensure_topics(kafka_bootstrap, settings, changelogs=True))
    asyncio.run(write_scope_value(kafka_bootstrap, settings, b'{"v": 2}'))  # not a scope state: StateError
    log_path = tmp_path / "worker.log"
    worker = WorkerProcess(settings, kafka_bootstrap, log_path).start()
    try:
        record = json.dumps(turn("acme", "alice", "barista", "t-1", 0)).encode()
        asyncio.run(produce(kafka_bootstrap, settings.topic("turns"), [Outgoing(SCOPE.encode(), record)]))
        wait_until(lambda: worker.proc.poll() is not None, DEADLINE_S, "the worker to halt on the failed batch")
        assert worker.proc.returncode == 70
        assert "halting the worker: a batch failed before it was made durable: StateError" in log_path.read_text()
    finally:
        worker.stop()

    asyncio.run(write_scope_value(kafka_bootstrap, settings, None))  # repaired: the scope is new again
    worker = WorkerProcess(settings, kafka_bootstrap, log_path).start()
    try:
        wait_until(lambda: worker.get("/scopes")["turn_counts"] == {SCOPE: 1}, DEADLINE_S,
                   "the turn of the halted batch to be applied after the restart")
    finally:
        discard(worker)
