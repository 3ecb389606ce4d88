"""An import record applied by the scope's step: every snapshot as it came (journalled "imported"), an
archived one through the archive, nothing of a bad record, nothing again for the same import."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from credence.errors import DomainError
from credence.streams.scope.imports import KIND
from credence.tables.entries import ARCHIVED, CONFIRMED, Entry, new_persona_entry, new_reflection
from credence.tables.evidence import Evidence
from credence.tables.scope import Scope

from .conftest import SCOPE_KEY, T0

SCOPE = Scope.parse(SCOPE_KEY)
EARLIER = datetime(2025, 11, 3, 8, 30, tzinfo=UTC)


def entries() -> list[Entry]:
    confirmed = replace(new_reflection("ref_a", SCOPE, "The user likes tea.", EARLIER), status=CONFIRMED,
                        confirmed_at=EARLIER + timedelta(days=2), version=7,
                        evidence=Evidence(1.5, 0.25, EARLIER + timedelta(days=2), EARLIER + timedelta(days=9),
                                          3, (EARLIER + timedelta(days=9)).date(), 4))
    gone = replace(new_persona_entry("manual_b", SCOPE, "The user lives in Oslo.", EARLIER), status=ARCHIVED,
                   archived_at=EARLIER + timedelta(days=30), version=3)
    return [confirmed, gone]


def record(items: list[Entry], import_id: str = "imp-1") -> dict:
    return {"type": KIND, **SCOPE.fields(), "import_id": import_id, "entries": [e.to_dict() for e in items],
            "by": "ops", "ts": T0.isoformat()}


def test_snapshots_apply_as_they_came(driver_factory):
    d = driver_factory()
    confirmed, gone = entries()
    d.step(KIND, record([confirmed, gone]), T0)
    assert d.state.entries == {"ref_a": confirmed}  # version, counters, clocks untouched
    assert d.state.archived == {"manual_b": 3}
    journal = d.journal()
    assert [(e["entry_id"], e["event"], e["cause"], e["event_id"]) for e in journal] == [
        ("ref_a", "imported", "import:ops", "ref_a@7"), ("manual_b", "imported", "import:ops", "manual_b@3")]
    assert [Entry.from_dict(e["entry"]) for e in journal] == [confirmed, gone]
    (archived,) = d.archives()
    assert archived["entry_id"] == "manual_b" and archived["archived_at"].startswith("2025-12-03")
    assert d.state.imports == ["imp-1"]


def test_the_same_import_again_changes_nothing(driver_factory):
    d = driver_factory()
    d.step(KIND, record(entries()), T0)
    d.emits.clear()
    d.step(KIND, record(entries()), T0 + timedelta(minutes=1))
    assert d.emits == []


def test_an_older_snapshot_leaves_the_newer_entry(driver_factory):
    d = driver_factory()
    confirmed, _ = entries()
    newer = replace(confirmed, version=9, text="The user loves green tea.")
    d.state.entries[newer.id] = newer
    d.step(KIND, record([confirmed]), T0)
    assert d.state.entries["ref_a"] is newer and d.journal() == []


@pytest.mark.parametrize("bad, reason", [
    ({"created_at": None}, "missing 'created_at'"),
    ({"user": "someone-else"}, "belongs to acme/someone-else/aria"),
    ({"status": "merged"}, "status must be one of"),
])
def test_a_bad_snapshot_refuses_the_whole_record(driver_factory, bad, reason):
    d = driver_factory()
    confirmed, gone = entries()
    rec = record([gone, confirmed])
    rec["entries"][1] |= bad
    with pytest.raises(DomainError, match=reason):
        d.step(KIND, rec, T0)
    assert d.state.entries == {} and d.state.archived == {} and d.emits == [] and d.state.imports == []


def test_a_repeated_id_refuses_the_whole_record(driver_factory):
    d = driver_factory()
    confirmed, _ = entries()
    with pytest.raises(DomainError, match="appears twice"):
        d.step(KIND, record([confirmed, replace(confirmed, version=8)]), T0)
    assert d.state.entries == {}


def test_an_import_moves_no_clock_and_runs_no_sweep(driver_factory):
    d = driver_factory()
    negative = replace(new_reflection("ref_n", SCOPE, "The user hates rain.", EARLIER),
                       evidence=Evidence(0.0, 1.0, None, EARLIER))
    d.step(KIND, record([negative]), T0)
    assert d.state.entries["ref_n"] == negative  # no sub-zero day counted on the way in
    assert d.state.clock is None and d.state.last_sweep_at is None


def test_imports_survive_the_state_round_trip(driver_factory):
    from credence.streams.scope.scope_state import ScopeState

    d = driver_factory()
    d.step(KIND, record(entries()), T0)
    assert ScopeState.from_dict(d.state.to_dict()).imports == ["imp-1"]
    assert "imports" not in driver_factory().state.control_dict()  # unchanged bytes for scopes never imported


def test_an_import_waits_behind_an_evidence_request_in_flight(driver_factory):
    d = driver_factory(auto=False)
    d.turn("I love hiking in the mountains.", T0)
    d.flush()
    assert d.state.blocked  # Stage-1 asked, not answered
    d.step(KIND, record(entries()), T0 + timedelta(minutes=1))
    assert "ref_a" not in d.state.entries and d.state.queue[-1]["kind"] == KIND  # in order, in the state
    d.pump()
    assert d.state.entries["ref_a"] == entries()[0] and d.state.imports == ["imp-1"]
