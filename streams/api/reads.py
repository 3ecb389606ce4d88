"""What a scope's owner answers: the prompt block, entries with tier and score, one entry's history.

Scores are read at the scope's clock (the latest event time the stream applied), or at `?at=` when the
caller names an instant: the same `now` the evidence core renders with, so the API agrees with the stream.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from credence import api_models as models
from credence.config.memory import MemorySettings
from credence.errors import ApiError, DomainError, RecordError
from credence.records.envelope import parse_utc
from credence.streams.api.tenants import Tenant
from credence.tables.entries import KINDS, Entry
from credence.tables.evidence import ARCHIVE_CANDIDATE, derived_tier
from credence.tables.mentions import is_suppressed
from credence.tables.rendering import render_memory_block, renderable
from credence.tables.scope import Scope
from credence.tables.tags import check_tag

TIERS = ("protected", "promoted", "confirmed", "pending", ARCHIVE_CANDIDATE)


def tenant_memory(memory: MemorySettings, tenant: Tenant) -> MemorySettings:
    """The evidence settings with the tenant's overrides (budgets; time zone for its sweeps)."""
    return tenant.settings.memory(memory, tenant.name)


def read_instant(query, clock: datetime | None) -> datetime:
    if "at" in query:
        try:
            return parse_utc(query["at"], "at")
        except RecordError as exc:
            raise ApiError(400, str(exc)) from None
    return clock or datetime.now(UTC)


def tag_of(tag: str | None, status: int = 400) -> str | None:
    """A tag filter: a valid tag or none; an invalid one is refused with the rule it breaks."""
    if tag is None:
        return None
    try:
        return check_tag(tag)
    except DomainError as exc:
        raise ApiError(status, f"tag: {exc}") from None


def finite(score: float) -> float | None:
    return score if math.isfinite(score) else None


def tier_of(entry: Entry, now: datetime, memory: MemorySettings) -> str:
    return "protected" if entry.protected else derived_tier(entry.score(now, settings=memory), settings=memory)


def entry_view(entry: Entry, now: datetime, memory: MemorySettings, snapshot: bool = True) -> models.EntryView:
    return models.EntryView(
        id=entry.id, kind=entry.kind, text=entry.text, status=entry.status, tier=tier_of(entry, now, memory),
        score=None if entry.protected else finite(entry.score(now, settings=memory)), version=entry.version,
        protected=entry.protected, created_at=entry.created_at, updated_at=entry.updated_at, tags=list(entry.tags),
        snapshot=entry.to_dict() if snapshot else None)


def left_out_reason(entry: Entry, now: datetime, memory: MemorySettings) -> str:
    if renderable(entry, now, settings=memory):
        return "over the token budget"
    if is_suppressed(entry, now, settings=memory):
        return "suppressed (mentioned too often recently)"
    return f"not rendered in status {entry.status} at score {entry.score(now, settings=memory):+.3f}"


def prompt(scope: Scope, entries: list[Entry], card: list[Entry], now: datetime, memory: MemorySettings,
           count_tokens) -> models.PromptResponse:
    entries = sorted(entries, key=lambda e: e.id)  # the order the worker's views render in (ties keep it)
    block = render_memory_block(scope, [*card, *entries], now, settings=memory, count_tokens=count_tokens)
    shown = {e.id for e in block.entries}
    return models.PromptResponse(
        text=block.text,
        entries=[models.PromptEntry(id=e.id, kind=e.kind, tier=tier_of(e, now, memory), protected=e.protected,
                                    score=None if e.protected else finite(e.score(now, settings=memory)))
                 for e in block.entries],
        tokens=models.PromptTokens(persona=block.persona_tokens, reflections=block.reflection_tokens),
        left_out=[models.LeftOut(id=e.id, reason=left_out_reason(e, now, memory))
                  for e in entries if e.id not in shown],
        clock=now)


def entries(all_entries: list[Entry], card: list[Entry], now: datetime, memory: MemorySettings,
            query) -> models.EntriesResponse:
    tier, kind, tag = query.get("tier"), query.get("kind"), tag_of(query.get("tag"))
    if tier is not None and tier not in TIERS:
        raise ApiError(400, f"tier must be one of {TIERS}, got {tier[:40]!r}")
    if kind is not None and kind not in KINDS:
        raise ApiError(400, f"kind must be one of {KINDS}, got {kind[:40]!r}")
    views = [entry_view(e, now, memory) for e in [*card, *sorted(all_entries, key=lambda e: e.id)]]
    return models.EntriesResponse(
        entries=[v for v in views if (tier is None or v.tier == tier) and (kind is None or v.kind == kind)
                 and (tag is None or tag in v.tags)],
        clock=now)
