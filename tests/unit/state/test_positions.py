"""Applied input positions: a record past the next expected offset on its input partition means either
offsets that hold no record anyone can get (transaction markers, aborted records: the broker's fetch from
the expected offset returns nothing before the record) or records the consumer skipped (Faust can commit
offsets it never delivered). Past the first the record applies; at the second nothing after the hole is
applied, the partition is read again from the hole (after each batch that still brought records past it),
and the position is stored with the batch's state."""

from __future__ import annotations

import asyncio
import json

from faust.types import TP
from hypothesis import given, settings
from hypothesis import strategies as st

from credence.config import load_settings
from credence.config.state import StateSettings
from credence.streams.runtime.agent import ScopeAgent
from credence.streams.runtime.app import Stats
from credence.streams.state.ownership import Ownership
from credence.streams.state.positions import APPLY, ASK, GAP, SEEN, Positions, position_key
from credence.streams.state.transaction import WorkerState
from credence.streams.state.writes import TableWrites
from tests.support import faust_double
from tests.support.faust_double import Switch, Topics

from .conftest import SCOPE, new_tables, turn

SETTINGS = load_settings(topic_prefix="pos")
TURNS = SETTINGS.topic("turns")


class Event(faust_double.Event):
    def __init__(self, partition: int, offset: int, record: dict) -> None:
        super().__init__(TURNS, partition, offset, SCOPE, record)


class Consumer:
    def __init__(self, earliest: int = 0) -> None:
        self.earliest, self.seeks = earliest, []

    async def earliest_offsets(self, *tps):
        return {tp: self.earliest for tp in tps}

    async def seek_wait(self, targets):  # Faust's seek in the consumer's thread (seek alone races its fetcher)
        self.seeks.extend(targets.items())


class Probe:
    """The broker's answer to a fetch from an offset: the offsets that hold a record a read_committed
    consumer gets (all of them unless `empty` is given), at most `window` of them."""

    def __init__(self, empty: set[int] = frozenset(), end: int = 1_000, window: int = 500) -> None:
        self.empty, self.end, self.window, self.asked = set(empty), end, window, []

    async def offsets_from(self, topic, partition, offset):
        self.asked.append(offset)
        return [n for n in range(offset, self.end) if n not in self.empty][:self.window]


class Runner:
    inline = False  # requests go out (and are dropped here), as a remote model's do
    vectors = None  # embeddings off: refine clusters lexically

    def submit(self, scope, req):
        pass


def agent_over(tables, ownership, consumer: Consumer, probe: Probe | None = None) -> tuple[ScopeAgent, int]:
    writes = TableWrites()  # one pending list for the store, the marks and the positions
    state = WorkerState.over(tables, StateSettings(), ownership, writes, SETTINGS.topic)
    agent = ScopeAgent(SETTINGS, Topics(), state, Switch(), Stats())
    agent.runner, agent.consumer_of, agent.probe = Runner(), lambda: consumer, probe or Probe()
    partition = ownership.partition_of(SCOPE)
    ownership.held = {partition}
    return agent, partition


def turns_applied(agent: ScopeAgent) -> int:
    return agent.state.store.get(SCOPE).turns


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


def test_a_hole_found_before_a_forget_in_the_same_batch_is_still_read_again(tables, ownership):
    consumer = Consumer()
    agent, p = agent_over(tables, ownership, consumer)
    events = [Event(p, n, turn(n, f"message {n}")) for n in range(3)]
    tenant, user, _ = SCOPE.split("/")
    forget = Event(p, 0, {"v": 1, "type": "forget", "tenant": tenant, "user": user})
    forget.message = faust_double.Message(SETTINGS.topic("control"), p, 0)
    # The forget commits what came before it and the batch goes on after it: offset 1's hole, found
    # before the forget, is read again all the same.
    asyncio.run(agent.batch([events[0], events[2], forget]))  # offset 1 never delivered
    assert consumer.seeks == [(TP(TURNS, p), 1)] and agent.stats.rewinds == 1


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
    agent.state.positions.reset()  # partitions moved and came back: positions come from the table
    asyncio.run(agent.rewind_held({p}))
    assert consumer.seeks == [(TP(TURNS, p), 3)]
    asyncio.run(agent.rewind_held({p + 1}))  # a partition with no stored position is left alone
    assert len(consumer.seeks) == 1


def test_status_shows_how_far_each_held_partition_is_read_also_after_a_restart(tables, ownership):
    consumer = Consumer()
    agent, p = agent_over(tables, ownership, consumer)
    asyncio.run(agent.batch([Event(p, n, turn(n, f"message {n}")) for n in range(3)]))
    assert agent.state.positions.known({p}) == {f"{TURNS}:{p}": 3}
    assert agent.state.positions.known({p + 1}) == {}  # another worker's partition: not shown
    agent.state.positions.reset()  # a restart: nothing in memory until the assignment's rewind reads the table
    assert agent.state.positions.known({p}) == {}
    asyncio.run(agent.rewind_held({p}))
    assert agent.state.positions.known({p}) == {f"{TURNS}:{p}": 3}


def test_a_partition_that_brought_a_record_since_the_assignment_is_not_rewound(tables, ownership):
    """It was read from at most its stored position (a later start is a gap, rewound by `check`), and a
    seek on a partition being read only brings its records again (seen as redeliveries in a clean run)."""
    consumer = Consumer()
    agent, p = agent_over(tables, ownership, consumer)
    asyncio.run(agent.batch([Event(p, n, turn(n, f"message {n}")) for n in range(3)]))
    agent.state.positions.reset()
    asyncio.run(agent.batch([Event(p, 3, turn(3, "message 3"))]))  # delivered before the first tick's rewind
    asyncio.run(agent.rewind_held({p}))
    assert consumer.seeks == [] and turns_applied(agent) == 4 and agent.stats.redelivered == 0


def test_check_answers_apply_seen_or_gap():
    positions = Positions({}, TableWrites())
    assert positions.check("t", 0, 7) == APPLY  # nothing known yet: the first record sets the line
    positions.advance("t", 0, 7)
    # 9 used to be a GAP at once: an offset a transaction marker holds never comes, and the partition
    # stopped there. Whether offset 8 holds a record is the broker's to say.
    assert [positions.check("t", 0, n) for n in (6, 7, 8, 9)] == [SEEN, SEEN, APPLY, ASK]
    positions.reported("t", 0, 8, [9, 11, 12])  # a fetch from 8 returned these: 8 and 10 hold none
    assert positions.check("t", 0, 9) == APPLY
    positions.advance("t", 0, 9)
    assert [positions.check("t", 0, n) for n in (11, 12)] == [APPLY, GAP]  # 10 empty; 11 was skipped
    positions.advance("t", 0, 12)
    assert positions.check("t", 0, 14) == ASK  # past what the fetch read


def test_offsets_the_broker_reports_empty_are_passed_without_a_rewind(tables, ownership):
    """Transaction markers (2, 5) and an aborted record (6) hold offsets no record will fill."""
    consumer, probe = Consumer(), Probe(empty={2, 5, 6})
    agent, p = agent_over(tables, ownership, consumer, probe)
    asyncio.run(agent.batch([Event(p, n, turn(n, f"message {n}")) for n in (0, 1, 3, 4)]))
    asyncio.run(agent.batch([Event(p, 7, turn(7, "message 7"))]))
    assert turns_applied(agent) == 5 and consumer.seeks == [] and agent.stats.rewinds == 0
    assert probe.asked == [2]  # one fetch from the first marker told of the others
    assert json.loads(tables.seen[position_key(TURNS, p)])["next"] == 8


def test_a_record_skipped_after_a_marker_is_read_again(tables, ownership):
    consumer, probe = Consumer(), Probe(empty={2})
    agent, p = agent_over(tables, ownership, consumer, probe)
    events = {n: Event(p, n, turn(n, f"message {n}")) for n in (0, 1, 3, 4)}
    asyncio.run(agent.batch([events[0], events[1], events[4]]))  # 3 was dropped by the consumer
    assert turns_applied(agent) == 2 and consumer.seeks == [(TP(TURNS, p), 2)]
    asyncio.run(agent.batch([events[3], events[4]]))  # read again from 2: the fetch starts at 3
    assert turns_applied(agent) == 4 and agent.stats.rewinds == 1 and probe.asked == [2]


class Log:
    """One input partition as a consumer sees it: offsets 0..end-1, some holding no record (markers,
    aborted records), read from `at`; a read may drop records (Faust dropping a fetch), and a seek moves
    `at` (the agent's rewinds, or a re-read from the committed offset)."""

    def __init__(self, held: list[bool]) -> None:
        self.held = held + [True]  # a record always comes after: a hole is noticed by what follows it
        self.at = 0

    def offsets(self, start: int) -> list[int]:
        return [n for n in range(start, len(self.held)) if self.held[n]]

    def read(self, dropped: int, taken: int) -> list[int]:
        ahead = self.offsets(self.at)
        out = ahead[dropped:dropped + taken]
        if out:
            self.at = out[-1] + 1
        return out


@settings(max_examples=60, deadline=None)
@given(held=st.lists(st.booleans(), min_size=1, max_size=24),
       reads=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 6), st.integers(0, 8)), max_size=12),
       window=st.integers(1, 6))
def test_every_deliverable_record_is_applied_once_whatever_the_holes(held, reads, window):
    """For any partition with offsets that hold no record, reads that drop records or go back, and a
    broker that answers with at most `window` offsets at a time: every record that can be delivered is
    applied, and none twice."""
    log = Log(held)
    tables, ownership = new_tables(), Ownership(4, "credence.turns")

    class Seeking(Consumer):
        async def seek_wait(self, targets):
            log.at = next(iter(targets.values()))

    probe = Probe(empty={n for n, h in enumerate(log.held) if not h}, end=len(log.held), window=window)
    agent, p = agent_over(tables, ownership, Seeking(), probe)

    def batch(dropped: int, taken: int) -> None:
        asyncio.run(agent.batch([Event(p, n, turn(n, f"message {n}")) for n in log.read(dropped, taken)]))

    batch(0, 1)  # the first record read sets the line (nothing stored yet: nothing before it is known)
    for dropped, taken, back in reads:
        batch(dropped, taken)
        log.at = max(0, log.at - back)  # read again from an earlier offset (a redelivery)
    for _ in range(2 * len(log.held)):  # then reads that drop nothing, until the last record came
        batch(0, 3)
    deliverable = log.offsets(0)
    assert turns_applied(agent) == len(deliverable) and agent.stats.turns_duplicate == 0
    assert json.loads(tables.seen[position_key(TURNS, p)])["next"] == deliverable[-1] + 1
