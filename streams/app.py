"""The Faust application, built from the settings object at start (never at import)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import faust

from credence.config import Settings
from credence.streams.topics import Topics, declare_topics

log = logging.getLogger(__name__)


@dataclass
class Stats:
    """What this worker process did since it started (reported by /status; not persisted)."""

    turns_accepted: int = 0
    turns_rejected: int = 0
    turns_duplicate: int = 0
    turns_rekeyed: int = 0


@dataclass
class Credence:
    """Everything one worker owns: the app, its topics, its tables."""

    app: faust.App
    settings: Settings
    topics: Topics
    tables: dict
    stats: Stats = field(default_factory=Stats)


def store_url(settings: Settings) -> str:
    return "rocksdb://" if settings.table_store == "rocksdb" else "memory://"


def create_app(settings: Settings, bootstrap: str) -> Credence:
    app = faust.App(
        settings.app_id,
        broker=f"kafka://{bootstrap}",
        store=store_url(settings),
        datadir=str(settings.data_dir / "worker"),
        topic_partitions=settings.topic_partitions,
        topic_replication_factor=settings.topic_replicas,
        autodiscover=False,
        web_enabled=settings.web_port != 0,
        web_port=settings.web_port or 6066,
        web_bind=settings.web_host,
        web_host=settings.web_host,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        broker_commit_interval=1.0,
        table_standby_replicas=0,
    )
    topics = declare_topics(app, settings)
    tables = {
        # scope -> number of distinct turns seen (the foundation's restart-recovery witness)
        "turn_counts": app.Table("turn_counts", default=int, key_type=str, value_type=int,
                                 partitions=settings.topic_partitions),
        # "scope\x1fturn_id" -> 1: exact duplicate turn_ids per scope are dropped
        "seen_turns": app.Table("seen_turns", default=int, key_type=str, value_type=int,
                                partitions=settings.topic_partitions),
    }
    credence = Credence(app=app, settings=settings, topics=topics, tables=tables)
    from credence.streams import ingest, views  # agents and pages attach themselves to the app

    ingest.register(credence)
    views.register(credence)
    return credence
