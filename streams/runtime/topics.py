"""The worker's Faust declarations of the topics credence/records/topics.py specifies. Scope-keyed topics all have
the settings' partition count, so one scope always lands on one partition and is handled in order by one
worker."""

from __future__ import annotations

import faust
from aiokafka import AIOKafkaConsumer, TopicPartition

from credence.config import Settings
from credence.errors import ConfigError
from credence.kafka import client_options, start
from credence.records.topics import INPUTS, TOPICS, TopicSpec

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
STATE_TABLES = ("scopes", "entries", "lists", "history", "seen")


class Topics:
    """The worker's Faust topic of every spec in the registry, generated from it: ``topics[TOPICS.evidence]``,
    or by the spec's attribute (``getattr(topics, spec.attribute)``, as the agent's test doubles answer)."""

    def __init__(self, declared: dict[TopicSpec, faust.TopicT]) -> None:
        if set(declared) != set(TOPICS.values()):
            raise ConfigError(f"the worker declares every registered topic, got {sorted(s.name for s in declared)}")
        self._declared = dict(declared)
        for spec, channel in declared.items():
            setattr(self, spec.attribute, channel)

    def __getitem__(self, spec: TopicSpec) -> faust.TopicT:
        return self._declared[spec]


def declare_topics(app: faust.App, settings: Settings) -> Topics:
    def topic(spec: TopicSpec) -> faust.TopicT:
        retention_h = settings.retention_hours(spec)
        return app.topic(
            settings.topic(spec),
            key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw",
            partitions=settings.topic_partitions, replicas=settings.topic_replicas,
            retention=retention_h * 3600.0 if retention_h >= 0 else None,
            compacting=spec.compacted or None,
        )

    return Topics({spec: topic(spec) for spec in TOPICS.values()})


async def end_offsets(bootstrap: str, settings: Settings, partitions: list[int]) -> dict[str, list[int]]:
    """Each input topic's end offset on each of `partitions` (logical topic name -> offsets by partition)."""
    consumer = AIOKafkaConsumer(**client_options(bootstrap, settings.kafka, enable_auto_commit=False))
    await start(consumer, bootstrap, settings.kafka)
    try:
        tps = {spec.name: [TopicPartition(settings.topic(spec), p) for p in partitions] for spec in INPUTS}
        ends = await consumer.end_offsets([tp for named in tps.values() for tp in named])
        return {name: [ends[tp] for tp in named] for name, named in tps.items()}
    finally:
        await consumer.stop()
