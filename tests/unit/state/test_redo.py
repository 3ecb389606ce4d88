"""A batch's writes are all-or-nothing across the five changelog topics: a worker killed after any number
of its records reached the broker restores either the state before the batch or the state after it, never a
mix, once the partition's redo record is applied again (redo.py, TableWrites.replay)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credence.errors import StateError
from credence.streams.state import redo
from credence.streams.state.redo import Write
from credence.streams.state.writes import TableWrites

NAMES = ("scopes", "entries", "lists", "history", "seen")


class Killed(Exception):
    """The process died here: nothing after this send reached the broker."""


@dataclass
class Meta:
    topic_partition: tuple
    offset: int


class Broker:
    """Every changelog record that reached the broker, in order; `budget` sends, then the worker dies."""

    def __init__(self, budget: int | None = None) -> None:
        self.log: list[tuple[str, int, str, bytes | None]] = []
        self.budget = budget

    def restore(self, name: str) -> dict[str, bytes]:
        """What a restore of `name`'s changelog leaves in a fresh local store (last value per key)."""
        out: dict[str, bytes] = {}
        for topic, _, key, value in self.log:
            if topic == name:
                if value is None:
                    out.pop(key, None)
                else:
                    out[key] = value
        return out


class Topic:
    def __init__(self, broker: Broker, name: str) -> None:
        self.broker, self.name = broker, name

    def prepare_key(self, key, serializer):
        return key, None  # kept as the str it was: the log below is read by key

    async def send(self, key, value, partition):
        if self.broker.budget is not None:
            if self.broker.budget == 0:
                raise Killed
            self.broker.budget -= 1
        self.broker.log.append((self.name, partition, key, value))
        done = asyncio.get_running_loop().create_future()
        done.set_result(Meta((self.name, partition), len(self.broker.log)))
        return done


class Store(dict):
    def set_persisted_offset(self, tp, offset) -> None:
        self.persisted = (tp, offset)


class Table:
    key_serializer = value_serializer = "raw"

    def __init__(self, broker: Broker, name: str, data: dict | None = None) -> None:
        self.data = Store(data or {})
        self.changelog_topic = Topic(broker, name)


def tables_on(broker: Broker, restored: Broker | None = None) -> dict[str, Table]:
    return {n: Table(broker, n, restored.restore(n) if restored else None) for n in NAMES}


def write_batch(writes: TableWrites, tables: dict[str, Table], batch: list[tuple[str, str, bytes | None]]) -> None:
    for name, key, value in batch:
        if value is None:
            writes.delete(tables[name], key, 0)
        else:
            writes.put(tables[name], key, value, 0)


def contents(tables: dict[str, Table]) -> dict[str, dict]:
    return {n: {k: v for k, v in t.data.items() if not redo.is_redo_key(k)} for n, t in tables.items()}


FIRST = [("scopes", "a/b/c", b"control-1"), ("lists", "a/b/c\x1fqueue\x1f0", b"item-0"),
         ("entries", "a/b/c\x1fe1", b"entry-1"), ("seen", "position\x1fturns\x1f0", b"next-1")]
SECOND = [("scopes", "a/b/c", b"control-2"), ("lists", "a/b/c\x1fqueue\x1f0", None),
          ("lists", "a/b/c\x1fqueue\x1f1", b"item-1"), ("entries", "a/b/c\x1fe1", None),
          ("history", "a/b/c\x1fe2\x1f0", b"chunk"), ("entries", "a/b/c\x1fe2", b"entry-2"),
          ("seen", "position\x1fturns\x1f0", b"next-2")]


def after(*batches) -> dict[str, dict]:
    state: dict[str, dict] = {n: {} for n in NAMES}
    for batch in batches:
        for name, key, value in batch:
            if value is None:
                state[name].pop(key, None)
            else:
                state[name][key] = value
    return state


def run(broker: Broker, *batches) -> bool:
    """Flush `batches` in order on fresh tables; False if the worker died on the way."""
    tables = tables_on(broker)
    writes = TableWrites(tables)
    try:
        for batch in batches:
            write_batch(writes, tables, batch)
            asyncio.run(writes.flush())
    except Killed:
        return False
    return True


def restored_state(broker: Broker) -> tuple[dict[str, dict], int]:
    """A new worker restores every changelog, then applies the redo records again (as on recovery)."""
    fresh = Broker()
    tables = tables_on(fresh, restored=broker)
    writes = TableWrites(tables)
    replayed = asyncio.run(writes.replay({0}))
    return contents(tables), replayed


def total_sends() -> int:
    broker = Broker()
    assert run(broker, FIRST, SECOND)
    return len(broker.log)


@pytest.mark.parametrize("budget", range(total_sends() + 1))
def test_a_kill_after_any_send_restores_the_state_before_or_after_each_batch(budget: int) -> None:
    broker = Broker(budget)
    run(broker, FIRST, SECOND)
    state, _ = restored_state(broker)
    assert state in (after(), after(FIRST), after(FIRST, SECOND))


def test_without_the_redo_a_kill_mid_batch_leaves_a_mix() -> None:
    """The hazard itself: the changelogs alone, cut after the second batch's first few data records."""
    broker = Broker()
    assert run(broker, FIRST, SECOND)
    cut = next(i for i, r in enumerate(broker.log) if r[2] == "a/b/c" and r[3] == b"control-2") + 1
    torn = Broker()
    torn.log = [r for r in broker.log[:cut]]
    mixed = {n: torn.restore(n) for n in NAMES}
    assert {n: {k: v for k, v in d.items() if not redo.is_redo_key(k)} for n, d in mixed.items()} not in (
        after(FIRST), after(FIRST, SECOND))
    state, replayed = restored_state(torn)
    assert state == after(FIRST, SECOND) and replayed == len(SECOND)


def test_the_redo_record_is_sent_and_acknowledged_before_any_write() -> None:
    broker = Broker()
    assert run(broker, FIRST)
    kinds = [redo.is_redo_key(key) for _, _, key, _ in broker.log]
    assert kinds == [True] + [False] * len(FIRST)


def test_unfenced_nothing_is_sent_before_the_emits_are_acknowledged() -> None:
    """Without transactions every changelog record is readable once sent: none may go before the emits
    the batch's state records as done are durable."""
    async def flushed() -> list:
        broker = Broker()
        tables = tables_on(broker)
        writes = TableWrites(tables)
        write_batch(writes, tables, FIRST)
        emitted = asyncio.get_running_loop().create_future()
        flushing = asyncio.ensure_future(writes.flush(emitted))
        for _ in range(100):  # the flush runs as far as it can without the acknowledgements
            await asyncio.sleep(0)
        sent_before = list(broker.log)
        emitted.set_result(None)
        await flushing
        assert len(broker.log) == 1 + len(FIRST)
        return sent_before

    assert asyncio.run(flushed()) == []


def test_parts_left_by_a_longer_batch_are_deleted_with_it(monkeypatch) -> None:
    monkeypatch.setattr(redo, "PART_BYTES", 16)  # one write per part
    broker = Broker()
    assert run(broker, SECOND, FIRST[:1])
    seen = broker.restore("seen")
    parts = sorted(k for k in seen if redo.is_redo_key(k))
    assert parts == [redo.redo_key(0, 0)]  # SECOND's other parts were tombstoned
    assert redo.complete(lambda i: seen.get(redo.redo_key(0, i)))[1] == [Write(*FIRST[0])]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(NAMES), st.text(min_size=1, max_size=12),
                          st.one_of(st.none(), st.binary(max_size=300))), max_size=40),
       st.integers(min_value=1, max_value=2048))
def test_encoded_parts_decode_to_the_same_writes(writes, part_bytes) -> None:
    batch = [Write(*w) for w in writes]
    old = redo.PART_BYTES
    redo.PART_BYTES = part_bytes
    try:
        parts = redo.encode(batch)
    finally:
        redo.PART_BYTES = old
    assert redo.complete(lambda i: parts[i] if i < len(parts) else None)[1] == batch


def test_a_batch_missing_a_part_is_not_applied(monkeypatch) -> None:
    """Its second part never came: the part stored there is an older batch's."""
    monkeypatch.setattr(redo, "PART_BYTES", 16)
    old = redo.encode([Write("scopes", f"k{i}", b"old") for i in range(3)])
    new = redo.encode([Write("scopes", f"k{i}", b"new") for i in range(2)])
    assert len(old) == 3 and len(new) == 2
    assert redo.complete({0: new[0], 1: old[1], 2: old[2]}.get) is None
    assert redo.complete({0: new[0], 1: new[1], 2: old[2]}.get)[1] == [Write("scopes", "k0", b"new"),
                                                                      Write("scopes", "k1", b"new")]


@pytest.mark.parametrize("raw", [b"not json\nxx", b'{"v":9,"batch":"b","part":0,"parts":1}\n',
                                 b'{"v":1,"batch":"b","part":0,"parts":1}\nnot zlib'])
def test_a_damaged_redo_record_is_a_state_error(raw: bytes) -> None:
    with pytest.raises(StateError):
        redo.complete(lambda i: raw if i == 0 else None)


THIRD = [("scopes", "a/b/c", b"control-3"), ("seen", "position\x1fturns\x1f0", b"next-3")]


def catch_up(tables: dict[str, Table], broker: Broker) -> None:
    """A worker given its partition back on the store it kept: Faust applies each changelog's records past
    the store's persisted offset (the broker's offsets here are positions in its one log)."""
    for name, table in tables.items():
        start = getattr(table.data, "persisted", (None, 0))[1]
        for offset, (topic, _, key, value) in enumerate(broker.log, start=1):
            if topic == name and offset > start:
                if value is None:
                    table.data.pop(key, None)
                else:
                    table.data[key] = value


@pytest.mark.parametrize("budget", range(total_sends() + 1))
def test_a_store_kept_through_a_kill_holds_nothing_the_changelogs_miss(budget: int) -> None:
    """Killed anywhere in a batch, a worker keeps its store on disk; the partition moves on (another worker
    restores it, applies the last redo record again and writes a batch), then comes back to that store:
    after the changelogs' tail and the redo record it holds exactly what a fresh restore holds, no key
    written only into the killed worker's store."""
    broker = Broker(budget)
    kept = tables_on(broker)
    writes = TableWrites(kept)
    try:
        for batch in (FIRST, SECOND):
            write_batch(writes, kept, batch)
            asyncio.run(writes.flush())
    except Killed:
        pass
    broker.budget = None
    other = tables_on(broker, restored=broker)
    asyncio.run(TableWrites(other).replay({0}))
    moved_on = TableWrites(other)
    write_batch(moved_on, other, THIRD)
    asyncio.run(moved_on.flush())

    catch_up(kept, broker)
    asyncio.run(TableWrites(kept).replay({0}))
    fresh, _ = restored_state(broker)
    assert contents(kept) == fresh
