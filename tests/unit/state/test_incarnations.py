"""A scope's incarnation (streams/state/incarnations.py): a forget read at offset o of a control partition
makes the user's scopes created there afterwards incarnation o + 1, journalled with every record and in
every event id, so no fold of the journal confuses a returning user's entries with the forgotten ones
under the same deterministic ids; the order of records on the partition alone decides it."""

from __future__ import annotations

import asyncio
import json

from credence.config import load_settings
from credence.config.pipeline import PipelineSettings
from credence.config.state import StateSettings
from credence.streams.llm.factory import make_backend
from credence.streams.llm.runner import Runner
from credence.streams.runtime.agent import ScopeAgent
from credence.streams.runtime.app import Stats
from credence.streams.state.incarnations import KIND
from credence.streams.state.ownership import Ownership
from credence.streams.state.transaction import WorkerState
from credence.streams.state.writes import TableWrites
from tests.support import faust_double
from tests.support.faust_double import Switch
from tests.unit.runtime.test_forward_and_forget import forget

from .conftest import SCOPE, new_tables, turn

SETTINGS = load_settings(topic_prefix="inc", pipeline=PipelineSettings(stage1_max_batch=1))

OTHER = "acme/u2/aria"  # another user
LATER = "acme/u1/coach"  # the same user, another character


class Recorder(faust_double.Topics):
    """The topics of a worker, keeping every record sent."""

    keep = staticmethod(lambda sent: (sent.topic, json.loads(sent.value)))


class Event(faust_double.Event):
    def __init__(self, name: str, partition: int, offset: int, record: dict) -> None:
        key = record["tenant"] + "/" + record["user"] + "/" + record.get("character", "")
        super().__init__(SETTINGS.topic(name), partition, offset, key, record)


async def _unused(topic, scope, record):  # pragma: no cover - the rules backend answers in the batch
    raise AssertionError("nothing is sent through the result topics here")


def agent_over(tables) -> ScopeAgent:
    """A worker holding every partition, answering with the rules backend in the batch."""
    writes, ownership = TableWrites(), Ownership(4, SETTINGS.topic("turns"))
    state = WorkerState.over(tables, StateSettings(), ownership, writes, SETTINGS.topic)
    agent = ScopeAgent(SETTINGS, Recorder(), state, Switch(), Stats())
    agent.runner = Runner(make_backend(SETTINGS.llm, memory=SETTINGS.memory), _unused, 4, inline=True)
    ownership.held = set(range(4))
    return agent


def run(tables, events: list[Event], agent=None):
    agent = agent or agent_over(tables)
    agent.topics = Recorder()
    for event in events:
        asyncio.run(agent.batch([event]))
    return agent


def lives(tables) -> list[Event]:
    """u1 talks, is forgotten (at control offset 6 of her scope's partition, 2 of the others), and talks
    again, in that scope and in one of another character; u2 talks."""
    partition_of = agent_over(tables).state.ownership.partition_of
    home = partition_of(SCOPE)
    offsets: dict[tuple[str, int], int] = {("control", p): 6 if p == home else 2 for p in range(4)}

    def event(name: str, scope: str, record: dict) -> Event:
        p = partition_of(scope)
        at = offsets.get((name, p), 0)
        offsets[(name, p)] = at + 1
        return Event(name, p, at, record)

    said = [event("turns", SCOPE, turn(n, "I love green tea.")) for n in range(2)]
    forgets = []
    for p in range(4):
        forgets.append(Event("control", p, offsets[("control", p)], forget(None)))
        forgets[-1].key = b"acme/u1/"
    return said + forgets + [
        event("turns", SCOPE, turn(2, "I love green tea.")), event("turns", SCOPE, turn(3, "I love green tea.")),
        event("turns", LATER, turn(4, "I am learning Rust.", scope=LATER)),
        event("turns", OTHER, turn(5, "hello", scope=OTHER))]


def test_a_scope_begun_after_a_forget_is_a_new_incarnation_in_every_record():
    tables = new_tables()
    events = lives(tables)
    agent = run(tables, events[:2])
    first = {r["event_id"] for name, r in agent.topics.sent if name == "evidence"}
    assert first and all("~" not in i for i in first)  # never forgotten: the records of before
    assert agent.state.store.get(SCOPE).incarnation == 0

    agent = run(tables, events[2:], agent_over(tables))  # a restart too: the incarnation is in the table
    home_partition = agent.state.ownership.partition_of(SCOPE)
    assert agent.state.store.get(SCOPE).incarnation == 7  # the forget's offset on the scope's partition, + 1
    later = agent.state.store.get(LATER).incarnation
    assert later == (7 if agent.state.ownership.partition_of(LATER) == home_partition else 3)
    assert agent.state.store.get(OTHER).incarnation == 0  # another user: untouched
    journal = [r for name, r in agent.topics.sent if name == "evidence" and r["user"] == "u1"]
    assert journal and all(r["incarnation"] in (7, later) for r in journal)
    assert all(r["event_id"].endswith(f"~{r['incarnation']}") for r in journal)
    again = {r["event_id"] for r in journal if r["character"] == "aria"}
    assert {i.split("~")[0] for i in again} & first and not again & first  # same entries, new identities
    # the user's name is in no key the forget left behind
    assert [k for k in tables.seen if k.startswith(KIND)] and not [k for k in tables.seen
                                                                   if k.startswith(KIND) and "u1" in k]


def test_a_replay_and_a_redelivered_forget_end_in_the_same_state():
    tables = new_tables()
    events = lives(tables)
    run(tables, events)
    replayed = new_tables()
    home = agent_over(replayed).state.ownership.partition_of(SCOPE)
    redelivered = [e for e in events if e.message.partition == home and "control" in e.message.topic]
    run(replayed, events[:6] + redelivered + events[6:])  # the forget applied twice on the scope's partition
    assert replayed.scopes == tables.scopes and replayed.entries == tables.entries
    assert replayed.seen == tables.seen
