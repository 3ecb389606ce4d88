"""Talking to the cluster as an administrator: declare topics (and table changelogs) up front.

Producers must never auto-create a topic with the broker's default partition count: the scope-keyed
tables require every source topic to have exactly `topic_partitions` partitions.
"""

from __future__ import annotations

import asyncio
import logging

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError, NodeNotReadyError, RequestTimedOutError, TopicAlreadyExistsError

from credence.config import Settings
from credence.errors import BrokerError
from credence.kafka import client_options, start
from credence.records.topics import TOPICS
from credence.streams.runtime.topics import STATE_TABLES
from credence.streams.runtime.topics import changelog_configs as table_changelog_configs

log = logging.getLogger(__name__)


def topic_configs(settings: Settings, name: str) -> dict[str, str]:
    hours = settings.retention_hours(TOPICS[name])
    return {
        "retention.ms": str(hours * 3_600_000 if hours >= 0 else -1),
        "cleanup.policy": TOPICS[name].cleanup,
        "min.insync.replicas": str(settings.topic_min_insync_replicas),
    }


def changelog_configs(settings: Settings) -> dict[str, str]:
    return table_changelog_configs(settings) | {"min.insync.replicas": str(settings.topic_min_insync_replicas)}


def changelog_topic(settings: Settings, table: str) -> str:
    return f"{settings.app_id}-{table}-changelog"  # Faust's naming


async def ensure_topics(bootstrap: str, settings: Settings, changelogs: bool = False) -> set[str]:
    """Create credence's topics if missing (with `changelogs`, also the worker's table changelogs, so
    Faust never races its own creation of them); refuse to go on if one exists with other partitions.
    Answers every topic the cluster had before (internal ones included)."""
    admin = AIOKafkaAdminClient(**client_options(bootstrap, settings.kafka))
    await start(admin, bootstrap, settings.kafka)
    try:
        wanted = {settings.topic(n): topic_configs(settings, n) for n in TOPICS}
        if changelogs:
            wanted |= {changelog_topic(settings, t): changelog_configs(settings) for t in STATE_TABLES}
        existing = set(await _ask(admin.list_topics))
        missing = [
            NewTopic(full, settings.topic_partitions, settings.topic_replicas, topic_configs=configs)
            for full, configs in wanted.items() if full not in existing
        ]
        if missing:
            try:
                await _ask(admin.create_topics, missing)
            except TopicAlreadyExistsError:
                pass  # another process declared it first; the partition check below still applies
        partitions = await _partition_counts(admin, list(wanted))
        for name, parts in partitions.items():
            if parts != settings.topic_partitions:
                raise BrokerError(
                    f"topic {name} has {parts} partitions but credence is configured for "
                    f"{settings.topic_partitions} (CREDENCE_TOPIC_PARTITIONS); recreate it or change the setting"
                )
        return existing
    finally:
        await admin.close()


async def _ask(call, *args, deadline_s: float = 30.0):
    """One admin request, asked again while it meets a broker that just went away and that the cluster's
    metadata still names (the admin client sends to one node and does not move on by itself)."""
    end = asyncio.get_running_loop().time() + deadline_s
    while True:
        try:
            return await call(*args)
        except (KafkaConnectionError, NodeNotReadyError, RequestTimedOutError):
            if asyncio.get_running_loop().time() > end:
                raise
            await asyncio.sleep(0.5)  # retry interval while the metadata catches up


async def _partition_counts(admin: AIOKafkaAdminClient, names: list[str], deadline_s: float = 30.0):
    """Partition counts as the cluster reports them; a topic created a moment ago reports none until
    its metadata has propagated, so ask again until every topic shows partitions or the deadline passes."""
    end = asyncio.get_running_loop().time() + deadline_s
    while True:
        described = await _ask(admin.describe_topics, names)
        counts = {t["topic"]: len(t.get("partitions") or []) for t in described}
        # A partition without a leader yet makes the first produce fail with NotLeaderForPartition.
        led = all(p.get("leader", -1) >= 0 for t in described for p in t.get("partitions") or [])
        if (all(counts.get(n) for n in names) and led) or asyncio.get_running_loop().time() > end:
            return {n: counts.get(n, 0) for n in names}
        await asyncio.sleep(0.1)  # metadata poll interval


