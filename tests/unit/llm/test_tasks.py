"""The one task registry: every task name is a `TaskName` whose value is the string old records carry; each
task has a payload model, prompt modules, a runner and an output model (credence.streams.llm.tasks) and, in
the scope, one payload builder and one result handler (credence.streams.scope.results.SCOPE_TASKS), bound as
objects; and no product module spells a task name as a string where it names a task."""

import ast
import asyncio
from pathlib import Path

import orjson
import pytest

from credence.errors import LLMError
from credence.streams.llm import prompts
from credence.streams.llm.rules.backend import RulesBackend
from credence.streams.llm.runner import execute
from credence.streams.llm.tasks import TASKS
from credence.streams.scope import requests, results
from credence.streams.scope.scope_state import Request
from credence.streams.scope.tasks import TaskName
from tests.support.openai_answers import least_value

ROOT = Path(__file__).resolve().parents[3]
# Stored in scope state (requests, request ids) and on credence.control/credence.facts: never renamed.
WIRE_NAMES = {"stage1", "stage2", "synthesis", "feedback", "target", "promotion", "correction",
              "refine", "summarise"}


def test_task_names_are_the_strings_stored_records_carry():
    assert {str(name) for name in TaskName} == WIRE_NAMES
    assert all(TaskName(value) == value for value in WIRE_NAMES)  # a saved request reads back as its member


def test_a_request_saved_as_a_string_reads_back_as_its_member_and_is_stored_the_same():
    saved = {"id": "promotion-7", "task": "promotion", "payload": {}, "issued_at": "2026-03-02T12:00:00+00:00",
             "boot": "b", "failures": 0, "failed": False}
    req = Request.from_dict(saved)
    assert req.task is TaskName.PROMOTION
    assert orjson.dumps(req.to_dict()) == orjson.dumps(saved)


def test_every_task_is_described_once_by_objects():
    assert set(TASKS) == set(TaskName)
    for name, task in TASKS.items():
        assert task.name is name and task.prompts and task.output is not None


def test_every_task_has_exactly_one_payload_builder_and_one_result_handler():
    assert set(results.SCOPE_TASKS) == set(TaskName)
    builders = [bound.build for bound in results.SCOPE_TASKS.values()]
    handlers = [bound.handle for bound in results.SCOPE_TASKS.values()]
    assert len(set(builders)) == len(builders) and len(set(handlers)) == len(handlers)
    assert {b.__module__ for b in builders} == {requests.__name__}
    # A handler is results.py's, or the apply function of a loop that lives in its own scope module.
    assert {h.__module__ for h in handlers} <= {results.__name__} | {
        f"credence.streams.scope.{m}" for m in ("corrections", "refine", "recent")}


def test_every_prompt_module_belongs_to_a_task():
    used = {m.NAME for task in TASKS.values() for m in task.prompts}
    assert used == set(prompts.PROMPTS)


def _spelled_task_names(path: Path) -> list[str]:
    """String literals used as a task name: compared with a `.task`, or passed where a request, a request
    id prefix or a task's pending requests are named."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        literals: list[ast.AST] = []
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr == "task" for s in sides):
                for s in sides:
                    literals += s.elts if isinstance(s, (ast.Tuple, ast.List, ast.Set)) else [s]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) in (
                "request", "pending_tasks", "next_id", "admit", "refuse"):
            literals = list(node.args)
        found += [f"{path.relative_to(ROOT)}:{n.lineno}: {n.value!r}" for n in literals
                  if isinstance(n, ast.Constant) and n.value in WIRE_NAMES]
    return found


def test_no_product_module_spells_a_task_name():
    spelled = [hit for folder in ("streams", "tables", "sinks", "credence", "config")
               for path in sorted((ROOT / folder).rglob("*.py")) for hit in _spelled_task_names(path)]
    assert spelled == []


def test_a_payload_that_does_not_validate_is_a_clear_error():
    with pytest.raises(LLMError, match="feedback: the request payload does not validate"):
        asyncio.run(execute(RulesBackend(), TaskName.FEEDBACK, {"surfaced": "not a list"}))


OBS = {"id": "r1", "text": "The user likes tea.", "subject": "tea"}
FACT = {"id": "f1", "text": "The user likes tea.", "subject": "tea", "importance": 6,
        "polarity": "positive", "source_turn_ids": ["t1"]}
PAYLOADS = {
    TaskName.STAGE1: {"turns": [{"id": "t1", "role": "user", "text": "I love green tea", "ts": "x"}]},
    TaskName.STAGE2: {"facts": [FACT], "observations": [OBS]},
    TaskName.SYNTHESIS: {"facts": [FACT]},
    TaskName.FEEDBACK: {"reply_text": "yes", "surfaced": [OBS]},
    TaskName.TARGET: {"messages": ["no, not tea"], "observations": [OBS]},
    TaskName.PROMOTION: {"entry_id": "r9", "ticket": {"version": 1, "attempt": 1}, "personas": [OBS],
                         "reflection": {"text": "The user hates tea.", "subject": "tea", "source_fact_ids": ["f1"]}},
    # -- correction work --
    TaskName.CORRECTION: {"corrections": [{"id": "c1", "old": OBS, "new_text": "The user no longer drinks tea.",
                                           "new_score": 2.1}]},
    TaskName.REFINE: {"entries": [OBS, {"id": "r2", "text": "The user likes tea a lot.", "subject": "tea"}],
                      "cluster": "c", "versions": {"r1": 1, "r2": 1}},
    TaskName.SUMMARISE: {"memo": "", "max_tokens": 100, "memo_version": 0, "head_ids": ["t1"],
                         "turns": [{"id": "t1", "role": "user", "text": "I love green tea", "ts": "x"}]},
}


def example_payload(name: TaskName) -> dict:
    """The payload above, or for a task not listed (a new one) the least its payload model accepts."""
    return PAYLOADS.get(name) or least_value(TASKS[name].payload.model_json_schema())


@pytest.mark.parametrize("name", list(TaskName))
def test_what_a_task_returns_is_its_output_model(name):
    out = asyncio.run(execute(RulesBackend(), name, example_payload(name)))
    assert TASKS[name].output.model_validate(out).model_dump() == out


def test_requests_saved_before_the_context_fields_still_run():
    """A request in a scope's state from an older worker lacks ai_text/related/score: defaults apply.
    The task is named by the string the saved request carries."""
    run = lambda task, p: asyncio.run(execute(RulesBackend(), task, p))  # noqa: E731
    assert run("feedback", {"reply_text": "yes", "surfaced": [OBS]}) == {"decisions": [{"id": "r1", "decision": "confirm"}]}
    assert run("target", {"messages": ["no, not tea"], "observations": [OBS]}) == {"ids": ["r1"], "forget": False}
    assert len(run("synthesis", {"facts": [FACT]})["drafts"]) == 1
    out = run("promotion", PAYLOADS[TaskName.PROMOTION])
    assert out["decision"]["action"] == "reject"  # no scores: the existing entry stands


def test_a_backend_has_one_generic_call_and_no_method_per_task():
    from credence.streams.llm.backend import LLMBackend

    assert LLMBackend.__abstractmethods__ == {"label", "stats", "call"}


def test_every_prompt_has_its_rules_answer():
    assert all(callable(getattr(module, "rules_answer", None)) for module in prompts.PROMPTS.values())
