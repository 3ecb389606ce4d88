"""The scope store: what a batch writes is what a fresh worker reads back, readers never see a batch in
flight, schema-1 values are split on first touch, entry history is bounded, live scopes are bounded."""

from datetime import timedelta

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from credence.records.inputs import as_record
from credence.streams.runtime.batch import Applied, ScopeWork, apply
from credence.streams.scope.scope_state import ScopeState
from credence.streams.state import codec, versions
from credence.tables.scope import tenant_of
from credence.tables.statement import _verdict, is_self_contained

from .conftest import SCOPE, T0, make_context, new_tables, store_over, turn


def applied(kind, record, *rest) -> Applied:
    """An input as the agent hands it to the step: its record typed."""
    return Applied(kind, as_record(kind, record), *rest)

TEXTS = ["I love hiking in the Alps", "My sister lives in Berlin", "I work as a nurse at night",
         "I play the cello every Sunday", "I am allergic to peanuts"]


def run_batch(store, scope: str, records: list[dict], first_offset: int = 0) -> ScopeWork:
    """Apply `records` (turns) to the scope's live state as one batch and write it, like the agent."""
    work = ScopeWork(store.live(scope), partition=0, tenant=tenant_of(scope))
    for i, record in enumerate(records):
        now = T0 + timedelta(minutes=first_offset + i)
        apply(work, applied("turn", record, now, True, "turns:0", first_offset + i, True), make_context)
    store.write(scope, work.changed, work.journal)
    return work


def feed(store, scope: str, n: int) -> None:
    """n turns, each batch also applying every LLM result the turn leads to (the rules backend's), so
    entries are created and reinforced."""
    from tests.unit.scope.conftest import run_request

    offset = store.control(scope).applied.get("turns:0", -1) + 1 if store.control(scope) else 0
    for i in range(offset, offset + n):
        work = ScopeWork(store.live(scope), partition=0, tenant=tenant_of(scope))
        now = T0 + timedelta(hours=i)
        ctx = apply(work, applied("turn", turn(i, TEXTS[i % len(TEXTS)], now, scope), now, True, "turns:0", i,
                                  True), make_context)
        pending, results = list(ctx.requests), 0
        while pending:
            req = pending.pop(0)
            record = {"type": "result", "request_id": req.id, "task": req.task, "output": run_request(req)}
            position_offset = 1000 * i + results
            results += 1
            ctx = apply(work, applied("result", record, now, True, "facts:0", position_offset, False), make_context)
            pending += ctx.requests
        store.write(scope, work.changed, work.journal)


def test_what_a_batch_writes_a_fresh_store_reads_back(tables, ownership):
    store = store_over(tables, ownership)
    feed(store, SCOPE, 6)
    live = store.get(SCOPE)
    fresh = store_over(tables, ownership).get(SCOPE)  # a restarted worker: nothing live
    assert fresh.to_dict() == live.to_dict()
    assert set(k for k in tables.entries) == {codec.entry_key(SCOPE, e) for e in live.entries}
    assert orjson.loads(tables.scopes[SCOPE])["v"] == codec.SCHEMA


def test_only_changed_entries_are_rewritten(tables, ownership):
    store = store_over(tables, ownership)
    feed(store, SCOPE, 4)
    before = dict(tables.entries)
    run_batch(store, SCOPE, [turn(99, "ok")], first_offset=100)  # a turn that changes no entry
    assert dict(tables.entries) == before


def test_readers_get_the_stored_state_while_a_batch_is_in_flight(tables, ownership):
    store = store_over(tables, ownership)
    run_batch(store, SCOPE, [turn(1, "hello")])
    work = ScopeWork(store.live(SCOPE), partition=0, tenant=tenant_of(SCOPE))
    apply(work, applied("turn", turn(2, "again"), T0, True, "turns:0", 5, True), make_context)
    assert store.get(SCOPE).turns == 1  # stepped in memory, not written: not visible
    store.write(SCOPE, work.changed, work.journal)
    assert store.get(SCOPE).turns == 2


def test_a_copy_handed_to_a_reader_does_not_follow_later_steps(tables, ownership):
    store = store_over(tables, ownership)
    run_batch(store, SCOPE, [turn(1, "hello")])
    copy = store.get(SCOPE)
    run_batch(store, SCOPE, [turn(2, "again")], first_offset=1)
    assert copy.turns == 1 and store.get(SCOPE).turns == 2


def test_schema_1_values_are_migrated_on_first_touch(tables, ownership):
    old = store_over(tables, ownership)
    feed(old, SCOPE, 5)
    state = old.get(SCOPE)
    assert state.entries, "the fixture must have entries to migrate"
    legacy = new_tables()
    legacy.scopes[SCOPE] = orjson.dumps(state.to_dict())  # one JSON state per scope, no schema version
    legacy.seen["turns\x1facme/u1/aria\x1ft1"] = b'"turns:0:0"'
    store = store_over(legacy, ownership)
    assert store.get(SCOPE).to_dict() == state.to_dict()  # readable before it is touched
    run_batch(store, SCOPE, [turn(50, "ok")], first_offset=50)
    assert orjson.loads(legacy.scopes[SCOPE])["v"] == codec.SCHEMA
    assert set(legacy.entries) == {codec.entry_key(SCOPE, e) for e in state.entries}
    migrated = store_over(legacy, ownership).get(SCOPE)
    assert migrated.entries == state.entries and migrated.turns == state.turns + 1


def test_history_is_the_entrys_journal_oldest_first_and_bounded(tables, ownership):
    store = store_over(tables, ownership, history_max=3)
    feed(store, SCOPE, 10)
    state = store.get(SCOPE)
    for eid in state.entries:
        items = store.history(SCOPE, eid)
        assert 1 <= len(items) <= 3
        assert items[-1]["version"] == state.entries[eid].version  # newest last
        assert [i["version"] for i in items] == sorted(i["version"] for i in items)
    assert len(history_chunks(tables)) <= 3 * len(state.entries)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=45), min_size=1, max_size=12), st.integers(1, 70))
def test_history_keeps_exactly_the_newest_events_whatever_the_batches(batches, keep):
    """Journal events arriving in batches of any size: history() is the newest `keep` of them in order,
    and the stored chunks stay within the ring however many events there were."""
    from credence.streams.state.history import CHUNK
    from credence.streams.state.ownership import Ownership

    tables = new_tables()
    ownership = Ownership(4, "credence.turns")
    store = store_over(tables, ownership, history_max=keep)
    entry = next(iter(_entry_state().entries.values()))
    sent = 0
    for size in batches:
        live = store.live(SCOPE)
        live.state.entries[entry.id] = entry
        journal = [{"entry_id": entry.id, "event": "signal", "cause": f"c{sent + i}", "at": None, "score": 0.0,
                    "tier": "pending", "entry": entry.to_dict()} for i in range(size)]
        sent += size
        store.write(SCOPE, {entry.id}, journal)
    causes = [i["cause"] for i in store.history(SCOPE, entry.id)]
    assert causes == [f"c{n}" for n in range(max(0, sent - keep), sent)]
    assert len(history_chunks(tables)) <= -(-keep // CHUNK) + 1


def _entry_state() -> ScopeState:
    from credence.tables.entries import new_reflection
    from credence.tables.scope import Scope

    state = ScopeState(scope=SCOPE)
    entry = new_reflection("r-1", Scope.parse(SCOPE), "likes hiking", T0)
    state.entries[entry.id] = entry
    return state


def history_chunks(tables) -> dict:
    """The history table's signal-history chunks, without the entries' kept versions (versions.py)."""
    return {k: v for k, v in tables.history.items() if not codec.split_key(k)[-1].startswith("v")}


def test_archiving_an_entry_deletes_its_history(tables, ownership):
    store = store_over(tables, ownership)
    entry = next(iter(_entry_state().entries.values()))
    live = store.live(SCOPE)
    live.state.entries[entry.id] = entry
    record = {"entry_id": entry.id, "event": "created", "cause": "x", "at": None, "score": 0.0, "tier": "pending",
              "entry": entry.to_dict()}
    store.write(SCOPE, {entry.id}, [record] * 50)
    assert tables.history
    live = store.live(SCOPE)
    del live.state.entries[entry.id]
    store.write(SCOPE, {entry.id}, [record])
    assert history_chunks(tables) == {} and tables.entries == {} and store.history(SCOPE, entry.id) == []
    # its versions stay, for as-of reads of the time it was live (streams/state/versions.py)
    assert set(tables.history) == {versions.version_key(SCOPE, entry.id, entry.version)}


def test_version_grows_when_entries_change_only(tables, ownership):
    store = store_over(tables, ownership)
    assert store.version(SCOPE) == 0
    feed(store, SCOPE, 3)
    v = store.version(SCOPE)
    assert v > 0
    run_batch(store, SCOPE, [turn(77, "ok")], first_offset=77)
    assert store.version(SCOPE) == v


def test_live_scopes_are_bounded_and_dropped_with_their_partition(tables, ownership):
    store = store_over(tables, ownership, live_scopes_max=3)
    scopes = [f"acme/u{i}/aria" for i in range(8)]
    for i, scope in enumerate(scopes):
        run_batch(store, scope, [turn(i, "hi", scope=scope)])
    assert store.live_count() == 3
    assert all(store.get(s).turns == 1 for s in scopes)  # evicted ones are read from the tables
    held = {ownership.partition_of(s) for s in scopes[-3:]}
    store.drop_partitions(held)
    assert store.live_count() == 0


def test_forget_deletes_every_key_of_the_user_on_that_partition_only(tables, ownership):
    store = store_over(tables, ownership)
    feed(store, "acme/u1/aria", 3)
    feed(store, "acme/u2/aria", 3)
    part = ownership.partition_of("acme/u1/aria")
    is_self_contained("The user has a dog named Rex.")  # a user's text in the gate's memo cache
    assert store.forget("acme/u1/", part) == ["acme/u1/aria"]
    assert _verdict.cache_info().currsize == 0  # the forget reached the memo caches (tables/memo.py)
    assert store.get("acme/u1/aria") is None
    assert not [k for k in list(tables.entries) + list(tables.history) if k.startswith("acme/u1/")]
    assert store.get("acme/u2/aria").entries


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=6))
def test_any_batching_of_the_same_records_stores_the_same_state(sizes):
    """Whatever the batch boundaries, the stored state equals one record per batch (the old layout's
    write-every-record behaviour)."""
    from tests.unit.state.conftest import Ownership

    ownership = Ownership(4, "credence.turns")
    records = [turn(i, TEXTS[i % len(TEXTS)], T0 + timedelta(hours=i)) for i in range(sum(sizes))]
    one, batched = store_over(new_tables(), ownership), store_over(new_tables(), ownership)
    for i, record in enumerate(records):
        run_batch(one, SCOPE, [record], first_offset=i)
    start = 0
    for size in sizes:
        run_batch(batched, SCOPE, records[start:start + size], first_offset=start)
        start += size
    fresh = store_over(batched._scopes and StateTablesOf(batched), ownership).get(SCOPE)
    assert fresh.to_dict() == one.get(SCOPE).to_dict()


def StateTablesOf(store):  # noqa: N802 - the tables a store writes, for a fresh reader
    from credence.streams.state.store import StateTables

    return StateTables(store._scopes, store._entries, store._lists.table, store._history.table, {})


def test_a_new_scope_state_is_empty():
    assert ScopeState(scope=SCOPE).entries == {}


def test_queued_inputs_are_stored_one_key_each_and_deleted_when_drained(tables, ownership):
    """Turns that wait behind an LLM request are stored under their own keys (not in the control value
    every batch rewrites); a fresh reader sees them in order; draining deletes them."""
    from tests.unit.scope.conftest import run_request

    store = store_over(tables, ownership)
    work = ScopeWork(store.live(SCOPE), partition=0, tenant=tenant_of(SCOPE))
    ctx = apply(work, applied("turn", turn(0, TEXTS[0]), T0, True, "turns:0", 0, True), make_context)
    [req] = ctx.requests
    for i in range(1, 6):
        apply(work, applied("turn", turn(i, TEXTS[i % 5]), T0, True, "turns:0", i, True), make_context)
    store.write(SCOPE, work.changed, work.journal)
    queued = [k for k in tables.lists if "\x1fqueue\x1f" in k]
    assert len(queued) == 5 and b"record" not in tables.scopes[SCOPE]
    fresh = store_over(tables, ownership).get(SCOPE)
    assert [q["record"]["turn_id"] for q in fresh.queue] == [f"t{i}" for i in range(1, 6)]
    work = ScopeWork(store.live(SCOPE), partition=0, tenant=tenant_of(SCOPE))
    pending, n = [req], 0
    while pending:  # answer every request the queued turns lead to: the queue drains
        req = pending.pop(0)
        record = {"type": "result", "request_id": req.id, "task": req.task, "output": run_request(req)}
        pending += apply(work, applied("result", record, T0, True, "facts:0", n, False), make_context).requests
        n += 1
    store.write(SCOPE, work.changed, work.journal)
    left = store.get(SCOPE).queue
    assert len([k for k in tables.lists if "\x1fqueue\x1f" in k]) == len(left) < 5
    assert store_over(tables, ownership).get(SCOPE).queue == left


def test_a_scope_that_cannot_be_read_is_left_out_of_the_counts_and_named(tables, ownership, caplog):
    """One damaged (or still recovering) scope must not take /status and /metrics down with it."""
    store = store_over(tables, ownership)
    other = "acme/u2/aria"
    feed(store, SCOPE, 3)
    feed(store, other, 3)
    run_batch(store, SCOPE, [turn(90, "I love tea"), turn(91, "I love coffee")], first_offset=90)
    del tables.lists[next(k for k in tables.lists if k.startswith(SCOPE))]  # a list item the control names
    fresh = store_over(tables, ownership)
    assert [s.scope for s in fresh.states()] == [other]
    assert fresh.unreadable == {SCOPE} and caplog.text.count("cannot be read") == 1
    assert [s.scope for s in fresh.states()] == [other] and caplog.text.count("cannot be read") == 1  # logged once


def _counts(state: ScopeState) -> tuple:
    return (state.turns, len(state.queue), len(state.requests), state.idle, state.entries_version)


def _summary(store, scope: str) -> tuple:
    s = store.summary(scope)
    return (s.turns, s.queued, s.requests, s.idle, s.entries_version)


def test_a_scopes_summary_is_its_states_counts_live_stored_pending_and_legacy(tables, ownership):
    """Probes (/scopes, ticks, the unfinished-work scan) read counts without decoding queued items; they
    are the full state's counts whichever copy answers."""
    store = store_over(tables, ownership)
    work = ScopeWork(store.live(SCOPE), partition=0, tenant=tenant_of(SCOPE))
    for i in range(4):  # the first turn asks Stage 1; the rest queue behind it
        apply(work, applied("turn", turn(i, TEXTS[i]), T0, True, "turns:0", i, True), make_context)
    store.write(SCOPE, work.changed, work.journal)
    state = store.get(SCOPE)
    assert len(state.queue) == 3 and state.requests and not state.idle
    assert _summary(store, SCOPE) == _counts(state)  # live
    assert _summary(store_over(tables, ownership), SCOPE) == _counts(state)  # stored only
    work = ScopeWork(store.live(SCOPE), partition=0, tenant=tenant_of(SCOPE))
    apply(work, applied("turn", turn(9, "more"), T0, True, "turns:0", 9, True), make_context)
    assert _summary(store, SCOPE) == _counts(state)  # a batch in flight: the stored counts
    legacy = new_tables()
    legacy.scopes[SCOPE] = orjson.dumps(state.to_dict())  # schema 1: the lists inline
    assert _summary(store_over(legacy, ownership), SCOPE) == _counts(state)
    assert store.summary("acme/nobody/aria") is None
    assert store.version(SCOPE) == state.entries_version


@settings(max_examples=25, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(min_value=0, max_value=2), st.integers(min_value=1, max_value=3)),
                      min_size=1, max_size=6))
def test_a_tally_is_the_full_recount_and_reads_only_the_scopes_that_moved(steps):
    """/status and /metrics count per scope and recount a scope only when its stamp moved; the sum is
    always what counting every state afresh gives, and a scope that did not move is not read again."""
    from collections import Counter

    from credence.streams.state.ownership import Ownership
    from credence.streams.state.tally import Tally

    tables, ownership = new_tables(), Ownership(1, "turns")
    ownership.held = {0}
    store = store_over(tables, ownership)
    scopes = [f"acme/u{i}/aria" for i in range(3)]
    read: list[str] = []

    def kinds(state: ScopeState) -> Counter:
        read.append(state.scope)
        return Counter((e.kind, e.status) for e in state.entries.values())

    tally = Tally(store, kinds)
    for which, turns in steps:
        feed(store, scopes[which], turns)
        read.clear()
        counted = tally()
        expected = Counter((e.kind, e.status) for s in store_over(tables, ownership).states() for e in s.entries.values())
        assert counted == expected
        assert read == [scopes[which]]  # only the scope this step moved
    store.forget("acme/u0/", 0)
    assert tally() == Counter((e.kind, e.status) for s in store.states() for e in s.entries.values())
