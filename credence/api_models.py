"""The API's bodies: one pydantic model per request and response. The OpenAPI document, the server's
validation and the Python client all use these, so they cannot drift apart."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

STRICT = ConfigDict(extra="forbid")


class Error(BaseModel):
    error: str = Field(description="why the request was refused")
    status: int


class TurnsRequest(BaseModel):
    model_config = STRICT
    # Each turn is the turns topic's v1 record without `tenant` (the path names it); each one is
    # validated by the topic's own decoder and accepted or rejected on its own.
    turns: list[dict] = Field(description="turn records: user, character, turn_id, role, text, ts[, surfaced_ids]")


class Rejected(BaseModel):
    index: int
    reason: str


class TurnPosition(BaseModel):
    turn_id: str
    user: str
    character: str
    partition: int = Field(description="the turns topic's partition it was written to (its scope's)")
    offset: int
    state: Literal["accepted", "applied", "extracted"] = Field(
        default="accepted", description="with ?wait=: how far its scope's owner had come when this answered")


class TurnsResponse(BaseModel):
    accepted: int
    rejected: list[Rejected]
    turns: list[TurnPosition] = Field(default_factory=list, description="each accepted turn's position")
    token: str | None = Field(default=None, description="consistency token: pass it as ?token= with "
                              "?wait=applied|extracted on a read to read these turns' effects")
    reached: bool | None = Field(default=None, description="with ?wait=: every scope reached it in time")


class TurnStatus(BaseModel):
    turn_id: str
    state: Literal["accepted", "applied", "extracted"] = Field(
        description="accepted: written, not yet applied by the scope's owner; applied: in the scope's state; "
                    "extracted: its Stage-1 window closed and its facts were processed")
    partition: int | None = None
    offset: int | None = None
    entry_ids: list[str] = Field(default_factory=list, description="extracted: the entries its facts created, "
                                 "restated or signalled (kept for the scope's recent turns)")
    reached: bool | None = Field(default=None, description="with ?wait=: the state was reached in time")


class PromptEntry(BaseModel):
    id: str
    kind: str
    tier: str
    score: float | None = Field(description="score at the scope's clock; null for card (protected) entries")
    protected: bool = False


class LeftOut(BaseModel):
    id: str
    reason: str


class PromptTokens(BaseModel):
    persona: int
    reflections: int


class PromptResponse(BaseModel):
    text: str
    entries: list[PromptEntry]
    tokens: PromptTokens
    left_out: list[LeftOut]
    clock: datetime | None = Field(description="the instant scores were computed at (the scope's event clock)")


class RecallRequest(BaseModel):
    model_config = STRICT
    query: str = Field(min_length=1, max_length=2000)
    top_k: int = Field(default=10, ge=1, le=100)
    since: datetime | None = None
    until: datetime | None = None
    tag: str | None = Field(default=None, min_length=1, max_length=64,
                            description="only entries carrying this tag (their turns' metadata.tags)")


class RecallHit(BaseModel):
    id: str
    text: str
    kind: str
    tier: str
    score: float | None
    rrf: float
    rankers: dict[str, int]
    tags: list[str] = Field(default_factory=list)


class RecallResponse(BaseModel):
    hits: list[RecallHit]
    rankers: list[str] = Field(default_factory=list, description="the rankers this answer fused: bm25, and "
                               "cosine once the embedding model has loaded (a worker answers by bm25 meanwhile)")


class MemoryActionRequest(BaseModel):
    model_config = STRICT
    by: str = Field(min_length=1, max_length=200, description="who asks: restores and nominations are human actions")


class ConsensusRequest(BaseModel):
    model_config = STRICT
    score: float = Field(ge=0, le=1, allow_inf_nan=False, strict=True,
                         description="external corroboration, 0..1; at >= usage.consensus_skip_at (0.75) the "
                                     "usage-decay sweep skips the entry")
    by: str = Field(min_length=1, max_length=200, pattern=r"\S",
                    description="who sets it: an operator or a verification pipeline")


class MemoryActionResponse(BaseModel):
    entry_id: str
    requested: Literal["restore", "nominate", "consensus"]
    candidate_id: str | None = Field(default=None, description="nominate: the candidate record emitted")


class FeedbackRequest(BaseModel):
    model_config = STRICT
    entry_id: str = Field(min_length=1, max_length=200)
    kind: Literal["confirm", "deny"]
    ts: datetime | None = Field(default=None, description="when the user gave it (default: now); with an offset")


class EntryView(BaseModel):
    id: str
    kind: str
    text: str
    status: str
    tier: str
    score: float | None
    version: int
    protected: bool = False
    created_at: datetime | None = None
    updated_at: datetime | None = None
    tags: list[str] = Field(default_factory=list, description="the tenant's tags of the turns it came from")
    snapshot: dict | None = Field(default=None, description="the entry's full record (docs/records.md)")


class FeedbackResponse(BaseModel):
    feedback_id: str
    applied: bool | None = Field(default=None, description="with ?wait=true: whether it was applied in time")
    entry: EntryView | None = Field(default=None, description="with ?wait=true: the entry after the feedback")


class EntriesResponse(BaseModel):
    entries: list[EntryView]
    clock: datetime | None


class HistoryEvent(BaseModel):
    model_config = ConfigDict(extra="allow")
    event: str | None = None
    cause: str | None = None
    at: datetime | None = None
    score: float | None = None
    tier: str | None = None


class VersionItem(BaseModel):
    text: str
    replaced_at: datetime
    reason: str
    source_fact_id: str | None = None


class EntryDetail(BaseModel):
    entry: EntryView
    history: list[HistoryEvent] = Field(description="the signals that made the score, oldest first, "
                                                    "with the score after each")
    clock: datetime | None
    version_history: list[VersionItem] = Field(
        default_factory=list, description="the texts a rewrite (a correction, an edit) replaced, oldest first; "
                                          "the entry kept its id and counters")


class CardEntryIn(BaseModel):
    model_config = STRICT
    id: str
    text: str


class CardRequest(BaseModel):
    model_config = STRICT
    entries: list[CardEntryIn]


class CardResponse(BaseModel):
    tenant: str
    character: str
    entries: int


class ForgetResponse(BaseModel):
    tenant: str
    user: str
    partitions: int


# -- one entry at a time: delete with an erasure receipt, remember this -------------------------------


class StoreErasure(BaseModel):
    store: str = Field(description="where: scope state, signal history, entry versions, changelogs, recall "
                                   "index, Parquet archive, journal topic")
    removed: int = Field(description="keys, tombstones, rows or indexes removed there")
    remaining: int = Field(default=0, description="what of the entry is still there after the removal (0)")
    detail: str


class ErasureReceipt(BaseModel):
    entry_id: str
    erased_ids: list[str] = Field(description="the entry and the entries merged into it (their text is its)")
    applied: bool = Field(description="the scope's owner applied the delete within the wait; false: it is "
                                      "queued (behind an LLM request) and the stores below say what is left")
    by: str
    reason: str | None = None
    at: datetime | None = Field(default=None, description="the scope's event time of the delete")
    stores: list[StoreErasure] = Field(description="each store and what was removed there")
    kept: list[StoreErasure] = Field(description="what stays, and until when (nothing of it is served)")


class RememberRequest(BaseModel):
    model_config = STRICT
    text: str = Field(min_length=1, max_length=1000, description="one self-contained statement about the user")
    importance: int = Field(default=5, ge=1, le=10, strict=True,
                            description="1..10: seeds the new reflection's reinforcement (the seed's table)")
    subject: str | None = Field(default=None, max_length=200)
    by: str = Field(default="user", min_length=1, max_length=200, pattern=r"\S")


class EditTextRequest(BaseModel):
    model_config = STRICT
    text: str = Field(min_length=1, max_length=1000, description="the entry's new wording: one self-contained "
                                                                 "statement about the user")
    by: str = Field(default="user", min_length=1, max_length=200, pattern=r"\S")


class EditTextResponse(BaseModel):
    entry_id: str
    applied: bool = Field(description="the scope's owner applied it within the wait")
    entry: EntryView | None = Field(default=None, description="the entry after the edit, when applied")
    version_history: list[VersionItem] = Field(default_factory=list, description="the texts it replaced, "
                                                                                "oldest first")


class RememberResponse(BaseModel):
    remember_id: str = Field(description="the user fact's source id (an entry it creates cites its fact)")
    fact_id: str


class Status(BaseModel):
    model_config = ConfigDict(extra="allow")
    service: str
    version: str
    ready: bool


class OpenApiDocument(BaseModel):
    model_config = ConfigDict(extra="allow")
    openapi: str


# -- the recent conversation (GET …/recent, MCP get_recent) -------------------------------------------

class RecentTurn(BaseModel):
    turn_id: str
    role: str
    text: str = Field(description="the turn's text; one over the per-message cap keeps its head and tail")
    ts: str


class RecentResponse(BaseModel):
    memo: str | None = Field(description="the rolling memo of the turns older than `turns` (null: none yet, or "
                                         "it did not fit max_tokens beside the newest turns)")
    memo_turns: int = Field(description="how many turns the memo stands for")
    turns: list[RecentTurn] = Field(description="the newest turns, oldest first, as many as fit max_tokens")
    left_out_turns: int = Field(description="kept turns older than `turns` that did not fit")
    tokens: int = Field(description="tokens of memo and turns together (at most max_tokens)")
    max_tokens: int
    memory: PromptResponse = Field(description="the memory block, as GET …/prompt serves it (a use of its "
                                               "entries, as there)")
    clock: datetime | None = Field(description="the scope's event clock")
