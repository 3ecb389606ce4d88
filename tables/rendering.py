"""The prompt memory block of one scope: which entries reach the system prompt, under two token budgets.

Non-protected persona entries share ``persona_token_budget``; pending + confirmed reflections share
``reflection_token_budget``. Higher scores (then higher importance, then higher usage strength) win
budget pressure; an entry that does not fit is skipped and smaller ones after it may still fit.
Character-card (protected) entries are always rendered, outside both budgets.

A corrected value is never presented as current: an entry the user's latest word disputes (its last
disputing signal is no older than its last reinforcing one) or whose score is below zero keeps its place
in its budget but is shown under a heading that says the user disputed it. (The seed renders a pending
reflection at any score; a net-negative one is shown as disputed, never as plain text.)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from credence.config.memory import DEFAULT_MEMORY_SETTINGS, MemorySettings
from credence.config.usage import DEFAULT_USAGE_SETTINGS, UsageSettings
from credence.tables.entries import ACTIVE, CONFIRMED, PENDING, PERSONA, PROMOTE_BLOCKED, REFLECTION, Entry
from credence.tables.mentions import is_suppressed
from credence.tables.scope import Scope
from credence.tables.tokens import TokenCounter, default_token_counter
from credence.tables.usage import usage_strength

CHARACTER_HEADING = "Character card:"
PERSONA_HEADING = "What you know about the user:"
REFLECTION_HEADING = "Observations about the user (pending or confirmed; the user may correct them):"
DISPUTED_HEADING = "The user said these are wrong or no longer true (never present them as current):"


@dataclass(frozen=True, slots=True)
class MemoryBlock:
    protected: tuple[Entry, ...]
    persona: tuple[Entry, ...]
    reflections: tuple[Entry, ...]
    persona_tokens: int
    reflection_tokens: int
    disputed: tuple[Entry, ...] = ()  # within the two budgets above, shown under their own heading

    @property
    def entries(self) -> tuple[Entry, ...]:
        return self.protected + self.persona + self.reflections + self.disputed

    @property
    def text(self) -> str:
        sections = []
        for heading, entries in (
            (CHARACTER_HEADING, self.protected),
            (PERSONA_HEADING, self.persona),
            (REFLECTION_HEADING, self.reflections),
            (DISPUTED_HEADING, self.disputed),
        ):
            if entries:
                sections.append("\n".join([heading, *(f"- {e.text}" for e in entries)]))
        return "\n\n".join(sections)


def renderable(entry: Entry, now: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> bool:
    """Whether ``entry`` may compete for the prompt at all (before budgets)."""
    if entry.protected:
        return entry.status in (ACTIVE, PENDING, CONFIRMED)
    if is_suppressed(entry, now, settings=settings):
        return False
    if entry.kind == PERSONA:
        return entry.status == ACTIVE
    if entry.status in (CONFIRMED, PROMOTE_BLOCKED):
        # A promote_blocked reflection is still the confirmed observation it was; only its promotion waits.
        # A confirmed reflection the user has since argued down to zero or below is kept out of the prompt.
        return entry.score(now, settings=settings) > 0
    return entry.status == PENDING


def disputed(entry: Entry, now: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> bool:
    """Whether the user's latest word on ``entry`` takes it back: a disputing signal no older than the
    last reinforcing one, or a score below zero. Character-card entries are never disputed by evidence."""
    if entry.protected:
        return False
    ev = entry.evidence
    if ev.disputation > 0 and ev.disp_last_signal_at is not None and (
            ev.rein_last_signal_at is None or ev.disp_last_signal_at >= ev.rein_last_signal_at):
        return True
    return entry.score(now, settings=settings) < 0


def by_priority(
    entries: Iterable[Entry],
    now: datetime,
    *,
    settings: MemorySettings = DEFAULT_MEMORY_SETTINGS,
    usage: UsageSettings = DEFAULT_USAGE_SETTINGS,
) -> list[Entry]:
    """Score, then importance, then usage strength (only ever a tie-break), descending; ties
    keep their input order."""
    return sorted(entries, key=lambda e: (-e.score(now, settings=settings), -e.importance,
                                          -usage_strength(e.usage, now, settings=usage)))


def fill_budget(entries: Sequence[Entry], budget: int, count_tokens: TokenCounter) -> tuple[tuple[Entry, ...], int]:
    """Take entries in order while they fit; one that does not fit is skipped and the scan continues."""
    chosen: list[Entry] = []
    used = 0
    for entry in entries:
        cost = count_tokens(entry.text)
        if used + cost <= budget:
            chosen.append(entry)
            used += cost
    return tuple(chosen), used


def render_memory_block(
    scope: Scope,
    entries: Iterable[Entry],
    now: datetime,
    *,
    settings: MemorySettings = DEFAULT_MEMORY_SETTINGS,
    count_tokens: TokenCounter | None = None,
    usage: UsageSettings = DEFAULT_USAGE_SETTINGS,
) -> MemoryBlock:
    """The memory block for ``scope``; entries of other scopes are ignored (evidence never crosses scopes)."""
    count = count_tokens or default_token_counter()
    eligible = [e for e in entries if e.scope == scope.key and renderable(e, now, settings=settings)]
    protected = tuple(e for e in eligible if e.protected)
    persona, persona_tokens = fill_budget(
        by_priority((e for e in eligible if not e.protected and e.kind == PERSONA), now, settings=settings,
                    usage=usage),
        settings.persona_token_budget,
        count,
    )
    reflections, reflection_tokens = fill_budget(
        by_priority((e for e in eligible if not e.protected and e.kind == REFLECTION), now, settings=settings,
                    usage=usage),
        settings.reflection_token_budget,
        count,
    )
    taken_back = tuple(e for e in persona + reflections if disputed(e, now, settings=settings))
    return MemoryBlock(protected, tuple(e for e in persona if e not in taken_back),
                       tuple(e for e in reflections if e not in taken_back), persona_tokens, reflection_tokens,
                       taken_back)
