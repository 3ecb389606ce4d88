"""A batch whose step fails mid-way: nothing of the failed record is left, the records around it are."""

from datetime import timedelta

from credence.records.inputs import as_record
from credence.streams.runtime.batch import RELEASE, Applied, ScopeWork, apply, rebuild
from credence.tables.scope import tenant_of
from tests.support.scope_tables import SCOPE, T0, make_context, store_over, turn


def applied(kind, record, *rest) -> Applied:
    """An input as the agent hands it to the step: its record typed."""
    return Applied(kind, as_record(kind, record), *rest)


def test_a_step_that_fails_half_way_leaves_nothing_behind(tables, ownership):
    store = store_over(tables, ownership)
    work = ScopeWork(store.live(SCOPE), partition=0, tenant=tenant_of(SCOPE))
    ctx = apply(work, applied("turn", turn(1, "I love hiking in the Alps"), T0, True, "turns:0", 0, True),
                make_context)
    [request] = ctx.requests
    bad = {"type": "result", "request_id": request.id, "task": "stage1", "output": {"facts": [{"bogus": 1}]}}
    item = applied("result", bad, T0, True, "facts:0", 0, False)
    try:
        apply(work, item, make_context)
        raise AssertionError("the malformed result must make the step raise")
    except KeyError:
        pass
    assert request.id not in work.live.state.requests  # the step popped it before failing: half-applied
    work = rebuild(store, SCOPE, work, make_context)
    state = work.live.state
    assert request.id in state.requests and state.turns == 1 and state.applied == {"turns:0": 0}
    assert [e.topic for e in work.emits] == [] and [r.id for r in work.requests] == [request.id]
    apply(work, Applied(RELEASE, {"request_id": request.id}, T0, True, "facts:0", 0, False), make_context)
    apply(work, applied("turn", turn(2, "ok", T0 + timedelta(minutes=1)), T0 + timedelta(minutes=1), True,
                        "turns:0", 1, True), make_context)
    store.write(SCOPE, work.changed, work.journal)
    stored = store_over(tables, ownership).get(SCOPE)
    assert request.id not in stored.requests and stored.turns == 2
    assert stored.applied == {"turns:0": 1, "facts:0": 0}


def test_rebuild_gives_the_state_of_the_records_before_the_failure(tables, ownership):
    store = store_over(tables, ownership)
    records = [turn(i, t, T0 + timedelta(hours=i)) for i, t in enumerate(["hello", "I have a dog", "bye"])]
    work = ScopeWork(store.live(SCOPE), partition=0, tenant=tenant_of(SCOPE))
    for i, r in enumerate(records):
        apply(work, applied("turn", r, T0 + timedelta(hours=i), True, "turns:0", i, True), make_context)
    expected = work.live.state.to_dict()
    work.live.state.turns += 40  # whatever a failing step scribbled
    work = rebuild(store, SCOPE, work, make_context)
    assert work.live.state.to_dict() == expected
    assert tables.scopes == {}  # nothing written before the batch commits


def test_a_facts_event_goes_through_the_batch_and_leaves_no_key_behind(tables, ownership):
    # Facts events share the journal's envelope (docs/records.md) but name no entry: the store must not
    # keep an entry or history under their id.
    from credence.tables.entries import new_persona_entry
    from credence.tables.scope import Scope
    from tests.unit.scope.conftest import run_request

    store = store_over(tables, ownership)
    work = ScopeWork(store.live(SCOPE), partition=0, tenant=tenant_of(SCOPE))
    # an unrelated persona entry, so Stage-2 has a candidate to compare (with none the step skips the call)
    candidate = new_persona_entry("p-candidate", Scope.parse(SCOPE), "The user's name is Kim.", T0, subject="name")
    work.live.state.entries[candidate.id] = candidate
    [stage1] = apply(work, applied("turn", turn(1, "I love hiking"), T0, True, "turns:0", 0, True),
                     make_context).requests
    result = {"type": "result", "request_id": stage1.id, "task": "stage1", "output": run_request(stage1)}
    [stage2] = apply(work, applied("result", result, T0, True, "facts:0", 0, False), make_context).requests
    failed = {"type": "failed", "request_id": stage2.id, "task": "stage2", "error": "timeout"}
    apply(work, applied("failed", failed, T0, False, "control:0", 0, False), make_context)  # switched off
    assert [j["event"] for j in work.journal] == ["stage2_dropped"]
    assert work.changed == set()  # no entry key to write, so no put and tombstone on the changelogs
    store.write(SCOPE, work.changed, work.journal)
    assert tables.entries == {} and tables.history == {}
    stored = store_over(tables, ownership).get(SCOPE)
    assert stage2.id not in stored.requests and all(f["stage2"] == "skipped" for f in stored.facts.values())


def test_the_work_keeps_whether_the_scope_is_idle_after_each_record_applied(tables, ownership):
    # The commit marks a scope busy or idle from this (streams/state/transaction.py), not from the state.
    store = store_over(tables, ownership)
    work = ScopeWork(store.live(SCOPE), partition=0, tenant=tenant_of(SCOPE))
    assert work.idle is None  # nothing applied yet
    [request] = apply(work, applied("turn", turn(1, "I love hiking in the Alps"), T0, True, "turns:0", 0, True),
                      make_context).requests
    assert work.idle is False and work.idle == work.live.state.idle  # its Stage-1 request is open
    apply(work, Applied(RELEASE, {"request_id": request.id}, T0, True, "facts:0", 0, False), make_context)
    assert work.idle == work.live.state.idle
