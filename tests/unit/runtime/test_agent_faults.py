"""The scope agent under faults outside the step: an exception anywhere in a batch stops the worker before
anything of the batch is written (a restart in the same process would go on with positions, marks and live
scopes already advanced), a record the domain refuses is dead-lettered, and one tenant's far-future
clock does not prune another tenant's duplicate marks."""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import datetime, timedelta

import pytest

from credence.config import load_settings
from credence.config.pipeline import PipelineSettings
from credence.config.state import StateSettings
from credence.streams.llm.factory import make_backend
from credence.streams.llm.runner import Runner
from credence.streams.runtime import agent as agent_module
from credence.streams.runtime import batch as batch_module
from credence.streams.runtime.agent import ScopeAgent
from credence.streams.runtime.app import Stats
from credence.streams.state.ownership import Ownership
from credence.streams.state.transaction import WorkerState
from credence.streams.state.writes import TableWrites
from tests.support import faust_double
from tests.support.faust_double import Stream, Switch
from tests.support.scope_tables import SCOPE, T0, new_tables, turn

SETTINGS = load_settings(topic_prefix="flt", pipeline=PipelineSettings(stage1_max_batch=1))
PARTITIONS = 4
OTHER = "acme/u2/aria"  # a second scope of the same tenant


class Event(faust_double.Event):
    def __init__(self, name: str, scope: str, partition: int, offset: int, record: dict, received: datetime):
        super().__init__(SETTINGS.topic(name), partition, offset, scope, record, timestamp=received.timestamp())


class Topics(faust_double.Topics):
    keep = staticmethod(lambda sent: (sent.topic, sent.key, sent.value))


class Halted(BaseException):
    """The process ended (os._exit in production): nothing after it runs."""


async def _never_sent(topic, scope, record):  # pragma: no cover - every request is answered in the batch
    raise AssertionError("an in-process backend sends nothing")


def agent_over(tables) -> ScopeAgent:
    """A worker over `tables`: a new one over the same tables is a restarted process."""
    writes = TableWrites()
    ownership = Ownership(PARTITIONS, SETTINGS.topic("turns"))
    ownership.held = set(range(PARTITIONS))
    state = WorkerState.over(tables, StateSettings(), ownership, writes, SETTINGS.topic)
    agent = ScopeAgent(SETTINGS, Topics(), state, Switch(), Stats())
    agent.runner = Runner(make_backend(SETTINGS.llm, memory=SETTINGS.memory), _never_sent, 4, inline=True)
    return agent


class Log:
    """Input records with dense offsets per partition, received (Kafka timestamp) a second apart."""

    def __init__(self) -> None:
        self.partition_of = Ownership(PARTITIONS, SETTINGS.topic("turns")).partition_of
        self.next: dict[tuple[str, int], int] = {}
        self.received = T0

    def event(self, name: str, scope: str, record: dict) -> Event:
        partition = self.partition_of(scope)
        offset = self.next.get((name, partition), 0)
        self.next[(name, partition)] = offset + 1
        self.received += timedelta(seconds=1)
        return Event(name, scope, partition, offset, record, self.received)

    def turn(self, n: int, text: str, scope: str = SCOPE, at: datetime | None = None) -> Event:
        return self.event("turns", scope, turn(n, text, at or T0 + timedelta(minutes=n), scope))

    def tick(self, scope: str = SCOPE) -> Event:
        tenant, user, character = scope.split("/")
        return self.event("control", scope, {"v": 1, "type": "tick", "tenant": tenant, "user": user,
                                             "character": character, "now": (T0 + timedelta(hours=1)).isoformat()})


def conversation() -> list[list[Event]]:
    log = Log()
    return [[log.turn(0, "I love green tea.")],
            [log.turn(1, "I live in Berlin."), log.turn(2, "I hate mornings.", OTHER)],
            [log.turn(3, "My name is Sam.")]]


def end_state(agent: ScopeAgent, scope: str) -> dict:
    state = agent.state.store.get(scope)
    return {"turns": state.turns, "applied": state.applied, "facts": sorted(state.facts),
            "entries": sorted((e.text, e.status, e.evidence.reinforcement) for e in state.entries.values())}


def journal(agent: ScopeAgent) -> list[tuple[str, str]]:
    events = [json.loads(v) for name, _, v in agent.topics.sent if name == "evidence"]
    return sorted((e["entry_id"], e["event"]) for e in events)


async def supervised(agent: ScopeAgent, stream: Stream) -> None:
    """Faust's agent supervisor: an agent that raised is started again, in the same process, on the same
    stream (whatever the batch that raised had advanced in memory stays advanced)."""
    while stream.batches:
        try:
            await agent.run(stream)
        except Exception:  # noqa: BLE001
            continue


def snapshot(tables) -> dict:
    return {name: copy.deepcopy(dict(getattr(tables, name))) for name in ("scopes", "entries", "lists", "history",
                                                                        "seen")}


@pytest.mark.parametrize("failing", ["store.live", "marks.first_time"])
def test_an_exception_outside_the_step_halts_the_worker_and_a_restart_reads_the_batch_again(failing,
                                                                                             monkeypatch):
    clean_tables, tables = new_tables(), new_tables()
    clean = agent_over(clean_tables)
    asyncio.run(supervised(clean, Stream(conversation())))

    halts: list[str] = []

    def halt(reason: str) -> None:
        halts.append(reason)
        raise Halted(reason)

    monkeypatch.setattr(agent_module, "halt", halt)
    first, second, third = conversation()
    agent = agent_over(tables)
    asyncio.run(supervised(agent, Stream([first])))
    before, sent_before = snapshot(tables), list(agent.topics.sent)

    owner, name = (agent.state.store, "live") if failing == "store.live" else (agent.state.marks, "first_time")
    real = getattr(owner, name)

    def broken(*args):
        if OTHER in args:
            raise OSError("the local store could not be read")
        return real(*args)

    monkeypatch.setattr(owner, name, broken)
    with pytest.raises(Halted):
        asyncio.run(supervised(agent, Stream([second, third])))
    assert len(halts) == 1 and "OSError: the local store could not be read" in halts[0]
    assert snapshot(tables) == before and agent.topics.sent == sent_before  # nothing of the batch, nor after it

    restarted = agent_over(tables)  # the next run: read again from the last committed offsets
    restarted.topics.sent = agent.topics.sent
    asyncio.run(supervised(restarted, Stream([second, third])))
    for scope in (SCOPE, OTHER):
        assert end_state(restarted, scope) == end_state(clean, scope)
    assert journal(restarted) == journal(clean) and end_state(clean, SCOPE)["turns"] == 3


def test_a_tick_the_domain_refuses_is_dead_lettered_like_any_refused_record(monkeypatch):
    real = batch_module.step

    def refuse_ticks(state, item, ctx):
        if item.kind == "tick":
            raise ValueError("not this tick")
        return real(state, item, ctx)

    monkeypatch.setattr(batch_module, "step", refuse_ticks)
    log = Log()
    agent = agent_over(new_tables())
    asyncio.run(agent.batch([log.turn(0, "I love green tea."), log.tick(), log.turn(1, "I live in Berlin.")]))
    dead = [json.loads(v) for name, _, v in agent.topics.sent if name == "dlq"]
    assert len(dead) == 1 and "not this tick" in dead[0]["reason"]
    assert agent.state.store.get(SCOPE).turns == 2 and agent.stats.records_rejected == 1


def same_partition_scope(tenant: str) -> str:
    partition_of = Ownership(PARTITIONS, SETTINGS.topic("turns")).partition_of
    return next(s for s in (f"{tenant}/u{i}/aria" for i in range(1000)) if partition_of(s) == partition_of(SCOPE))


def test_one_tenants_far_future_turn_does_not_prune_another_tenants_duplicate_marks():
    log = Log()
    buggy = same_partition_scope("globex")
    agent = agent_over(new_tables())
    asyncio.run(agent.batch([log.turn(0, "I love green tea."), log.turn(1, "I live in Berlin.")]))
    far_future = T0.replace(year=2090)
    asyncio.run(agent.batch([log.turn(0, "hello from the future", buggy, at=far_future)]))
    asyncio.run(agent.batch([log.turn(0, "I love green tea.")]))  # a producer retry, the same turn_id
    assert agent.stats.turns_duplicate == 1 and agent.state.store.get(SCOPE).turns == 2
    assert agent.state.store.get(buggy).turns == 1


def test_the_same_turn_re_sent_seconds_after_a_backdated_one_is_dropped_as_a_duplicate():
    """A client syncing history dates its turn a month back; its retry seconds later is the same turn: the
    mark is kept by when the turn reached Kafka, not by the date the client claims."""
    log = Log()
    agent = agent_over(new_tables())
    asyncio.run(agent.batch([log.turn(0, "I love green tea.")]))
    backdated = T0 - timedelta(days=30)
    asyncio.run(agent.batch([log.turn(1, "I live in Berlin.", at=backdated)]))
    asyncio.run(agent.batch([log.turn(1, "I live in Berlin.", at=backdated)]))  # the client's retry
    assert agent.stats.turns_duplicate == 1 and agent.state.store.get(SCOPE).turns == 2
