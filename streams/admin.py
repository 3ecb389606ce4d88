"""Talking to the cluster as an administrator: declare topics up front, and measure a group's lag.

Producers must never auto-create a topic with the broker's default partition count: the scope-keyed
tables require every source topic to have exactly `topic_partitions` partitions.
"""

from __future__ import annotations

import asyncio
import logging

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from credence.config import Settings
from credence.errors import BrokerError
from credence.streams.topics import TOPICS

log = logging.getLogger(__name__)


def topic_configs(settings: Settings, name: str) -> dict[str, str]:
    hours = settings.retention_hours(name)
    return {
        "retention.ms": str(hours * 3_600_000 if hours >= 0 else -1),
        "cleanup.policy": "compact" if TOPICS[name] else "delete",
    }


async def ensure_topics(bootstrap: str, settings: Settings) -> None:
    """Create credence's topics if missing; refuse to go on if one exists with other partitions."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        wanted = {settings.topic(n): n for n in TOPICS}
        existing = set(await admin.list_topics())
        missing = [
            NewTopic(full, settings.topic_partitions, settings.topic_replicas, topic_configs=topic_configs(settings, n))
            for full, n in wanted.items() if full not in existing
        ]
        if missing:
            try:
                await admin.create_topics(missing)
            except TopicAlreadyExistsError:
                pass  # another process declared it first; the partition check below still applies
        partitions = await _partition_counts(admin, list(wanted))
        for name, parts in partitions.items():
            if parts != settings.topic_partitions:
                raise BrokerError(
                    f"topic {name} has {parts} partitions but credence is configured for "
                    f"{settings.topic_partitions} (CREDENCE_TOPIC_PARTITIONS); recreate it or change the setting"
                )
    finally:
        await admin.close()


async def _partition_counts(admin: AIOKafkaAdminClient, names: list[str], deadline_s: float = 30.0):
    """Partition counts as the cluster reports them; a topic created a moment ago reports none until
    its metadata has propagated, so ask again until every topic shows partitions or the deadline passes."""
    end = asyncio.get_running_loop().time() + deadline_s
    while True:
        counts = {t["topic"]: len(t.get("partitions") or []) for t in await admin.describe_topics(names)}
        if all(counts.get(n) for n in names) or asyncio.get_running_loop().time() > end:
            return {n: counts.get(n, 0) for n in names}
        await asyncio.sleep(0.1)  # metadata poll interval


async def group_lag(bootstrap: str, group: str, topics: list[str]) -> int:
    """Records in `topics` not yet committed by consumer group `group` (-1 if the group has no offsets)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await admin.start()
    await consumer.start()
    try:
        committed = await admin.list_consumer_group_offsets(group)
        parts = [TopicPartition(t, p) for t in topics for p in (consumer.partitions_for_topic(t) or ())]
        if not parts:
            return -1
        ends = await consumer.end_offsets(parts)
        lag = 0
        for tp, end in ends.items():
            meta = committed.get(tp)
            lag += end - (meta.offset if meta is not None and meta.offset >= 0 else 0)
        return lag
    finally:
        await consumer.stop()
        await admin.close()


def run(coro):
    return asyncio.run(coro)
