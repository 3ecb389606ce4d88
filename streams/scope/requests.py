"""Building LLM task payloads from a scope's state, one builder per task (bound to its task name in
results.SCOPE_TASKS): the Stage-1 window, the Stage-2 candidate pool, synthesis, feedback, rebuttal target,
promotion."""

from __future__ import annotations

import hashlib

from rank_bm25 import BM25Okapi

from credence.streams.scope.context import StepContext
from credence.streams.scope.scope_state import ScopeState
from credence.tables.entries import Entry
from credence.tables.lifecycle import PromotionTicket
from credence.tables.memo import text_memo
from credence.tables.mentions import is_suppressed
from credence.tables.refine import cluster_hash
from credence.tables.tokens import approximate_tokens

# A promote_blocked reflection is still a confirmed observation: it keeps collecting evidence.
CANDIDATE_STATUSES = {"reflection": {"pending", "confirmed", "promote_blocked"}, "persona": {"active"}}
# Reflections a user's reply or rebuttal can still deny (tables.lifecycle.DENIABLE).
OPEN_REFLECTION_STATUSES = ("pending", "confirmed", "promote_blocked")
AI_TEXT_CHARS = 1500  # the tail of the AI's last turn a feedback or rebuttal check sees
SYNTHESIS_RELATED = 8  # existing observations synthesis sees, to decline restating them
# Facts one synthesis request carries: an answer holds at most MAX_REFLECTIONS drafts (10, a wire bound of
# reflection_synthesis), so each fact can still become a reflection of its own; the rest go in the next request.
SYNTHESIS_MAX_FACTS = 10


def observation(entry: Entry) -> dict:
    return {"id": entry.id, "text": entry.text, "subject": entry.subject}


def scored(entry: Entry, ctx: StepContext) -> dict:
    """An observation with its evidence_score now, for decisions that weigh evidence (merge)."""
    return observation(entry) | {"score": round(entry.score(ctx.now, settings=ctx.memory), 3)}


def candidate_pool(state: ScopeState, ctx: StepContext) -> list[Entry]:
    """Active persona entries and reflections, less protected, suppressed, terminal and net-negative ones."""
    pool = []
    for entry in state.entries.values():
        if entry.protected or entry.status not in CANDIDATE_STATUSES[entry.kind]:
            continue
        if is_suppressed(entry, ctx.now, settings=ctx.memory):
            continue
        if entry.score(ctx.now, settings=ctx.memory) < 0:
            continue
        pool.append(entry)
    return sorted(pool, key=lambda e: e.id)


def _words(text: str) -> list[str]:
    return list(_word_tuple(text))


@text_memo(maxsize=65_536)
def _word_tuple(text: str) -> tuple[str, ...]:
    # Cached: every Stage-2 batch and promotion pre-ranks the scope's pool, whose texts rarely change.
    return tuple(w for w in "".join(c.lower() if c.isalnum() else " " for c in text).split() if len(w) > 2)


def pre_rank(pool: list[Entry], facts: list[dict]) -> list[Entry]:
    """Lexical pre-rank (BM25 against the facts' words) so the best candidates survive the token caps."""
    if len(pool) < 2:
        return pool
    corpus = [_words(f"{e.subject} {e.text}") or ["_"] for e in pool]
    query = [w for f in facts for w in _words(f"{f['subject']} {f['text']}")]
    scores = BM25Okapi(corpus).get_scores(query) if query else [0.0] * len(pool)
    order = sorted(range(len(pool)), key=lambda i: (-scores[i], pool[i].id))
    return [pool[i] for i in order]


def stage2_batch(state: ScopeState, ctx: StepContext) -> list[dict]:
    """At most N pending user facts, most important first, then oldest."""
    pending = [(i, f["fact"]) for i, f in enumerate(state.facts.values()) if f["stage2"] == "pending"]
    pending.sort(key=lambda p: (-p[1]["importance"], p[0]))
    return [fact for _, fact in pending[: ctx.memory.stage2_max_facts_per_batch]]


def within_prompt_cap(ranked: list[Entry], ctx: StepContext) -> list[Entry]:
    """The best-ranked candidates whose texts, each trimmed to the observation cap, fit the prompt cap
    together: no later one can be in the rendered prompt (the backend's fit keeps a prefix of what it is
    given), so the request, kept in the scope's state until answered, is bounded like the prompt."""
    budget, cap = ctx.memory.stage2_max_prompt_tokens, ctx.memory.stage2_observation_max_tokens
    for n, entry in enumerate(ranked):
        budget -= min(approximate_tokens(entry.text), cap) + 1  # at least its id's token beside the text
        if budget < 0:
            return ranked[:n]
    return ranked


def stage1_payload(turns: list[dict]) -> dict:
    """A window's turns and nothing else: which turns it holds is decided by event time alone (window.py)."""
    return {"turns": turns}


def stage2_payload(state: ScopeState, ctx: StepContext, facts: list[dict]) -> dict:
    ranked = within_prompt_cap(pre_rank(candidate_pool(state, ctx), facts), ctx)
    limit = ctx.memory.stage2_rerank_above_candidates
    return {"facts": facts, "observations": [observation(e) for e in ranked],
            "rerank_limit": limit if len(ranked) > limit else None}


def synthesis_payload(state: ScopeState, ctx: StepContext, facts: list[dict]) -> dict:
    """The facts, and the existing observations closest to them (so synthesis can decline to restate)."""
    related = [e for e in pre_rank(candidate_pool(state, ctx), facts)
               if set(_words(f"{e.subject} {e.text}")) & {w for f in facts for w in _words(f"{f['subject']} {f['text']}")}]
    return {"facts": facts, "related": [observation(e) for e in related[:SYNTHESIS_RELATED]],
            "restatement_cosine": ctx.memory.restatement_cosine}  # used only with embeddings on


def reflection_id(scope: str, text: str) -> str:
    """Deterministic: the same observation synthesised twice (a retry, a replay) is the same entry."""
    key = f"{scope}\x1f{' '.join(text.lower().split())}"
    return "r-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def feedback_payload(state: ScopeState, reply_text: str, surfaced: list[Entry]) -> dict:
    """The user's reply to the AI turn that surfaced these reflections (the turn's tail rides along)."""
    return {"reply_text": reply_text, "ai_text": state.last_ai_text, "surfaced": [observation(e) for e in surfaced]}


def target_payload(state: ScopeState, mentioned: list[Entry], turn_id: str | None = None,
                   forget_only: bool = False) -> dict:
    """A rebuttal or forget request: the user's last messages, the AI's last turn and the entries it may
    be about. Not for the call: the turn, the provenance of what the answer changes, and whether only a
    forget request applies (entries a forget word nominated are not ones the character mentioned: "don't
    forget my dog's vet visit" says nothing against the dog; a rebuttal in the same turn asks its own)."""
    return {"messages": list(state.recent_user_messages), "ai_text": state.last_ai_text,
            "observations": [observation(e) for e in sorted(mentioned, key=lambda e: e.id)], "turn_id": turn_id,
            "forget_only": forget_only}


def forget_candidates(state: ScopeState, text: str, ctx: StepContext) -> list[Entry]:
    """The live, non-protected entries a forget request shares words with, best-ranked first (at most
    forget_max_candidates): the target check decides which of them the user means."""
    said = set(_words(text))
    live = [e for e in state.entries.values() if not e.protected and e.status in CANDIDATE_STATUSES[e.kind]
            and said & set(_words(f"{e.subject} {e.text}"))]
    return pre_rank(sorted(live, key=lambda e: e.id), [{"subject": "", "text": text}])[:ctx.memory.forget_max_candidates]


def promotion_payload(state: ScopeState, reflection: Entry, ctx: StepContext, ticket: PromotionTicket) -> dict:
    """Scores ride along: merge rejects a contradiction only against stronger evidence. Only the active
    persona entries most relevant to the reflection (pre-ranked like Stage-2's pool) ride along, so the
    request stays small however many entries the scope holds."""
    active = sorted((e for e in state.entries.values()
                     if e.kind == "persona" and e.status == "active" and not e.protected), key=lambda e: e.id)
    ranked = pre_rank(active, [{"subject": reflection.subject, "text": reflection.text}])
    personas = [scored(e, ctx) for e in ranked[: ctx.pipeline.promotion_max_personas]]
    return {"entry_id": reflection.id,
            "reflection": {"text": reflection.text, "subject": reflection.subject,
                           "source_fact_ids": list(reflection.source_fact_ids),
                           "score": scored(reflection, ctx)["score"]},
            "personas": sorted(personas, key=lambda o: o["id"]),
            # not for the call: the handler applies the answer only if the reflection is still this version
            "ticket": {"version": ticket.version, "attempt": ticket.attempt}}


# -- correction work --
def correction_payload(state: ScopeState, ctx: StepContext) -> dict:
    """The first queued items (FIFO), each with the entry it corrects and the new statement, both scored.
    Items whose entries are gone are still asked: the handler settles them as the promotion decided."""
    items = []
    for item in state.corrections[: ctx.memory.correction_batch_size]:
        old, new = state.entries.get(item["target_id"]), state.entries.get(item["reflection_id"])
        items.append({"id": item["id"],
                      "old": scored(old, ctx) if old is not None else {"id": item["target_id"], "text": ""},
                      "new_text": new.text if new is not None else item.get("draft", {}).get("text", ""),
                      "new_score": scored(new, ctx)["score"] if new is not None else None})
    return {"corrections": items}


def refine_payload(state: ScopeState, cluster: list[Entry], ctx: StepContext) -> dict:
    """One cluster for the refine task, with evidence scores; its hash and each member's version ride along
    for the handler (applied only to members still as asked, scope/refine.py)."""
    return {"entries": [scored(e, ctx) for e in cluster], "cluster": cluster_hash(e.id for e in cluster),
            "versions": {e.id: e.version for e in cluster}}


def summarise_payload(state: ScopeState, head, ctx: StepContext) -> dict:
    """The recent conversation's memo and its head's turns (streams/scope/recent.py); not for the call: the
    memo version and head ids the answer is applied against."""
    return {"memo": state.recent.memo, "max_tokens": ctx.memory.recent_summary_max_tokens,
            "turns": [{"id": t.turn_id, "role": t.role, "text": t.text, "ts": t.ts} for t in head],
            "memo_version": state.recent.memo_version, "head_ids": [t.turn_id for t in head]}
