"""The runtime's factory, `create_app`: the Faust application and the parts of a worker's stream side,
built from the settings object at start (never at import). Not a composition root: that is `build_worker`
(streams/ops/worker.py), which calls it."""

from __future__ import annotations

import logging
from pathlib import Path

import faust

from credence.config import Settings
from credence.records.topics import INPUTS, TOPICS
from credence.streams.llm.backend import LLMBackend
from credence.streams.llm.embeddings import Encode, load_encoder
from credence.streams.llm.factory import make_backend
from credence.streams.llm.runner import ResultSender, Runner
from credence.streams.runtime import timers, views
from credence.streams.runtime.agent import ScopeAgent, encode_record, halt
from credence.streams.runtime.canonical import UniqueUrlAssignor, canonical_url
from credence.streams.runtime.container import Credence, Observe, Recall, Stats
from credence.streams.runtime.probe import OffsetProbe
from credence.streams.runtime.switch import PowerSwitch
from credence.streams.runtime.tenancy import NoTenants, TenantMemory, TenantRecords, TenantSwitch
from credence.streams.runtime.topics import STATE_TABLES, changelog_configs, declare_topics
from credence.streams.runtime.transport import read_committed
from credence.streams.state import rocks
from credence.streams.state.fence import Fence
from credence.streams.state.freshness import Freshness
from credence.streams.state.ownership import Ownership
from credence.streams.state.restore import install_bulk_recovery
from credence.streams.state.store import ScopeStore, StateTables
from credence.streams.state.transaction import WorkerState
from credence.streams.state.writes import TableWrites
from credence.tables.tokens import default_token_counter

log = logging.getLogger(__name__)


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
    """The runtime's factory: the stream side of a worker (Faust app, state tables, scope agent, LLM
    runner, timers and views). The composition root, `build_worker` (streams/ops/worker.py), builds
    first what the runtime is handed (the tenants' records, the Stage-2 encoder: `stage2_encoder`,
    recall, the LLM calls' observer) and mounts what is served beside it afterwards; the runtime knows
    none of them."""
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
    state_tables = StateTables(**{name: raw_table(app, name, settings.topic_partitions, changelog) for name in STATE_TABLES})
    ownership = Ownership(settings.topic_partitions, settings.topic(TOPICS.turns))
    writes = TableWrites({name: state_tables[name] for name in STATE_TABLES}, freshness=freshness, fence=fence)
    state = WorkerState.over(state_tables, settings.state, ownership, writes, settings.topic)
    store = state.store
    ownership.on_moved(store.drop_partitions)
    ownership.on_moved(state.reread)

    # every table has been read by then (one recovery for all)
    state_tables.entries.on_recover(_on_recovered(writes, store, ownership, state.reread))
    tenants = tenants if tenants is not None else NoTenants()
    switch = TenantSwitch(PowerSwitch(settings.core_config_path), tenants)
    backend = make_backend(settings.llm, count_tokens=default_token_counter(), memory=settings.memory)
    stats = Stats()
    probe = OffsetProbe(bootstrap, settings.kafka)
    app.on_before_shutdown.connect(stop_with(probe))
    runner = _runner(app, settings, bootstrap, backend, ownership, encoder, observe)
    agent = ScopeAgent(settings, topics, state, switch, stats, memory_for=TenantMemory(settings.memory, tenants),
                       runner=runner, consumer_of=lambda: app.consumer, probe=probe)
    credence = Credence(app=app, settings=settings, topics=topics, state_tables=state_tables, store=store,
                        ownership=ownership, marks=state.marks, switch=switch, tenants=tenants, backend=backend,
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
