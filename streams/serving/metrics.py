"""GET /metrics in the Prometheus text format (prometheus_client), read from the worker's state at scrape
time: nothing here runs on the scope agent's path except the LLM latency observation the runner makes.

Exported: consumer lag per assigned partition (deliverable records not yet applied: see `deliverable_lag`),
turns and evidence signals (by signal kind), entries by kind and tier (from the scope store, computed at scrape
time) — the last three also by tenant only with CREDENCE_API__METRICS_TENANT_LABELS=true: tenant names are
tenant data —, LLM call latency (histogram by task and outcome) and the backend's counters, dead-lettered
records, statements the self-containment gate refused (by stage and reason), recall index builds, and every
numeric field of `credence.stats` as `credence_stats_<field>` (numeric dict fields get a `key` label), so
fields added to Stats show up without touching this file.
No secrets: no keys, no LLM URL, no entry text, no tenant name unless asked.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import fields
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from credence.streams.state.tally import Tally
from credence.tables.evidence import derived_tier
from credence.tables.scope import tenant_of

if TYPE_CHECKING:
    from credence.streams.runtime.container import Credence

log = logging.getLogger(__name__)

# Seconds; LLM calls range from a rules-backend microsecond to a slow remote model's minute.
LATENCY_BUCKETS = (0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class WorkerCollector:
    """Reads the worker's state when Prometheus scrapes."""

    def __init__(self, credence: Credence) -> None:
        self.credence = credence
        # Tenant names are tenant data: only an operator who asks gets series per tenant.
        self.tenant_labels = credence.settings.api.metrics_tenant_labels
        memory = credence.settings.memory

        def tiers(state) -> Counter:
            tenant, counts = tenant_of(state.scope), Counter()
            for entry in state.entries.values():
                if entry.protected:
                    tier = "protected"
                elif state.clock is None:
                    tier = "pending"
                else:
                    tier = derived_tier(entry.score(state.clock, settings=memory), settings=memory)
                counts[(tenant, entry.kind, tier)] += 1
            return counts

        self._tally = Tally(credence.store, tiers)  # a scrape reads only the scopes that moved

    def collect(self):
        yield from self._stats()
        yield from self._per_tenant()
        yield from self._lag()
        yield from self._tiers()
        yield from self._llm()
        yield from self._worker()

    def _stats(self):
        stats = self.credence.stats
        for f in fields(stats):
            value = getattr(stats, f.name)
            if _number(value):
                family = GaugeMetricFamily(f"credence_stats_{f.name}", f"Stats.{f.name} since the worker started")
                family.add_metric([], value)
                yield family
            elif f.name.endswith("_by_tenant"):
                continue  # keyed by tenant name: exported above as credence_turns / credence_signals
            elif isinstance(value, dict) and value and all(_number(v) for v in value.values()):
                family = GaugeMetricFamily(f"credence_stats_{f.name}", f"Stats.{f.name} since the worker started",
                                           labels=["key"])
                for key, v in sorted(value.items()):
                    family.add_metric([str(key)], v)
                yield family
        dead = CounterMetricFamily("credence_dead_lettered_records", "Input records sent to the dead-letter topic")
        dead.add_metric([], stats.records_rejected)
        yield dead
        refused = CounterMetricFamily("credence_statements_refused",
                                      "Stage-1 facts and reflections refused by the self-containment gate (the rules "
                                      "backend's own drops included), and "
                                      "synthesis drafts declined as restatements, by stage and reason",
                                      labels=["stage", "reason"])
        counts = dict(stats.statements_refused)
        # the rules backend's own gate drops, never in its (journalled) answers: counted in this process
        for key, n in getattr(getattr(self.credence, "backend", None), "refused", dict)().items():
            counts[key] = counts.get(key, 0) + n
        for key, n in sorted(counts.items()):
            stage, _, reason = key.partition(":")
            refused.add_metric([stage, reason], n)
        yield refused

    def _per_tenant(self):
        stats, named = self.credence.stats, self.tenant_labels
        turns = CounterMetricFamily("credence_turns", "Turns applied" + (", by tenant" if named else ""),
                                    labels=["tenant"] if named else [])
        for labels, n in _summed((((t,), n) for t, n in getattr(stats, "turns_by_tenant", {}).items()), named):
            turns.add_metric(list(labels), n)
        yield turns
        signals = CounterMetricFamily("credence_signals", "Evidence signals applied, by "
                                      + ("tenant and " if named else "") + "signal kind",
                                      labels=["tenant", "kind"] if named else ["kind"])
        by_kind = (((tenant, kind), n) for tenant, kinds in getattr(stats, "signals_by_tenant", {}).items()
                   for kind, n in kinds.items())
        for labels, n in _summed(by_kind, named):
            signals.add_metric(list(labels), n)
        yield signals

    def _lag(self):
        lag = GaugeMetricFamily("credence_consumer_lag",
                                "Records read_committed can deliver that this worker has not applied, per assigned "
                                "partition (transaction markers excluded; a changelog: what its restore has left)",
                                labels=["topic", "partition"])
        app = self.credence.app
        consumer = getattr(app, "_consumer", None)  # never create one at scrape time
        if consumer is not None:
            try:
                assigned = sorted(consumer.assignment())
            except Exception:  # noqa: BLE001 - not started yet or shutting down: no partitions to report
                assigned = []
            for tp in assigned:
                value = _partition_lag(app, consumer, tp)
                if value is not None:
                    lag.add_metric([tp.topic, str(tp.partition)], value)
        yield lag

    def _tiers(self):
        named = self.tenant_labels
        entries = GaugeMetricFamily("credence_entries", "Entries of the scopes this worker holds, by tier",
                                    labels=["tenant", "kind", "tier"] if named else ["kind", "tier"])
        for labels, n in _summed(self._tally().items(), named):
            entries.add_metric(list(labels), n)
        yield entries

    def _llm(self):
        backend = self.credence.backend
        kind = backend.label.split(" ", 1)[0]  # "rules" / "openai-compatible": never the URL
        for name, value in backend.stats.as_dict().items():
            family = CounterMetricFamily(f"credence_llm_{name}", f"LLM backend {name}", labels=["backend"])
            family.add_metric([kind], value)
            yield family

    def _worker(self):
        credence = self.credence
        for name, value, text in (
            ("credence_busy_scopes", len(credence.busy), "Scopes with work in flight"),
            ("credence_llm_inflight", credence.runner.inflight, "LLM requests running or waiting"),
            ("credence_llm_concurrency_limit", credence.backend.concurrency_limit or 0,
             "Requests the LLM backend lets into flight now (adaptive; 0: unbounded, in process)"),
            ("credence_recall_index_builds", getattr(credence.recall, "builds", 0), "Recall index builds"),
            ("credence_recall_embedded_entries", getattr(credence.recall, "embedded", 0), "Entries embedded"),
        ):
            family = GaugeMetricFamily(name, text)
            family.add_metric([], value)
            yield family


def _summed(counts, named: bool = True) -> list[tuple[tuple, float]]:
    """(labels, n) sorted by labels; without `named`, the first label (the tenant) summed away."""
    total: Counter = Counter()
    for labels, n in counts:
        total[tuple(labels) if named else tuple(labels)[1:]] += n
    return sorted(total.items())


def deliverable_lag(end: int | None, position: int | None, committed: int | None, in_flight: int) -> int | None:
    """Records of one input partition that read_committed can deliver and the worker has not applied.

    ``end`` is what read_committed can deliver up to (the last stable offset); ``position`` the consumer's
    next fetch offset, which aiokafka moves past commit/abort markers as it fetches them; ``in_flight`` the
    records fetched and not yet acknowledged. A marker never becomes a record, so end minus the committed
    offset (the record after the last one applied) would count every marker behind it forever: a
    transactional writer leaves one after each transaction. None: nothing fetched yet, nothing to say.
    """
    if end is None or end < 0:
        return None
    fetched = position if position is not None else (committed or 0)
    return max(0, end - fetched) + in_flight


def _partition_lag(app, consumer, tp) -> int | None:
    tables = getattr(app, "tables", None)
    if tables is not None and tp.topic in tables.changelog_topics:
        # A changelog the worker holds is its own output once restored (it writes it, nothing delivers it
        # back): what is left is what the restore has still to apply.
        recovery = tables.recovery
        return max(0, recovery.active_remaining().get(tp, 0)) if recovery.in_recovery else 0
    state = _safe(_fetch_state, consumer, tp)
    if state is None:
        return None
    in_flight = sum(1 for message in list(consumer._unacked_messages) if message.tp == tp)
    return deliverable_lag(state.lso if state.lso is not None else state.highwater,
                           state.position if state.has_valid_position else None,
                           consumer._committed_offset.get(tp), in_flight)


def _fetch_state(consumer, tp):
    # aiokafka's per-partition fetch state (highwater, last stable offset, position), read without a call
    # into the consumer's thread: a scrape is synchronous and must not wait on the fetcher.
    return consumer._thread._ensure_consumer()._subscription.subscription.assignment.state_value(tp)


def _safe(read, *args):
    try:
        return read(*args)
    except Exception:  # noqa: BLE001 - a partition being revoked has no fetch state
        return None


def llm_latency(registry: CollectorRegistry) -> Histogram:
    return Histogram("credence_llm_latency_seconds", "LLM call latency by task and outcome (result/failed)",
                     ["task", "outcome"], buckets=LATENCY_BUCKETS, registry=registry)


class Metrics:
    """The worker's own registry (several workers may share a process) with the LLM calls' latency, built
    before the runner, which reports each call to `observe`."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._latency = llm_latency(self.registry)

    def observe(self, task: str, outcome: str, seconds: float) -> None:
        self._latency.labels(task, outcome).observe(seconds)


def register(credence: Credence, meter: Metrics) -> CollectorRegistry:
    """Mount GET /metrics: `meter`'s registry and the worker's state, read at each scrape."""
    registry = meter.registry
    registry.register(WorkerCollector(credence))

    @credence.app.page("/metrics")
    async def metrics(web, request):
        # aiohttp refuses a content_type with parameters; the full type goes in as a header.
        return web.bytes(generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    return registry
