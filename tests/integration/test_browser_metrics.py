"""A real worker's /metrics (Prometheus text) and /status embeddings field, checked against what the
worker itself reports elsewhere (/scopes, /scope views, the journal topic), and its /browser assets."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from credence.errors import CredenceError
from credence.streams.llm.embeddings import extra_installed
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.pipeline import (
    discard,
    flush_and_wait_idle,
    pipeline_settings,
    produce_lines,
    sample_lines,
    scope_views,
    scopes_of,
    topic_values,
    valid_turn_counts,
    wait_turns,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SCOPES = ["acme/alice/tutor", "globex/carol/coach"]


def scrape(worker: WorkerProcess) -> dict[str, list]:
    response = httpx.get(worker.url + "/metrics", timeout=10.0)
    response.raise_for_status()
    assert response.headers["content-type"].startswith("text/plain")
    return {f.name: f.samples for f in text_string_to_metric_families(response.text)}


def by_labels(samples, name: str, *labels: str) -> dict:
    return {tuple(s.labels[label] for label in labels): s.value for s in samples if s.name == name}


@pytest.fixture(scope="module")
def worker(kafka_bootstrap, tmp_path_factory):
    """One worker for the module, idle after the sample: the tests only read it (no recall, no input)."""
    # Series per tenant, as an operator asks for them (CREDENCE_API__METRICS_TENANT_LABELS; off by default,
    # tests/integration/test_api_door.py).
    root = tmp_path_factory.mktemp("metrics")
    settings = pipeline_settings(kafka_bootstrap, root, f"m{uuid.uuid4().hex[:10]}",
                                 api={"metrics_tenant_labels": True})
    lines = sample_lines(SCOPES)
    asyncio.run(produce_lines(kafka_bootstrap, settings, lines))
    process = WorkerProcess(settings, kafka_bootstrap, root / "worker.log").start()
    try:
        wait_turns(process, valid_turn_counts(lines))
        flush_and_wait_idle(process, kafka_bootstrap, settings, scopes_of(lines))
        yield process, settings, lines
    finally:
        discard(process)


def test_metrics_agree_with_the_worker_and_the_journal(worker, kafka_bootstrap):
    process, settings, lines = worker
    metrics = scrape(process)
    turns = Counter()
    for scope, n in valid_turn_counts(lines).items():
        turns[scope.split("/")[0]] += n
    assert by_labels(metrics["credence_turns"], "credence_turns_total", "tenant") == {
        (t,): float(n) for t, n in turns.items()}

    journal = topic_values(kafka_bootstrap, settings, "evidence")
    signals = Counter((e["tenant"], e["cause"].rsplit(":", 1)[-1]) for e in journal if e["event"] == "signal")
    assert signals, "the sample should produce evidence signals"
    assert by_labels(metrics["credence_signals"], "credence_signals_total", "tenant", "kind") == {
        k: float(n) for k, n in signals.items()}

    tiers = Counter()
    for scope, view in scope_views(process, SCOPES).items():
        for entry in view["entries"]:
            tiers[(scope.split("/")[0], entry["kind"], entry["tier"])] += 1
    assert tiers and by_labels(metrics["credence_entries"], "credence_entries", "tenant", "kind", "tier") == {
        k: float(n) for k, n in tiers.items()}

    status = process.get("/status")
    for name, value in status["stats"].items():
        if isinstance(value, int):  # every numeric Stats field, without a list kept here
            assert metrics[f"credence_stats_{name}"][0].value == value
    calls = status["llm"]["stats"]["calls"]
    latency = by_labels(metrics["credence_llm_latency_seconds"], "credence_llm_latency_seconds_count",
                        "task", "outcome")
    assert {task for task, _ in latency} >= {"stage1", "synthesis"}
    assert calls > 0 and all(n > 0 for n in latency.values())
    assert sum(n for (_, outcome), n in latency.items() if outcome == "failed") == status["llm"]["stats"]["failures"]
    assert metrics["credence_dead_lettered_records"][0].value == status["stats"]["records_rejected"]
    assert all(s.labels["backend"] == "rules" for s in metrics["credence_llm_calls"])
    # In process, nothing bounds the calls: null in /status, 0 in /metrics (a model server's is adaptive).
    assert status["llm"]["concurrency_limit"] is None
    assert metrics["credence_llm_concurrency_limit"][0].value == 0


def test_consumer_lag_drains_to_zero_on_every_assigned_partition(worker):
    """Idle and caught up, every assigned partition shows lag 0, the changelogs included: the worker writes
    them itself (in transactions, the default), so once restored nothing is left to deliver to it; before,
    each showed the highwater of its last restore fetch (nothing is ever committed for a changelog)."""
    process, settings, _ = worker
    last = {}

    def lag():
        samples = scrape(process)["credence_consumer_lag"]
        last.update(lags := {(s.labels["topic"], s.labels["partition"]): s.value for s in samples})
        inputs = {p for t, p in lags if t == settings.topic("turns")}
        changelogs = {t for t, _ in lags if t.endswith("-changelog")}
        return len(inputs) == settings.topic_partitions and changelogs and not any(lags.values())

    assert settings.state.transactions
    try:
        wait_until(lag, 60, "every partition's lag to drain to 0")
    except CredenceError:
        pytest.fail(f"lag never reached 0 on every partition; last scrape: {last}")


def test_status_says_which_recall_is_on_and_the_browser_assets_are_served(worker):
    process, _, _ = worker
    embeddings = process.get("/status")["embeddings"]
    assert embeddings["installed"] == extra_installed()
    assert embeddings["recall"] == ("bm25+cosine" if extra_installed() else "bm25")
    assert embeddings["stage2_pre_rank"] == "bm25" and embeddings["model_loaded"] is False  # lazy
    page = httpx.get(process.url + "/browser", timeout=5.0)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert '<script src="/browser/browser.js"' in page.text
    script = httpx.get(process.url + "/browser/browser.js", timeout=5.0)
    assert script.headers["content-type"].startswith("text/javascript") and "fetch(" in script.text
    assert "method:" not in script.text  # read-only: the page only ever GETs
