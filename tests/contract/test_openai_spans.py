"""The OpenAI-compatible backend's span per call (OpenTelemetry GenAI conventions): model, operation, task,
this call's own tokens in and out (not the backend's totals of concurrent calls), its retries and its
outcome, and never the prompt or the answer."""

import asyncio

from credence.errors import LLMUnavailable
from credence.streams.llm.factory import make_backend
from credence.streams.llm.prompts import stage1_extraction
from tests.support.tracing import in_memory_spans


def _spans(settings, turns_batches):
    async def run():
        backend = make_backend(settings)
        try:
            return await asyncio.gather(*(backend.ask(stage1_extraction, b) for b in turns_batches), return_exceptions=True)
        finally:
            await backend.aclose()

    with in_memory_spans() as exporter:
        results = asyncio.run(run())
        return results, [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]


def test_each_call_is_a_span_with_its_own_tokens_and_retries(openai_server_factory, llm_settings_factory,
                                                             fifty_turns):
    server = openai_server_factory(down_for=1)  # the first request is answered 503: one call retries once
    settings = llm_settings_factory(server)
    batches = [fifty_turns[i:i + 2] for i in range(0, 8, 2)]
    results, spans = _spans(settings, batches)
    assert not [r for r in results if isinstance(r, BaseException)]
    assert len(spans) == len(batches)
    for span in spans:
        attrs = span.attributes
        assert span.name == f"chat {server.model}" and attrs["gen_ai.request.model"] == server.model
        assert attrs["gen_ai.operation.name"] == "chat" and attrs["credence.llm.task"] == "stage1_extraction"
        assert attrs["credence.llm.outcome"] == "ok"
        assert 0 < attrs["gen_ai.usage.input_tokens"] < 2_000 and attrs["gen_ai.usage.output_tokens"] > 0
    assert sorted(s.attributes["credence.llm.retries"] for s in spans) == [0, 0, 0, 1]
    texts = [t.text for t in fifty_turns]
    assert not [(k, v) for s in spans for k, v in s.attributes.items() if any(t in str(v) for t in texts)]


def test_an_unavailable_server_is_an_error_span(openai_server_factory, llm_settings_factory, fifty_turns):
    server = openai_server_factory(down=True)
    results, (span,) = _spans(llm_settings_factory(server, max_retries=1), [fifty_turns[:2]])
    assert isinstance(results[0], LLMUnavailable)
    assert span.attributes["credence.llm.outcome"] == "unavailable" and span.attributes["credence.llm.retries"] == 1
    assert span.attributes["error.type"] == "LLMUnavailable" and not span.status.is_ok


def test_the_span_names_the_tasks_model_tier(openai_server_factory, llm_settings_factory, fifty_turns):
    server = openai_server_factory(extra_models=["small-model"])
    settings = llm_settings_factory(server, models={"stage1_extraction": "small-model"})
    _, (span,) = _spans(settings, [fifty_turns[:2]])
    assert span.name == "chat small-model" and span.attributes["gen_ai.request.model"] == "small-model"
