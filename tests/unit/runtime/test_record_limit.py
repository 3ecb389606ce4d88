"""No record over the broker's limit is ever produced, and none stops a partition: an input whose step
would make one (here the scope's control value, holding every promotion it would ask for at once) is
dead-lettered with the reason before anything of it is applied, and the rest of the batch lands."""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import timedelta

from credence.config import load_settings
from credence.config.pipeline import PipelineSettings
from credence.config.state import StateSettings
from credence.records.topics import TOPICS
from credence.streams.llm.runner import Runner
from credence.streams.runtime.agent import ScopeAgent
from credence.streams.runtime.app import Stats
from credence.streams.state.ownership import Ownership
from credence.streams.state.store import ScopeStore
from credence.streams.state.transaction import WorkerState
from credence.streams.state.writes import TableWrites
from credence.tables.clock import format_instant
from tests.support import faust_double
from tests.support.faust_double import Switch
from tests.support.promoting import promoting_scope
from tests.support.scope_tables import T0, new_tables, turn

from .test_inline_answers import Topics

LIMIT = 512 * 1024  # the least the settings accept
# Every due reflection asked at once (no in-flight cap to speak of): the control value outgrows LIMIT.
SETTINGS = load_settings(topic_prefix="lim", kafka={"max_record_bytes": LIMIT},
                         pipeline=PipelineSettings(stage1_max_batch=1, promotion_max_in_flight=5000))
BIG, SMALL = "acme/big/aria", "acme/small/aria"


class Unanswered(Runner):
    def __init__(self) -> None:
        self.inline, self.submitted, self.vectors = False, [], None

    def submit(self, scope, req):
        self.submitted.append((scope, req))


def agent_over() -> tuple[ScopeAgent, Topics, ScopeStore]:
    tables, writes, topics = new_tables(), TableWrites(), Topics()
    ownership = Ownership(1, SETTINGS.topic("turns"))
    state = WorkerState.over(tables, StateSettings(), ownership, writes, SETTINGS.topic)
    store = state.store
    agent = ScopeAgent(SETTINGS, topics, state, Switch(), Stats())
    agent.runner = Unanswered()
    ownership.held = {0}
    live = store.live(BIG)  # the big scope as its tables hold it before the batch
    live.state = promoting_scope(BIG, reflections=300, personas=50, at=T0)
    live.unsaved = set(live.state.entries)
    store.write(BIG, (), [])
    return agent, topics, store


class Event(faust_double.Event):
    def __init__(self, name: str, scope: str, offset: int, record: dict) -> None:
        super().__init__(SETTINGS.topic(name), 0, offset, scope, record)


def event(name: str, scope: str, offset: int, record: dict) -> Event:
    return Event(name, scope, offset, record)


def test_an_input_that_would_make_an_oversized_record_is_dead_lettered_and_the_batch_lands():
    agent, topics, store = agent_over()
    before = store.get(BIG).to_dict()
    tenant, user, character = BIG.split("/")
    tick = {"v": 1, "type": "tick", "tenant": tenant, "user": user, "character": character,
            "now": format_instant(T0 + timedelta(minutes=1))}
    batch = [event("turns", SMALL, 0, turn(1, "I love hiking", T0, scope=SMALL)),
             event("control", BIG, 0, tick),
             event("turns", SMALL, 1, turn(2, "I live in Berlin", T0 + timedelta(minutes=1), scope=SMALL))]
    asyncio.run(agent.batch(batch))

    [dlq] = [json.loads(v) for name, _, v in topics.sent if name == "dlq"]
    assert dlq["topic"] == SETTINGS.topic("control") and dlq["offset"] == 0
    assert "record limit" in dlq["reason"] and "CREDENCE_KAFKA__MAX_RECORD_BYTES" in dlq["reason"]
    assert json.loads(base64.b64decode(dlq["original"])) == tick
    assert all(len(k or b"") + len(v) <= LIMIT for _, k, v in topics.sent)
    big = store.get(BIG)
    assert big.requests == {} and big.to_dict() == before  # nothing of the refused tick was applied
    small = store.get(SMALL)
    assert small.turns == 2 and small.applied == {"turns:0": 1}
    assert {scope for scope, _ in agent.runner.submitted} == {SMALL}


def test_a_record_sent_beside_the_scopes_effects_goes_to_the_dlq_when_over_the_limit():
    agent, _, _ = agent_over()
    assert agent.dlq.bounded(TOPICS.turns, b"k", b"x" * 100) == (TOPICS.turns, b"k", b"x" * 100)
    topic, key, value = agent.dlq.bounded(TOPICS.turns, b"k", b"x" * (LIMIT + 1))
    letter = json.loads(value)
    assert topic == TOPICS.dlq and key == b"k" and len(value) <= LIMIT
    assert "record limit" in letter["reason"] and letter["original_truncated"]


def test_an_llm_result_over_the_limit_comes_back_as_a_failure_with_the_reason(monkeypatch):
    from credence.streams.llm import runner as runner_module
    from credence.streams.scope.scope_state import Request

    async def huge(backend, task, payload, encode=None):
        return {"facts": [{"text": "x" * 1000}] * 600}

    monkeypatch.setattr(runner_module, "execute", huge)
    runner = Runner(backend=None, send=None, max_inflight=1, max_record_bytes=LIMIT)
    req = Request(id="stage1-1", task="stage1", payload={"turns": []}, issued_at=T0, boot="b")
    record = asyncio.run(runner.answer(SMALL, req))
    assert record["type"] == "failed" and "record limit" in record["error"]
    assert record["request_id"] == "stage1-1"
