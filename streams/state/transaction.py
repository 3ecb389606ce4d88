"""A worker's scope state on its partitions (`WorkerState`) and the transaction of one batch over it.

After quix-streams' `PartitionTransaction`: the agent begins one per batch (`state.begin()`), asks it the
per-record questions (a position's verdict, a first-time mark, a user forgotten, a scope's live state) and
ends it with `commit`, which writes each input partition's positions, marks, forget filters and changed
scopes, then makes them durable with the batch's emits in one flush (redo record and, fenced, one Kafka
transaction per partition). Why in this order: docs/state.md.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from faust.streams import _current_event

from credence.config.state import StateSettings
from credence.streams.state.forgets import Forgets
from credence.streams.state.marks import Marks
from credence.streams.state.ownership import Ownership
from credence.streams.state.positions import ASK, GAP, Positions
from credence.streams.state.store import Live, ScopeStore, StateTables
from credence.streams.state.writes import TableWrites


class Probe(Protocol):
    """Which offsets of an input partition hold records a read_committed fetch returns (runtime/probe.py)."""

    async def offsets_from(self, topic: str, partition: int, start: int) -> list[int]: ...


class ScopeChanges(Protocol):
    """What a batch did to one scope (runtime/batch.py's ScopeWork), as the transaction writes it."""

    live: Live
    partition: int
    changed: set[str]
    applied: list
    journal: list[dict]  # its journal events
    idle: bool | None  # no work left after the last record applied (None: none applied)


def set_current_event(event) -> None:
    """Make `event` the current event of this task only. Faust writes a table key to the changelog
    partition of the current event and reads the local store of its partition; inside a batch there is
    none, so each scope's writes run with one of its own records current. The stream's own
    `current_event` attribute is left alone: `take_events` reads it to collect the next batch."""
    _current_event.set(weakref.ref(event))


@dataclass
class WorkerState:
    """The state objects of the partitions a worker holds, written together by a batch's transaction."""

    store: ScopeStore  # the scopes: control values, entries, lists, histories
    marks: Marks  # duplicate marks
    positions: Positions  # the input offsets applied
    forgets: Forgets  # forget filters: what was queued before a user's forget
    ownership: Ownership  # the partitions held and their busy scopes
    writes: TableWrites  # the batch's held writes, its redo record and fence

    @classmethod
    def over(cls, tables: StateTables, settings: StateSettings, ownership: Ownership, writes: TableWrites,
             topic: Callable[[str], str]) -> WorkerState:
        """Each state object over `tables`, writing through `writes` (`topic`: logical name -> topic name)."""
        return cls(ScopeStore(tables, settings, ownership.partition_of, writes),
                   Marks(tables.seen, settings.seen_horizon_days, ownership.partition_of, writes),
                   Positions(tables.seen, writes), Forgets(tables.seen, writes, topic), ownership, writes)

    def begin(self, holes: dict[tuple[str, int], int] | None = None) -> Transaction:
        """A batch's transaction; `holes`: those its batch found so far (a forget commits the batch before
        it and goes on in a new transaction, which still rewinds them)."""
        return Transaction(self, holes)

    def reread(self, *_partitions) -> None:
        """Partitions moved or were recovered: what is cached of the tables is read from them again."""
        self.marks.reset()
        self.positions.reset()
        self.forgets.reset()


class Transaction:
    """One batch over a worker's state: the answers its records need, and its commit."""

    def __init__(self, state: WorkerState, holes: dict[tuple[str, int], int] | None = None) -> None:
        self.state = state
        self.last: dict[int, object] = {}  # input partition -> its last record applied or refused in the batch
        self.holes = holes if holes is not None else {}  # (topic, partition) -> the offset to rewind it to

    def holds(self, partition: int) -> bool:
        """A record taken before a rebalance moved its partition away is not applied here: its new owner
        reads it again (two writers on one changelog partition otherwise)."""
        return partition in self.state.ownership.held

    async def verdict(self, topic: str, partition: int, offset: int, probe: Probe | None) -> str:
        """positions.check's verdict on an input record; when offsets before it did not come, the broker
        says whether they hold records (a transaction marker or an aborted record holds none): GAP if it
        holds one the consumer skipped, or cannot tell. A GAP is remembered as a hole to rewind."""
        positions = self.state.positions
        verdict = positions.check(topic, partition, offset)
        if verdict == ASK and probe is not None:
            expected = positions.expected(topic, partition)
            positions.reported(topic, partition, expected, await probe.offsets_from(topic, partition, expected))
            verdict = positions.check(topic, partition, offset)
        if verdict in (ASK, GAP):
            self.holes[(topic, partition)] = positions.expected(topic, partition)
            return GAP
        return verdict

    def reached(self, event) -> None:
        """`event` is the last record of its partition so far: the partition's state is written with it."""
        self.last[event.message.partition] = event

    def advance(self, topic: str, partition: int, offset: int) -> None:
        self.state.positions.advance(topic, partition, offset)

    def forgotten(self, scope: str, partition: int, origin: tuple[str, int, int]) -> bool:
        return self.state.forgets.queued_before(scope, partition, origin)

    def home(self, scope: str) -> int:
        return self.state.ownership.partition_of(scope)

    def exists(self, scope: str) -> bool:
        return self.state.store.exists(scope)

    def live(self, scope: str, prefix: str) -> Live:
        return self.state.store.live(scope, prefix)

    def first_time(self, kind: str, scope: str, ident: str, position: str, at, received) -> bool:
        return self.state.marks.first_time(kind, scope, ident, position, at, received)

    def emit(self, partition: int, topic, key: bytes | None, value: bytes, to: int | None = None) -> None:
        self.state.writes.emit(partition, topic, key, value, to)

    def forward(self, topic, key: bytes, value: bytes, to: int, headers: dict[str, bytes]) -> None:
        self.state.writes.forward(topic, key, value, to, headers)

    async def commit(self, scopes: Mapping[str, ScopeChanges]) -> list[str]:
        """Write each input partition's marks, positions, forget filters and changed scopes, then flush
        them with the batch's emits. Returns the scopes written; readable once this returns."""
        state, saved = self.state, []
        by_partition: dict[int, list[tuple[str, ScopeChanges]]] = {}
        for scope, changes in scopes.items():
            by_partition.setdefault(changes.partition, []).append((scope, changes))
        for partition, event in self.last.items():
            set_current_event(event)  # each key's changelog partition is its scope's
            state.marks.write(partition)
            state.positions.write(partition)
            state.forgets.write(partition, state.positions.expected)
            saved += [scope for scope, changes in by_partition.get(partition, ()) if self._save(scope, changes)]
        await state.writes.flush()  # the state is durable before the offsets can be committed
        return saved

    def _save(self, scope: str, changes: ScopeChanges) -> bool:
        store = self.state.store
        if not changes.applied and not changes.live.unsaved:
            store.release(scope)  # nothing applied (redelivered, duplicate or idle): nothing to write
            return False
        store.write(scope, changes.changed, changes.journal)
        self.state.ownership.mark(scope, changes.idle if changes.applied else changes.live.state.idle)
        return True

    async def forget(self, prefix: str, at: tuple[str, int, int], after: dict[str, list[int]] | None,
                     inputs: Iterable[str]) -> tuple[list[str], int]:
        """Right to be forgotten, by the forget record at `at` (topic, partition, offset; its record current):
        delete the user's scopes, entries and duplicate marks on the partition, hold a filter of what was
        queued before it (`after`: the input topics' end offsets when it was sent), make that durable, and
        only then pass its offset. Returns the scopes and the count of marks deleted."""
        state, (topic, partition, offset) = self.state, at
        doomed = state.store.forget(prefix, partition, offset)
        marks = state.marks.forget(prefix, partition)
        if after is not None:
            state.forgets.hold(prefix, partition, {name: ends for name, ends in after.items() if name in inputs})
            state.forgets.write(partition, state.positions.expected)
        for scope in doomed:
            state.ownership.busy.discard(scope)
        await state.writes.flush()
        # Only now: a crash before this point must find the forget request still to apply.
        state.positions.advance(topic, partition, offset)
        return doomed, marks
