"""The Faust application, built from the settings object at start (never at import)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import faust

from credence.config import Settings
from credence.streams.runtime.topics import CHANGELOG_CONFIGS
from credence.streams.runtime.topics import Topics, declare_topics

log = logging.getLogger(__name__)


@dataclass
class Stats:
    """What this worker process did since it started (reported by /status; not persisted)."""

    turns_accepted: int = 0
    turns_rejected: int = 0
    turns_duplicate: int = 0
    turns_rekeyed: int = 0
    records_rejected: int = 0
    redelivered: int = 0
    journal_events: int = 0
    archived: int = 0
    forgotten_scopes: int = 0
    broker_unreachable_since: float = 0.0  # unix time the brokers were first found unreachable; 0 = reachable


@dataclass
class Credence:
    """Everything one worker owns: the app, its topics, tables, LLM runner and switch."""

    app: faust.App
    settings: Settings
    topics: Topics
    tables: dict
    stats: Stats = field(default_factory=Stats)
    busy: set = field(default_factory=set)  # scopes with work in flight, queued or buffered
    runner: object = None
    switch: object = None
    backend: object = None
    send: object = None
    store: object = None  # ScopeStore: the one read path for scope state
    api: object = None  # streams.api.server.Api: /v1, tenants and cards (authenticate() for other pages)


def store_url(settings: Settings) -> str:
    return "rocksdb://" if settings.table_store == "rocksdb" else "memory://"


def create_app(settings: Settings, bootstrap: str) -> Credence:
    from credence.kafka import faust_options

    app = faust.App(
        settings.app_id,
        **faust_options(bootstrap, settings.kafka),
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
        # A worker killed without leaving the group holds its partitions until the session times out.
        broker_session_timeout=settings.kafka_session_timeout_s,
        broker_heartbeat_interval=max(1.0, settings.kafka_session_timeout_s / 4),
        table_standby_replicas=0,
    )
    topics = declare_topics(app, settings)
    changelog = {k: v for k, v in CHANGELOG_CONFIGS.items() if k != "cleanup.policy"}
    table = dict(partitions=settings.topic_partitions, key_type=str,  # values: the app's json codec
                 extra_topic_configs=changelog)
    tables = {
        # scope -> ScopeState.to_dict(): entries, windows, facts, requests — one value, one atomic step
        "scopes": app.Table("scopes", default=None, **table),
        # "kind\x1fscope\x1fid" -> position of the record that first carried it (duplicate detection)
        "seen": app.Table("seen", default=None, **table),
    }
    credence = Credence(app=app, settings=settings, topics=topics, tables=tables)
    from credence.streams.runtime.store import ScopeStore

    credence.store = ScopeStore(tables["scopes"])

    from credence.streams.runtime import agent, timers, views
    from credence.streams.llm.factory import make_backend
    from credence.streams.runtime.runner import Runner
    from credence.streams.runtime.switch import PowerSwitch
    from credence.tables.tokens import default_token_counter

    credence.switch = PowerSwitch(settings.core_config_path)
    credence.backend = make_backend(settings.llm, count_tokens=default_token_counter(),
                                    memory=settings.memory)
    agent.register(credence)
    encode = None
    if settings.pipeline.embeddings:
        from credence.streams.runtime.embeddings import load_encoder

        encode = load_encoder(settings.pipeline.embedding_model_path)
    credence.runner = Runner(credence.backend, credence.send, settings.pipeline.max_inflight_llm, encode)
    timers.register(credence)
    views.register(credence)
    from credence.streams.api.server import register as register_api

    register_api(credence, bootstrap)
    _register_serving(credence)
    return credence


def _register_serving(credence: Credence) -> None:
    """/metrics and the memory browser, when this build has them (credence.streams.serving)."""
    for module in ("metrics", "browser"):
        try:
            mod = __import__(f"credence.streams.serving.{module}", fromlist=["register"])
        except ImportError:
            continue
        mod.register(credence)
