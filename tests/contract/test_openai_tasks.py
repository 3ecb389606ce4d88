"""Each task through the openai backend matches the rules answer, and every request passes the
server's checks (model, static prefix, strict schema, temperature, max_tokens, Stage-2 caps)."""

import asyncio

import pytest

from credence.errors import LLMError
from credence.streams.llm import make_backend
from credence.streams.llm.models import Observation, ReflectionDraft
from credence.streams.llm.rules.backend import RulesBackend


async def _all_tasks(backend, turns, observations):
    facts = await backend.extract_facts(turns)
    surfaced = observations[:3]
    return {
        "facts": facts,
        "classify": await backend.classify(facts, observations),
        "rerank": await backend.rerank(facts, observations, 5),
        "feedback": await backend.check_feedback("no, I don't like tea", surfaced),
        "target": await backend.target_check(["hello", "no", "I never liked coffee"], observations),
        "synthesize": await backend.synthesize(facts),
        "merge": await backend.merge_decision(
            ReflectionDraft(text="The user loves coffee.", subject="coffee", source_fact_ids=[facts[0].id]),
            observations,
        ),
        "create": await backend.merge_decision(
            ReflectionDraft(text="The user owns a boat.", subject="boat", source_fact_ids=[facts[0].id]),
            observations,
        ),
    }


def _run(settings, turns, observations):
    async def go():
        backend = make_backend(settings)
        try:
            return await _all_tasks(backend, turns, observations), backend.stats
        finally:
            await backend.aclose()

    return asyncio.run(go())


def test_every_task_matches_the_rules_answer_and_passes_the_checks(
    openai_server_factory, llm_settings_factory, fifty_turns, observations
):
    server = openai_server_factory()
    results, stats = _run(llm_settings_factory(server), fifty_turns[:10], observations)
    expected = asyncio.run(_all_tasks(RulesBackend(), fifty_turns[:10], observations))
    assert results == expected
    assert server.violations == []
    assert server.outcomes() == {"ok": 8}
    assert (stats.calls, stats.retries, stats.failures) == (8, 0, 0)
    assert stats.prompt_tokens > 0 and stats.completion_tokens > 0


def test_api_key_and_a_wrong_model_are_refused_without_retrying(openai_server_factory, llm_settings_factory):
    server = openai_server_factory(model="served-model")
    settings = llm_settings_factory(server, model="other-model", api_key="secret")

    async def go():
        backend = make_backend(settings)
        try:
            await backend.target_check(["no"], [Observation(id="o1", text="The user likes tea.", subject="tea")])
        finally:
            await backend.aclose()
        return backend

    with pytest.raises(LLMError, match="HTTP 400.*CREDENCE_LLM__MODEL"):
        asyncio.run(go())
    assert server.outcomes() == {"violation": 1}
    assert "other-model" in server.violations[0]


@pytest.mark.parametrize("task", ["stage1", "stage2", "rerank", "feedback", "target", "synthesis", "merge"])
def test_output_naming_an_unknown_id_is_never_accepted(
    openai_server_factory, llm_settings_factory, fifty_turns, observations, task
):
    server = openai_server_factory(failure_rate=1.0, failure_kinds=["unknown_id"])
    settings = llm_settings_factory(server, max_retries=2)
    facts = RulesBackend().extract_facts  # rules facts, so only the task under test goes to the server

    async def go():
        backend = make_backend(settings)
        known = await facts(fifty_turns[:5])
        draft = ReflectionDraft(text="The user loves coffee.", subject="coffee", source_fact_ids=[known[0].id])
        calls = {
            "stage1": lambda: backend.extract_facts(fifty_turns[:5]),
            "stage2": lambda: backend.classify(known, observations),
            "rerank": lambda: backend.rerank(known, observations, 3),
            "feedback": lambda: backend.check_feedback("yes", observations[:2]),
            "target": lambda: backend.target_check(["no"], observations),
            "synthesis": lambda: backend.synthesize(known),
            "merge": lambda: backend.merge_decision(draft, observations),
        }
        try:
            await calls[task]()
        finally:
            await backend.aclose()

    with pytest.raises(LLMError, match="unknown"):
        asyncio.run(go())
    assert server.outcomes() == {"unknown_id": 3}
    assert server.violations == []
