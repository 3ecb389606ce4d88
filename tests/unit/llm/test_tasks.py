"""The one task registry: every name the scope requests has a payload model, prompt modules, a runner
and a result handler, and nothing else spells the names."""

import asyncio

import pytest

from credence.errors import LLMError
from credence.streams.llm import prompts
from credence.streams.llm.rules.backend import RulesBackend
from credence.streams.llm.tasks import TASKS
from credence.streams.runtime.runner import execute
from credence.streams.scope import results


def test_every_task_has_its_result_handler_and_no_handler_lacks_a_task():
    assert set(results.HANDLERS) == set(TASKS)
    for name, task in TASKS.items():
        assert results.HANDLERS[name].__name__ == task.handler


def test_every_prompt_module_belongs_to_a_task():
    used = {m.NAME for task in TASKS.values() for m in task.prompts}
    assert used == set(prompts.TASKS)


def test_a_payload_that_does_not_validate_is_a_clear_error():
    with pytest.raises(LLMError, match="feedback: the request payload does not validate"):
        asyncio.run(execute(RulesBackend(), "feedback", {"surfaced": "not a list"}))


def test_requests_saved_before_the_context_fields_still_run():
    """A request in a scope's state from an older worker lacks ai_text/related/score: defaults apply."""
    obs = {"id": "r1", "text": "The user likes tea.", "subject": "tea"}
    fact = {"id": "f1", "text": "The user likes tea.", "subject": "tea", "importance": 6,
            "polarity": "positive", "source_turn_ids": ["t1"]}
    run = lambda task, p: asyncio.run(execute(RulesBackend(), task, p))  # noqa: E731
    assert run("feedback", {"reply_text": "yes", "surfaced": [obs]}) == {"decisions": [{"id": "r1", "decision": "confirm"}]}
    assert run("target", {"messages": ["no, not tea"], "observations": [obs]}) == {"ids": ["r1"]}
    assert len(run("synthesis", {"facts": [fact]})["drafts"]) == 1
    out = run("promotion", {"entry_id": "r9", "ticket": {"version": 1, "attempt": 1},
                            "reflection": {"text": "The user hates tea.", "subject": "tea", "source_fact_ids": ["f1"]},
                            "personas": [obs]})
    assert out["decision"]["action"] == "reject"  # no scores: the existing entry stands
