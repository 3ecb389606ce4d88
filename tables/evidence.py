"""Evidence math: counters, signals, read-time decay, score, tiers, initial seed and the sub-zero sweep.

Pure functions of (state, input, now). Counters hold the stored (undecayed) values; decay is applied
only when the score is read, so nothing has to be written back on every read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any, Final

from credence.config.memory import DEFAULT_MEMORY_SETTINGS, MemorySettings
from credence.errors import DomainError
from credence.tables.clock import as_utc, format_day, format_instant, parse_day, parse_instant

SECONDS_PER_DAY: Final = 86_400.0

USER_FACT_REINFORCE: Final = "user_fact_reinforce"
USER_FACT_NEGATE: Final = "user_fact_negate"
USER_CONFIRM: Final = "user_confirm"
USER_DENY: Final = "user_deny"
NEGATIVE_KEYWORD: Final = "negative_keyword"
USER_IGNORE: Final = "user_ignore"

REINFORCEMENT: Final = "reinforcement"
DISPUTATION: Final = "disputation"


@dataclass(frozen=True, slots=True)
class SignalKind:
    """One evidence signal: the counter it touches, the setting holding its weight, and the user
    feedback decision or Stage-2 relation that produces it (if any)."""

    name: str
    counter: str  # REINFORCEMENT | DISPUTATION
    feedback: str | None = None  # "confirm" | "deny" | "ignore": explicit or surfaced feedback
    relation: str | None = None  # "reinforce" | "negate": a Stage-2 classification

    @property
    def weight_setting(self) -> str:
        return f"{self.name}_weight"

    def weight(self, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> float:
        return getattr(settings, self.weight_setting)


# The one registry of signal kinds; everything else (weights by name, feedback decisions, Stage-2
# relations, which counter a signal touches) is read from here. Weights live in MemorySettings.
SIGNALS: Final = {s.name: s for s in (
    SignalKind(USER_FACT_REINFORCE, REINFORCEMENT, relation="reinforce"),
    SignalKind(USER_FACT_NEGATE, DISPUTATION, relation="negate"),
    SignalKind(USER_CONFIRM, REINFORCEMENT, feedback="confirm"),
    SignalKind(USER_DENY, DISPUTATION, feedback="deny"),
    SignalKind(NEGATIVE_KEYWORD, DISPUTATION),
    SignalKind(USER_IGNORE, REINFORCEMENT, feedback="ignore"),
)}
REINFORCING_SIGNALS: Final = frozenset(k for k, s in SIGNALS.items() if s.counter == REINFORCEMENT)
DISPUTING_SIGNALS: Final = frozenset(k for k, s in SIGNALS.items() if s.counter == DISPUTATION)
SIGNAL_KINDS: Final = frozenset(SIGNALS)
FEEDBACK_SIGNALS: Final = {s.feedback: k for k, s in SIGNALS.items() if s.feedback}
RELATION_SIGNALS: Final = {s.relation: k for k, s in SIGNALS.items() if s.relation}

PROMOTED: Final = "promoted"
CONFIRMED: Final = "confirmed"
PENDING: Final = "pending"
ARCHIVE_CANDIDATE: Final = "archive_candidate"


@dataclass(frozen=True, slots=True)
class Evidence:
    """One entry's evidence snapshot. Timestamps are aware UTC datetimes or None ("no timestamp")."""

    reinforcement: float = 0.0
    disputation: float = 0.0
    rein_last_signal_at: datetime | None = None
    disp_last_signal_at: datetime | None = None
    sub_zero_days: int = 0
    sub_zero_last_increment_date: date | None = None
    user_fact_reinforce_count: int = 0

    def __post_init__(self) -> None:
        # Normalise here so every Evidence compares and serialises the same way, however it was built.
        for name in ("rein_last_signal_at", "disp_last_signal_at"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, as_utc(value))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Evidence:
        """Read a snapshot; a naive timestamp means UTC, an unparseable one is "no timestamp"."""
        d = d or {}
        return cls(
            reinforcement=_number(d.get("reinforcement"), "reinforcement"),
            disputation=max(0.0, _number(d.get("disputation"), "disputation")),
            rein_last_signal_at=parse_instant(d.get("rein_last_signal_at")),
            disp_last_signal_at=parse_instant(d.get("disp_last_signal_at")),
            sub_zero_days=int(_number(d.get("sub_zero_days"), "sub_zero_days")),
            sub_zero_last_increment_date=parse_day(d.get("sub_zero_last_increment_date")),
            user_fact_reinforce_count=int(_number(d.get("user_fact_reinforce_count"), "user_fact_reinforce_count")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "reinforcement": self.reinforcement,
            "disputation": self.disputation,
            "rein_last_signal_at": format_instant(self.rein_last_signal_at),
            "disp_last_signal_at": format_instant(self.disp_last_signal_at),
            "sub_zero_days": self.sub_zero_days,
            "sub_zero_last_increment_date": format_day(self.sub_zero_last_increment_date),
            "user_fact_reinforce_count": self.user_fact_reinforce_count,
        }


def _number(value: Any, name: str) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise DomainError(f"evidence field {name} must be a number, got {value!r}")
    try:
        number = float(value)
    except ValueError as exc:
        raise DomainError(f"evidence field {name} must be a number, got {value!r}") from exc
    if not math.isfinite(number):
        raise DomainError(f"evidence field {name} must be finite, got {value!r}")
    return number


def signal_weight(kind: str, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> float:
    """The configured base weight of a signal kind (before any combo bonus)."""
    if kind not in SIGNALS:
        raise DomainError(f"unknown signal kind {kind!r}; expected one of {sorted(SIGNALS)}")
    return SIGNALS[kind].weight(settings)


def apply_signal(
    ev: Evidence, kind: str, at: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS
) -> Evidence:
    """Add the signal's weight to the stored counter it touches and set only that side's clock to ``at``."""
    weight = signal_weight(kind, settings)
    at = as_utc(at)
    if kind in DISPUTING_SIGNALS:
        return replace(ev, disputation=max(0.0, ev.disputation + weight), disp_last_signal_at=at)
    count = ev.user_fact_reinforce_count
    if kind == USER_FACT_REINFORCE:
        # The lifetime counter is incremented before the combo check, and never decays.
        count += 1
        if count > settings.combo_threshold:
            weight += settings.combo_bonus
    return replace(ev, reinforcement=ev.reinforcement + weight, rein_last_signal_at=at, user_fact_reinforce_count=count)


def age_days(clock: datetime | None, now: datetime) -> float:
    """Fractional days since ``clock``; a missing or future clock is age 0."""
    if clock is None:
        return 0.0
    return max(0.0, (as_utc(now) - as_utc(clock)).total_seconds() / SECONDS_PER_DAY)


def decayed(counter: float, clock: datetime | None, now: datetime, half_life_days: float) -> float:
    return counter * 0.5 ** (age_days(clock, now) / half_life_days)


def effective_reinforcement(
    ev: Evidence, now: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS
) -> float:
    return decayed(ev.reinforcement, ev.rein_last_signal_at, now, settings.reinforcement_half_life_days)


def effective_disputation(ev: Evidence, now: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> float:
    return decayed(ev.disputation, ev.disp_last_signal_at, now, settings.disputation_half_life_days)


def evidence_score(
    ev: Evidence, now: datetime, protected: bool = False, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS
) -> float:
    """effective_reinforcement - effective_disputation at ``now``; +inf for character-card entries."""
    if protected:
        return math.inf
    return effective_reinforcement(ev, now, settings=settings) - effective_disputation(ev, now, settings=settings)


def derived_tier(score: float, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> str:
    """The descriptive tier of a score; a decision input, not the stored status."""
    if score >= settings.promoted_threshold:
        return PROMOTED
    if score >= settings.confirmed_threshold:
        return CONFIRMED
    if score > settings.archive_candidate_threshold:
        return PENDING
    return ARCHIVE_CANDIDATE


def seed_reinforcement(importances: Iterable[int], *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> float:
    """Initial reinforcement from the highest source-fact importance (above 10 counts as 10)."""
    values = [int(i) for i in importances]
    if not values:
        return 0.0
    return settings.seed_reinforcement_by_importance.get(min(max(values), 10), 0.0)


def seeded_evidence(
    importances: Iterable[int], created_at: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS
) -> Evidence:
    """A new entry's evidence: a seeded one's reinforcement clock is its creation time; unseeded has none."""
    seed = seed_reinforcement(importances, settings=settings)
    if seed == 0.0:
        return Evidence()
    return Evidence(reinforcement=seed, rein_last_signal_at=as_utc(created_at))


def sweep(
    ev: Evidence,
    now: datetime,
    protected: bool = False,
    *,
    settings: MemorySettings = DEFAULT_MEMORY_SETTINGS,
    tenant: str | None = None,
) -> tuple[Evidence, bool]:
    """One archive-sweep visit: count today as a sub-zero day if the score is below zero, then decide archival.

    The tally is a lifetime count (never reset when the score recovers), so an entry that has spent
    ``archive_after_sub_zero_days`` calendar days below zero is archived even if it is positive now.
    """
    if protected:
        return ev, False
    today = as_utc(now).astimezone(settings.zone_for(tenant)).date()
    last = ev.sub_zero_last_increment_date
    # "> last" rather than "!= last": a time-zone change must never count the same day twice.
    if evidence_score(ev, now, settings=settings) < 0 and (last is None or today > last):
        ev = replace(ev, sub_zero_days=ev.sub_zero_days + 1, sub_zero_last_increment_date=today)
    return ev, ev.sub_zero_days >= settings.archive_after_sub_zero_days
