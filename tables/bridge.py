"""The bridge from memory to verified facts: narrow, manual, gated.

Memory is mutable and personal; a verified fact is not. They meet only here: a human nominates a *ripe*
entry (alive >= N days, reinforced >= K times by recall, on a topic the tenant's filter accepts), and the
nomination becomes one candidate record with full provenance for an external verification pipeline.
Never automatic, never LLM-driven. While ``bridge_enabled`` is off (the default) ``nominate`` and
``approve_candidate`` raise BridgeRetired and produce nothing; candidates already out there are left as
they are. Rollback is the flag. Pure: time is a parameter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from credence.config.usage import DEFAULT_BRIDGE_SETTINGS, BridgeSettings
from credence.errors import BridgeError, BridgeRetired
from credence.tables.clock import as_utc, format_instant
from credence.tables.entries import ACTIVE, CONFIRMED, PENDING, Entry
from credence.tables.evidence import SECONDS_PER_DAY

__all__ = ["BridgeError", "BridgeRetired", "NotRipe", "approve_candidate", "candidate_id", "is_ripe",
           "nominate", "unripe_reasons"]  # fmt: skip

NOMINATED: Final = "nominated"
APPROVED: Final = "approved"
# Entries still in the active view and not disputed away: denied, promoted (the persona entry is the live
# one), blocked or archived entries are not ripe.
ALIVE: Final = frozenset({PENDING, CONFIRMED, ACTIVE})


class NotRipe(BridgeError):
    """The entry does not meet the ripeness rule; the message lists every unmet condition."""


def _retired(action: str, settings: BridgeSettings) -> None:
    if not settings.bridge_enabled:
        raise BridgeRetired(
            f"the bridge to verified facts is retired: {action} refused, nothing emitted "
            "(set CREDENCE_BRIDGE__BRIDGE_ENABLED=true to open it; existing candidates are untouched)"
        )


def unripe_reasons(entry: Entry, now: datetime, *, settings: BridgeSettings = DEFAULT_BRIDGE_SETTINGS) -> list[str]:
    """Why ``entry`` is not ripe at ``now``; empty when it is."""
    reasons = []
    if entry.protected:
        reasons.append("it is a character-card entry, not a memory of the user")
    if entry.status not in ALIVE or entry.invalidated_at is not None:
        reasons.append(f"it is {entry.status}{' and invalidated' if entry.invalidated_at else ''}, not alive")
    age_days = (as_utc(now) - entry.created_at).total_seconds() / SECONDS_PER_DAY
    if age_days < settings.ripe_min_age_days:
        reasons.append(f"alive {age_days:.1f} days, needs {settings.ripe_min_age_days:g}")
    if entry.usage.reinforce_count < settings.ripe_min_reinforce_count:
        reasons.append(f"reinforced {entry.usage.reinforce_count} times, needs {settings.ripe_min_reinforce_count}")
    tags = (entry.subject,) if entry.subject else ()
    if not settings.topic_filter(entry.tenant).accepts(entry.text, tags):
        reasons.append(f"tenant {entry.tenant!r}'s topic filter does not accept it "
                       "(CREDENCE_BRIDGE__TOPIC_FILTERS; the default accepts nothing)")
    return reasons


def is_ripe(entry: Entry, now: datetime, *, settings: BridgeSettings = DEFAULT_BRIDGE_SETTINGS) -> bool:
    return not unripe_reasons(entry, now, settings=settings)


def candidate_id(entry: Entry) -> str:
    """Names the entry version nominated, so a verification pipeline can drop a repeated nomination."""
    return f"{entry.id}@{entry.version}"


def nominate(
    entry: Entry,
    now: datetime,
    *,
    nominated_by: str,
    versions: Iterable[Entry] = (),
    signals: Iterable[Mapping[str, Any]] = (),
    settings: BridgeSettings = DEFAULT_BRIDGE_SETTINGS,
) -> dict[str, Any]:
    """One candidate record for a ripe entry, with its provenance: the entry, every version of it, the
    signal history that made its score, and its usage. ``nominated_by`` names the human who asked."""
    _retired("nominate", settings)
    if not isinstance(nominated_by, str) or not nominated_by.strip():
        raise BridgeError("a nomination is a deliberate human action: say who nominates (nominated_by)")
    reasons = unripe_reasons(entry, now, settings=settings)
    if reasons:
        raise NotRipe(f"entry {entry.id} is not ripe: " + "; ".join(reasons))
    history = sorted({v.version: v for v in (*versions, entry) if v.id == entry.id}.values(), key=lambda v: v.version)
    return {
        "v": 1, "candidate_id": candidate_id(entry), "status": NOMINATED,
        "tenant": entry.tenant, "user": entry.user, "character": entry.character,
        "entry_id": entry.id, "entry_kind": entry.kind, "text": entry.text, "subject": entry.subject,
        "nominated_by": nominated_by.strip(), "nominated_at": format_instant(now),
        "provenance": {
            "entry": entry.to_dict(),
            "versions": [v.to_dict() for v in history],
            "signals": [dict(s) for s in signals],
            "usage": entry.usage.to_dict(),
        },
    }  # fmt: skip


def approve_candidate(
    candidate: Mapping[str, Any],
    now: datetime,
    *,
    approved_by: str,
    settings: BridgeSettings = DEFAULT_BRIDGE_SETTINGS,
) -> dict[str, Any]:
    """A nominated candidate, approved by a human for the verification pipeline (a new record; the
    nomination itself is left as it was)."""
    _retired("approve_candidate", settings)
    if not isinstance(approved_by, str) or not approved_by.strip():
        raise BridgeError("an approval is a deliberate human action: say who approves (approved_by)")
    if not isinstance(candidate, Mapping) or candidate.get("status") != NOMINATED or not candidate.get("candidate_id"):
        raise BridgeError("only a nominated candidate record (status 'nominated', with a candidate_id) is approved")
    return {**candidate, "status": APPROVED, "approved_by": approved_by.strip(), "approved_at": format_instant(now)}
