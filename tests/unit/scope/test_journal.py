"""The journal reproduces the scope's entries; the scope state survives its changelog form."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from credence.streams.scope.context import FACTS_KIND
from credence.streams.scope.requests import reflection_id
from credence.streams.scope.scope_state import ScopeState
from credence.tables.entries import Entry, apply_snapshot, new_persona_entry
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = "acme/u1/aria"
IDS = [reflection_id(SCOPE, t) for t in ("The user loves hiking.", "The user likes tea.", "The user has a dog.")]
FIXTURES_OK = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

TEXTS = ["I love hiking", "I really love hiking", "I hate hiking", "I like tea", "I don't like tea",
         "I have a dog", "yes, exactly", "no, that's wrong", "ok cool", "no, not the dog", "My name is Sam"]
steps = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.integers(0, 3 * 3600), st.sampled_from(TEXTS)),
        st.tuples(st.just("ai"), st.integers(0, 600), st.lists(st.sampled_from(IDS + ["p-card"]), max_size=2)),
        *[st.tuples(st.just("feedback"), st.integers(0, 600),
                    st.tuples(st.sampled_from(IDS), st.sampled_from(["confirm", "deny", "ignore"])))] * 2,
        st.tuples(st.just("flush"), st.just(0), st.none()),
        st.tuples(st.just("tick"), st.sampled_from([3600, 86400, 7 * 86400, 15 * 86400]) | st.integers(0, 20 * 86400),
                  st.none()),
        st.tuples(st.just("switch"), st.just(0), st.none()),
    ),
    min_size=6,
    max_size=30,
)
# Every script starts from a scope that already holds three pending reflections, so short random scripts
# reach feedback, promotion, denial and archival.
PREAMBLE = [("user", 0, "I love hiking"), ("user", 1, "I like tea"), ("user", 1, "I have a dog"),
            ("flush", 0, None)]


def drive(driver, script) -> None:
    at = T0
    for n, (kind, gap, arg) in enumerate(PREAMBLE + script):
        at += timedelta(seconds=gap)
        if kind == "user":
            driver.turn(arg, at)
        elif kind == "ai":
            driver.turn("As you told me...", at, role="ai", surfaced_ids=list(arg))
        elif kind == "feedback":
            driver.feedback(arg[0], arg[1], at, feedback_id=f"fb{n}")
        elif kind == "flush":
            driver.flush()
        elif kind == "tick":
            driver.tick(at)
        else:
            driver.powerful = not driver.powerful
    driver.flush()
    driver.pump()


def with_card(state_factory) -> ScopeState:
    state = state_factory()
    card = new_persona_entry("p-card", Scope("acme", "u1", "aria"), "Aria is a pirate.", T0, protected=True)
    state.entries[card.id] = card
    return state


def replay(records: list[dict], into: dict[str, Entry] | None = None) -> dict[str, Entry]:
    view = dict(into or {})
    for rec in records:
        if rec["entry_kind"] == FACTS_KIND:
            continue  # what became of a request's facts: no entry to fold
        snap = Entry.from_dict(json.loads(json.dumps(rec["entry"])))
        view[snap.id] = apply_snapshot(view.get(snap.id), snap)
    return view


@FIXTURES_OK
@given(script=steps, powerful=st.booleans(), auto=st.booleans())
def test_replaying_the_journal_reproduces_the_entries(driver_factory, state_factory, script, powerful, auto):
    state = with_card(state_factory)
    card = state.entries["p-card"]
    d = driver_factory(state=state, powerful=powerful, auto=auto)
    drive(d, script)
    journal = d.journal()
    for rec in journal:
        assert rec["event_id"] == f"{rec['entry']['id']}@{rec['entry']['version']}"
        assert rec["entry_id"] == rec["entry"]["id"] and rec["entry_kind"] == rec["entry"]["kind"]
    # one event per change: no two events carry different snapshots under the same event id
    by_id: dict[str, dict] = {}
    for rec in journal:
        assert by_id.setdefault(rec["event_id"], rec["entry"]) == rec["entry"]
    expected = dict(d.state.entries)
    del expected["p-card"]  # the character card is not journalled by the scope
    for archive in d.archives():  # archived entries' final snapshots, unless re-created since
        if archive["entry_id"] not in d.state.entries:
            expected[archive["entry_id"]] = Entry.from_dict(archive["entry"])
    assert d.state.entries["p-card"] == card
    view = replay(journal)
    assert view == expected
    assert replay(journal, into=view) == view  # idempotent: a second replay changes nothing
    assert replay(list(reversed(journal))) == expected  # order-independent: newest version wins


@settings(FIXTURES_OK, max_examples=50)
@given(script=steps, powerful=st.booleans(), auto=st.booleans())
def test_scope_state_round_trips_through_json(driver_factory, state_factory, script, powerful, auto):
    d = driver_factory(state=with_card(state_factory), powerful=powerful, auto=auto)
    at = T0
    # no final flush: keep windows, queues and requests open
    for n, (kind, gap, arg) in enumerate(PREAMBLE + script):
        at += timedelta(seconds=gap)
        if kind == "user":
            d.turn(arg, at)
        elif kind == "feedback":
            d.feedback(arg[0], arg[1], at, feedback_id=f"fb{n}")
        elif kind == "tick":
            d.tick(at)
        elif kind == "flush":
            d.flush()
    wire = json.loads(json.dumps(d.state.to_dict()))
    restored = ScopeState.from_dict(wire)
    assert restored.to_dict() == d.state.to_dict()
    assert restored.entries == d.state.entries
    assert restored.requests == d.state.requests
    assert (restored.clock, restored.window_started_at, restored.last_sweep_at, restored.switched_off_at) == \
        (d.state.clock, d.state.window_started_at, d.state.last_sweep_at, d.state.switched_off_at)
    # and the restored state, picked up by a new worker run, carries on exactly like the original
    twin = driver_factory(state=restored, powerful=powerful, auto=True, boot="boot-2")
    twin.step("tick", {"type": "tick"})  # re-issues what the old run had in flight
    d.auto = True
    for driver in (d, twin):
        driver.pump()
        driver.flush()
        driver.tick(at + timedelta(days=3))
    assert twin.state.requests == {} and d.state.requests == {}
    assert twin.state.to_dict() == d.state.to_dict()


def test_round_trip_of_an_empty_state(state_factory):
    state = state_factory()
    assert ScopeState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def test_an_observation_stated_again_after_archival_keeps_the_journal_consistent(driver_factory):
    hiking = IDS[0]
    d = driver_factory()
    d.turn("I love hiking", T0)
    d.flush()
    d.feedback(hiking, "deny", T0 + timedelta(minutes=1))
    d.tick(T0 + timedelta(days=20))
    assert hiking not in d.state.entries and len(d.archives()) == 1
    d.turn("I love hiking", T0 + timedelta(days=21))
    d.flush()
    journal = d.journal()
    by_id: dict[str, dict] = {}
    for rec in journal:
        assert by_id.setdefault(rec["event_id"], rec["entry"]) == rec["entry"], rec["event_id"]
    live = d.state.entries[hiking]
    assert live.status == "pending" and live.version > Entry.from_dict(d.archives()[0]["entry"]).version
    assert replay(journal) == d.state.entries


def test_a_step_on_a_restored_state_never_mutates_the_stored_value(driver_factory):
    """The table value is the all-or-nothing unit: a step that fails half-way must leave it as it was,
    so the state a step works on shares nothing mutable with the stored dict (memory table store)."""
    d = driver_factory(auto=False)
    d.turn("I love hiking and I like tea", T0)
    d.flush()
    d.pump_one()  # facts now wait for Stage-2
    (stage2,) = d.outbox
    stored = d.state.to_dict()
    pristine = json.loads(json.dumps(stored))
    restored = driver_factory(state=ScopeState.from_dict(stored), auto=True, powerful=False)
    restored.result(stage2, {"classifications": []})
    restored.turn("I have a dog", T0 + timedelta(minutes=1))
    restored.flush()
    assert restored.state.facts != ScopeState.from_dict(pristine).facts  # the steps did change the state
    assert json.loads(json.dumps(stored)) == pristine
