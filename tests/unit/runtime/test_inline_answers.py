"""An in-process backend (rules) answers a scope's requests inside the batch, right after the record that
asked. Evidence requests hold the scope, so answering them at once must end in the state the result
topics' round trip ends in; every answer lands at the asking record's position, so where a batch starts
and ends changes nothing, promotions included; an answer that cannot be applied is dead-lettered and its
request released, with nothing of it left behind."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from credence.config import load_settings
from credence.config.pipeline import PipelineSettings
from credence.config.state import StateSettings
from credence.streams.llm.factory import make_backend
from credence.streams.llm.runner import Runner
from credence.streams.runtime.agent import ScopeAgent
from credence.streams.runtime.app import Stats
from credence.streams.scope import results
from credence.streams.state.ownership import Ownership
from credence.streams.state.transaction import WorkerState
from credence.streams.state.writes import TableWrites
from tests.support import faust_double
from tests.support.faust_double import Switch
from tests.support.scope_tables import SCOPE, T0, new_tables, turn

SETTINGS = load_settings(topic_prefix="inl", pipeline=PipelineSettings(stage1_max_batch=1))
TALK = ["I love green tea.", "I live in Berlin.", "I really love green tea.", "My name is Sam.",
        "I hate mornings.", "I love green tea, especially in winter."]


class Event(faust_double.Event):
    def __init__(self, name: str, partition: int, offset: int, record: dict) -> None:
        super().__init__(SETTINGS.topic(name), partition, offset, SCOPE, record)


class Topics(faust_double.Topics):
    keep = staticmethod(lambda sent: (sent.topic, sent.key, sent.value))


class Recording(Runner):
    """The real runner over the rules backend, but what it would send to the model is kept here."""

    def __init__(self, inline: bool) -> None:
        super().__init__(make_backend(SETTINGS.llm, memory=SETTINGS.memory), self._unused, 4, inline=inline)
        self.submitted: list = []
        self.answered: list[str] = []

    async def _unused(self, topic, scope, record):  # pragma: no cover - submit is replaced
        raise AssertionError("nothing is sent in these tests")

    def submit(self, scope, req):
        self.submitted.append(req)

    async def answer(self, scope, req):
        self.answered.append(req.task)
        return await super().answer(scope, req)


def agent_over(inline: bool) -> tuple[ScopeAgent, Topics, int]:
    tables, writes, topics = new_tables(), TableWrites(), Topics()
    ownership = Ownership(4, SETTINGS.topic("turns"))
    state = WorkerState.over(tables, StateSettings(), ownership, writes, SETTINGS.topic)
    agent = ScopeAgent(SETTINGS, topics, state, Switch(), Stats())
    agent.runner = Recording(inline)
    partition = ownership.partition_of(SCOPE)
    ownership.held = {partition}
    return agent, topics, partition


def turns(partition: int) -> list[Event]:
    return [Event("turns", partition, n, turn(n, text, T0.replace(hour=n))) for n, text in enumerate(TALK)]


def end_state(agent: ScopeAgent) -> dict:
    state = agent.state.store.get(SCOPE)
    return {"turns": state.turns, "requests": sorted(r.task for r in state.requests.values()),
            "queue": len(state.queue), "facts": sorted(state.facts),
            "entries": {e.id: (e.status, e.text, e.evidence.reinforcement, e.evidence.disputation)
                        for e in state.entries.values()}}


@pytest.mark.parametrize("per_batch", [1, 2, len(TALK)])
def test_answers_in_the_batch_end_where_the_round_trip_through_the_result_topics_ends(per_batch):
    inline, _, p = agent_over(inline=True)
    events = turns(p)
    for i in range(0, len(events), per_batch):
        asyncio.run(inline.batch(events[i:i + per_batch]))
    assert inline.runner.submitted == [] and "stage1" in inline.runner.answered

    # The same turns with every request sent out; each answer comes back on credence.control/facts, after
    # whatever the partition already held, as a remote model's does.
    remote, _, p = agent_over(inline=False)
    asyncio.run(remote.batch(events))
    offsets = {"facts": 0, "control": 0}
    while remote.runner.submitted:
        asked, remote.runner.submitted = remote.runner.submitted, []
        batch = []
        for req in asked:
            answer = asyncio.run(remote.runner.answer(SCOPE, req))
            name = "facts" if answer["task"] == "stage1" else "control"
            batch.append(Event(name, p, offsets[name], answer))
            offsets[name] += 1
        asyncio.run(remote.batch(batch))
    assert end_state(inline) == end_state(remote)
    assert end_state(inline)["entries"] and end_state(inline)["requests"] == []


# Green tea reaches 2.4 with the third statement and is promoted (merge-on-promote); the character then
# surfaces it and the user denies it (tests/integration/test_pipeline_scenario.py's race).
TEA = "The user loves green tea."
RACE = [("user", "I love green tea.", None), ("user", "I love green tea.", None),
        ("ai", "Green tea again?", TEA), ("user", "yes, exactly", None),
        ("user", "I love green tea.", None), ("ai", "So green tea is your thing?", TEA),
        ("user", "no, that's wrong", None)]


def race(partition: int) -> list[Event]:
    from credence.streams.scope.requests import reflection_id

    events = []
    for n, (role, text, surfaced) in enumerate(RACE):
        record = turn(n, text, T0.replace(hour=n)) | {"role": role}
        if surfaced:
            record["surfaced_ids"] = [reflection_id(SCOPE, surfaced)]
        events.append(Event("turns", partition, n, record))
    return events


def test_a_promotion_is_answered_where_it_was_asked_whatever_the_batches():
    ends = []
    for per_batch in (1, 3, len(RACE)):
        agent, _, p = agent_over(inline=True)
        events = race(p)
        for i in range(0, len(events), per_batch):
            asyncio.run(agent.batch(events[i:i + per_batch]))
        assert agent.runner.submitted == [] and "promotion" in agent.runner.answered
        ends.append(end_state(agent))
    assert ends[0] == ends[1] == ends[2]
    assert any(status == "promoted" for status, *_ in ends[0]["entries"].values())  # decided before the denial


def test_an_answer_that_cannot_be_applied_is_dead_lettered_and_its_request_released(monkeypatch):
    agent, topics, p = agent_over(inline=True)
    real = results.apply

    def refuse(state, kind, record, ctx):
        if record.get("task") == "stage1":
            state.facts["half-applied"] = {"id": "half-applied"}  # a step that raises after changing things
            raise ValueError("not this answer")
        return real(state, kind, record, ctx)

    monkeypatch.setattr(results, "apply", refuse)
    asyncio.run(agent.batch(turns(p)[:2]))
    state = agent.state.store.get(SCOPE)
    assert state.turns == 2 and state.requests == {} and "half-applied" not in state.facts
    dead = [json.loads(v) for name, _, v in topics.sent if name == "dlq"]
    assert len(dead) == 2 and all("could not apply to scope" in d["reason"] and "not this answer" in d["reason"]
                                  for d in dead)
    original = json.loads(base64.b64decode(dead[0]["original"]))
    assert original["type"] == "result" and original["task"] == "stage1"
    assert agent.stats.records_rejected == 2 and agent.stats.turns_accepted == 2


def test_turns_count_as_accepted_only_once_the_batch_that_applied_them_is_durable():
    # /status's turns_accepted is what callers wait on before they read the scopes: counted while the batch
    # was still being written, a reader saw every turn accepted and the last batch's new scopes missing
    # (/scopes lists the stored keys, written by the flush).
    agent, _, p = agent_over(inline=True)
    flush, seen = agent.state.writes.flush, []

    async def observed(*args):
        seen.append(agent.stats.turns_accepted)
        await flush(*args)

    agent.state.writes.flush = observed
    asyncio.run(agent.batch(turns(p)))
    assert seen == [0] and agent.stats.turns_accepted == len(TALK)
