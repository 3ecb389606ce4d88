"""Weak-memory fallback: with powerful memory off, reflections advance by age, not by evidence_score.

pending → confirmed ``fallback_confirm_after_days`` after creation; confirmed → promoted
``fallback_promote_after_days`` after confirmation through the simple non-LLM merge. One transition per
tick, so a reflection never jumps from pending to promoted in one visit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta

from credence.config.memory import DEFAULT_MEMORY_SETTINGS, MemorySettings
from credence.tables.clock import as_utc
from credence.tables.entries import ACTIVE, CONFIRMED, PENDING, PERSONA, Entry, changed
from credence.tables.lifecycle import CREATE, MERGE, LifecycleStep, MergeOutcome, apply_merge_decision

CONFIRM = "confirm"

_SPACE = re.compile(r"\s+")


def _normalised(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


def simple_merge_decision(reflection: Entry, personas: Iterable[Entry]) -> tuple[MergeOutcome, Entry | None]:
    """The non-LLM merge: fold into an active, non-protected persona entry of the same scope with the same
    text (ignoring case and spacing), otherwise create a new one."""
    wanted = _normalised(reflection.text)
    for persona in personas:
        if (
            persona.kind == PERSONA
            and persona.status == ACTIVE
            and not persona.protected
            and persona.scope == reflection.scope
            and _normalised(persona.text) == wanted
        ):
            return MergeOutcome(MERGE, target_id=persona.id), persona
    return MergeOutcome(CREATE), None


def confirmed_clock_start(reflection: Entry, switched_off_at: datetime | None) -> datetime:
    """Switching powerful memory on→off restarts the confirmed clock at the switch time."""
    start = reflection.confirmed_at or reflection.created_at
    if switched_off_at is not None and as_utc(switched_off_at) > start:
        return as_utc(switched_off_at)
    return start


def fallback_tick(
    reflection: Entry,
    now: datetime,
    *,
    personas: Iterable[Entry] = (),
    switched_off_at: datetime | None = None,
    persona_id: str | None = None,
    settings: MemorySettings = DEFAULT_MEMORY_SETTINGS,
) -> LifecycleStep | None:
    """At most one age-driven transition of ``reflection``; None when nothing is due.

    ``switched_off_at`` is when powerful memory was last turned off; ``personas`` are the scope's persona
    entries the simple merge may fold into.
    """
    now = as_utc(now)
    if reflection.status == PENDING:
        if now - reflection.created_at >= timedelta(days=settings.fallback_confirm_after_days):
            return LifecycleStep(changed(reflection, now, status=CONFIRMED, confirmed_at=now), None, CONFIRM)
        return None
    if reflection.status == CONFIRMED:
        start = confirmed_clock_start(reflection, switched_off_at)
        if now - start >= timedelta(days=settings.fallback_promote_after_days):
            decision, target = simple_merge_decision(reflection, personas)
            return apply_merge_decision(reflection, decision, now, target=target, persona_id=persona_id,
                                        settings=settings)
    return None
