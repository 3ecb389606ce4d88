"""Asking the broker which offsets of an input partition hold a record: a fetch from a given offset by a
consumer of its own (no group, read_committed, like the worker's), so the answer is the broker's whatever
the worker's consumer delivered or dropped. positions.py says why the agent asks."""

from __future__ import annotations

import logging

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from credence.config.kafka import KafkaSettings
from credence.errors import BrokerError
from credence.kafka import client_options, start

log = logging.getLogger(__name__)
WAIT_MS = 5_000  # the record that raised the question is on the broker: its fetch comes back at once


class OffsetProbe:
    def __init__(self, bootstrap: str, kafka: KafkaSettings | None) -> None:
        self._bootstrap, self._kafka = bootstrap, kafka
        self._consumer: AIOKafkaConsumer | None = None

    async def offsets_from(self, topic: str, partition: int, offset: int) -> list[int]:
        """The offsets of the records one read_committed fetch of (topic, partition) from `offset`
        returns, ascending ([] when it cannot tell: records deleted by retention, no answer in time)."""
        tp = TopicPartition(topic, partition)
        try:
            consumer = await self._started()
            consumer.assign([tp])
            consumer.seek(tp, offset)
            try:
                fetched = await consumer.getmany(tp, timeout_ms=WAIT_MS)
            finally:
                consumer.pause(tp)  # no fetching ahead between questions
        except (KafkaError, BrokerError) as exc:
            log.warning("%s[%d]: could not read from offset %d to see which offsets hold records: %s: %s",
                        topic, partition, offset, type(exc).__name__, exc)
            return []
        return [record.offset for record in fetched.get(tp, [])]

    async def _started(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            # No offset reset: an offset retention deleted is an error here, never another offset's answer.
            consumer = AIOKafkaConsumer(**client_options(
                self._bootstrap, self._kafka, group_id=None, enable_auto_commit=False,
                isolation_level="read_committed", auto_offset_reset="none"))
            await start(consumer, self._bootstrap, self._kafka)
            self._consumer = consumer
        return self._consumer

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None
