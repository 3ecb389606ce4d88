"""Applied input positions: a record past the next expected offset on its input partition means the
consumer skipped records (Faust can commit offsets it never delivered). Nothing after the hole is applied,
the partition is read again from the hole (after each batch that still brought records past it), and the
position is stored with the batch's state."""

from __future__ import annotations

import asyncio
import json

from faust.types import TP

from credence.config import load_settings
from credence.config.state import StateSettings
from credence.streams.runtime.agent import ScopeAgent
from credence.streams.runtime.app import Stats
from credence.streams.runtime.marks import Marks
from credence.streams.runtime.positions import APPLY, GAP, SEEN, Positions, position_key
from credence.streams.runtime.store import ScopeStore
from credence.streams.runtime.writes import TableWrites

from .conftest import SCOPE, turn

SETTINGS = load_settings(topic_prefix="pos")
TURNS = SETTINGS.topic("turns")


class Message:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self.topic, self.partition, self.offset = topic, partition, offset


class Event:
    def __init__(self, partition: int, offset: int, record: dict) -> None:
        self.message = Message(TURNS, partition, offset)
        self.key, self.value = SCOPE.encode(), json.dumps(record).encode()


class Channel:
    async def send(self, key, value):
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


class Topics:
    def __getattr__(self, name):
        return Channel()


class Consumer:
    def __init__(self, earliest: int = 0) -> None:
        self.earliest, self.seeks = earliest, []

    async def earliest_offsets(self, *tps):
        return {tp: self.earliest for tp in tps}

    async def seek_wait(self, targets):  # Faust's seek in the consumer's thread (seek alone races its fetcher)
        self.seeks.extend(targets.items())


class Runner:
    inline = False  # requests go out (and are dropped here), as a remote model's do

    def submit(self, scope, req):
        pass


class Switch:
    def enabled(self, tenant):
        return True


def agent_over(tables, ownership, consumer: Consumer) -> tuple[ScopeAgent, int]:
    writes = TableWrites()  # one pending list for the store, the marks and the positions
    store = ScopeStore(tables, StateSettings(), ownership.partition_of, writes)
    marks = Marks(tables.seen, 7.0, ownership.partition_of, writes)
    agent = ScopeAgent(SETTINGS, Topics(), store, marks, writes, ownership, Switch(), Stats(),
                       Positions(tables.seen, writes))
    agent.runner, agent.consumer_of = Runner(), lambda: consumer
    partition = ownership.partition_of(SCOPE)
    ownership.held = {partition}
    return agent, partition


def turns_applied(agent: ScopeAgent) -> int:
    return agent.store.get(SCOPE).turns


def test_a_hole_stops_the_partition_rewinds_it_once_and_the_missing_record_fills_it(tables, ownership):
    consumer = Consumer()
    agent, p = agent_over(tables, ownership, consumer)
    events = [Event(p, n, turn(n, f"message {n}")) for n in range(5)]
    asyncio.run(agent.batch([events[0], events[1], events[3]]))  # offset 2 never delivered
    assert turns_applied(agent) == 2
    assert consumer.seeks == [(TP(TURNS, p), 2)] and agent.stats.rewinds == 1
    assert json.loads(tables.seen[position_key(TURNS, p)])["next"] == 2  # stored with the state

    asyncio.run(agent.batch([events[4]]))  # fetched before the rewind: still after the hole
    # Seek again: Faust drops a re-fetched record below the highest offset it has delivered, and this
    # one raised that mark after the first seek. One hole, counted once.
    assert turns_applied(agent) == 2 and consumer.seeks == [(TP(TURNS, p), 2)] * 2 and agent.stats.rewinds == 1

    asyncio.run(agent.batch(events[2:]))  # read again from the hole
    assert turns_applied(agent) == 5
    asyncio.run(agent.batch(events[:2]))  # a redelivery of what was applied changes nothing
    assert turns_applied(agent) == 5 and agent.stats.redelivered == 2
    assert json.loads(tables.seen[position_key(TURNS, p)])["next"] == 5


def test_records_deleted_before_they_were_applied_are_skipped_with_an_error(tables, ownership, caplog):
    consumer = Consumer(earliest=3)  # retention took offsets 0..2 before this worker read them
    agent, p = agent_over(tables, ownership, consumer)
    events = [Event(p, n, turn(n, f"message {n}")) for n in range(5)]
    asyncio.run(agent.batch([events[0]]))
    asyncio.run(agent.batch([events[3]]))  # offsets 1 and 2 are gone
    assert consumer.seeks == [(TP(TURNS, p), 3)]
    assert "were deleted before they were applied" in caplog.text
    asyncio.run(agent.batch(events[3:]))
    assert turns_applied(agent) == 3


def test_after_an_assignment_each_input_partition_is_read_from_its_stored_position(tables, ownership):
    consumer = Consumer()
    agent, p = agent_over(tables, ownership, consumer)
    asyncio.run(agent.batch([Event(p, n, turn(n, f"message {n}")) for n in range(3)]))
    agent.positions.reset()  # partitions moved and came back: positions come from the table
    asyncio.run(agent.rewind_held({p}))
    assert consumer.seeks == [(TP(TURNS, p), 3)]
    asyncio.run(agent.rewind_held({p + 1}))  # a partition with no stored position is left alone
    assert len(consumer.seeks) == 1


def test_a_partition_that_brought_a_record_since_the_assignment_is_not_rewound(tables, ownership):
    """It was read from at most its stored position (a later start is a gap, rewound by `check`), and a
    seek on a partition being read only brings its records again (seen as redeliveries in a clean run)."""
    consumer = Consumer()
    agent, p = agent_over(tables, ownership, consumer)
    asyncio.run(agent.batch([Event(p, n, turn(n, f"message {n}")) for n in range(3)]))
    agent.positions.reset()
    asyncio.run(agent.batch([Event(p, 3, turn(3, "message 3"))]))  # delivered before the first tick's rewind
    asyncio.run(agent.rewind_held({p}))
    assert consumer.seeks == [] and turns_applied(agent) == 4 and agent.stats.redelivered == 0


def test_check_answers_apply_seen_or_gap():
    positions = Positions({}, TableWrites())
    assert positions.check("t", 0, 7) == APPLY  # nothing known yet: the first record sets the line
    positions.advance("t", 0, 7)
    assert [positions.check("t", 0, n) for n in (6, 7, 8, 9)] == [SEEN, SEEN, APPLY, GAP]
