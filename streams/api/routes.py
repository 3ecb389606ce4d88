"""The /v1 route table: method, path, models and handler of every route. The server mounts it and the
OpenAPI document is generated from it, so the two cannot disagree."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel

from credence import api_models as models

V1 = "/v1"
T = V1 + "/tenants/{tenant}"
SCOPE = T + "/users/{user}/characters/{character}"


@dataclass(frozen=True)
class Query:
    name: str
    type: str  # JSON schema type
    description: str


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    name: str  # the handler's name on Api, and the OpenAPI operationId
    summary: str
    response: type[BaseModel]
    status: int = 200
    body: type[BaseModel] | None = None
    by_owner: bool = False  # answered by the scope's owner
    query: tuple[Query, ...] = ()


AT = Query("at", "string", "ISO-8601 instant to read scores at (default: the scope's clock)")
AS_OF = Query("as_of", "string", "ISO-8601 instant: answer with the entry versions valid then (bi-temporal, "
              "from the scope's kept entry versions), read at that instant; 404 for a scope with no state, "
              "410 before the versions kept")

WAIT = Query("wait", "string", "applied | extracted: answer once the scope's owner has reached the turns of "
             "`token`; 503 with Retry-After if not within `timeout`")
TIMEOUT = Query("timeout", "number", "seconds `wait` may take (default and most: api.turn_wait_max_seconds)")
TOKEN = Query("token", "string", "the consistency token POST …/turns answered")
WAITING = (WAIT, TIMEOUT, TOKEN)

ROUTES: tuple[Route, ...] = (
    Route("POST", T + "/turns", "post_turns", "Send conversation turns (validated one by one, produced to "
          "the turns topic keyed by scope); answers each turn's position and a consistency token",
          models.TurnsResponse, 202, models.TurnsRequest,
          query=(Query("wait", "string", "applied | extracted: answer once each turn's scope reached it"), TIMEOUT)),
    Route("GET", SCOPE + "/turns/{turn_id}", "get_turn", "One turn's state: accepted, applied (its scope's owner "
          "applied it), extracted (its facts were processed, with the entries they touched)", models.TurnStatus,
          by_owner=True, query=(Query("wait", "string", "applied | extracted: answer once the turn got there"),
                             TIMEOUT, Query("token", "string", "the POST's token: tells a turn not yet "
                                                               "applied (accepted) from an unknown one (404)"))),
    Route("GET", SCOPE + "/prompt", "get_prompt", "The prompt memory block: card, persona and reflections "
          "under the token budgets", models.PromptResponse, by_owner=True, query=(AT, AS_OF, *WAITING)),
    Route("POST", SCOPE + "/recall", "post_recall", "Explicit memory recall: BM25 (+ cosine) fused by RRF over "
          "the scope's active entries", models.RecallResponse, body=models.RecallRequest, by_owner=True,
          query=WAITING),
    Route("POST", SCOPE + "/feedback", "post_feedback", "Confirm or deny one entry (applied by the stream in "
          "order)", models.FeedbackResponse, 202, models.FeedbackRequest, by_owner=True,
          query=(Query("wait", "boolean", "wait (bounded) until applied and return the entry"),)),
    Route("GET", SCOPE + "/entries", "get_entries", "The scope's entries with tier and score",
          models.EntriesResponse, by_owner=True,
          query=(Query("tier", "string", "only this tier"), Query("kind", "string", "persona or reflection"), AT,
                 AS_OF, *WAITING, Query("tag", "string", "only entries carrying this tag"))),
    Route("GET", SCOPE + "/entries/{entry_id}", "get_entry", "One entry and the ordered signals that made its "
          "score", models.EntryDetail, by_owner=True, query=(AT,)),
    Route("POST", SCOPE + "/entries/{entry_id}/restore", "post_restore", "Bring an entry the usage-decay sweep "
          "soft-archived back into the active view (applied by the stream in order)", models.MemoryActionResponse,
          202, models.MemoryActionRequest, by_owner=True),
    Route("PUT", SCOPE + "/entries/{entry_id}/consensus", "put_consensus", "Set an entry's external consensus "
          "score (0..1, who set it, when; applied by the stream in order and journalled)",
          models.MemoryActionResponse, 202, models.ConsensusRequest, by_owner=True),
    Route("POST", SCOPE + "/entries/{entry_id}/nominate", "post_nominate", "Nominate one ripe entry as a fact "
          "candidate (a human action; 409 while the bridge is retired)", models.MemoryActionResponse, 202,
          models.MemoryActionRequest, by_owner=True),
    Route("DELETE", SCOPE + "/entries/{entry_id}", "delete_entry", "Delete one entry (and the entries merged "
          "into it) from the tables, changelogs, recall index and Parquet archive; answers an erasure receipt "
          "once the owner applied it (bounded wait)", models.ErasureReceipt, 200, by_owner=True,
          query=(Query("by", "string", "who deletes it (journalled; default: user)"),
                 Query("reason", "string", "why, at most 200 characters (journalled)"))),
    Route("PUT", SCOPE + "/entries/{entry_id}/text", "put_entry_text", "Reword one entry as the user corrects "
          "it: same id and counters, the old wording kept in its version history (bounded wait until applied)",
          models.EditTextResponse, 200, models.EditTextRequest, by_owner=True),
    Route("POST", SCOPE + "/entries", "post_entries", "Remember this: a user statement entered as a user fact "
          "of the given importance (Stage-2 and synthesis decide, as for any fact)", models.RememberResponse, 202,
          models.RememberRequest, by_owner=True),
    Route("PUT", T + "/characters/{character}/card", "put_card", "Replace the character card's protected "
          "entries (rendered for every user, outside budgets)", models.CardResponse, 200, models.CardRequest),
    Route("DELETE", T + "/users/{user}", "delete_user", "Forget a user everywhere (tables and changelogs)",
          models.ForgetResponse, 202),
    Route("GET", V1 + "/openapi.json", "get_openapi", "This document", models.OpenApiDocument),
    Route("GET", SCOPE + "/recent", "get_recent", "The recent conversation: the rolling memo of older turns "
          "and the newest turns, within a token budget, beside the memory block", models.RecentResponse,
          by_owner=True, query=(Query("max_tokens", "integer", "token budget of memo and turns (default: the "
                                   "recent_render_max_tokens setting; 1..100000)"),)),
)

Handler = Callable[..., Awaitable[tuple[int, object]]]
