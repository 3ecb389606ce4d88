"""Traces across the stream, on a real worker and broker: the worker exports OTLP over HTTP (the standard
OTEL_* variables) to a collector the test runs. One trace goes from `POST …/turns` (continuing the
caller's traceparent) through the worker's steps, the Stage-1 call to an OpenAI-compatible server and the
result topics to the evidence event; the MCP tool `add_turns` and `credence replay` start traces the
worker's steps continue; no span attribute holds a key, a turn's text or an entry's text."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

from credence.config.llm import LLMSettings
from credence.config.pipeline import PipelineSettings
from credence.streams.llm.prompts import stage1_extraction
from credence.streams.ops.replay import replay
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.api import add_tenant, client, mcp_session
from tests.support.openai_server import OpenAICompatibleServer
from tests.support.otlp_collector import Collector
from tests.support.pipeline import discard
from tests.support.tracing import in_memory_spans

pytestmark = pytest.mark.integration

TEXTS = {"alice": "I love green tea and I walk my dog Biscuit every morning.",
         "bob": "My sister Ingrid lives in Lisbon and I visit her every spring.",
         "carol": "I play the cello in a quartet on Thursday evenings.",
         "dave": "I love black coffee and I ride my bike Pixel every evening."}


def turn(user: str) -> dict:
    return {"user": user, "character": "barista", "turn_id": f"{user}-1", "role": "user", "text": TEXTS[user],
            "ts": "2026-05-01T10:00:00Z"}


@pytest.fixture(scope="module")
def traced(kafka_bootstrap, tmp_path_factory, settings_factory_module):
    root = tmp_path_factory.mktemp("tracing")
    with OpenAICompatibleServer() as llm_server, Collector() as collector:
        llm = LLMSettings(backend="openai", base_url=llm_server.base_url, model=llm_server.model, timeout_s=30)
        settings = settings_factory_module(root, llm=llm, pipeline=PipelineSettings(
            stage1_max_batch=1, ticks_advance_clock=False, tick_interval_seconds=0))
        key = add_tenant(kafka_bootstrap, settings, "acme")
        env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
               "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_SERVICE_NAME": "credence-test"}
        worker = WorkerProcess(settings, kafka_bootstrap, root / "worker.log", extra_env=env).start()
        try:
            yield worker, settings, key, collector, llm_server.model
        finally:
            discard(worker)


@pytest.fixture(scope="module")
def settings_factory_module(kafka_bootstrap):
    from tests.support.pipeline import pipeline_settings

    def make(root, **overrides):
        return pipeline_settings(kafka_bootstrap, root, f"trc{uuid.uuid4().hex[:8]}", **overrides)
    return make


def ancestors(span, by_id) -> list[str]:
    names, seen = [], set()
    while span.parent_id and span.parent_id in by_id and span.parent_id not in seen:
        seen.add(span.parent_id)
        span = by_id[span.parent_id]
        names.append(span.name)
    return names


def strings(value) -> list[str]:
    return [s for v in value for s in strings(v)] if isinstance(value, list) else [str(value)]


def wait_for_span(collector, worker, what, match):
    return wait_until(lambda: [s for s in collector.snapshot() if match(s)], 90,
                      f"{what} (log: {worker.log_path})")


def test_one_trace_from_the_http_turn_to_the_evidence_event(traced):
    worker, settings, key, collector, model = traced
    caller_trace, caller_span = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    response = httpx.post(f"{worker.url}/v1/tenants/acme/turns", json={"turns": [turn("alice")]}, timeout=10,
                          headers={"Authorization": f"Bearer {key}",
                                   "traceparent": f"00-{caller_trace}-{caller_span}-01"})
    assert response.status_code == 202, response.text
    wait_for_span(collector, worker, "an evidence event in the caller's trace",
                  lambda s: s.trace_id == caller_trace and s.name == "credence.emit evidence")
    trace = [s for s in collector.snapshot() if s.trace_id == caller_trace]
    by_id = {s.span_id: s for s in trace}
    (server,) = [s for s in trace if s.name == "POST /v1/tenants/{tenant}/turns"]
    assert server.parent_id == caller_span and server.kind == 2  # SERVER, continuing the caller's span
    assert server.attributes["http.response.status_code"] == 202
    (chat,) = [s for s in trace if s.attributes.get("credence.llm.task") == stage1_extraction.NAME
               and s.name.startswith("chat ")]
    assert chat.attributes["gen_ai.request.model"] == model and chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.usage.input_tokens"] > 0 and chat.attributes["gen_ai.usage.output_tokens"] > 0
    assert chat.attributes["credence.llm.outcome"] == "ok" and chat.attributes["credence.llm.retries"] == 0
    chain = ancestors(chat, by_id)
    assert server.name in chain and "credence.step turns" in chain, chain
    evidence = [s for s in trace if s.name == "credence.emit evidence"]
    assert all(server.name in ancestors(e, by_id) for e in evidence)
    assert any("credence.step facts" in ancestors(e, by_id) for e in evidence)  # carried back by the result


def test_the_mcp_tool_starts_a_trace_the_step_continues(traced):
    worker, settings, key, collector, _ = traced

    async def add():
        async with mcp_session(worker.url, key) as session:
            return await session.call_tool("add_turns", {"turns": [turn("bob")]})

    assert not asyncio.run(add()).is_error
    (tool,) = wait_for_span(collector, worker, "the add_turns span", lambda s: s.name == "credence.mcp add_turns")
    steps = wait_for_span(collector, worker, "a step in the tool's trace",
                          lambda s: s.trace_id == tool.trace_id and s.name == "credence.step turns")
    by_id = {s.span_id: s for s in collector.snapshot() if s.trace_id == tool.trace_id}
    assert tool.name in ancestors(steps[0], by_id)


def test_a_replay_starts_a_trace_the_step_continues(traced, tmp_path):
    worker, settings, key, collector, _ = traced
    path = tmp_path / "turns.jsonl"
    path.write_text('{"v": 1, "tenant": "acme", ' + str(turn("carol"))[1:].replace("'", '"') + "\n")
    with in_memory_spans() as exporter:
        assert asyncio.run(replay(path, worker.bootstrap, settings, progress=False)) == 1
        (root,) = [s for s in exporter.get_finished_spans() if s.name == "credence.replay"]
    trace_id = f"{root.context.trace_id:032x}"
    wait_for_span(collector, worker, "a step in the replay's trace",
                  lambda s: s.trace_id == trace_id and s.name == "credence.step turns")


def test_no_attribute_holds_a_key_or_text(traced):
    worker, settings, key, collector, _ = traced
    caller_trace = uuid.uuid4().hex
    response = httpx.post(f"{worker.url}/v1/tenants/acme/turns", json={"turns": [turn("dave")]}, timeout=10,
                          headers={"Authorization": f"Bearer {key}",
                                   "traceparent": f"00-{caller_trace}-{uuid.uuid4().hex[:16]}-01"})
    assert response.status_code == 202, response.text
    wait_for_span(collector, worker, "dave's evidence event",
                  lambda s: s.trace_id == caller_trace and s.name == "credence.emit evidence")
    with client(worker, key, "acme") as api:
        entries = [e for user in TEXTS for e in api.entries(user, "barista").entries]
    assert any(e.text for e in entries)
    forbidden = [key, *TEXTS.values(), *{e.text for e in entries}]
    spans = collector.snapshot()
    found = [(s.name, k, v) for s in spans for k, value in s.attributes.items() for v in strings(value)
             if any(f and f in v for f in forbidden)]
    assert spans and not found, found
