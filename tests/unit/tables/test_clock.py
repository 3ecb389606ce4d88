"""Instants on the wire: format_instant's fast path (already UTC) must write exactly what converting first
writes, for every instant and offset; parse_instant reads it back to the same instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from credence.tables.clock import as_utc, format_instant, parse_instant

INSTANTS = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1))
OFFSETS = st.integers(min_value=-14 * 60, max_value=14 * 60).map(lambda m: timezone(timedelta(minutes=m)))


@given(INSTANTS, st.one_of(st.none(), st.just(UTC), OFFSETS))
def test_format_instant_writes_the_utc_instant_whatever_zone_it_came_in(naive, zone):
    instant = naive if zone is None else naive.replace(tzinfo=zone)
    text = format_instant(instant)
    assert text == as_utc(instant).isoformat() and text.endswith("+00:00")
    assert parse_instant(text) == as_utc(instant)


def test_examples():
    assert format_instant(None) is None
    assert format_instant(datetime(2026, 3, 2, 12, 0, tzinfo=UTC)) == "2026-03-02T12:00:00+00:00"
    assert format_instant(datetime(2026, 3, 2, 13, 0, tzinfo=timezone(timedelta(hours=1)))) == \
        "2026-03-02T12:00:00+00:00"
    assert format_instant(datetime(2026, 3, 2, 12, 0)) == "2026-03-02T12:00:00+00:00"  # naive: UTC already
    assert format_instant(datetime.fromisoformat("2026-03-02T12:00:00+00:00")) == "2026-03-02T12:00:00+00:00"
