"""A partition's changelog transaction goes out while the batch's emits are in flight and is committed
only once they are acknowledged (fence.py): its records reach the broker before the emits are durable,
yet no read_committed reader (a restore, Faust's recovery) sees any of them until the commit."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from credence.kafka import client_options
from credence.streams.ops.admin import changelog_topic, ensure_topics
from credence.streams.state.fence import Fence

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

DEADLINE_S = 30.0


async def _ends(bootstrap: str, settings, tp: TopicPartition) -> tuple[int, int]:
    """(end offset for read_uncommitted readers, last stable offset for read_committed ones)."""
    ends = []
    for isolation in ("read_uncommitted", "read_committed"):
        consumer = AIOKafkaConsumer(**client_options(bootstrap, settings.kafka, isolation_level=isolation))
        await consumer.start()
        try:
            ends.append((await consumer.end_offsets([tp]))[tp])
        finally:
            await consumer.stop()
    return ends[0], ends[1]


async def _until(condition, what: str) -> None:
    end = time.monotonic() + DEADLINE_S
    while not await condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def test_the_transaction_is_sent_before_the_emits_are_acknowledged_and_read_only_after(settings_factory,
                                                                                      kafka_bootstrap):
    settings = settings_factory(topic_partitions=2)
    topic = changelog_topic(settings, "scopes")
    tp = TopicPartition(topic, 1)

    async def scenario() -> None:
        await ensure_topics(kafka_bootstrap, settings, changelogs=True)
        fence = Fence(settings, kafka_bootstrap)
        await fence.hold([1])
        try:
            emitted = asyncio.get_running_loop().create_future()
            sending = asyncio.ensure_future(fence.send(1, [(topic, b"k1", b"v1"), (topic, b"k2", b"v2")], emitted))

            async def on_the_broker() -> bool:
                return (await _ends(kafka_bootstrap, settings, tp))[0] >= 2

            await _until(on_the_broker, "the transaction's records to reach the broker")
            assert (await _ends(kafka_bootstrap, settings, tp))[1] == 0  # nothing readable committed
            assert not sending.done()
            emitted.set_result(None)
            metas = await asyncio.wait_for(sending, DEADLINE_S)
            assert [m.offset for m in metas] == [0, 1]
            assert (await _ends(kafka_bootstrap, settings, tp))[1] == 3  # the records and the commit marker
        finally:
            await fence.stop()

    asyncio.run(scenario())
