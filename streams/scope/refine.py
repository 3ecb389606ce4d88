"""Refinement loops inside the scope step (the origin's, kept): on a cadence in the scope's event time,
clusters of near-duplicate or overlapping live entries go to the refine task, and its answer
(split / merge / modify / discard, or nothing) is applied here by the rules of tables.refine.

Only with powerful memory on. A refine request holds the scope like every evidence request and carries its
cluster, so a replay applies the same decision without asking again and a member changed meanwhile is left
alone. Every applied action is journalled (cause refine_<action>); nothing is deleted.

Clusters, holding and journalling in full: docs/design/refinement.md.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from credence.streams.scope import restate
from credence.streams.scope.context import StepContext
from credence.streams.scope.dedupe import survivor_rank
from credence.streams.scope.requests import refine_payload
from credence.streams.scope.scope_state import ScopeState
from credence.streams.scope.tasks import TaskName
from credence.tables import refine as rules
from credence.tables.clock import format_instant, parse_instant
from credence.tables.entries import Entry
from credence.tables.statement import is_self_contained
from credence.tables.text import polarity_of, restatement_stems

# Answered clusters remembered (the newest): the control value stays small however long a scope lives; a
# cluster forgotten early is only asked again.
REFINED_MAX = 256


def pool(state: ScopeState) -> list[Entry]:
    """Live, unprotected entries that no promotion in flight is deciding."""
    promoting = {r.payload.get("entry_id") for r in state.pending_tasks(TaskName.PROMOTION)}
    return [e for e in restate.live_statements(state) if not e.protected and e.id not in promoting]


def _keys(entry: Entry) -> frozenset[str]:
    """Content stems: two statements the restatement rule relates share one at least."""
    return frozenset(s for s in restatement_stems(entry.text) if not s.startswith("@"))


def clusters(state: ScopeState, ctx: StepContext) -> list[list[Entry]]:
    """The scope's clusters of near-duplicate or overlapping live entries, deterministic in the entries:
    the restatement rule, and with embeddings on (ctx.vectors) also cosine-similar pairs (_similar)."""
    entries = pool(state)
    similar = _similar(entries, ctx) if ctx.vectors is not None else set()
    related = lambda a, b: (  # noqa: E731
        (a.id, b.id) in similar or restate.same_statement(a.text, b.text, ctx.memory))
    # Two restatements share all of the smaller side's stems (containment) or a Jaccard share of the
    # union, which is at least that share of the smaller side: the least of the two bounds the probe.
    return rules.clusters(entries, related, size_max=ctx.memory.refine_cluster_size_max, keys=_keys,
                          share=ctx.memory.restatement_jaccard, pairs=similar)


def _similar(entries: list[Entry], ctx: StepContext) -> set[tuple[str, str]]:
    """Pairs (both orders) of the same polarity whose embeddings' cosine similarity reaches
    refine_cluster_cosine: paraphrases with few words in common, which the lexical rule misses.

    Replay: the vectors are a function of the text and the model alone (embeddings.TextVectors embeds each
    text by itself), so a re-run step finds the same pairs; what a pass asked is kept in the request (its
    cluster's hash and versions) and the answer is applied from its result record, never recomputed."""
    if len(entries) < 2:
        return set()
    vectors = np.asarray(ctx.vectors([e.text for e in entries]), dtype=np.float64)
    sims = vectors @ vectors.T
    polarity = [polarity_of(e.text) for e in entries]
    out = set()
    for i, j in zip(*np.nonzero(np.triu(sims >= ctx.memory.refine_cluster_cosine, k=1))):
        if polarity[i] == polarity[j]:
            out |= {(entries[i].id, entries[j].id), (entries[j].id, entries[i].id)}
    return out


def due(state: ScopeState, now: datetime, ctx: StepContext) -> bool:
    """Every refine_cron_interval_seconds of event time, the first one interval after the scope's first
    step (switch on or off: a scope that has waited longer runs its pass when the switch comes on)."""
    if state.last_refine_at is None:
        state.last_refine_at = now
        return False
    return now - state.last_refine_at >= timedelta(seconds=ctx.memory.refine_cron_interval_seconds)


def ask(state: ScopeState, ctx: StepContext) -> None:
    """A refine pass when one is due: up to refine_clusters_per_pass clusters not answered within their
    revisit time (never answered first), one request each."""
    if not due(state, ctx.now, ctx) or not ctx.powerful or state.pending_tasks(TaskName.REFINE):
        return
    state.last_refine_at = ctx.now
    revisit = timedelta(days=ctx.memory.refine_revisit_after_days)
    recent = sorted(((at, k) for k, at in state.refined.items() if ctx.now - parse_instant(at) < revisit),
                    reverse=True)[:REFINED_MAX]
    state.refined = {k: at for at, k in sorted(recent)}
    fresh = [c for c in clusters(state, ctx) if rules.cluster_hash(e.id for e in c) not in state.refined]
    for cluster in fresh[: ctx.memory.refine_clusters_per_pass]:
        ctx.request(state, TaskName.REFINE, refine_payload(state, cluster, ctx))


def apply(state: ScopeState, payload: dict, output: dict, ctx: StepContext) -> None:
    """Apply a refine answer: each action whose sources are all still the versions the cluster was asked
    about, live and unused by an earlier action of the answer; the rest are refused and logged."""
    key, versions = payload["cluster"], payload["versions"]
    state.refined[key] = format_instant(ctx.now)
    used: set[str] = set()
    for n, action in enumerate(output.get("actions", [])):
        ids = list(action.get("source_ids", []))
        sources = [state.entries.get(i) for i in ids]
        if not ids or len(set(ids)) != len(ids) or any(
                e is None or e.version != versions.get(e.id) or e.id in used or restate.live(state, e.id) is None
                or e.protected for e in sources):
            ctx.refuse(TaskName.REFINE, "stale_or_unknown_source", f"{action.get('action')} {ids}")
            continue
        texts = [t.strip() for t in action.get("texts", []) if t.strip()]
        if _APPLY[action.get("action")](state, sources, texts, (key, n), ctx):
            used.update(ids)


def _admit(ctx: StepContext, texts: list[str]) -> bool:
    """Every text readable alone (the gate every fact and entry passes), refused with the first reason."""
    for text in texts:
        ok, reason = is_self_contained(text)
        if not ok:
            ctx.refuse(TaskName.REFINE, reason, text)
            return False
    return True


def _split(state: ScopeState, sources: list[Entry], texts: list[str], at: tuple[str, int], ctx: StepContext) -> bool:
    if len(sources) != 1 or len(set(texts)) < 2 or not _admit(ctx, texts):
        ctx.refuse(TaskName.REFINE, "bad_split", f"{[e.id for e in sources]} into {len(texts)} text(s)")
        return False
    source, texts = sources[0], list(dict.fromkeys(texts))
    ids = [rules.piece_id(source, at[0], at[1], j) for j in range(len(texts))]
    pieces, gone = rules.split(source, texts, ids, ctx.now, settings=ctx.memory)
    for piece in pieces:
        ctx.put(state, piece, "created", f"refine_split:{source.id}")
    ctx.archive(state, gone, source, "refine_split")
    return True


def _merge(state: ScopeState, sources: list[Entry], texts: list[str], at: tuple[str, int], ctx: StepContext) -> bool:
    if len(sources) < 2:
        ctx.refuse(TaskName.REFINE, "bad_merge", f"{[e.id for e in sources]}")
        return False
    # The survivor keeps its id, as `memory dedupe` chooses it: protected never here, then persona over
    # reflection, better evidence, older.
    ordered = sorted(sources, key=lambda e: survivor_rank(e, ctx.now, ctx.memory))
    text = texts[0] if texts and _admit(ctx, texts[:1]) else ordered[0].text
    merged, gone = rules.merge(ordered, text, ctx.now, settings=ctx.memory)
    ctx.put(state, merged, "merged", "refine_merge", ordered[0])
    for archived, before in zip(gone, ordered[1:]):
        ctx.archive(state, archived, before, "refine_merge")
    return True


def _modify(state: ScopeState, sources: list[Entry], texts: list[str], at: tuple[str, int], ctx: StepContext) -> bool:
    if len(sources) != 1 or len(texts) != 1 or texts[0] == sources[0].text or not _admit(ctx, texts):
        ctx.refuse(TaskName.REFINE, "bad_modify", f"{[e.id for e in sources]}")
        return False
    ctx.put(state, rules.modify(sources[0], texts[0], ctx.now, settings=ctx.memory), "merged", "refine_modify", sources[0])
    return True


def _discard(state: ScopeState, sources: list[Entry], texts: list[str], at: tuple[str, int], ctx: StepContext) -> bool:
    if len(sources) != 1:
        ctx.refuse(TaskName.REFINE, "bad_discard", f"{[e.id for e in sources]}")
        return False
    ctx.archive(state, rules.discard(sources[0], ctx.now), sources[0], "refine_discard")
    return True


def _unknown(state: ScopeState, sources: list[Entry], texts: list[str], at: tuple[str, int], ctx: StepContext) -> bool:
    ctx.refuse(TaskName.REFINE, "unknown_action", f"{[e.id for e in sources]}")
    return False


class _Actions(dict):
    def __missing__(self, key):
        return _unknown


_APPLY = _Actions({rules.SPLIT: _split, rules.MERGE: _merge, rules.MODIFY: _modify, rules.DISCARD: _discard})
