"""The worker's Kafka transport: Faust's aiokafka driver, with its consumer reading read_committed.

Faust reads read_uncommitted unless it runs exactly-once itself (processing_guarantee, which makes every
commit a transaction of its own), and has no setting for it: an aborted upstream transaction's records
would be delivered and applied. Read committed, they never come, and neither do the open transactions'
records until their commit (the broker serves up to the last stable offset). The worker's own topics are
written without transactions, so nothing else changes for them.
"""

from __future__ import annotations

from typing import Any

import aiokafka
from faust.transport.drivers import aiokafka as driver

READ_COMMITTED = "read_committed"


class ReadCommittedConsumerThread(driver.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> aiokafka.AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        # aiokafka hands it to its fetcher at start(), which comes after this (on_start); Faust builds the
        # consumer with its own ~30 options, which this keeps rather than copying them.
        consumer._isolation_level = READ_COMMITTED
        return consumer


class ReadCommittedConsumer(driver.Consumer):
    def _new_consumer_thread(self) -> ReadCommittedConsumerThread:
        return ReadCommittedConsumerThread(self, loop=self.loop, beacon=self.beacon)


class Transport(driver.Transport):
    Consumer = ReadCommittedConsumer


def read_committed(app) -> None:
    """Give `app` this transport (before anything asked for its consumer)."""
    app.transport = Transport(app.conf.broker_consumer, app)
