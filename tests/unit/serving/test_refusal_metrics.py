"""What the self-containment gate refused reaches /metrics: a counter per stage and reason."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client.core import GaugeMetricFamily

from credence.streams.llm.models import Turn
from credence.streams.llm.rules.backend import RulesBackend
from credence.streams.llm.rules.extraction import extract_facts
from credence.streams.runtime.app import Stats
from credence.streams.serving.metrics import WorkerCollector


def test_refusals_are_summed_per_stage_and_reason_and_exported():
    stats = Stats()
    stats.count_refused({"stage1:first_person": 2, "synthesis:restatement": 1})
    stats.count_refused({"stage1:first_person": 1})
    assert stats.statements_refused == {"stage1:first_person": 3, "synthesis:restatement": 1}
    families = list(WorkerCollector._stats(SimpleNamespace(credence=SimpleNamespace(stats=stats))))
    (refused,) = [f for f in families if f.name == "credence_stats_statements_refused"]
    assert isinstance(refused, GaugeMetricFamily)
    assert {s.labels["key"]: s.value for s in refused.samples} == {"stage1:first_person": 3.0,
                                                                   "synthesis:restatement": 1.0}
    (counter,) = [f for f in families if f.name == "credence_statements_refused"]
    assert {(s.labels["stage"], s.labels["reason"]): s.value for s in counter.samples} == {
        ("stage1", "first_person"): 3.0, ("synthesis", "restatement"): 1.0}


def per_tenant_families(labels: bool):
    stats = Stats()
    stats.turns_by_tenant = {"acme": 3, "globex": 2}
    stats.signals_by_tenant = {"acme": {"confirm": 1}, "globex": {"confirm": 2, "deny": 1}}
    tally = {("acme", "persona", "pending"): 2, ("globex", "persona", "pending"): 1}
    collector = SimpleNamespace(credence=SimpleNamespace(stats=stats), tenant_labels=labels, _tally=lambda: tally)
    families = [*WorkerCollector._stats(collector), *WorkerCollector._per_tenant(collector),
                *WorkerCollector._tiers(collector)]
    return {f.name: {tuple(sorted(s.labels.items())): s.value for s in f.samples} for f in families}


def test_metrics_name_no_tenant_unless_the_operator_asks():
    plain = per_tenant_families(labels=False)
    assert "acme" not in repr(plain) and "globex" not in repr(plain)
    assert plain["credence_turns"] == {(): 5.0}
    assert plain["credence_signals"] == {(("kind", "confirm"),): 3.0, (("kind", "deny"),): 1.0}
    assert plain["credence_entries"] == {(("kind", "persona"), ("tier", "pending")): 3.0}
    named = per_tenant_families(labels=True)
    assert named["credence_turns"] == {(("tenant", "acme"),): 3.0, (("tenant", "globex"),): 2.0}
    assert named["credence_entries"][(("kind", "persona"), ("tenant", "globex"), ("tier", "pending"))] == 1.0


def test_the_rules_backends_own_drops_are_added_to_the_steps_refusals():
    """The rules backend's own drops: with the default backend a statement it cannot word alone never
    reaches the step's gate; /metrics still counts it, under the label the step would give it."""
    backend = RulesBackend()
    before = backend.refused().get("stage1:dangling_reference", 0)
    assert extract_facts([Turn(id="t1", role="user", text="i love her cooking", ts="2026-01-01T00:00:00Z")]) == []
    stats = Stats()
    stats.count_refused({"stage1:dangling_reference": 2, "synthesis:restatement": 1})
    families = list(WorkerCollector._stats(SimpleNamespace(credence=SimpleNamespace(stats=stats, backend=backend))))
    (counter,) = [f for f in families if f.name == "credence_statements_refused"]
    samples = {(s.labels["stage"], s.labels["reason"]): s.value for s in counter.samples}
    assert samples[("stage1", "dangling_reference")] == 2 + before + 1
    assert samples[("synthesis", "restatement")] == 1
