"""Topic declarations. Every topic is keyed by scope `tenant/user/character`; partitions and retention
come from settings, so one scope always lands on one partition and is handled in order by one worker."""

from __future__ import annotations

from dataclasses import dataclass

import faust

from credence.config import Settings

# logical name -> compacted? (compacted topics keep the latest record per key; forgetting tombstones them)
TOPICS: dict[str, bool] = {
    "turns": False,
    "feedback": False,
    "facts": False,
    "evidence": False,
    "archive": False,
    "control": False,
    "dlq": False,
    # Every worker reads these two whole into memory (streams/api/directory.py): tenants' key hashes and
    # settings, keyed by tenant; character cards, keyed by tenant/character.
    "tenants": True,
    "cards": True,
    # seed 002: recall hits (input of the scope agent) and the bridge's fact candidates (output only)
    "usage": False,
    "fact-candidates": False,
}

CHANGELOG_CONFIGS = {
    # Each batch rewrites the keys it changed, so the changelog must compact often or recovery replays
    # every historical version: roll segments every 10 minutes and clean at 10% dirty.
    "cleanup.policy": "compact", "segment.ms": "600000", "min.cleanable.dirty.ratio": "0.1",
}


def changelog_configs(settings: Settings) -> dict[str, str]:
    """The table changelogs' topic configs: tombstones kept as long as the state settings say (a local store
    out of step for longer is not trusted, streams/runtime/freshness.py)."""
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
            compacting=TOPICS[name] or None,
        )

    return Topics(**{name.replace("-", "_"): topic(name) for name in TOPICS})
