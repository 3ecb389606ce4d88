"""The prompt memory block of one scope: which entries reach the system prompt, under two token budgets.

Non-protected persona entries share ``persona_token_budget``; pending + confirmed reflections share
``reflection_token_budget``. Higher scores (then higher importance, then higher usage strength) win
budget pressure; an entry that does not fit is skipped and smaller ones after it may still fit.
Character-card (protected) entries are always rendered, outside both budgets.
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


@dataclass(frozen=True, slots=True)
class MemoryBlock:
    protected: tuple[Entry, ...]
    persona: tuple[Entry, ...]
    reflections: tuple[Entry, ...]
    persona_tokens: int
    reflection_tokens: int

    @property
    def entries(self) -> tuple[Entry, ...]:
        return self.protected + self.persona + self.reflections

    @property
    def text(self) -> str:
        sections = []
        for heading, entries in (
            (CHARACTER_HEADING, self.protected),
            (PERSONA_HEADING, self.persona),
            (REFLECTION_HEADING, self.reflections),
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


def by_priority(
    entries: Iterable[Entry],
    now: datetime,
    *,
    settings: MemorySettings = DEFAULT_MEMORY_SETTINGS,
    usage: UsageSettings = DEFAULT_USAGE_SETTINGS,
) -> list[Entry]:
    """Score, then importance, then usage strength (seed 002: only ever a tie-break), descending; ties
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
    return MemoryBlock(protected, persona, reflections, persona_tokens, reflection_tokens)
