"""Usage settings: the usage channel (recall-driven strength and its decay) and the bridge to facts.

Every number is seed 002's default under its name. Both behaviours that can lose or export memory are
gated and off by default: nothing rots until ``decay_enabled`` is set, nothing is nominated as a fact
candidate until ``bridge_enabled`` is set. Environment: CREDENCE_USAGE__<FIELD>, CREDENCE_BRIDGE__<FIELD>.
"""

from __future__ import annotations

import re
from datetime import time

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class UsageSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Gate: "decay stays OFF until DECAY_ENABLED is flipped on (no memories rot until you say so)".
    decay_enabled: bool = False

    # Reinforce: an asymptotic impulse Δ = α · (ceiling − current), at most once per (source, UTC day).
    reinforce_alpha: float = Field(default=0.15, gt=0, le=1)
    reinforce_ceiling: float = Field(default=1.0, gt=0)
    # The seed gives no starting strength. 0.5 lets an entry nobody ever recalls live through the grace
    # plus ~37 days of decay before it crosses the soft-archive threshold; 0 would soft-archive every
    # never-recalled entry at the first sweep after the gate is opened.
    initial_strength: float = Field(default=0.5, ge=0)
    # Daily idempotency keeps the (source, UTC day) keys it counted for this many days back from the
    # latest one, so a hit that arrives late for an earlier day still counts once; an older one is
    # dropped. One half-life: the stored keys stay bounded (days × sources).
    idempotency_days: int = Field(default=28, ge=1)

    # Decay, read-time like the evidence score: none within the grace, then exponential, never below the floor.
    decay_half_life_days: float = Field(default=28.0, gt=0)  # 4 weeks
    decay_grace_days: float = Field(default=3.0, ge=0)
    decay_floor: float = Field(default=0.1, ge=0)
    # The daily sweep (03:00 UTC): below this strength an entry is soft-archived (never deleted).
    soft_archive_below: float = Field(default=0.2, ge=0)
    decay_sweep_at: time = time(3, 0)
    # External corroboration overrides the internal-use signal: such entries are skipped by the sweep.
    consensus_skip_at: float = Field(default=0.75, ge=0, le=1)

    @model_validator(mode="after")
    def _ordered(self) -> UsageSettings:
        if not self.decay_floor <= self.reinforce_ceiling:
            raise ValueError("decay_floor must not exceed reinforce_ceiling")
        if self.decay_sweep_at.tzinfo is not None:
            raise ValueError("decay_sweep_at is a UTC time of day; write it without an offset, e.g. '03:00'")
        return self


class TopicFilter(BaseModel):
    """Which entries of a tenant may be nominated: an entry passes when one of its subject tags is listed,
    or its text contains one of the keywords as a whole word (case-insensitive). Empty accepts nothing."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subjects: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()

    @field_validator("subjects", "keywords")
    @classmethod
    def _clean(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        cleaned = tuple(v.strip().lower() for v in value)
        if any(not v for v in cleaned):
            raise ValueError("topic filter subjects and keywords must be non-empty strings")
        return cleaned

    def accepts(self, text: str, tags: tuple[str, ...]) -> bool:
        if any(t.strip().lower() in self.subjects for t in tags):
            return True
        words = f" {' '.join(_words(text))} "
        return any(f" {' '.join(_words(k))} " in words for k in self.keywords)


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


class BridgeSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Gate: "Rollback is the flag." Off: nominate/approve raise BridgeRetired and nothing is emitted.
    bridge_enabled: bool = False
    # Ripe = alive in memory >= N days AND reinforce_count >= K (the seed names N and K, not their values).
    ripe_min_age_days: float = Field(default=30.0, ge=0)
    ripe_min_reinforce_count: int = Field(default=5, ge=0)
    # Topic filter per tenant ("*" applies to tenants not listed). Default: accepts nothing.
    topic_filters: dict[str, TopicFilter] = {}

    def topic_filter(self, tenant: str) -> TopicFilter:
        return self.topic_filters.get(tenant) or self.topic_filters.get("*") or TopicFilter()


DEFAULT_USAGE_SETTINGS = UsageSettings()
DEFAULT_BRIDGE_SETTINGS = BridgeSettings()
