"""Usage strength: the pull channel beside the user-evidence push channel.

Every recall hit actually returned to a caller reinforces an entry with an asymptotic impulse
Δ = α · (ceiling − current), at most once per (source, UTC day), also when the hit arrives after a
later day's (the counted days are kept for ``idempotency_days`` back from the latest). Strength decays at
read time like the evidence score: nothing within the grace after the last reinforcement (or after the
usage started, for an entry never recalled), then exponentially with a 4-week half-life, never below the
floor. A daily sweep soft-archives what fell below the threshold — only while the gate ``decay_enabled``
is on.

Strength never changes the evidence score or tier; rendering uses it only as a tie-break.
Pure: time is always a parameter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from typing import Any

from credence.config.usage import DEFAULT_USAGE_SETTINGS, UsageSettings
from credence.errors import DomainError
from credence.tables.clock import as_utc, format_day, format_instant, parse_day, parse_instant

SECONDS_PER_DAY = 86_400.0
RECALL = "recall"  # the source of usage records emitted by the API's recall route
PROMPT = "prompt"  # an entry rendered in a served memory block (GET …/prompt, MCP get_prompt): in daily use


def prompt_hits(rendered: Iterable, at: datetime) -> list[str]:
    """The ids of rendered entries whose (UTC day of ``at``, "prompt") use is not counted yet: what one
    served memory block sends as a usage record (empty when every one already counted today, so a prompt
    served a thousand times a day costs one record per entry and day). Card entries keep no usage."""
    key = (as_utc(at).date(), PROMPT)
    return [e.id for e in rendered if not e.protected and key not in e.usage.reinforced]


@dataclass(frozen=True, slots=True)
class Usage:
    """One entry's usage snapshot.

    ``strength`` is the value at the anchor (the later of ``last_reinforced_at`` and ``since``); None
    means the initial strength from settings. ``since`` is when the usage started counting (the entry's
    creation, or its restoration): an entry never recalled decays from there. ``reinforced`` holds the
    (UTC day, source) keys already counted, sorted, within the idempotency horizon (daily idempotency).
    """

    strength: float | None = None
    reinforce_count: int = 0
    last_reinforced_at: datetime | None = None
    since: datetime | None = None
    reinforced: tuple[tuple[date, str], ...] = ()
    # The status an entry had when the daily sweep soft-archived it (None = not soft-archived): what
    # an operator's restore puts back.
    soft_archived_from: str | None = None

    def __post_init__(self) -> None:
        for name in ("last_reinforced_at", "since"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, as_utc(value))
        object.__setattr__(self, "reinforced", tuple(sorted(set(self.reinforced))))
        count = self.reinforce_count
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise DomainError(f"usage reinforce_count must be an int >= 0, got {self.reinforce_count!r}")
        if self.strength is not None and not (isinstance(self.strength, int | float) and self.strength >= 0):
            raise DomainError(f"usage strength must be a number >= 0 or null, got {self.strength!r}")

    @property
    def reinforced_day(self) -> date | None:
        """The latest UTC day with a reinforcement."""
        return self.reinforced[-1][0] if self.reinforced else None

    @property
    def reinforced_sources(self) -> tuple[str, ...]:
        """The sources counted on the latest reinforced day."""
        latest = self.reinforced_day
        return tuple(source for day, source in self.reinforced if day == latest)

    @property
    def anchor(self) -> datetime | None:
        """Where decay counts from: the later of the last reinforcement and the start of this life."""
        stamps = [t for t in (self.last_reinforced_at, self.since) if t is not None]
        return max(stamps) if stamps else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "strength": self.strength,
            "reinforce_count": self.reinforce_count,
            "last_reinforced_at": format_instant(self.last_reinforced_at),
            "since": format_instant(self.since),
            "reinforced_days": _days_to_dict(self.reinforced),
            # the latest day alone, as snapshots had it before every counted day was kept
            "reinforced_day": format_day(self.reinforced_day),
            "reinforced_sources": list(self.reinforced_sources),
            "soft_archived_from": self.soft_archived_from,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, *, since: datetime | None = None) -> Usage:
        """Read a snapshot; a missing one (an entry written before usage strength was kept) starts at ``since``."""
        if d is None:
            return cls(since=since)
        if not isinstance(d, Mapping):
            raise DomainError(f"usage snapshot must be a JSON object or null, got {type(d).__name__}")
        strength = d.get("strength")
        if strength is not None and (isinstance(strength, bool) or not isinstance(strength, int | float)):
            raise DomainError(f"usage strength must be a number or null, got {strength!r}")
        count = d.get("reinforce_count", 0)
        return cls(
            strength=None if strength is None else float(strength),
            reinforce_count=count,
            last_reinforced_at=parse_instant(d.get("last_reinforced_at")),
            since=parse_instant(d.get("since")) or since,
            reinforced=_reinforced_from(d),
            soft_archived_from=_status(d.get("soft_archived_from")),
        )


def _status(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value):
        return value
    raise DomainError(f"usage soft_archived_from must be an entry status or null, got {value!r}")


def _sources(value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(s, str) and s for s in value):
        raise DomainError(f"usage {name} must be a list of non-empty strings")
    return tuple(value)


def _reinforced_from(d: Mapping[str, Any]) -> tuple[tuple[date, str], ...]:
    """The counted (day, source) keys; an older snapshot has only its latest day and that day's sources."""
    days = d.get("reinforced_days")
    if days is None:
        day = parse_day(d.get("reinforced_day"))
        sources = _sources(d.get("reinforced_sources") or (), "reinforced_sources")
        return tuple((day, s) for s in sources) if day is not None else ()
    if not isinstance(days, Mapping):
        raise DomainError("usage reinforced_days must be an object of YYYY-MM-DD: [sources]")
    keys = []
    for text, sources in days.items():
        day = parse_day(text)
        if day is None:
            raise DomainError(f"usage reinforced_days has a key that is not a day: {text!r}")
        keys.extend((day, s) for s in _sources(sources, "reinforced_days sources"))
    return tuple(keys)


def _days_to_dict(keys: tuple[tuple[date, str], ...]) -> dict[str, list[str]]:
    days: dict[str, list[str]] = {}
    for day, source in keys:
        days.setdefault(format_day(day), []).append(source)
    return days


def usage_strength(u: Usage, now: datetime, *, settings: UsageSettings = DEFAULT_USAGE_SETTINGS) -> float:
    """The strength at ``now``: the stored value through the grace, then halved every half-life, floored."""
    base = settings.initial_strength if u.strength is None else u.strength
    anchor = u.anchor
    if anchor is None or base <= settings.decay_floor:
        return base  # no clock to decay from, or already at/under the floor: it stays where it is
    beyond_grace = (as_utc(now) - anchor).total_seconds() - settings.decay_grace_days * SECONDS_PER_DAY
    if beyond_grace <= 0:
        return base
    decayed = base * 0.5 ** (beyond_grace / (settings.decay_half_life_days * SECONDS_PER_DAY))
    return max(settings.decay_floor, decayed)


def reinforce(u: Usage, at: datetime, source: str, *, settings: UsageSettings = DEFAULT_USAGE_SETTINGS) -> Usage:
    """One recall hit from ``source`` at ``at``, counted once per (source, UTC day of ``at``).

    A hit for a (source, day) already counted returns ``u`` itself, unchanged; so does one dated
    ``idempotency_days`` or more before the latest counted day (whether it counted can no longer be told).
    A hit for an earlier day that never counted still counts, at the anchor (see below), so the same hits
    in any order within the horizon make the same impulses on the same days.
    """
    if not isinstance(source, str) or not source.strip():
        raise DomainError(f"a usage source must be a non-empty string, got {source!r}")
    at = as_utc(at)
    key = (at.date(), source)
    latest = u.reinforced_day
    horizon = None if latest is None else latest - timedelta(days=settings.idempotency_days)
    if key in u.reinforced or (horizon is not None and key[0] <= horizon):
        return u
    # Event time never runs backwards for a usage: a hit stamped before its anchor counts at the anchor.
    anchor = u.anchor
    when = at if anchor is None or at > anchor else anchor
    current = usage_strength(u, when, settings=settings)
    newest = max(key[0], latest) if latest is not None else key[0]
    oldest_kept = newest - timedelta(days=settings.idempotency_days)
    return replace(
        u,
        strength=current + settings.reinforce_alpha * (settings.reinforce_ceiling - current),
        reinforce_count=u.reinforce_count + 1,
        last_reinforced_at=when,
        reinforced=tuple(k for k in (*u.reinforced, key) if k[0] > oldest_kept),
    )


def decay_sweep(
    u: Usage,
    now: datetime,
    *,
    consensus_score: float | None = None,
    settings: UsageSettings = DEFAULT_USAGE_SETTINGS,
) -> tuple[Usage, bool]:
    """One daily-sweep visit: (usage, whether to soft-archive the entry now).

    Decay is read-time, so the usage itself is returned unchanged; the sweep only decides. Skipped (False)
    while the gate is off, and for entries whose external corroboration reaches ``consensus_skip_at``.
    """
    if not settings.decay_enabled:
        return u, False
    if consensus_score is not None and consensus_score >= settings.consensus_skip_at:
        return u, False
    return u, usage_strength(u, now, settings=settings) < settings.soft_archive_below


def restored(u: Usage, at: datetime, *, settings: UsageSettings = DEFAULT_USAGE_SETTINGS) -> Usage:
    """The usage of an entry an operator restored: a new life from ``at`` with at least the initial strength,
    so the next sweep does not send it straight back. The reinforcement history is kept."""
    at = as_utc(at)
    current = usage_strength(u, at, settings=settings)
    return replace(u, strength=max(settings.initial_strength, current), since=max(at, u.anchor or at))


def sweep_instants(last: datetime | None, now: datetime, *, settings: UsageSettings = DEFAULT_USAGE_SETTINGS,
                   max_days: int = 400) -> list[datetime]:
    """The daily sweep instants (``decay_sweep_at`` UTC) in (last, now]; with no ``last``, only the latest.
    After a gap longer than ``max_days`` only the latest ``max_days`` are visited: strength only falls
    between reinforcements, so the skipped ones could only have archived earlier, never differently."""
    now = as_utc(now)
    at = settings.decay_sweep_at
    latest = now.replace(hour=at.hour, minute=at.minute, second=at.second, microsecond=at.microsecond)
    if latest > now:
        latest -= timedelta(days=1)
    if last is None:
        return [latest]
    last = as_utc(last)
    instants: list[datetime] = []
    t = latest
    while t > last and len(instants) < max_days:
        instants.append(t)
        t -= timedelta(days=1)
    return instants[::-1]
