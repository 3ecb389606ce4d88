"""A new LLM task touches five product files (docs/architecture.md, "Adding an LLM task"): its name
(scope/tasks.py); its prompt module with the TASK it serves and its rules answer (llm/prompts/<prompt>.py);
its payload builder (scope/requests.py); its result handler and SCOPE_TASKS line (scope/results.py); the
line that asks for it (scope/step.py or a loop module). Here a toy task is all of that, in the test alone,
each piece labelled with its file. It runs through the rules backend and through the OpenAI backend
against the test server, which checks every request (the schema's id enum is exactly the input's ids)
and answers a prompt it has no answer for with the least its schema allows; its scope handler applies it.
Its other test lines pin it by design: test_prompts.py (fingerprint, calls), test_tasks.py (WIRE_NAMES)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from types import ModuleType

import pytest

from credence.config.memory import MemorySettings
from credence.config.pipeline import PipelineSettings
from credence.records.inputs import as_record
from credence.records.kind import Kind
from credence.streams.llm.aliases import Aliases, Reader
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
    alias_field,
    render_json,
)
from credence.streams.llm.rules.backend import RulesBackend
from credence.streams.llm.runner import execute
from credence.streams.llm.tasks import TASKS
from credence.streams.scope import results
from credence.streams.scope.context import StepContext
from credence.streams.scope.scope_state import ScopeState

TOY = "toy"  # scope/tasks.py: the task's name, a TaskName member in a real task
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
WORDS = ["tea", "coffee"]


def _toy_prompt() -> ModuleType:
    """llm/prompts/<prompt>.py: the prompt, its wire models, its build, the TASK it serves, its rules answer."""
    toy = ModuleType("toy_favourite")
    toy.NAME, toy.VERSION, toy.MAX_TOKENS = "toy_favourite", 1, 64
    toy.SYSTEM = f"Pick the user's favourite word by its id and write it in capitals.\n{DATA_RULE}\n{JSON_RULE}"

    class Word(WireIn):
        id: str
        text: str

    class Input(WireIn):
        words: list[Word]

    class Output(Wire):
        favourite: alias_field("W")  # type: ignore[valid-type]
        shout: Text

    def build(words: Sequence[str]) -> Call:
        ids = Aliases("W", list(words))

        def read(out: Output, reader: Reader) -> tuple[str | None, str]:
            return reader.real(ids, out.favourite), out.shout

        payload = Input(words=[Word(id=ids.alias(w), text=w) for w in dict.fromkeys(words)])
        return Call(payload, {"W": ids.names}, read, inputs=(words,))

    class ToyPayload(TaskPayload):
        words: list[str]

    class ToyOutput(TaskOutput):
        favourite: str | None
        shout: str

    async def run(backend, prompt, p: ToyPayload, rank) -> ToyOutput:
        favourite, shout = await backend.ask(prompt, p.words)
        return ToyOutput(favourite=favourite, shout=shout)

    toy.Input, toy.Output, toy.render_user, toy.build = Input, Output, render_json, build
    toy.TASK = Task(TOY, ToyPayload, run, ToyOutput)  # type: ignore[arg-type]
    toy.rules_answer = _favourite  # what the call reads back, from the rules logic (below) on the build's inputs
    return toy


def _favourite(words: Sequence[str]) -> tuple[str, str]:
    """llm/rules/<module>.py: the rules logic the prompt's rules_answer wires (when it is more than a line)."""
    word = max(words, key=len)
    return word, word.upper() + "!"


def _toy_payload(state: ScopeState, words: list[str]) -> dict:
    """scope/requests.py: the payload builder."""
    return {"words": words}


def _toy_handle(state: ScopeState, payload: dict, output: dict, ctx: StepContext) -> None:
    """scope/results.py: the handler (and its SCOPE_TASKS line, in the fixture)."""
    ctx.log.append(f"{output['favourite']} shouted as {output['shout']!r}")


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
    req = ctx.request(state, TOY, results.SCOPE_TASKS[TOY].build(state, WORDS))  # scope/step.py: the ask line
    output = asyncio.run(execute(backend, req.task, req.payload))
    results.apply(state, Kind.RESULT, as_record(Kind.RESULT, {"request_id": req.id, "task": req.task,
                                                              "output": output}), ctx)
    assert not state.requests  # answered and applied
    return ctx.log


def _ask_the_server(server, llm_settings_factory) -> list[str]:
    backend = make_backend(llm_settings_factory(server))
    try:
        return _ask_and_apply(backend)
    finally:
        asyncio.run(backend.aclose())


def test_a_task_added_in_one_place_runs_on_the_rules_backend(toy):
    assert _ask_and_apply(RulesBackend()) == ["coffee shouted as 'COFFEE!'"]


def test_a_task_added_in_one_place_runs_on_the_openai_backend(toy, openai_server_factory, llm_settings_factory):
    # A model that decides otherwise than the rules: the test's own answer, in the aliased wire format.
    server = openai_server_factory(answers={toy.NAME: lambda inp: {"favourite": inp.words[0].id,
                                                                   "shout": inp.words[0].text.upper() + "!!"}})
    assert _ask_the_server(server, llm_settings_factory) == ["tea shouted as 'TEA!!'"]
    assert server.outcomes() == {"ok": 1} and server.violations == []
    assert server.models_seen == {(toy.NAME, server.model): 1}  # the server took it for the toy's prompt


def test_the_test_server_needs_no_line_for_a_new_prompt(toy, openai_server_factory, llm_settings_factory):
    # No canned answer: the least the request's schema allows (the first offered id, an empty shout), and
    # the request's id enum checked against the input's ids all the same.
    server = openai_server_factory()
    assert _ask_the_server(server, llm_settings_factory) == ["tea shouted as ''"]
    assert server.outcomes() == {"ok": 1} and server.violations == []
