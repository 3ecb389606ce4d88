"""The Faust application, built from the settings object at start (never at import)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import faust

from credence.config import Settings
from credence.records.topics import INPUTS, TOPICS, TopicSpec
from credence.streams.llm.backend import LLMBackend
from credence.streams.llm.embeddings import Encode, load_encoder
from credence.streams.llm.factory import make_backend
from credence.streams.llm.runner import ResultSender, Runner
from credence.streams.runtime import timers, views
from credence.streams.runtime.agent import ScopeAgent, encode_record, halt
from credence.streams.runtime.canonical import UniqueUrlAssignor, canonical_url
from credence.streams.runtime.probe import OffsetProbe
from credence.streams.runtime.switch import PowerSwitch
from credence.streams.runtime.tenancy import NoTenants, TenantMemory, TenantRecords, TenantSwitch
from credence.streams.runtime.topics import TABLES, Topics, changelog_configs, declare_topics
from credence.streams.runtime.transport import read_committed
from credence.streams.state import rocks
from credence.streams.state.fence import Fence
from credence.streams.state.forgets import Forgets
from credence.streams.state.freshness import Freshness
from credence.streams.state.marks import Marks
from credence.streams.state.ownership import Ownership
from credence.streams.state.positions import Positions
from credence.streams.state.restore import RestoreStats, install_bulk_recovery
from credence.streams.state.store import ScopeStore, StateTables
from credence.streams.state.writes import TableWrites
from credence.tables.scope import tenant_of
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
        tenant = tenant_of(scope)
        if turns:
            self.turns_by_tenant[tenant] = self.turns_by_tenant.get(tenant, 0) + turns
        for emit in emits:
            if emit.topic == TOPICS.evidence and emit.record.get("event") == "signal":
                kinds = self.signals_by_tenant.setdefault(tenant, {})
                kind = emit.record["cause"].rsplit(":", 1)[-1]  # "<source>:<kind>" or the kind alone
                kinds[kind] = kinds.get(kind, 0) + 1

    def count_refused(self, refused: dict) -> None:
        for key, n in refused.items():
            self.statements_refused[key] = self.statements_refused.get(key, 0) + n


class Recall(Protocol):
    """The recall service served beside the stream (streams/serving/recall.py), as /status reads it."""

    @property
    def encoder(self) -> Encode | None: ...


Observe = Callable[[str, str, float], None]  # (task, outcome, seconds) of each LLM call: /metrics


@dataclass
class Credence:
    """Everything one worker owns: the app, its topics, state, LLM runner and switch, built complete by
    create_app (the composition root, streams/ops/worker.py, hands it what is built above the runtime)."""

    app: faust.App
    settings: Settings
    topics: Topics
    tables: StateTables
    store: ScopeStore  # the one read path for scope state
    ownership: Ownership  # partitions held now, and the busy scopes on them
    marks: Marks
    switch: TenantSwitch  # powerful memory per tenant: its record's override, then the core config file
    tenants: TenantRecords  # the tenants' settings (the API's directory of the tenants topic)
    backend: LLMBackend
    agent: ScopeAgent
    runner: Runner
    stats: Stats = field(default_factory=Stats)
    encoder: Encode | None = None  # the Stage-2 pre-rank's sentence encoder, None = BM25 pre-rank
    recall: Recall | None = None  # the /v1 recall route's service (streams/serving), None without it
    restored: RestoreStats = field(default_factory=RestoreStats)  # the bulk changelog restores (restore.py)

    @property
    def busy(self) -> set[str]:
        """Held scopes with work in flight, queued or buffered."""
        return self.ownership.busy

    async def send(self, topic: TopicSpec, scope: str, record: dict) -> None:
        await self.agent.send(topic, scope, record)


def store_url(settings: Settings) -> str:
    # RocksDB that opens no database while a rebalance hands partitions out (state/rocks.py)
    return rocks.store_url() if settings.table_store == "rocksdb" else "memory://"


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
        canonical_url=canonical_url(settings),  # routable, unique in the group (canonical.py)
        PartitionAssignor=UniqueUrlAssignor,
        # Faust's own table and router pages answer any caller with table values and who holds a key.
        web_tables_enabled=False,
        web_router_enabled=False,
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


def create_app(settings: Settings, bootstrap: str, *, tenants: TenantRecords | None = None,
               encoder: Encode | None = None, recall: Recall | None = None, observe: Observe | None = None
               ) -> Credence:
    """The stream side of a worker: Faust app, state tables, scope agent, LLM runner, timers and views.
    The composition root, streams/ops/worker.py, which knows every layer, builds first what the runtime
    is handed (the tenants' records, the Stage-2 encoder: `stage2_encoder`, recall, the LLM calls'
    observer) and mounts what is served beside it afterwards; the runtime knows none of them."""
    app = faust_app(settings, bootstrap)
    # When each partition's stores were last in step with the changelogs (RocksDB: they outlive the process)
    freshness = Freshness(Path(app.conf.tabledir) if settings.table_store == "rocksdb" else None,
                          settings.state.changelog_tombstone_seconds)
    fence = _fence(app, settings, bootstrap)

    async def rewind_held() -> None:  # every assignment, ticks or none (the agent is built below)
        await agent.rewind_held(set(ownership.held))

    restored = install_bulk_recovery(app, settings, bootstrap, freshness, on_dead=halt,
                                     before_restore=fence and _fencing(fence),
                                     on_assignment=fence and fence.assigned, on_ready=rewind_held).restored
    topics = declare_topics(app, settings)
    changelog = {k: v for k, v in changelog_configs(settings).items() if k != "cleanup.policy"}
    # Values are bytes we encode once ourselves (streams/state/codec.py), stored and changelogged as is.
    tables = StateTables(**{name: raw_table(app, name, settings.topic_partitions, changelog) for name in TABLES})
    ownership = Ownership(settings.topic_partitions, settings.topic(TOPICS.turns))
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
    tenants = tenants if tenants is not None else NoTenants()
    switch = TenantSwitch(PowerSwitch(settings.core_config_path), tenants)
    backend = make_backend(settings.llm, count_tokens=default_token_counter(), memory=settings.memory)
    stats = Stats()
    probe = OffsetProbe(bootstrap, settings.kafka)
    app.on_before_shutdown.connect(stop_with(probe))
    runner = _runner(app, settings, bootstrap, backend, ownership, encoder, observe)
    agent = ScopeAgent(settings, topics, store, marks, writes, ownership, switch, stats, positions, forgets,
                       memory_for=TenantMemory(settings.memory, tenants), runner=runner,
                       consumer_of=lambda: app.consumer, probe=probe)
    credence = Credence(app=app, settings=settings, topics=topics, tables=tables, store=store,
                        ownership=ownership, marks=marks, switch=switch, tenants=tenants, backend=backend,
                        agent=agent, runner=runner, stats=stats, encoder=encoder, recall=recall, restored=restored)
    register_agent(credence)
    timers.register(credence)
    views.register(credence)
    return credence


def _on_recovered(writes: TableWrites, store: ScopeStore, ownership: Ownership, reread):
    """The tables' recovery callback: before any input is read, the last batch of each held partition is
    whole in the tables again, and what is cached of them is read anew."""
    async def recovered() -> None:
        tenure = dict(ownership.tenure)  # a partition lost (and perhaps regained) since is not ours to replay
        try:
            replayed = await writes.replay(set(tenure), holds=lambda p: ownership.tenure.get(p) == tenure[p])
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


def stage2_encoder(settings: Settings) -> Encode | None:
    """The Stage-2 pre-rank's sentence encoder when embeddings are on (None: the BM25 pre-rank)."""
    if not settings.pipeline.embeddings:
        return None
    return load_encoder(settings.pipeline.embedding_model_path)


def _runner(app: faust.App, settings: Settings, bootstrap: str, backend: LLMBackend, ownership: Ownership,
            encode: Encode | None, observe: Observe | None) -> Runner:
    """The LLM runner: results through their own producer (runner.py says why), stopped with the app."""
    results = ResultSender(settings, bootstrap, ownership.partition_of, encode_record)

    @app.on_before_shutdown.connect
    async def stop_results(sender, **kwargs) -> None:
        await results.stop()

    return Runner(backend, results, settings.llm.max_concurrency, encode, settings.llm.inline_in_process,
                  settings.kafka.max_record_bytes, observe=observe)


def raw_table(app: faust.App, name: str, partitions: int, changelog: dict) -> faust.Table:
    """A table of bytes values we encode ourselves (streams/state/codec.py), stored and changelogged
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
