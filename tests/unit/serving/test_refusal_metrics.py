"""What the self-containment gate refused reaches /metrics: a counter per stage and reason."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client.core import GaugeMetricFamily

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
