"""The worker's Faust declarations of the topics config/topics.py specifies. Scope-keyed topics all have
the settings' partition count, so one scope always lands on one partition and is handled in order by one
worker."""

from __future__ import annotations

from dataclasses import dataclass

import faust
from aiokafka import AIOKafkaConsumer, TopicPartition

from credence.config import Settings
from credence.config.topics import INPUTS, TOPICS
from credence.kafka import client_options, start

CHANGELOG_CONFIGS = {
    # Each batch rewrites the keys it changed, so the changelog must compact often or recovery replays
    # every historical version: roll segments every 10 minutes and clean at 10% dirty.
    "cleanup.policy": "compact", "segment.ms": "600000", "min.cleanable.dirty.ratio": "0.1",
}


def changelog_configs(settings: Settings) -> dict[str, str]:
    """The table changelogs' topic configs: tombstones kept as long as the state settings say (a local store
    out of step for longer is not trusted, streams/state/freshness.py)."""
    retention_ms = round(settings.state.changelog_tombstone_seconds * 1000)
    return CHANGELOG_CONFIGS | {"delete.retention.ms": str(retention_ms)}


# scopes: control values; entries: one key per entry; lists: long lists of a scope's state, one key per
# item (queued inputs, processed fact ids); history: entries' journal events; seen: duplicate marks
TABLES = ("scopes", "entries", "lists", "history", "seen")


@dataclass(frozen=True)
class Topics:
    turns: faust.TopicT
    feedback: faust.TopicT
    facts: faust.TopicT
    evidence: faust.TopicT
    archive: faust.TopicT
    control: faust.TopicT
    dlq: faust.TopicT
    tenants: faust.TopicT
    cards: faust.TopicT
    usage: faust.TopicT
    fact_candidates: faust.TopicT


def declare_topics(app: faust.App, settings: Settings) -> Topics:
    def topic(name: str) -> faust.TopicT:
        retention_h = settings.retention_hours(name)
        return app.topic(
            settings.topic(name),
            key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw",
            partitions=settings.topic_partitions, replicas=settings.topic_replicas,
            retention=retention_h * 3600.0 if retention_h >= 0 else None,
            compacting=TOPICS[name].compacted or None,
        )

    return Topics(**{spec.attribute: topic(name) for name, spec in TOPICS.items()})


async def end_offsets(bootstrap: str, settings: Settings, partitions: list[int]) -> dict[str, list[int]]:
    """Each input topic's end offset on each of `partitions` (logical topic name -> offsets by partition)."""
    consumer = AIOKafkaConsumer(**client_options(bootstrap, settings.kafka, enable_auto_commit=False))
    await start(consumer, bootstrap, settings.kafka)
    try:
        tps = {name: [TopicPartition(settings.topic(name), p) for p in partitions] for name in INPUTS}
        ends = await consumer.end_offsets([tp for named in tps.values() for tp in named])
        return {name: [ends[tp] for tp in named] for name, named in tps.items()}
    finally:
        await consumer.stop()
