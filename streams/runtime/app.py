"""The Faust application, built from the settings object at start (never at import)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import faust

from credence.config import Settings
from credence.streams.llm.backend import LLMBackend
from credence.streams.llm.factory import make_backend
from credence.streams.runtime import timers, views
from credence.streams.runtime.agent import INPUTS, ScopeAgent, encode_record, halt
from credence.streams.runtime.fence import Fence
from credence.streams.runtime.forgets import Forgets
from credence.streams.runtime.freshness import Freshness
from credence.streams.runtime.marks import Marks
from credence.streams.runtime.positions import Positions
from credence.streams.runtime.probe import OffsetProbe
from credence.streams.runtime.ownership import Ownership
from credence.streams.runtime.restore import RestoreStats, install_bulk_recovery
from credence.streams.runtime.runner import ResultSender, Runner
from credence.streams.runtime.store import ScopeStore, StateTables
from credence.streams.runtime.switch import PowerSwitch
from credence.streams.runtime.topics import TABLES, Topics, changelog_configs, declare_topics
from credence.streams.runtime.transport import read_committed
from credence.streams.runtime.writes import TableWrites
from credence.tables.tokens import default_token_counter

log = logging.getLogger(__name__)


@dataclass
class Stats:
    """What this worker process did since it started (reported by /status; not persisted)."""

    turns_accepted: int = 0
    turns_rejected: int = 0
    turns_duplicate: int = 0
    turns_rekeyed: int = 0
    records_forwarded: int = 0  # inputs on a partition (or under a key) not their scope's, sent on to it
    records_forgotten: int = 0  # inputs of a user queued before the user's forget, dropped (forgets.py)
    records_rejected: int = 0
    redelivered: int = 0
    moved_away: int = 0  # records taken before their partition moved to another worker (not applied)
    rewinds: int = 0  # input partitions read again because the consumer skipped records (positions.py)
    unsent: dict = field(default_factory=dict)  # topic -> records queued without waiting that the broker refused
    journal_events: int = 0
    archived: int = 0
    forgotten_scopes: int = 0
    first_input_at: float = 0.0  # unix time this process took its first input batch; 0 = none yet
    broker_unreachable_since: float = 0.0  # unix time the brokers were first found unreachable; 0 = reachable
    turns_by_tenant: dict = field(default_factory=dict)  # tenant -> turns applied (/metrics)
    signals_by_tenant: dict = field(default_factory=dict)  # tenant -> signal kind -> evidence signals applied
    # "<stage>:<reason>" -> Stage-1 facts and reflections refused as not self-contained, and synthesis
    # drafts declined as restatements ("synthesis:restatement"); exported as credence_stats_statements_refused
    statements_refused: dict = field(default_factory=dict)

    def count_step(self, scope: str, turns: int, emits) -> None:
        """Per-tenant counters of a scope's applied records: its turns, and the evidence signals journaled."""
        tenant = scope.split("/", 1)[0]
        if turns:
            self.turns_by_tenant[tenant] = self.turns_by_tenant.get(tenant, 0) + turns
        for emit in emits:
            if emit.topic == "evidence" and emit.record.get("event") == "signal":
                kinds = self.signals_by_tenant.setdefault(tenant, {})
                kind = emit.record["cause"].rsplit(":", 1)[-1]  # "<source>:<kind>" or the kind alone
                kinds[kind] = kinds.get(kind, 0) + 1

    def count_refused(self, refused: dict) -> None:
        for key, n in refused.items():
            self.statements_refused[key] = self.statements_refused.get(key, 0) + n


@dataclass
class Credence:
    """Everything one worker owns: the app, its topics, state, LLM runner and switch."""

    app: faust.App
    settings: Settings
    topics: Topics
    tables: StateTables
    store: ScopeStore  # the one read path for scope state
    ownership: Ownership  # partitions held now, and the busy scopes on them
    marks: Marks
    switch: PowerSwitch
    backend: LLMBackend
    agent: ScopeAgent
    runner: Runner
    stats: Stats = field(default_factory=Stats)
    api: object = None  # streams.api.server.Api: /v1, tenants and cards (authenticate() for other pages)
    encoder: object = None  # the Stage-2 pre-rank's sentence encoder, None = BM25 pre-rank
    recall: object = None  # serving.recall.RecallService (the /v1 recall route's)
    restored: RestoreStats = field(default_factory=RestoreStats)  # the bulk changelog restores (restore.py)

    @property
    def busy(self) -> set[str]:
        """Held scopes with work in flight, queued or buffered."""
        return self.ownership.busy

    async def send(self, topic: str, scope: str, record: dict) -> None:
        await self.agent.send(topic, scope, record)


def store_url(settings: Settings) -> str:
    return "rocksdb://" if settings.table_store == "rocksdb" else "memory://"


def faust_app(settings: Settings, bootstrap: str) -> faust.App:
    """The Faust app a worker runs: its store, web server, producer and consumer-group settings."""
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
        producer_linger=0.005,  # 5 ms lets a batch's records share produce requests (0 costs ~24%)
        # A full batch blocks the next send on its partition until the broker answers: with Faust's
        # default 16 KB, table writes (queued one by one behind the producer buffer) crawl at ~100/s.
        producer_max_batch_size=512 * 1024,
        broker_commit_interval=1.0,
        # A worker killed without leaving the group holds its partitions until the session times out.
        broker_session_timeout=settings.kafka_session_timeout_s,
        broker_heartbeat_interval=max(1.0, settings.kafka_session_timeout_s / 4),
        table_standby_replicas=0,
    )
    # never applied: an aborted upstream transaction's records, a fenced owner's changelog writes (fence.py)
    read_committed(app)
    return app


def create_app(settings: Settings, bootstrap: str) -> Credence:
    app = faust_app(settings, bootstrap)
    # When each partition's stores were last in step with the changelogs (RocksDB: they outlive the process)
    freshness = Freshness(Path(app.conf.tabledir) if settings.table_store == "rocksdb" else None,
                          settings.state.changelog_tombstone_seconds)
    fence = _fence(app, settings, bootstrap)
    restored = install_bulk_recovery(app, settings, bootstrap, freshness, on_dead=halt,
                                     before_restore=fence and _fencing(fence)).restored
    topics = declare_topics(app, settings)
    changelog = {k: v for k, v in changelog_configs(settings).items() if k != "cleanup.policy"}
    # Values are bytes we encode once ourselves (streams/runtime/codec.py), stored and changelogged as is.
    tables = StateTables(**{name: raw_table(app, name, settings.topic_partitions, changelog) for name in TABLES})
    ownership = Ownership(settings.topic_partitions, settings.topic("turns"))
    writes = TableWrites({name: tables[name] for name in TABLES}, freshness=freshness, fence=fence)
    store = ScopeStore(tables, settings.state, ownership.partition_of, writes)
    marks = Marks(tables.seen, settings.state.seen_horizon_days, ownership.partition_of, writes)
    positions = Positions(tables.seen, writes)
    forgets = Forgets(tables.seen, writes, settings.topic)

    def reread(*_partitions) -> None:  # partitions moved or were recovered: read from the tables again
        marks.reset()
        positions.reset()
        forgets.reset()

    ownership.on_moved(store.drop_partitions)
    ownership.on_moved(reread)

    # every table has been read by then (one recovery for all)
    tables.entries.on_recover(_on_recovered(writes, store, ownership, reread))
    switch = PowerSwitch(settings.core_config_path)
    backend = make_backend(settings.llm, count_tokens=default_token_counter(), memory=settings.memory)
    stats = Stats()
    agent = ScopeAgent(settings, topics, store, marks, writes, ownership, switch, stats, positions, forgets)
    agent.consumer_of = lambda: app.consumer
    agent.probe = OffsetProbe(bootstrap, settings.kafka)
    app.on_before_shutdown.connect(stop_with(agent.probe))
    runner = agent.runner = _runner(app, settings, bootstrap, backend, ownership)
    credence = Credence(app=app, settings=settings, topics=topics, tables=tables, store=store,
                        ownership=ownership, marks=marks, switch=switch, backend=backend, agent=agent,
                        runner=runner, stats=stats, restored=restored)
    register_agent(credence)
    credence.encoder = runner.encode
    timers.register(credence)
    views.register(credence)
    from credence.streams import serving

    serving.register(credence)  # credence.recall, before the API that answers with it
    from credence.streams.api.server import register as register_api

    register_api(credence, bootstrap)
    agent.switch = credence.switch  # the API wraps the switch with per-tenant settings
    _register_serving(credence)
    return credence


def _on_recovered(writes: TableWrites, store: ScopeStore, ownership: Ownership, reread):
    """The tables' recovery callback: before any input is read, the last batch of each held partition is
    whole in the tables again, and what is cached of them is read anew."""
    async def recovered() -> None:
        try:
            replayed = await writes.replay(set(ownership.held))
        except BaseException as exc:  # noqa: BLE001 - a half-written batch must never be read as state
            halt(f"the last batches could not be written again after a restore: {type(exc).__name__}: {exc}")
        if replayed:
            log.info("applied the last batch of partitions %s again (%d writes)", sorted(ownership.held), replayed)
        store.recovered()
        reread()
    return recovered


def stop_with(client):
    """A shutdown receiver that stops `client`."""
    async def stop(sender, **kwargs) -> None:
        await client.stop()
    return stop


def _fence(app: faust.App, settings: Settings, bootstrap: str) -> Fence | None:
    """The changelogs' transactional writers (fence.py), stopped with the app; None when switched off."""
    if not settings.state.transactions:
        return None
    fence = Fence(settings, bootstrap)
    app.on_before_shutdown.connect(stop_with(fence))
    return fence


def _fencing(fence: Fence):
    """The restore's first step: own the assigned partitions' writers, which fences their earlier holders."""

    async def before_restore(partitions: set[int]) -> None:
        try:
            await fence.hold(partitions)
        except Exception as exc:  # noqa: BLE001 - unfenced, another owner could still write: never restore
            halt(f"could not fence the earlier holders of partitions {sorted(partitions)}: "
                 f"{type(exc).__name__}: {exc}")

    return before_restore


def _runner(app: faust.App, settings: Settings, bootstrap: str, backend: LLMBackend,
            ownership: Ownership) -> Runner:
    """The LLM runner: results through their own producer (runner.py says why), stopped with the app;
    the Stage-2 pre-rank's encoder when embeddings are on."""
    encode = None
    if settings.pipeline.embeddings:
        from credence.streams.runtime.embeddings import load_encoder

        encode = load_encoder(settings.pipeline.embedding_model_path)
    results = ResultSender(settings, bootstrap, ownership.partition_of, encode_record)

    @app.on_before_shutdown.connect
    async def stop_results(sender, **kwargs) -> None:
        await results.stop()

    return Runner(backend, results, settings.llm.max_concurrency, encode, settings.llm.inline_in_process,
                  settings.kafka.max_record_bytes)


def raw_table(app: faust.App, name: str, partitions: int, changelog: dict) -> faust.Table:
    """A table of bytes values we encode ourselves (streams/runtime/codec.py), stored and changelogged
    as they are. Faust derives a table's codec from its value type (json for anything but a model), and
    builds the store and changelog topic from it lazily, so it is set before either exists."""
    table = app.Table(name, partitions=partitions, key_type=str, value_type=bytes, default=None,
                      extra_topic_configs=changelog)
    table.value_serializer = "raw"
    return table


def register_agent(credence: Credence) -> None:
    """The Faust side of the scope agent: its input topics and the partition hooks."""
    app, settings = credence.app, credence.settings
    inputs = app.topic(*(settings.topic(n) for n in INPUTS), key_type=bytes, value_type=bytes,
                       key_serializer="raw", value_serializer="raw")

    @app.agent(inputs, name="scopes")
    async def scope_agent(stream):
        await credence.agent.run(stream)

    @app.on_partitions_revoked.connect
    async def on_revoked(sender, revoked, **kwargs):
        credence.ownership.revoked(revoked)

    @app.on_partitions_assigned.connect
    async def on_assigned(sender, assigned, **kwargs):
        credence.ownership.assigned(assigned)


def _register_serving(credence: Credence) -> None:
    """/metrics and the memory browser, when this build has them (credence.streams.serving)."""
    for module in ("metrics", "browser"):
        try:
            mod = __import__(f"credence.streams.serving.{module}", fromlist=["register"])
        except ImportError:
            continue
        mod.register(credence)
