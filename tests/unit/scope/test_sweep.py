"""The hourly sweep in event time: sub-zero days once per calendar day, archival at 14, catch-up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from credence.streams.scope.requests import reflection_id
from credence.tables.entries import Entry, new_persona_entry
from credence.tables.evidence import Evidence
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = "acme/u1/aria"
HIKING = reflection_id(SCOPE, "The user loves hiking.")
MIN, HOUR, DAY = timedelta(minutes=1), timedelta(hours=1), timedelta(days=1)


def denied_hiking(driver_factory, **kw):
    d = driver_factory(**kw)
    d.turn("I love hiking", T0)
    d.flush()
    d.feedback(HIKING, "deny", T0 + MIN)  # 0.4 - 1.0: below zero from now on
    assert d.state.entries[HIKING].score(T0 + MIN) < 0
    return d


def test_sub_zero_days_count_once_per_calendar_day(driver_factory):
    d = denied_hiking(driver_factory)
    at = T0
    while at < T0 + 2 * DAY + 11 * HOUR + 45 * MIN:  # until 23:45 two days later
        at += 15 * MIN
        d.tick(at)
    ev = d.state.entries[HIKING].evidence
    assert ev.sub_zero_days == 3  # sweeps on day 0 (13:00..23:00), day 1, day 2
    assert ev.sub_zero_last_increment_date == (T0 + 2 * DAY).date()
    sweeps = [j for j in d.journal() if j["entry_id"] == HIKING and j["event"] == "sweep"]
    assert len(sweeps) == 3  # one journal event per counted day, none for the other hourly visits


def test_archived_after_14_sub_zero_days_with_one_archive_record(driver_factory):
    d = denied_hiking(driver_factory)
    at = T0
    while at < T0 + 16 * DAY:
        at += HOUR
        d.tick(at)
    assert HIKING not in d.state.entries
    (archive,) = [a for a in d.archives() if a["entry_id"] == HIKING]
    (archived,) = [j for j in d.journal() if j["entry_id"] == HIKING and j["event"] == "archived"]
    snapshot = archive["entry"]
    assert snapshot == archived["entry"]
    assert snapshot == [j for j in d.journal() if j["entry_id"] == HIKING][-1]["entry"]  # the final snapshot
    assert snapshot["status"] == "archived" and snapshot["evidence"]["sub_zero_days"] == 14
    assert archived["to_status"] == "archived" and archived["from_status"] == "denied"
    assert archived["event_id"] == f"{HIKING}@{snapshot['version']}"
    # counted day 0 (from 13:00) through day 13; archived at that day's first sweep
    archived_at = Entry.from_dict(snapshot).archived_at
    assert archived_at == datetime(2026, 3, 15, 0, 0, tzinfo=UTC)
    assert archive["archived_at"] == archived_at.isoformat() and archive["reason"] == "sweep"


def test_protected_entries_never_archive(driver_factory, state_factory):
    state = state_factory()
    card = new_persona_entry("card-1", Scope("acme", "u1", "aria"), "Aria is a pirate.", T0, protected=True,
                             evidence=Evidence(disputation=50.0, disp_last_signal_at=T0))
    state.entries[card.id] = card
    d = driver_factory(state=state)
    d.tick(T0)
    d.tick(T0 + 40 * DAY)
    assert d.state.entries["card-1"] == card
    assert d.archives() == [] and d.journal() == []


def test_catch_up_after_a_gap_counts_each_day(driver_factory):
    d = denied_hiking(driver_factory)
    d.tick(T0 + 10 * DAY)  # one record after ten silent days
    ev = d.state.entries[HIKING].evidence
    assert ev.sub_zero_days == 11  # day 0 .. day 10
    d.tick(T0 + 12 * DAY)
    assert d.state.entries[HIKING].evidence.sub_zero_days == 13


def test_catch_up_after_a_multi_week_gap_archives(driver_factory):
    d = denied_hiking(driver_factory)
    d.tick(T0 + 60 * DAY)  # beyond the hourly catch-up horizon
    assert HIKING not in d.state.entries
    (archive,) = d.archives()
    assert archive["entry"]["evidence"]["sub_zero_days"] == 14
    assert Entry.from_dict(archive["entry"]).archived_at == datetime(2026, 3, 15, 0, 0, tzinfo=UTC)


def test_daily_catch_up_beyond_the_hourly_horizon_still_counts_each_day(driver_factory, pipeline_factory,
                                                                         memory_factory):
    d = denied_hiking(driver_factory, pipeline=pipeline_factory(sweep_hourly_catchup_days=2),
                      memory=memory_factory(archive_after_sub_zero_days=100))
    d.tick(T0 + 30 * DAY)
    assert d.state.entries[HIKING].evidence.sub_zero_days == 31  # day 0 .. day 30


def test_tally_is_not_erased_when_the_score_recovers(driver_factory):
    d = denied_hiking(driver_factory)
    d.tick(T0 + 3 * DAY)
    tally = d.state.entries[HIKING].evidence.sub_zero_days
    assert tally == 4
    for n in range(3):  # confirmations lift the score above zero again
        d.feedback(HIKING, "confirm", T0 + 3 * DAY + (n + 1) * MIN, feedback_id=f"c{n}")
    assert d.state.entries[HIKING].score(T0 + 3 * DAY + 5 * MIN) > 0
    d.tick(T0 + 6 * DAY)
    assert d.state.entries[HIKING].evidence.sub_zero_days == tally


def test_positive_entries_are_not_counted(driver_factory):
    d = driver_factory()
    d.turn("I love hiking", T0)
    d.flush()
    d.tick(T0 + 20 * DAY)
    assert d.state.entries[HIKING].evidence.sub_zero_days == 0
    assert d.archives() == []


def test_calendar_days_are_counted_in_the_tenant_time_zone(driver_factory, memory_factory):
    d = denied_hiking(driver_factory, memory=memory_factory(tenant_time_zones={"acme": "Asia/Tokyo"}))
    d.tick(T0 + 6 * HOUR)  # 12:00..18:00 UTC is 21:00..03:00 in Tokyo: two calendar days there, one in UTC
    ev = d.state.entries[HIKING].evidence
    assert ev.sub_zero_days == 2
    assert ev.sub_zero_last_increment_date == (T0 + DAY).date()
