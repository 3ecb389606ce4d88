"""The worker's consumer reads read_committed: an aborted upstream transaction's records never reach it
(tests/integration/test_transactional_input.py proves it end to end; this fails first when a Faust or
aiokafka upgrade moves what the transport relies on)."""

from __future__ import annotations

import asyncio
import inspect

from aiokafka import AIOKafkaConsumer

from credence.config import load_settings
from credence.streams.runtime.app import faust_app
from credence.streams.runtime.transport import READ_COMMITTED


def test_the_workers_consumer_is_built_read_committed():
    async def build() -> str:
        app = faust_app(load_settings(topic_prefix="transport"), "localhost:9092")
        consumer = app.consumer._thread._create_worker_consumer(app.transport)
        try:
            return consumer._isolation_level
        finally:
            await consumer.stop()

    assert asyncio.run(build()) == READ_COMMITTED
    # aiokafka hands the attribute to its fetcher when the consumer starts
    assert "isolation_level=self._isolation_level" in inspect.getsource(AIOKafkaConsumer.start)
