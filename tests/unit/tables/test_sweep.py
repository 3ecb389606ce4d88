from datetime import UTC, date, datetime, timedelta

import pytest

from credence.config.memory import MemorySettings
from credence.tables.evidence import Evidence, evidence_score, sweep

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NEGATIVE = Evidence(disputation=1.0, disp_last_signal_at=T0)


def test_negative_score_counts_one_day():
    ev, archive = sweep(NEGATIVE, T0)
    assert ev.sub_zero_days == 1
    assert ev.sub_zero_last_increment_date == date(2026, 3, 1)
    assert archive is False


def test_zero_score_does_not_count():
    assert evidence_score(Evidence(), T0) == 0.0
    ev, archive = sweep(Evidence(), T0)
    assert ev == Evidence() and archive is False


def test_positive_score_does_not_count():
    ev = Evidence(reinforcement=0.1, rein_last_signal_at=T0)
    assert sweep(ev, T0) == (ev, False)


def test_at_most_once_per_calendar_day():
    ev = NEGATIVE
    for hour in range(12):  # 12:00 .. 23:00 of the same UTC day
        ev, _ = sweep(ev, T0 + timedelta(hours=hour))
    assert ev.sub_zero_days == 1


def test_day_changes_at_midnight_utc():
    ev, _ = sweep(NEGATIVE, datetime(2026, 3, 1, 23, 59, 59, tzinfo=UTC))
    ev, _ = sweep(ev, datetime(2026, 3, 1, 23, 59, 59, 999999, tzinfo=UTC))
    assert ev.sub_zero_days == 1
    ev, _ = sweep(ev, datetime(2026, 3, 2, 0, 0, tzinfo=UTC))
    assert ev.sub_zero_days == 2
    assert ev.sub_zero_last_increment_date == date(2026, 3, 2)


def test_tenant_time_zone_decides_the_calendar_day():
    settings = MemorySettings(tenant_time_zones={"acme": "Asia/Tokyo"})
    # 14:30 UTC and 15:30 UTC fall on two Tokyo days (midnight JST is 15:00 UTC) but one UTC day.
    first, second = datetime(2026, 3, 1, 14, 30, tzinfo=UTC), datetime(2026, 3, 1, 15, 30, tzinfo=UTC)
    ev, _ = sweep(NEGATIVE, first, settings=settings, tenant="acme")
    ev, _ = sweep(ev, second, settings=settings, tenant="acme")
    assert ev.sub_zero_days == 2
    assert ev.sub_zero_last_increment_date == date(2026, 3, 2)
    ev, _ = sweep(NEGATIVE, first, settings=settings, tenant="other")
    ev, _ = sweep(ev, second, settings=settings, tenant="other")
    assert ev.sub_zero_days == 1


def test_a_day_earlier_than_the_last_increment_never_counts():
    ev = Evidence(
        disputation=1.0, disp_last_signal_at=T0, sub_zero_days=3, sub_zero_last_increment_date=date(2026, 3, 5)
    )
    assert sweep(ev, T0)[0].sub_zero_days == 3


def test_archive_on_the_14th_day_not_the_13th():
    ev = NEGATIVE
    for day in range(13):
        ev, archive = sweep(ev, T0 + timedelta(days=day))
        assert archive is False
    assert ev.sub_zero_days == 13
    ev, archive = sweep(ev, T0 + timedelta(days=13))
    assert ev.sub_zero_days == 14 and archive is True


def test_tally_survives_recovery_and_archives_even_if_positive():
    ev = Evidence(
        reinforcement=5.0, rein_last_signal_at=T0, sub_zero_days=14, sub_zero_last_increment_date=date(2026, 2, 1)
    )
    after, archive = sweep(ev, T0)
    assert after.sub_zero_days == 14
    assert archive is True


def test_recovery_does_not_reset_and_later_days_keep_counting():
    ev = Evidence(
        disputation=1.0, disp_last_signal_at=T0, sub_zero_days=5, sub_zero_last_increment_date=date(2026, 2, 28)
    )
    recovered = Evidence(
        reinforcement=3.0, rein_last_signal_at=T0, disputation=1.0, disp_last_signal_at=T0,
        sub_zero_days=5, sub_zero_last_increment_date=date(2026, 2, 28),
    )  # fmt: skip
    assert sweep(recovered, T0)[0].sub_zero_days == 5
    assert sweep(ev, T0)[0].sub_zero_days == 6


def test_protected_never_counts_and_never_archives():
    ev = Evidence(disputation=9.0, disp_last_signal_at=T0, sub_zero_days=40)
    assert sweep(ev, T0, protected=True) == (ev, False)


def test_archive_limit_comes_from_settings():
    settings = MemorySettings(archive_after_sub_zero_days=1)
    assert sweep(NEGATIVE, T0, settings=settings)[1] is True


def test_unknown_time_zone_is_rejected_by_settings():
    with pytest.raises(ValueError, match="unknown time zone"):
        MemorySettings(tenant_time_zones={"acme": "Mars/Olympus"})
