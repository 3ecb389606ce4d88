"""Instants as the domain keeps them: timezone-aware UTC datetimes, ISO-8601 strings on the wire.

No clock is read here; these only normalise instants that callers pass in.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from functools import lru_cache


def as_utc(instant: datetime) -> datetime:
    """``instant`` as an aware UTC datetime; a naive one is taken to be UTC already."""
    if instant.tzinfo is None:
        return instant.replace(tzinfo=UTC)
    return instant.astimezone(UTC)


def parse_instant(value: object) -> datetime | None:
    """An ISO-8601 instant, or None for anything missing or unparseable ("no timestamp")."""
    if isinstance(value, datetime):
        return as_utc(value)
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return as_utc(datetime.fromisoformat(value.strip()))
    except ValueError:
        return None


def format_instant(instant: datetime | None) -> str | None:
    if instant is None:
        return None
    return _iso(instant)


# Every step writes the scope's few instants (clock, window start, sweeps) again, and isoformat of an aware
# datetime costs more than the look-up. Equal instants in any zone give the same UTC text, so any one of
# them may stand for the others as the key.
@lru_cache(maxsize=1 << 12)
def _iso(instant: datetime) -> str:
    return instant.isoformat() if instant.tzinfo is UTC else as_utc(instant).isoformat()


def parse_day(value: object) -> date | None:
    """An ISO-8601 calendar date, or None for anything missing or unparseable."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        return None


def format_day(day: date | None) -> str | None:
    return None if day is None else day.isoformat()
