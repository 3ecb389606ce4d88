"""recent_mentions anti-repetition: an entry the AI keeps bringing up is suppressed from rendering for a while.

This measures AI repetition only; it never adds user evidence. Pending reflections (still waiting for
the user to confirm or reject them) and character-card entries are never counted.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from credence.config.memory import DEFAULT_MEMORY_SETTINGS, MemorySettings
from credence.tables.clock import as_utc
from credence.tables.entries import ACTIVE, CONFIRMED, PERSONA, PROMOTE_BLOCKED, REFLECTION, Entry, changed


def counts_mentions(entry: Entry) -> bool:
    """Only non-protected active persona entries and confirmed (or promote_blocked) reflections are counted."""
    if entry.protected:
        return False
    return (entry.kind == PERSONA and entry.status == ACTIVE) or (
        entry.kind == REFLECTION and entry.status in (CONFIRMED, PROMOTE_BLOCKED)
    )


def suppression_over(entry: Entry, now: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> bool:
    return entry.suppressed_at is not None and as_utc(now) - entry.suppressed_at >= timedelta(
        hours=settings.suppression_hours
    )


def is_suppressed(entry: Entry, now: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> bool:
    """Suppressed at ``now``; a suppression past its duration no longer hides the entry, even before it is lifted."""
    return entry.suppressed_at is not None and not suppression_over(entry, now, settings=settings)


def lift_suppression(entry: Entry, now: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> Entry:
    """End a suppression that has run its course, clearing the mentions that caused it."""
    if not suppression_over(entry, now, settings=settings):
        return entry
    return changed(entry, now, suppressed_at=None, recent_mentions=())


def record_mention(entry: Entry, at: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> Entry:
    """The AI mentioned ``entry`` at ``at``: keep the mentions of the last window and suppress on the Nth.

    Returns the entry itself when it is not counted.
    """
    if not counts_mentions(entry):
        return entry
    at = as_utc(at)
    entry = lift_suppression(entry, at, settings=settings)
    # Cutoff inclusive: a mention exactly one window old has dropped out.
    cutoff = at - timedelta(hours=settings.mention_window_hours)
    mentions = (*(m for m in entry.recent_mentions if m > cutoff), at)
    suppressed_at = entry.suppressed_at
    if suppressed_at is None and len(mentions) >= settings.suppress_after_mentions:
        suppressed_at = at
    return changed(entry, at, recent_mentions=mentions, suppressed_at=suppressed_at)
