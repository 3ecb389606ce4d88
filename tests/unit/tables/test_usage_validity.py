"""Bi-temporal validity: a change of meaning never overwrites; as_of reads what held at T."""

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from credence.tables.entries import Entry, changed, new_persona_entry
from credence.tables.lifecycle import archive
from credence.tables.scope import Scope
from credence.tables.validity import as_of, is_live, means_differently, supersede

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SCOPE = Scope("acme", "u1", "aria")
H = timedelta(hours=1)


def persona() -> Entry:
    return new_persona_entry("p1", SCOPE, "enjoys hiking", T0)


def test_new_entries_are_valid_from_their_creation_and_live():
    p = persona()
    assert p.valid_from == T0 and p.invalidated_at is None and is_live(p)


def test_old_snapshots_read_as_valid_from_creation():
    d = persona().to_dict()
    for key in ("valid_from", "invalidated_at", "usage"):
        d.pop(key)
    old = Entry.from_dict(d)
    assert old.valid_from == T0 and old.invalidated_at is None and old.usage.since == T0
    assert Entry.from_dict(old.to_dict()) == old


def test_supersede_closes_the_old_meaning_and_writes_a_new_version():
    before = persona()
    after = changed(before, T0 + H, text="loves hiking")
    assert means_differently(before, after)
    closed, new = supersede(before, after, T0 + H)
    assert (closed.version, closed.text, closed.invalidated_at) == (2, "enjoys hiking", T0 + H)
    assert (new.version, new.text, new.valid_from, new.invalidated_at) == (3, "loves hiking", T0 + H, None)
    assert before.invalidated_at is None  # the input is untouched


def test_evidence_or_status_changes_are_not_changes_of_meaning():
    before = persona()
    assert not means_differently(before, changed(before, T0 + H, importance=9))


def test_as_of_returns_the_version_valid_at_each_instant():
    v1 = persona()
    v_signal = changed(v1, T0 + H, importance=7)
    closed, v_new = supersede(v_signal, changed(v_signal, T0 + 2 * H, text="loves hiking"), T0 + 2 * H)
    gone = archive(v_new, T0 + 3 * H)
    versions = [gone, v_new, closed, v_signal, v1, v1]  # any order, duplicated
    assert as_of(versions, T0 - H) == {}
    assert as_of(versions, T0)["p1"] == v1
    assert as_of(versions, T0 + H + H / 2)["p1"] == v_signal
    assert as_of(versions, T0 + 2 * H)["p1"].text == "loves hiking"
    assert as_of(versions, T0 + 3 * H) == {}
    assert as_of([closed], T0 + 2 * H) == {}  # the closed meaning alone: nothing held after it


@given(st.lists(st.sampled_from(["signal", "meaning"]), min_size=1, max_size=8), st.integers(0, 10 * 60))
def test_exactly_one_meaning_holds_at_any_instant_after_creation(changes, minutes):
    versions, current = [persona()], persona()
    for i, kind in enumerate(changes, start=1):
        now = T0 + i * H
        if kind == "signal":
            current = changed(current, now, importance=1 + i % 10)
            versions.append(current)
        else:
            closed, current = supersede(current, changed(current, now, text=f"text {i}"), now)
            versions += [closed, current]
    at = T0 + timedelta(minutes=minutes)
    held = as_of(versions, at)
    assert list(held) == ["p1"] and is_live(held["p1"])
    expected = max((v for v in versions if v.updated_at <= at), key=lambda v: v.version)
    assert held["p1"].text == expected.text and held["p1"].valid_from <= at
    assert {v.version for v in versions} == set(range(1, len(versions) + 1))  # no version overwritten
