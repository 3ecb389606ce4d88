"""runner.execute: an LLM request payload, as the scope builds it, becomes a result through the backend."""

from __future__ import annotations

import asyncio

import pytest

from credence.errors import CredenceError
from credence.streams.llm.rules.backend import RulesBackend
from credence.streams.llm.runner import execute


def run(task: str, payload: dict) -> dict:
    return asyncio.run(execute(RulesBackend(), task, payload))


def test_stage2_with_a_rerank_limit_classifies_only_the_reranked_observations():
    fact = {"id": "f1", "text": "The user loves hiking.", "subject": "hiking", "importance": 8,
            "polarity": "positive", "source_turn_ids": ["t1"], "origin": "user"}
    obs = [{"id": f"o{n}", "text": "The user loves hiking.", "subject": "hiking"} for n in range(3)]
    out = run("stage2", {"facts": [fact], "observations": obs, "rerank_limit": 2})
    assert [c["observation_id"] for c in out["classifications"]] == ["o0", "o1"]
    out = run("stage2", {"facts": [fact], "observations": obs, "rerank_limit": None})
    assert [c["observation_id"] for c in out["classifications"]] == ["o0", "o1", "o2"]


def test_stage2_without_observations_classifies_nothing():
    fact = {"id": "f1", "text": "The user loves hiking.", "subject": "hiking", "importance": 8,
            "polarity": "positive", "source_turn_ids": ["t1"]}
    assert run("stage2", {"facts": [fact], "observations": [], "rerank_limit": None}) == {"classifications": []}


def test_promotion_payload_becomes_a_merge_decision():
    out = run("promotion", {"entry_id": "r1", "ticket": {"version": 3, "attempt": 1},
                            "reflection": {"text": "The user loves hiking.", "subject": "hiking",
                                           "source_fact_ids": ["f1"]},
                            "personas": [{"id": "p1", "text": "The user enjoys hiking.", "subject": "hiking"}]})
    assert out["decision"]["action"] == "merge" and out["decision"]["target_id"] == "p1"


def test_unknown_task_is_an_error():
    with pytest.raises(CredenceError, match="unknown LLM task"):
        run("horoscope", {})
