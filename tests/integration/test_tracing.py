"""Traces across the stream, on a real worker and broker: the worker exports OTLP over HTTP (the standard
OTEL_* variables) to a collector the test runs; one trace goes from `POST …/turns` (continuing the
caller's traceparent) through the worker's steps, the Stage-1 call to an OpenAI-compatible server and the
result topics to the evidence event; no span attribute holds a key, a turn's text or an entry's text."""

from __future__ import annotations

import uuid

import httpx
import pytest

from credence.config.llm import LLMSettings
from credence.config.pipeline import PipelineSettings
from credence.streams.llm.prompts import stage1_extraction
from credence.streams.ops.process import WorkerProcess, wait_until
from tests.support.api import add_tenant, client
from tests.support.openai_server import OpenAICompatibleServer
from tests.support.otlp_collector import Collector

pytestmark = pytest.mark.integration

TEXT = "I love green tea and I walk my dog Biscuit every morning."
CALLER_TRACE, CALLER_SPAN = uuid.uuid4().hex, uuid.uuid4().hex[:16]


def ancestors(span, by_id) -> list[str]:
    names, seen = [], set()
    while span.parent_id and span.parent_id in by_id and span.parent_id not in seen:
        seen.add(span.parent_id)
        span = by_id[span.parent_id]
        names.append(span.name)
    return names


def strings(value) -> list[str]:
    return [s for v in value for s in strings(v)] if isinstance(value, list) else [str(value)]


def test_one_trace_from_the_http_turn_to_the_evidence_event(settings_factory, kafka_bootstrap, tmp_path):
    with OpenAICompatibleServer() as llm_server, Collector() as collector:
        llm = LLMSettings(backend="openai", base_url=llm_server.base_url, model=llm_server.model, timeout_s=30)
        settings = settings_factory(topic_partitions=2, llm=llm, pipeline=PipelineSettings(
            stage1_max_batch=1, ticks_advance_clock=False, tick_interval_seconds=0))
        key = add_tenant(kafka_bootstrap, settings, "acme")
        env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
               "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_SERVICE_NAME": "credence-test"}
        worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "worker.log", extra_env=env).start()
        try:
            turn = {"user": "alice", "character": "barista", "turn_id": "t-1", "role": "user", "text": TEXT,
                    "ts": "2026-05-01T10:00:00Z"}
            response = httpx.post(f"{worker.url}/v1/tenants/acme/turns", json={"turns": [turn]}, timeout=10,
                                  headers={"Authorization": f"Bearer {key}",
                                           "traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})
            assert response.status_code == 202, response.text

            def evidence_in_trace():
                return [s for s in collector.snapshot()
                        if s.trace_id == CALLER_TRACE and s.name == "credence.emit evidence"]

            wait_until(evidence_in_trace, 90, f"an evidence event in the caller's trace (log: {worker.log_path})")
            with client(worker, key, "acme") as api:
                entries = api.entries("alice", "barista").entries
        finally:
            worker.stop()
    spans = collector.snapshot()
    trace = [s for s in spans if s.trace_id == CALLER_TRACE]
    by_id = {s.span_id: s for s in trace}
    (server,) = [s for s in trace if s.name == "POST /v1/tenants/{tenant}/turns"]
    assert server.parent_id == CALLER_SPAN and server.kind == 2  # SERVER, continuing the caller's span
    assert server.attributes["http.response.status_code"] == 202
    (chat,) = [s for s in trace if s.attributes.get("credence.llm.task") == stage1_extraction.NAME
               and s.name.startswith("chat ")]
    assert chat.attributes["gen_ai.request.model"] == llm_server.model
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.usage.input_tokens"] > 0 and chat.attributes["gen_ai.usage.output_tokens"] > 0
    assert chat.attributes["credence.llm.outcome"] == "ok" and chat.attributes["credence.llm.retries"] == 0
    chain = ancestors(chat, by_id)
    assert server.name in chain and "credence.step turns" in chain, chain
    evidence = [s for s in trace if s.name == "credence.emit evidence"]
    assert all(server.name in ancestors(e, by_id) for e in evidence)
    assert any("credence.step facts" in ancestors(e, by_id) for e in evidence)  # carried back by the result
    # nothing secret or personal in any attribute of any span
    assert entries
    forbidden = [key, TEXT, *{e.text for e in entries}]
    found = [(s.name, k, v) for s in spans for k, value in s.attributes.items() for v in strings(value)
             if any(f and f in v for f in forbidden)]
    assert not found, found
