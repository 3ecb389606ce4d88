"""recent_mentions anti-repetition: an entry the AI keeps bringing up is suppressed from rendering for a while.

This measures AI repetition only; it never adds user evidence. Pending reflections (still waiting for
the user to confirm or reject them) and character-card entries are never counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from credence.config.memory import DEFAULT_MEMORY_SETTINGS, MemorySettings
from credence.tables.clock import as_utc
from credence.tables.entries import ACTIVE, CONFIRMED, PERSONA, PROMOTE_BLOCKED, REFLECTION, Entry, changed
from credence.tables.memo import text_memo


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


# Words every entry shares ("The user has ...") or that carry no content; they never make a mention.
_FILLER = frozenset("""
a an the and or but of to in on at for with from by as is are was were be been being has have had do does
did not no yes you your yours user user's users i me my mine we our it its this that these those there
they them their he she his her him so very really just also about into than then too
""".split())
_SUFFIXES = ("ing", "ed", "es", "s")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) - len(suffix) >= 3 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    # "love"/"loves"/"loved" and "hike"/"hiking" meet at the same stem
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


@text_memo(maxsize=1 << 16)  # pure; every AI turn compares its text with each renderable entry's
def content_words(text: str) -> frozenset[str]:
    """Lower-cased, crudely stemmed words of ``text`` less fillers: what a lexical mention match compares."""
    words = "".join(c.lower() if c.isalnum() or c == "'" else " " for c in text).split()
    return frozenset(_stem(w.strip("'")) for w in words if w.strip("'") not in _FILLER and len(w.strip("'")) > 1)


def mentioned_in(
    text: str, entries: Iterable[Entry], *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS
) -> list[Entry]:
    """The entries whose content words appear in ``text`` (at least ai_mention_min_overlap of them), in
    input order: the fallback when the AI turn does not say which entries it surfaced."""
    said = content_words(text)
    found = []
    for entry in entries:
        words = content_words(entry.text)
        if words and not words.isdisjoint(said) and len(words & said) / len(words) >= settings.ai_mention_min_overlap:
            found.append(entry)
    return found
