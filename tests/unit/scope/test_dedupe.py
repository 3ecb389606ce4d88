"""`credence memory dedupe`: near-duplicate live entries already stored are found (dry run) and, through a
control record the scope's owner applies, merged by the journalled merge path."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from credence.config.memory import MemorySettings
from credence.records.control import decode_control, dedupe_record
from credence.streams.scope.dedupe import duplicate_pairs
from credence.tables.clock import format_instant
from credence.tables.entries import new_persona_entry, new_reflection
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
S = Scope("acme", "u1", "aria")


def _twins(state):
    for e in (new_persona_entry("p-a", S, "The user is learning French with a tutor.", T0, subject="french"),
              new_persona_entry("p-b", S, "The user is learning French.", T0 + timedelta(days=1), subject="french"),
              new_persona_entry("p-c", S, "The user lives in Montreal.", T0, subject="home"),
              new_reflection("r-a", S, "The user likes running.", T0, subject="running"),
              new_reflection("r-b", S, "The user likes running in the rain.", T0, subject="running rain"),
              new_reflection("r-c", S, "The user is learning French.", T0, subject="french")):
        state.entries[e.id] = e


def test_the_plan_pairs_each_duplicate_with_the_entry_it_merges_into(driver_factory):
    d = driver_factory()
    _twins(d.state)
    plan = duplicate_pairs(list(d.state.entries.values()), T0, MemorySettings())
    assert [(keep.id, drop.id) for keep, drop in plan] == [("p-a", "p-b"), ("p-a", "r-c"), ("r-a", "r-b")]


def test_a_dedupe_control_record_merges_duplicates_through_the_journal(driver_factory):
    d = driver_factory()
    _twins(d.state)
    record = decode_control(_raw(dedupe_record("acme/u1/aria", "ops", T0 + timedelta(days=2))))
    d.step("dedupe", record, T0 + timedelta(days=2))
    live = sorted(e.id for e in d.state.entries.values() if e.status in ("active", "pending"))
    assert live == ["p-a", "p-c", "r-a"]
    assert d.state.entries["p-a"].merged_from_ids == ("p-b", "r-c")
    assert d.state.entries["r-a"].text == "The user likes running in the rain."  # the richer text
    assert sorted(a["entry_id"] for a in d.archives()) == ["p-b", "r-b", "r-c"]
    assert all(a["entry"]["merged_into_id"] in ("p-a", "r-a") for a in d.archives())
    causes = {(j["entry_id"], j["event"], j["cause"]) for j in d.journal()}
    assert {("p-a", "merged", "dedupe:ops"), ("p-b", "archived", "dedupe:ops")} <= causes
    assert duplicate_pairs(list(d.state.entries.values()), T0, MemorySettings()) == []
    before = len(d.journal())
    d.step("dedupe", record, T0 + timedelta(days=2))  # again: nothing left to merge, nothing journalled
    assert len(d.journal()) == before


def test_dedupe_record_is_a_valid_control_record():
    record = dedupe_record("acme/u1/aria", "ops", T0)
    assert decode_control(_raw(record))["ts"] == format_instant(T0)


def _raw(record: dict) -> bytes:
    return json.dumps(record).encode()
