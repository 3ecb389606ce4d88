"""The container of one worker's parts (`Credence`) and its counters (`Stats`): what the composition root,
streams/ops/worker.py's `build_worker`, hands to every part it mounts beside the runtime."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import faust

from credence.config import Settings
from credence.records.topics import TOPICS, TopicSpec
from credence.streams.llm.backend import LLMBackend
from credence.streams.llm.embeddings import Encode
from credence.streams.llm.runner import Runner
from credence.streams.runtime.agent import ScopeAgent
from credence.streams.runtime.tenancy import TenantRecords, TenantSwitch
from credence.streams.runtime.topics import Topics
from credence.streams.state.marks import Marks
from credence.streams.state.ownership import Ownership
from credence.streams.state.restore import RestoreStats
from credence.streams.state.store import ScopeStore, StateTables


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

    def count_step(self, tenant: str, turns: int, emits) -> None:
        """Per-tenant counters of a scope's applied records: its turns, and the evidence signals journaled."""
        if turns:
            self.turns_by_tenant[tenant] = self.turns_by_tenant.get(tenant, 0) + turns
        for emit in emits:
            if emit.topic == TOPICS.evidence and emit.record.get("event") == "signal":
                kinds = self.signals_by_tenant.setdefault(tenant, {})
                kind = emit.record["cause"].rsplit(":", 1)[-1]  # "<source>:<kind>" or the kind alone
                kinds[kind] = kinds.get(kind, 0) + 1

    def count_saved(self, work) -> int:
        """Count what a batch applied to the scope (`work`: its batch.ScopeWork); the turns it applied."""
        self.journal_events += len(work.journal)
        self.archived += sum(1 for e in work.emits if e.topic == TOPICS.archive)
        turns = sum(1 for a in work.applied if a.turn)
        self.count_step(work.tenant, turns, work.emits)
        self.count_refused(work.refused)
        return turns

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
    """Everything one worker owns: the app, its topics, state, LLM runner and switch, built complete by the
    runtime's factory `create_app`, to which the composition root (`build_worker`, streams/ops/worker.py)
    hands what is built above the runtime."""

    app: faust.App
    settings: Settings
    topics: Topics
    state_tables: StateTables
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
