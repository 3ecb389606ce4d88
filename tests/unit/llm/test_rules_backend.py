import asyncio
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credence.config import load_settings
from credence.config.llm import LLMSettings
from credence.errors import ConfigError
from credence.streams.llm.factory import make_backend
from credence.streams.llm.models import Observation, ReflectionDraft, Turn
from credence.streams.llm.prompts import (
    candidate_rerank,
    merge_decision,
    negative_keyword_target,
    reflection_synthesis,
    stage1_extraction,
    stage2_classification,
    surfaced_feedback,
)
from credence.streams.llm.prompts.base import MAX_SUBJECT, MAX_TEXT
from credence.streams.llm.rules.backend import RulesBackend
from credence.tables.origin import fact_id


def test_rules_is_the_default_and_labels_itself_a_fallback(caplog):
    with caplog.at_level(logging.WARNING):
        backend = make_backend(LLMSettings())
    assert isinstance(backend, RulesBackend)
    assert "offline fallback" in backend.label
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "offline fallback" in warnings[0].getMessage()


def test_openai_backend_needs_a_model_name():
    with pytest.raises(ConfigError, match="CREDENCE_LLM__MODEL"):
        make_backend(LLMSettings(backend="openai"))


def test_environment_selects_the_openai_backend(monkeypatch):
    monkeypatch.setenv("CREDENCE_LLM__BACKEND", "openai")
    monkeypatch.setenv("CREDENCE_LLM__BASE_URL", "http://vllm:8000/v1")
    monkeypatch.setenv("CREDENCE_LLM__MODEL", "served-model")
    monkeypatch.setenv("CREDENCE_LLM__MAX_CONCURRENCY", "3")
    settings = load_settings().llm
    assert (settings.backend, settings.base_url, settings.model, settings.max_concurrency) == (
        "openai", "http://vllm:8000/v1", "served-model", 3,
    )

    async def label() -> str:
        backend = make_backend(settings)
        try:
            return backend.label
        finally:
            await backend.aclose()

    assert asyncio.run(label()) == "openai-compatible (served-model at http://vllm:8000/v1)"


def test_every_task_runs_offline_and_is_counted(turn_factory):
    async def run() -> RulesBackend:
        backend = RulesBackend()
        facts = await backend.ask(stage1_extraction, [turn_factory("I love coffee")])
        coffee = Observation(id="o1", text="The user likes coffee.", subject="coffee")
        assert [c.relation for c in await backend.ask(stage2_classification, facts, [coffee], fit=backend.budget)] == ["reinforce"]
        assert await backend.ask(candidate_rerank, facts, [coffee], 3, fit=backend.budget) == ["o1"]
        assert [d.decision for d in await backend.ask(surfaced_feedback, "yes", [coffee])] == ["confirm"]
        assert (await backend.ask(negative_keyword_target, ["no, not coffee"], [coffee])).ids == ["o1"]
        [draft] = await backend.ask(reflection_synthesis, facts)
        assert draft == ReflectionDraft(text="The user loves coffee.", subject="coffee", source_fact_ids=[facts[0].id])
        assert (await backend.ask(merge_decision, draft, [coffee])).action == "merge"
        await backend.aclose()
        return backend

    backend = asyncio.run(run())
    assert backend.stats.as_dict() == {
        "calls": 7, "retries": 0, "failures": 0, "prompt_tokens": 0, "completion_tokens": 0, "unknown_ids": 0,
    }


def test_rules_classify_keeps_to_the_stage2_budget(turn_factory):
    async def run() -> list[str]:
        backend = RulesBackend(prompt_cap=1300)
        facts = await backend.ask(stage1_extraction, [turn_factory("I love coffee")])
        many = [Observation(id=f"o{i}", text="The user likes coffee. " * 20, subject="coffee") for i in range(50)]
        return [c.observation_id for c in await backend.ask(stage2_classification, facts, many, fit=backend.budget)]

    kept = asyncio.run(run())
    assert 0 < len(kept) < 50
    assert kept == [f"o{i}" for i in range(len(kept))]  # the best-ranked survive


def test_rules_rerank_keeps_to_the_same_budget(turn_factory):
    async def run() -> list[str]:
        backend = RulesBackend(prompt_cap=900)
        facts = await backend.ask(stage1_extraction, [turn_factory("I love coffee")])
        many = [Observation(id=f"o{i}", text="The user likes coffee. " * 20, subject="coffee") for i in range(50)]
        return await backend.ask(candidate_rerank, facts, many, 40, fit=backend.budget)

    kept = asyncio.run(run())
    assert 0 < len(kept) < 40 and kept == [f"o{i}" for i in range(len(kept))]


# -- in process as on the wire: every answer within the task's wire bounds ---------------------------

_LONG = "I love the extraordinarily magnificent incomprehensibilities of internationalization"
_phrase = st.lists(st.text(st.characters(categories=["L"]), min_size=8, max_size=20), min_size=1, max_size=9)
_statement = st.one_of(st.text(max_size=300), st.builds("I love {}. I hate {}".format, _phrase.map(" ".join),
                                                        _phrase.map(" ".join)))


def _within_wire_bounds(facts: list, drafts: list) -> None:
    for fact in facts:
        assert len(fact.subject) <= MAX_SUBJECT and len(fact.text) <= MAX_TEXT
        assert fact.id == fact_id(fact.source_turn_ids, fact.subject, fact.polarity, fact.text)
    assert len(facts) <= stage1_extraction.MAX_FACTS
    assert all(len(d.subject) <= MAX_SUBJECT and len(d.text) <= MAX_TEXT for d in drafts)


def test_a_long_subject_is_cut_to_the_wire_bound_in_process(turn_factory):
    async def run():
        backend = RulesBackend()
        facts = await backend.ask(stage1_extraction, [turn_factory(_LONG)])
        return facts, await backend.ask(reflection_synthesis, facts)

    facts, drafts = asyncio.run(run())
    assert [len(f.subject) for f in facts] == [MAX_SUBJECT]
    _within_wire_bounds(facts, drafts)
    assert drafts[0].source_fact_ids == [facts[0].id]


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(_statement, min_size=1, max_size=30))
def test_rules_answers_keep_to_the_wire_bounds(texts):
    turns = [Turn(id=f"t{i}", role="user", text=t, ts="2026-01-01T00:00:00Z") for i, t in enumerate(texts)]

    async def run():
        backend = RulesBackend()
        facts = await backend.ask(stage1_extraction, turns)
        drafts = await backend.ask(reflection_synthesis, facts)
        merges = [await backend.ask(merge_decision, d, []) for d in drafts]
        return facts, drafts, merges

    facts, drafts, merges = asyncio.run(run())
    _within_wire_bounds(facts, drafts)
    assert len(drafts) <= reflection_synthesis.MAX_REFLECTIONS
    assert all(len(m.text) <= MAX_TEXT for m in merges)
