"""A batch's transaction owns the order the worker's state is written in: per input partition its marks,
positions, forget filters and changed scopes, then one flush; a forget's position passes only after its
deletions are durable; a hole found on a partition is kept for the rewind."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace

from credence.streams.state.positions import APPLY, ASK, GAP
from credence.streams.state.transaction import WorkerState


class Calls(list):
    def part(self, name: str):
        calls = self

        class Part:
            def write(self, partition, *_):
                calls.append((name, "write", partition))

            def forget(self, prefix, partition, *_):
                calls.append((name, "forget", partition))
                return 2

            def hold(self, prefix, partition, after):
                calls.append((name, "hold", partition, after))

        return Part()


class Positions:
    def __init__(self, calls: Calls, verdicts: list[str], expected: int = 7) -> None:
        self.calls, self.verdicts, self._expected, self.reports = calls, verdicts, expected, []

    def write(self, partition):
        self.calls.append(("positions", "write", partition))

    def advance(self, topic, partition, offset):
        self.calls.append(("positions", "advance", partition, offset))

    def expected(self, topic, partition):
        return self._expected

    def check(self, topic, partition, offset):
        return self.verdicts.pop(0)

    def reported(self, topic, partition, start, offsets):
        self.reports.append((start, offsets))


class Store:
    def __init__(self, calls: Calls) -> None:
        self.calls = calls

    def write(self, scope, changed, journal):
        self.calls.append(("store", "write", scope))

    def release(self, scope):
        self.calls.append(("store", "release", scope))

    def forget(self, prefix, partition, offset):
        self.calls.append(("store", "forget", partition))
        return ["t/u/c"]


class Writes:
    def __init__(self, calls: Calls) -> None:
        self.calls = calls

    async def flush(self):
        self.calls.append(("writes", "flush"))


@dataclass
class Changes:
    partition: int
    applied: list
    live: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(unsaved=set(), state=SimpleNamespace(idle=True)))
    changed: set = field(default_factory=set)
    journal: list = field(default_factory=list)
    idle: bool = True


def state_over(calls: Calls, verdicts: list[str] | None = None) -> WorkerState:
    ownership = SimpleNamespace(held={0, 2}, busy={"t/u/c"}, mark=lambda scope, idle: calls.append(("ownership", scope)))
    return WorkerState(Store(calls), calls.part("marks"), Positions(calls, verdicts or []), calls.part("forgets"),
                       ownership, Writes(calls))


class Event:  # a record of `partition` (Faust keeps a weak reference to the current one)
    def __init__(self, partition: int) -> None:
        self.message = SimpleNamespace(partition=partition)


def test_commit_writes_each_partitions_marks_positions_filters_and_scopes_then_flushes_once():
    calls = Calls()
    tx = state_over(calls).begin()
    tx.reached(Event(2))
    tx.reached(Event(0))
    saved = asyncio.run(tx.commit({"a": Changes(0, applied=["turn"]), "b": Changes(2, applied=[])}))
    assert calls == [("marks", "write", 2), ("positions", "write", 2), ("forgets", "write", 2),
                     ("store", "release", "b"),  # nothing applied to it: not written
                     ("marks", "write", 0), ("positions", "write", 0), ("forgets", "write", 0),
                     ("store", "write", "a"), ("ownership", "a"),
                     ("writes", "flush")]
    assert saved == ["a"]


def test_a_forgets_position_passes_only_once_its_deletions_are_flushed():
    calls = Calls()
    state = state_over(calls)
    doomed, marks = asyncio.run(state.begin().forget("t/u/", ("control", 2, 41), {"turns": [5], "other": [1]},
                                                     ["turns"]))
    assert calls == [("store", "forget", 2), ("marks", "forget", 2), ("forgets", "hold", 2, {"turns": [5]}),
                     ("forgets", "write", 2), ("writes", "flush"), ("positions", "advance", 2, 41)]
    assert doomed == ["t/u/c"] and marks == 2 and state.ownership.busy == set()


class Probe:
    def __init__(self) -> None:
        self.asked = []

    async def offsets_from(self, topic, partition, start):
        self.asked.append(start)
        return [9]


def test_a_hole_is_kept_for_the_rewind_and_an_unanswered_question_is_a_hole():
    tx = state_over(Calls(), [APPLY, GAP, ASK]).begin()
    assert asyncio.run(tx.verdict("in", 0, 7, None)) == APPLY and tx.holes == {}
    assert asyncio.run(tx.verdict("in", 0, 9, None)) == GAP and tx.holes == {("in", 0): 7}
    assert asyncio.run(tx.verdict("in", 2, 9, None)) == GAP and tx.holes == {("in", 0): 7, ("in", 2): 7}
    again = state_over(Calls()).begin(tx.holes)  # a forget goes on in a new transaction: the holes stay
    assert again.holes == {("in", 0): 7, ("in", 2): 7}


def test_a_question_the_broker_answers_is_checked_again():
    probe, state = Probe(), state_over(Calls(), [ASK, APPLY])
    tx = state.begin()
    assert asyncio.run(tx.verdict("in", 0, 9, probe)) == APPLY
    assert probe.asked == [7] and state.positions.reports == [(7, [9])] and tx.holes == {}


def test_a_scope_written_with_nothing_applied_is_marked_by_its_state():
    # Only a scope's stored-but-unwritten entries (a schema-1 value) make it written with nothing applied.
    marked = []
    state = state_over(Calls())
    state.ownership.mark = lambda scope, idle: marked.append((scope, idle))
    tx = state.begin()
    tx.reached(Event(0))
    busy = SimpleNamespace(unsaved={"e1"}, state=SimpleNamespace(idle=False))
    # applied: its work says idle as of its last record (the state double says otherwise: not read)
    applied = Changes(0, applied=["turn"], live=SimpleNamespace(unsaved=set(), state=SimpleNamespace(idle=False)),
                      idle=True)
    asyncio.run(tx.commit({"a": Changes(0, applied=[], live=busy, idle=None), "b": applied}))
    assert marked == [("a", False), ("b", True)]
