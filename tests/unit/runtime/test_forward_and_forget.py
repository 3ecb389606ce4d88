"""The agent's side of two orderings: a record on a partition other than its scope's is forwarded there
(naming the record it was made from) and a copy made twice is applied once; a forget names the input
topics' end offsets when it was sent, and what was queued before them is dropped when read after it,
across a restart, while what came after is applied."""

from __future__ import annotations

import asyncio
import json

import pytest

from credence.config import load_settings
from credence.config.state import StateSettings
from credence.errors import RecordError
from credence.records.control import decode_control
from credence.streams.runtime.agent import ScopeAgent
from credence.streams.runtime.app import Stats
from credence.streams.runtime.forwards import FORWARDED_FROM, header
from credence.streams.state.forgets import forget_key
from credence.streams.state.ownership import Ownership
from credence.streams.state.transaction import WorkerState
from credence.streams.state.writes import TableWrites
from tests.support import faust_double
from tests.support.faust_double import Switch
from tests.support.scope_tables import SCOPE, T0, new_tables, turn

SETTINGS = load_settings(topic_prefix="fwd")
PARTITIONS = 4


class Event(faust_double.Event):
    def __init__(self, name: str, partition: int, offset: int, record: dict, key: str = SCOPE,
                 headers: dict | None = None) -> None:
        super().__init__(SETTINGS.topic(name), partition, offset, key, record, headers)


class Topics(faust_double.Topics):
    keep = staticmethod(lambda sent: (sent.topic, sent.key, sent.partition, sent.headers))


class Runner:
    inline = False
    vectors = None  # embeddings off: refine clusters lexically

    def submit(self, scope, req):
        pass


def agent_over(tables) -> ScopeAgent:
    """A worker over `tables` holding every partition (a new one over the same tables: a restart)."""
    writes, ownership = TableWrites(), Ownership(PARTITIONS, SETTINGS.topic("turns"))
    state = WorkerState.over(tables, StateSettings(), ownership, writes, SETTINGS.topic)
    agent = ScopeAgent(SETTINGS, Topics(), state, Switch(), Stats())
    agent.runner, ownership.held = Runner(), set(range(PARTITIONS))
    return agent


def usage(n: int) -> dict:
    tenant, user, character = SCOPE.split("/")
    return {"v": 1, "tenant": tenant, "user": user, "character": character, "entry_ids": ["e1"],
            "source": "recall", "ts": T0.replace(minute=n).isoformat()}


def forget(ends: dict[str, list[int]] | None) -> dict:
    tenant, user, _ = SCOPE.split("/")
    body = {"v": 1, "type": "forget", "tenant": tenant, "user": user}
    return body if ends is None else body | {"after": ends}


def test_a_record_on_another_partition_is_forwarded_to_its_scopes_partition_not_applied():
    agent = agent_over(new_tables())
    home = agent.state.ownership.partition_of(SCOPE)
    wrong = (home + 1) % PARTITIONS
    asyncio.run(agent.batch([Event("turns", wrong, 7, turn(1, "I love green tea."))]))
    assert agent.state.store.get(SCOPE) is None
    assert agent.topics.sent == [("turns", SCOPE.encode(), home, {FORWARDED_FROM: f"turns:{wrong}:7".encode()})]
    assert agent.stats.records_forwarded == 1 and agent.stats.turns_rekeyed == 0


def test_a_copy_forwarded_twice_is_applied_once_even_without_an_id_of_its_own():
    agent = agent_over(new_tables())
    home = agent.state.ownership.partition_of(SCOPE)
    asyncio.run(agent.batch([Event("turns", home, 0, turn(1, "I love green tea."))]))
    copies = [Event("usage", home, n, usage(1), headers=header(("usage", home + 1, 5))) for n in (0, 1)]
    asyncio.run(agent.batch(copies[:1]))
    asyncio.run(agent.batch(copies[1:]))  # the forward made again after a crash: a second copy
    assert agent.state.store.get(SCOPE).applied[f"usage:{home}"] == 0
    assert agent.stats.redelivered == 1


def test_a_forget_drops_what_was_queued_before_it_and_applies_what_came_after():
    tables = new_tables()
    agent = agent_over(tables)
    home = agent.state.ownership.partition_of(SCOPE)
    queued = [Event("turns", home, n, turn(n, f"message {n}")) for n in range(4)]
    ends = {"turns": [2] * PARTITIONS, "feedback": [0] * PARTITIONS, "usage": [0] * PARTITIONS}
    asyncio.run(agent.batch([queued[0], Event("control", home, 0, forget(ends))]))
    assert agent.state.store.get(SCOPE) is None  # forgotten at once
    assert forget_key(home) in tables.seen  # kept with the forget's own writes

    restarted = agent_over(tables)  # the filter outlives the worker
    asyncio.run(restarted.batch(queued[1:]))  # offset 1 was queued before the forget; 2 and 3 came after
    assert restarted.stats.records_forgotten == 1
    assert restarted.state.store.get(SCOPE).turns == 2
    assert forget_key(home) not in tables.seen  # positions passed every offset: nothing left to drop


def test_a_forwarded_copy_is_judged_by_the_record_it_was_made_from():
    agent = agent_over(new_tables())
    home = agent.state.ownership.partition_of(SCOPE)
    other = (home + 1) % PARTITIONS
    ends = {"turns": [3] * PARTITIONS}  # every partition held three turns when the forget was sent
    asyncio.run(agent.batch([Event("control", home, 0, forget(ends))]))
    # copies forwarded from the other partition, of its offsets 2 (before the forget) and 3 (after)
    copies = [Event("turns", home, n, turn(n, "hello"), headers=header(("turns", other, origin)))
              for n, origin in enumerate((2, 3))]
    asyncio.run(agent.batch(copies))
    assert agent.stats.records_forgotten == 1 and agent.state.store.get(SCOPE).turns == 1


def test_a_forget_without_offsets_is_applied_alone_as_before():
    tables = new_tables()
    agent = agent_over(tables)
    home = agent.state.ownership.partition_of(SCOPE)
    asyncio.run(agent.batch([Event("control", home, 0, forget(None)),
                             Event("turns", home, 0, turn(0, "hello"))]))
    assert agent.state.store.get(SCOPE).turns == 1 and forget_key(home) not in tables.seen


def test_an_answer_for_a_scope_without_state_does_not_create_it():
    agent = agent_over(new_tables())
    home = agent.state.ownership.partition_of(SCOPE)
    tenant, user, character = SCOPE.split("/")
    result = {"v": 1, "type": "result", "tenant": tenant, "user": user, "character": character,
              "request_id": "gone", "output": {}}
    asyncio.run(agent.batch([Event("control", home, 0, result)]))
    assert agent.state.store.get(SCOPE) is None and list(agent.state.store.scopes()) == []


@pytest.mark.parametrize("after", [[1, 2], {"turns": 3}, {"turns": [1, -1]}, {"turns": [1.5]}, {"turns": [True]}])
def test_a_forget_with_malformed_offsets_is_refused(after):
    with pytest.raises(RecordError, match="'after'"):
        decode_control(json.dumps(forget(None) | {"after": after}).encode())


def test_a_misplaced_record_whose_copy_would_pass_the_record_limit_is_dead_lettered_not_forwarded(caplog):
    """The broker took the original; its copy, with the header naming it, would be over the limit and
    refused by the producer on every restart. It goes whole to the DLQ with the reason, and the partition
    goes on with the record after it."""
    agent = agent_over(new_tables())
    home = agent.state.ownership.partition_of(SCOPE)
    wrong = (home + 1) % PARTITIONS
    tenant, user, character = SCOPE.split("/")
    answer = {"v": 1, "type": "result", "tenant": tenant, "user": user, "character": character,
              "request_id": "r1"}  # an LLM answer: only the record limit bounds it
    near_limit = answer | {"output": "x" * (SETTINGS.kafka.max_record_bytes - len(json.dumps(answer)) - 20)}
    asyncio.run(agent.batch([Event("control", wrong, 3, near_limit), Event("turns", home, 0, turn(0, "hello"))]))
    assert [name for name, *_ in agent.topics.sent] == ["dlq"]  # nothing forwarded
    assert f"[{wrong}]@3): a " in caplog.text and "over the record limit" in caplog.text
    assert agent.state.store.get(SCOPE).turns == 1 and agent.stats.records_forwarded == 0
