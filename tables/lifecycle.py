"""Stored lifecycle of reflections: score thresholds, merge-on-promote, its throttle, denial and archival.

A stored status only moves forward (pending → confirmed → promoted, or to denied / promote_blocked /
archived); a falling score never demotes it. The one way back is promote_blocked → confirmed, when a
blocked promotion is retried (unblock_promotion). Every function returns new entries and leaves its inputs alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from credence.config.memory import DEFAULT_MEMORY_SETTINGS, MemorySettings
from credence.errors import DomainError
from credence.tables.clock import as_utc
from credence.tables.entries import (
    ACTIVE,
    ARCHIVED,
    CONFIRMED,
    DENIED,
    PENDING,
    PERSONA,
    PROMOTE_BLOCKED,
    PROMOTED,
    REFLECTION,
    Entry,
    changed,
    new_persona_entry,
)
from credence.tables.evidence import Evidence, decayed, sweep
from credence.tables.scope import Scope

# Merge-on-promote outcomes.
CREATE: Final = "create"
MERGE: Final = "merge"
REJECT: Final = "reject"
OUTCOMES: Final = (CREATE, MERGE, REJECT)

# promote_decision() answers.
NOT_DUE: Final = "not_due"
WAIT: Final = "wait"
BLOCK: Final = "block"
ATTEMPT: Final = "attempt"

DENIABLE: Final = frozenset({PENDING, CONFIRMED, PROMOTE_BLOCKED})
# Denied reflections are swept too, so disputed observations leave the active view in time.
SWEPT: Final = {REFLECTION: frozenset({PENDING, CONFIRMED, PROMOTE_BLOCKED, DENIED}), PERSONA: frozenset({ACTIVE})}


@dataclass(frozen=True, slots=True)
class MergeOutcome:
    """What merge-on-promote decided: create a persona entry, merge into ``target_id``, or reject."""

    action: str
    target_id: str | None = None
    text: str | None = None  # the merged/rewritten persona text; None keeps the existing text

    def __post_init__(self) -> None:
        if self.action not in OUTCOMES:
            raise DomainError(f"merge decision action must be one of {OUTCOMES}, got {self.action!r}")
        if self.action == MERGE and not self.target_id:
            raise DomainError("a 'merge' decision needs the target_id of the persona entry to merge into")


@dataclass(frozen=True, slots=True)
class PromotionTicket:
    """Identifies one promote attempt, so a result arriving after a newer change can be refused."""

    entry_id: str
    version: int
    attempt: int


@dataclass(frozen=True, slots=True)
class LifecycleStep:
    """A lifecycle change: the reflection after it and, for create/merge, the persona entry written."""

    reflection: Entry
    persona: Entry | None
    action: str


def _require_reflection(entry: Entry) -> None:
    if entry.kind != REFLECTION:
        raise DomainError(f"{entry.id} is a {entry.kind} entry; this lifecycle rule applies to reflections")


def confirm_by_score(
    reflection: Entry, now: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS
) -> Entry | None:
    """pending → confirmed once the score reaches confirmed_threshold; None when nothing changes."""
    _require_reflection(reflection)
    if reflection.status != PENDING or reflection.score(now, settings=settings) < settings.confirmed_threshold:
        return None
    return changed(reflection, now, status=CONFIRMED, confirmed_at=as_utc(now))


def promote_decision(reflection: Entry, now: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> str:
    """Whether a confirmed reflection should enter merge-on-promote now: not_due, wait, block or attempt.

    The throttle is checked before the attempt limit so the last attempt's LLM call (which runs outside
    the scope's ordering) gets its full window before the reflection is blocked.
    """
    _require_reflection(reflection)
    if reflection.status != CONFIRMED or reflection.score(now, settings=settings) < settings.promoted_threshold:
        return NOT_DUE
    if rejected_for_now(reflection):
        return NOT_DUE
    last = reflection.last_promote_attempt_at
    if last is not None and as_utc(now) - last < timedelta(minutes=settings.promote_retry_interval_minutes):
        return WAIT
    if reflection.promote_attempts >= settings.max_promote_attempts:
        return BLOCK
    return ATTEMPT


def rejected_for_now(reflection: Entry) -> bool:
    """Merge-on-promote answered "reject" and no positive signal came since: the rejection is final for
    the reflection as it was; a newer reinforcement (the user or a user fact backing it) reopens it."""
    rejected = reflection.promotion_rejected_at
    if rejected is None:
        return False
    last_positive = reflection.evidence.rein_last_signal_at
    return last_positive is None or last_positive <= rejected


def record_promote_attempt(reflection: Entry, now: datetime) -> tuple[Entry, PromotionTicket]:
    """Count an attempt before the LLM call, so a crash or timeout still counts toward promote_blocked."""
    _require_reflection(reflection)
    if reflection.status != CONFIRMED:
        raise DomainError(f"reflection {reflection.id} is {reflection.status}; only confirmed ones are promoted")
    attempted = changed(
        reflection, now, promote_attempts=reflection.promote_attempts + 1, last_promote_attempt_at=as_utc(now)
    )
    ticket = PromotionTicket(attempted.id, attempted.version, attempted.promote_attempts)
    return attempted, ticket


def withdraw_promote_attempt(reflection: Entry, now: datetime) -> Entry:
    """Un-count an attempt whose result was dropped unread (powerful memory went off while it ran): it
    was neither a failure nor an answer. The attempt time stays, so the throttle still spaces attempts."""
    _require_reflection(reflection)
    return changed(reflection, now, promote_attempts=max(0, reflection.promote_attempts - 1))


def block_promotion(reflection: Entry, now: datetime) -> Entry:
    """Dead-letter a reflection whose promote attempts are exhausted."""
    _require_reflection(reflection)
    if reflection.status != CONFIRMED:
        raise DomainError(f"reflection {reflection.id} is {reflection.status}; only confirmed ones are blocked")
    return changed(reflection, now, status=PROMOTE_BLOCKED)


def blocked_retry_due(
    reflection: Entry, now: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS
) -> bool:
    """A promote_blocked reflection may be retried once promote_blocked_retry_hours passed since its last attempt."""
    if reflection.kind != REFLECTION or reflection.status != PROMOTE_BLOCKED:
        return False
    last = reflection.last_promote_attempt_at
    return last is None or as_utc(now) - last >= timedelta(hours=settings.promote_blocked_retry_hours)


def time_cannot_move(reflection: Entry, now: datetime, *,
                     settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> bool:
    """True when no later instant alone can make confirm_by_score, blocked_retry_due or promote_decision
    act on this reflection as it is: only a new version of it (a signal) can.

    Why the score cannot climb to a threshold T > 0 on its own: past both last signals,
    score(t) = R·2^(−a/h_r) − D·2^(−b/h_d), and its slope is positive only where D_eff/h_d > R_eff/h_r,
    that is D_eff > (h_d/h_r)·R_eff ≥ R_eff when h_r ≤ h_d, where the score is below 0. So a score below
    T stays below it. With the half-lives set the other way round, or a counter that does not decay from
    `now` on (no clock, or a clock after `now`), the answer is False: check again at every instant.
    """
    if reflection.kind != REFLECTION:
        return True
    if reflection.status == PENDING:
        threshold = settings.confirmed_threshold
    elif reflection.status == CONFIRMED:
        if rejected_for_now(reflection):
            return True  # reopened only by a newer positive signal
        threshold = settings.promoted_threshold
    elif reflection.status == PROMOTE_BLOCKED:
        return False  # its retry is due by time
    else:
        return True  # promoted, denied, archived: no score transition applies
    if threshold <= 0 or settings.reinforcement_half_life_days > settings.disputation_half_life_days:
        return False
    ev, now = reflection.evidence, as_utc(now)
    for counter, at in ((ev.reinforcement, ev.rein_last_signal_at), (ev.disputation, ev.disp_last_signal_at)):
        if counter < 0 or (counter and (at is None or as_utc(at) > now)):
            return False  # a counter that does not decay yet (no clock, or a clock ahead of now)
    return reflection.score(now, settings=settings) < threshold


def unblock_promotion(reflection: Entry, now: datetime) -> Entry:
    """promote_blocked → confirmed with a fresh series of attempts (the one way a status moves back:
    a block records an outage, not something the user said)."""
    _require_reflection(reflection)
    if reflection.status != PROMOTE_BLOCKED:
        raise DomainError(f"reflection {reflection.id} is {reflection.status}; only promote_blocked ones are unblocked")
    return changed(reflection, now, status=CONFIRMED, promote_attempts=0)


def promotion_is_current(stored: Entry, ticket: PromotionTicket) -> bool:
    """False when a denial, archive, block or newer attempt happened after the attempt was recorded."""
    return (
        stored.id == ticket.entry_id
        and stored.status == CONFIRMED
        and stored.promote_attempts == ticket.attempt
        and stored.version >= ticket.version
    )


def merge_evidence(target: Evidence, source: Evidence, now: datetime, *,
                   settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> Evidence:
    """Combine two entries' evidence at the merge instant ``now`` without making any of it younger.

    - reinforcement and disputation, each on its own: the side whose read-time value at ``now`` is larger
      (for a negative reinforcement, the one nearer zero) is carried on, decayed to ``now`` with its clock
      set to ``now``. Decay is memoryless, so that is the same curve as the side's own: from the merge on,
      the merged value equals that side's at every instant, never the stored raw maximum on a new clock.
      A clock that is missing or after ``now`` is kept, since that side is not decaying yet.
    - sub_zero_days and user_fact_reinforce_count: the larger lifetime tally (never the sum, never reset).
    - sub_zero_last_increment_date: the later day, so no day already counted is counted again.
    """
    now = as_utc(now)
    reinforcement, rein_clock = _larger_curve(
        (target.reinforcement, target.rein_last_signal_at), (source.reinforcement, source.rein_last_signal_at),
        now, settings.reinforcement_half_life_days,
    )
    disputation, disp_clock = _larger_curve(
        (target.disputation, target.disp_last_signal_at), (source.disputation, source.disp_last_signal_at),
        now, settings.disputation_half_life_days,
    )
    days = [d for d in (target.sub_zero_last_increment_date, source.sub_zero_last_increment_date) if d is not None]
    return Evidence(
        reinforcement=reinforcement,
        disputation=disputation,
        rein_last_signal_at=rein_clock,
        disp_last_signal_at=disp_clock,
        sub_zero_days=max(target.sub_zero_days, source.sub_zero_days),
        sub_zero_last_increment_date=max(days) if days else None,
        user_fact_reinforce_count=max(target.user_fact_reinforce_count, source.user_fact_reinforce_count),
    )


_Curve = tuple[float, datetime | None]


def _at_instant(counter: float, clock: datetime | None, now: datetime, half_life_days: float) -> _Curve:
    """The same decay curve restated from ``now``: a past clock moves to ``now`` with the value decayed to it."""
    if clock is None or clock >= now:
        return counter, clock
    return decayed(counter, clock, now, half_life_days), now


def _larger_curve(first: _Curve, second: _Curve, now: datetime, half_life_days: float) -> _Curve:
    """The side larger at ``now``; on a tie, the one that stays larger (for a positive value the later or
    missing clock decays later, for a negative one the earlier clock rises sooner), so the choice never
    depends on the order of the arguments."""
    def key(curve: _Curve) -> tuple[float, float]:
        value, clock = curve
        rank = math.inf if clock is None else clock.timestamp()
        return value, rank if value >= 0 else -rank

    return max(_at_instant(*first, now, half_life_days), _at_instant(*second, now, half_life_days), key=key)


def _union(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(first + second))


def merge_into_persona(persona: Entry, reflection: Entry, now: datetime, text: str | None = None, *,
                       settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> Entry:
    """Fold a reflection into an existing persona entry; a repeated merge of the same reflection is a no-op."""
    if persona.kind != PERSONA or persona.status != ACTIVE or persona.protected:
        raise DomainError(f"cannot merge into {persona.id}: the target must be an active, non-protected persona entry")
    if persona.scope != reflection.scope:
        raise DomainError(f"cannot merge {reflection.id} into {persona.id}: evidence never crosses scopes")
    if reflection.id in persona.merged_from_ids:
        return persona
    return changed(
        persona,
        now,
        text=text or persona.text,
        evidence=merge_evidence(persona.evidence, reflection.evidence, now, settings=settings),
        merged_from_ids=(*persona.merged_from_ids, reflection.id),
        source_fact_ids=_union(persona.source_fact_ids, reflection.source_fact_ids),
        importance=max(persona.importance, reflection.importance),
    )


def default_persona_id(reflection: Entry) -> str:
    """Deterministic, so a replayed "create" writes the same persona entry instead of a duplicate."""
    return f"persona-{reflection.id}"


def create_persona_from(
    reflection: Entry, now: datetime, persona_id: str | None = None, text: str | None = None, *,
    settings: MemorySettings = DEFAULT_MEMORY_SETTINGS,
) -> Entry:
    scope = Scope(reflection.tenant, reflection.user, reflection.character)
    return new_persona_entry(
        persona_id or default_persona_id(reflection),
        scope,
        text or reflection.text,
        now,
        subject=reflection.subject,
        importance=reflection.importance,
        source_fact_ids=reflection.source_fact_ids,
        evidence=merge_evidence(reflection.evidence, reflection.evidence, now, settings=settings),
        merged_from_ids=(reflection.id,),
        tags=reflection.tags,  # a promoted reflection's persona keeps its turns' tags
    )


def apply_merge_decision(
    reflection: Entry,
    decision: MergeOutcome,
    now: datetime,
    *,
    target: Entry | None = None,
    persona_id: str | None = None,
    settings: MemorySettings = DEFAULT_MEMORY_SETTINGS,
) -> LifecycleStep:
    """Apply a merge-on-promote outcome to a confirmed reflection.

    reject is an answer, not a failure: the reflection stays confirmed, its attempts start again from
    zero (rejections never lead to promote_blocked), and it is not offered again until a newer positive
    signal (rejected_for_now).
    """
    _require_reflection(reflection)
    if reflection.status != CONFIRMED:
        raise DomainError(
            f"reflection {reflection.id} is {reflection.status}; check promotion_is_current before applying a result"
        )
    if decision.action == REJECT:
        rejected = changed(reflection, now, promotion_rejected_at=as_utc(now), promote_attempts=0)
        return LifecycleStep(rejected, None, REJECT)
    if decision.action == CREATE:
        persona = create_persona_from(reflection, now, persona_id, decision.text, settings=settings)
    else:
        if target is None or target.id != decision.target_id:
            raise DomainError(f"merge target {decision.target_id!r} was not supplied; pass the stored persona entry")
        persona = merge_into_persona(target, reflection, now, decision.text, settings=settings)
    promoted = changed(reflection, now, status=PROMOTED, promoted_at=as_utc(now), merged_into_id=persona.id)
    return LifecycleStep(promoted, persona, decision.action)


def deny(reflection: Entry, now: datetime) -> Entry:
    """The user denied a surfaced reflection. Already promoted, denied or archived ones are left as they are."""
    _require_reflection(reflection)
    if reflection.status not in DENIABLE:
        return reflection
    return changed(reflection, now, status=DENIED)


def archive(entry: Entry, now: datetime) -> Entry:
    """Remove an entry from the active view. Character-card entries are never archived by evidence."""
    if entry.protected:
        raise DomainError(f"{entry.id} is a protected character-card entry and is never archived")
    if entry.status == ARCHIVED:
        return entry
    return changed(entry, now, status=ARCHIVED, archived_at=as_utc(now))


def sweep_cannot_change(entry: Entry, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> bool:
    """True when no later sweep visit (lifting a suppression, counting a sub-zero day, archiving) can
    change this entry as it is: sweeps skip it, or nothing is suppressed and its score can never fall
    below zero (no disputation, reinforcement not negative) with the sub-zero tally short of its limit."""
    if entry.suppressed_at is not None:
        return False
    if entry.protected or entry.status not in SWEPT[entry.kind]:
        return True
    ev = entry.evidence
    return ev.disputation == 0 and ev.reinforcement >= 0 and ev.sub_zero_days < settings.archive_after_sub_zero_days


def sweep_entry(
    entry: Entry, now: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS
) -> tuple[Entry, bool]:
    """One hourly-sweep visit to an entry: count a sub-zero day, archive at the limit.

    Returns the entry (the same object when nothing changed) and whether it was archived by this visit.
    """
    if entry.protected or entry.status not in SWEPT[entry.kind]:
        return entry, False
    evidence, due = sweep(entry.evidence, now, settings=settings, tenant=entry.tenant)
    if evidence != entry.evidence:
        entry = changed(entry, now, evidence=evidence)
    if due:
        return archive(entry, now), True
    return entry, False
