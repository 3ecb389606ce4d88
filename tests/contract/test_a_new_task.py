"""A new LLM task is a prompt module, its rules answer and its scope side, bound by one name: a toy task
added here, in the test alone, runs through the rules backend and through the OpenAI backend against the
test server (which checks every request), and its answer is applied by its scope handler. The files a
real task touches are listed in docs/architecture.md ("Adding an LLM task")."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime
from types import ModuleType

import pytest

from credence.config.memory import MemorySettings
from credence.config.pipeline import PipelineSettings
from credence.streams.llm.factory import make_backend
from credence.streams.llm.prompts import PROMPTS
from credence.streams.llm.prompts.base import (
    DATA_RULE,
    JSON_RULE,
    Call,
    Task,
    TaskOutput,
    TaskPayload,
    Text,
    Wire,
    WireIn,
    render_json,
)
from credence.streams.llm.rules.backend import RulesBackend
from credence.streams.llm.runner import execute
from credence.streams.llm.tasks import TASKS
from credence.streams.scope import results
from credence.streams.scope.context import StepContext
from credence.streams.scope.state import ScopeState

TOY = "toy"  # the task's name: a TaskName member in a real task (streams/scope/tasks.py)
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def _toy_prompt() -> ModuleType:
    """streams/llm/prompts/<prompt>.py: the prompt, its wire models, its build and the TASK it serves."""
    toy = ModuleType("toy_shout")
    toy.NAME, toy.VERSION, toy.MAX_TOKENS = "toy_shout", 1, 64
    toy.SYSTEM = f"You repeat the user's favourite word in capitals.\n{DATA_RULE}\n{JSON_RULE}"

    class Input(WireIn):
        word: str

    class Output(Wire):
        shout: Text

    def build(word: str) -> Call:
        return Call(Input(word=word), {}, lambda out, reader: out.shout, inputs=(word,))

    class ToyPayload(TaskPayload):
        word: str

    class ToyOutput(TaskOutput):
        shout: str

    async def run(backend, prompt, p: ToyPayload, rank) -> ToyOutput:
        return ToyOutput(shout=await backend.ask(prompt, p.word))

    toy.Input, toy.Output, toy.render_user, toy.build = Input, Output, render_json, build
    toy.rules_answer = _shout  # the rules answer: wires the rules logic (below) to the prompt
    toy.TASK = Task(TOY, ToyPayload, run, ToyOutput)  # type: ignore[arg-type]
    return toy


def _shout(word: str) -> str:
    """streams/llm/rules/<module>.py: the rules logic the prompt's rules_answer wires (when it is more than a line)."""
    return word.upper() + "!"


def _toy_payload(state: ScopeState, word: str) -> dict:
    """streams/scope/requests.py: the payload builder."""
    return {"word": word}


def _toy_handle(state: ScopeState, payload: dict, output: dict, ctx: StepContext) -> None:
    """streams/scope/results.py: the handler (and its SCOPE_TASKS line, below)."""
    ctx.log.append(f"{payload['word']} shouted as {output['shout']}")


@pytest.fixture
def toy(monkeypatch):
    prompt = _toy_prompt()
    # What the registries find by themselves for a module of the prompts package.
    monkeypatch.setitem(PROMPTS, prompt.NAME, prompt)
    monkeypatch.setitem(TASKS, TOY, replace(prompt.TASK, prompts=(prompt,)))
    monkeypatch.setitem(results.SCOPE_TASKS, TOY, results.ScopeTask(_toy_payload, _toy_handle))
    return prompt


def _ask_and_apply(backend) -> list[str]:
    """The scope asks, the runner's execute answers through `backend`, the scope applies the result."""
    state = ScopeState(scope="acme/u1/aria")
    ctx = StepContext(now=NOW, powerful=True, boot="b", memory=MemorySettings(), pipeline=PipelineSettings())
    req = ctx.request(state, TOY, results.SCOPE_TASKS[TOY].build(state, "tea"))  # step.py: where it is asked
    output = asyncio.run(execute(backend, req.task, req.payload))
    results.apply(state, "result", {"request_id": req.id, "task": req.task, "output": output}, ctx)
    assert not state.requests  # answered and applied
    return ctx.log


def test_a_task_added_in_one_place_runs_on_the_rules_backend(toy):
    assert _ask_and_apply(RulesBackend()) == ["tea shouted as TEA!"]


def test_a_task_added_in_one_place_runs_on_the_openai_backend(toy, openai_server_factory, llm_settings_factory):
    server = openai_server_factory(answers={toy.NAME: lambda inp: {"shout": f"{inp.word.upper()}!!"}})
    backend = make_backend(llm_settings_factory(server))
    try:
        assert _ask_and_apply(backend) == ["tea shouted as TEA!!"]
    finally:
        asyncio.run(backend.aclose())
    assert server.outcomes() == {"ok": 1} and server.violations == []
    assert server.models_seen == {(toy.NAME, server.model): 1}  # the server took it for the toy's prompt
