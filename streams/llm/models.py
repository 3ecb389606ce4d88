"""The plain typed records the LLM layer takes and returns. They mirror, but do not import, the domain
entries in tables/: the pipeline maps between the two, so this layer stays swappable."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Polarity = Literal["positive", "negative"]
Relation = Literal["reinforce", "negate"]
Feedback = Literal["confirm", "deny", "ignore"]
MergeAction = Literal["create", "merge", "reject"]
# The correction task's choices (the origin's, docs/corrections.md): fuse, the new replaces the old, the old stands, or
# both stand (a similar topic, no contradiction).
CorrectionAction = Literal["merge", "keep_new", "keep_old", "keep_both"]
RefineKind = Literal["split", "merge", "modify", "discard"]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Turn(_Record):
    id: str
    role: Literal["user", "ai"]
    text: str
    ts: str  # ISO-8601 UTC, as on credence.turns
    tags: tuple[str, ...] = ()  # the tenant's: for the entries its facts make, never sent to a model


class Fact(_Record):
    id: str
    text: str
    subject: str
    importance: int = Field(ge=1, le=10)
    polarity: Polarity
    source_turn_ids: list[str]
    # Facts drawn only from AI turns never enter Stage-2 (the seed's no-self-reinforcement rule).
    origin: Literal["user", "ai"] = "user"


class Observation(_Record):
    """An existing reflection or persona entry offered to a task as a candidate."""

    id: str
    text: str
    subject: str = ""
    # evidence_score now, where a decision weighs it (merge-on-promote); None where it plays no part.
    score: float | None = None


class Classification(_Record):
    fact_id: str
    observation_id: str
    relation: Relation


class FeedbackDecision(_Record):
    id: str
    decision: Feedback


class RebuttalTarget(_Record):
    """The negative-keyword target check's answer: the observations the user's message takes back, and
    whether the user asks to have them forgotten (then they leave the memory) rather than disputes them."""

    ids: list[str]
    forget: bool = False


class ReflectionDraft(_Record):
    text: str
    subject: str
    source_fact_ids: list[str]
    score: float | None = None  # the reflection's evidence_score when it is up for promotion


class MergeDecision(_Record):
    action: MergeAction
    target_id: str | None = None
    text: str = ""


class CorrectionItem(_Record):
    """A queued correction: an existing entry (``old``, with its evidence score) and the new statement
    that came up on the same topic (``new_text``, with its own score); ``id`` names the queued item."""

    id: str
    old: Observation
    new_text: str
    new_score: float | None = None


class CorrectionDecision(_Record):
    id: str
    action: CorrectionAction
    text: str = ""  # the fused sentence of a merge


class RefineAction(_Record):
    """One action of a refine answer over a cluster of entries (ids are the entries' real ids): split one
    source into texts (two or more), merge sources (two or more) into texts[0], modify one source's text
    to texts[0], discard one source; reason says why (kept in the journal's cause)."""

    action: RefineKind
    source_ids: list[str]
    texts: list[str] = []
    reason: str = ""
